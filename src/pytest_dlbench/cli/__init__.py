"""The ``dlbench`` command: look at suites and results without running pytest.

One module per verb, each with ``add_parser(commands)`` (its sub-parser, whose handler is its
``run``) and ``run(args)`` (the exit status). ``resolve`` shows what a suite resolves to;
``report`` recomputes the table and score of a run directory from its streams (and compares,
saves, writes HTML); ``compare`` sets two saved summaries side by side; ``table`` prints a run's
sweep table (MMoCLIP's result table); ``machine`` prints the machine's state and whether it is
ready to benchmark (docs/machine.md). The result verbs exit with the statuses of
:mod:`pytest_dlbench.results.gate`.

A verb module imports at its top only what its parser needs, and the rest inside ``run``, so
that ``dlbench --help`` stays cheap.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pytest_dlbench.cli import (
    baseline,
    bisect,
    compare,
    history,
    log,
    machine,
    profile,
    report,
    resolve,
    table,
)
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.numbers import printable
from pytest_dlbench.loggers.registry import LOGGERS
from pytest_dlbench.results import gate

__all__ = ["VERBS", "build_parser", "main"]

#: The verbs, in the order ``dlbench --help`` lists them.
VERBS = (resolve, report, compare, baseline, profile, table, log, machine, history, bisect)

DESCRIPTION = """\
Look at suites and results without running pytest.

  resolve   what a suite resolves to: every benchmark and its arguments
  report    the table and score of a run directory, recomputed from its streams (and
            compared with a baseline, saved, written as HTML)
  compare   two saved summaries side by side
  baseline  one baseline from the saved summaries of several sessions of one machine
  profile   the profile reports of a run again
  table     the sweep table of a run: one row per benchmark and its matrix parameters
  log       send a finished run to {loggers}
  machine   the machine's state, and whether it is ready to benchmark
  history   each benchmark's rate over the commits of a results history, and its steps
  bisect    the first commit between two where a benchmark's rate changed

Every option is spelled as in pytest (--bench-compare, --bench-select, --bench-base); the
short spelling (--compare, --select, --base) is accepted too.
"""

#: The verbs whose bad option or bad input is exit status 4 (usage), as pytest's; ``resolve``
#: and ``machine`` keep argparse's 2.
_RESULT_COMMANDS = ("report", "compare", "baseline", "profile", "log", "table", "history", "bisect")


def _command(argv: Sequence[str] | None) -> str | None:
    args = list(sys.argv[1:] if argv is None else argv)
    return next((a for a in args if not a.startswith("-")), None)


def build_parser() -> argparse.ArgumentParser:
    titles = " or ".join(entry.title for entry in LOGGERS.values())  # the registry's loggers
    parser = argparse.ArgumentParser(prog="dlbench", description=DESCRIPTION.format(loggers=titles),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        verb.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_dlbench.report.console import tolerant_output

    tolerant_output()  # a name the terminal's encoding cannot show is escaped, not a traceback
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits 2 on a bad option; report/compare say 4 (usage), as pytest does.
        if exc.code == 2 and _command(argv) in _RESULT_COMMANDS:
            return gate.USAGE_ERROR
        raise
    try:
        status: int = args.handler(args)  # the verb's run()
        sys.stdout.flush()  # here, so that a closed pipe is seen below, not at exit
        return status
    except DlbenchError as exc:
        print(f"dlbench: error: {printable(exc)}", file=sys.stderr)
        # report/compare: a corrupt file of the run (its manifest) is bad input, as documented.
        return gate.USAGE_ERROR if args.command in _RESULT_COMMANDS else 2
    except BrokenPipeError:
        # `dlbench resolve ... | head`: the reader has gone. Stop quietly, as a tool killed by
        # SIGPIPE does (128 + 13), and leave nothing for the interpreter to flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
