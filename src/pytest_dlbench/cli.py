"""The ``dlbench`` command: look at suites and results without running pytest.

``resolve`` shows what a suite resolves to; ``report`` recomputes the table and score of a run
directory from its streams (and compares, saves, writes HTML); ``compare`` sets two saved
summaries side by side; ``table`` prints a run's sweep table (MMoCLIP's result table);
``machine`` prints the machine's state and whether it is ready to benchmark (docs/machine.md).
``report``/``compare`` exit with the statuses of :mod:`pytest_dlbench.results.gate`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.numbers import printable, printable_lines
from pytest_dlbench.layout import DATA, check_run_dir, results_base
from pytest_dlbench.loggers.registry import LOGGERS
from pytest_dlbench.options import (
    REPORT_OPTIONS,
    SUITE_OPTIONS,
    check_outputs,
    evaluate_options,
)
from pytest_dlbench.results import gate

if TYPE_CHECKING:
    from pytest_dlbench.results.judge import HistoryDrifts
    from pytest_dlbench.results.model import BaselineLoad, SuiteSummary

__all__ = ["main"]


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


def short_flag(flag: str) -> str:
    """``--bench-select`` -> ``--select``: the other spelling every ``dlbench`` command takes."""
    return "--" + flag.removeprefix("--bench-")


def _add_suite_options(parser: argparse.ArgumentParser) -> None:
    for flag, kwargs in SUITE_OPTIONS:
        parser.add_argument(flag, short_flag(flag), dest=flag[2:].replace("-", "_"), **kwargs)


def _cmd_resolve(args: argparse.Namespace) -> int:
    from pytest_dlbench.run.devices import placeholder_context
    from pytest_dlbench.suite import fill_all, find_suite, load_system, resolve_suite, select_specs

    suite = resolve_suite(find_suite(args.suite), args.bench_override)
    for note in suite.warnings:
        print(f"warning: {note}", file=sys.stderr)
    specs = select_specs(suite.specs, args.bench_select, args.bench_exclude)
    system = load_system(args.bench_system) if args.bench_system else None  # checked either way
    # The data folder of a run started here ({data}, {milabench_data}, MILABENCH_DIR_DATA):
    # --bench-base, else $DLBENCH_BASE, else .dlbench, as pytest's.
    data_dir = results_base(args.bench_base).resolve() / DATA

    def launch_args(spec: Any) -> list[str]:
        context = placeholder_context(system=system, bench_name=spec.name, data_dir=data_dir)
        return fill_all(spec.args, context)

    if args.json:
        # default=str: unknown keys are shown as written, YAML dates included.
        shown = {s.name: s.to_dict() for s in specs}
        if args.launch:
            for spec in specs:
                shown[spec.name]["launch_args"] = launch_args(spec)
                shown[spec.name]["launch_data"] = str(data_dir)
        print(json.dumps(shown, indent=2, default=str))
        return 0

    def show(text: str = "") -> None:  # names and args from a YAML file: shown, not obeyed
        print(printable_lines(text))

    plural = "" if len(specs) == 1 else "s"
    show(f"suite {suite.name} ({suite.path}): {len(specs)} benchmark{plural}")
    for spec in specs:
        state = "" if spec.enabled else "  [disabled]"
        if spec.enabled and spec.definition is None:
            state = "  [no definition: deselected]"
        show(f"\n{spec.name}{state}")
        show(f"  definition  {spec.definition}")
        show(f"  tags        {', '.join(spec.tags) or '-'}")
        show(f"  weight      {spec.weight:g}    plan {spec.plan}")
        show(f"  skip/stop   {spec.skip}/{spec.stop}    max_duration {spec.max_duration:g} s")
        if spec.metric:
            show(f"  metric      {spec.metric}")
        if spec.command:
            parser = spec.command["parser"]
            show(f"  parser      {parser if isinstance(parser, str) else parser.get('regex')}")
            if spec.command.get("prepare"):
                show(f"  prepare     {spec.command['prepare']}")
            # Where the command runs (a voir folder: the folder) and, at launch, its data folder.
            show(f"  cwd         {spec.command.get('cwd') or '{workdir} (the run work folder)'}")
            if args.launch:
                show(f"  data        {data_dir}")
        if spec.env:
            show(f"  env         {spec.env}")
        needs = spec.config.get("requires_capabilities")
        if needs or spec.config.get("num_machines"):
            show(f"  requires    {needs or '-'}    num_machines "
                  f"{spec.config.get('num_machines') or '-'}")
        show(f"  args        {' '.join(spec.args)}")
        if args.launch:
            show(f"  at launch   {' '.join(launch_args(spec))}")
    return 0


# -- report / compare -------------------------------------------------------------------------
_RESULT_COMMANDS = ("report", "compare", "baseline", "profile", "log", "table", "history", "bisect")


def _error(message: str) -> None:
    print(f"dlbench: error: {printable(message)}", file=sys.stderr)


def _width() -> int:
    return shutil.get_terminal_size((100, 24)).columns  # honours $COLUMNS


def _verbosity(args: argparse.Namespace) -> int:
    return args.verbose - args.quiet


def _load_baseline(path: str) -> BaselineLoad:
    """The baseline file, read; its one-line error printed when it cannot be used."""
    from pytest_dlbench.results.model import load_baseline

    loaded = load_baseline(path)
    if loaded.status == gate.BASELINE_MISSING:
        _error(f"{loaded.message} (a baseline is required: save one with --save)")
    elif loaded.status:
        _error(loaded.message)
    return loaded


def _latest_run(args: argparse.Namespace) -> Path:
    """No RUN_DIR: the latest run of the base (--bench-base, else $DLBENCH_BASE, else
    .dlbench, as pytest's), named on stderr so that nobody wonders which run it was."""
    from pytest_dlbench.layout import latest_run_dir

    run_dir = latest_run_dir(results_base(args.bench_base))
    print(f"dlbench: the latest run: {run_dir}", file=sys.stderr)
    return run_dir


def _cmd_report(args: argparse.Namespace) -> int:
    from pytest_dlbench.report.evaluation import render_evaluation, write_evaluation
    from pytest_dlbench.results.evaluation import evaluate
    from pytest_dlbench.results.history import default_history

    run_dir = check_run_dir(args.run_dir) if args.run_dir else _latest_run(args)
    baseline = _load_baseline(args.compare) if args.compare else None
    # Before anything is scored; --autosave alone writes into the run's <base>/history.
    check_outputs(lambda dest: getattr(args, dest), cli=True,
                  history_base=default_history(run_dir).parent)
    # Without --compare, a --bench-against run is judged against its base side, which is in
    # the run directory with the verdict's settings.
    options = evaluate_options(lambda dest: getattr(args, dest), baseline=baseline,
                               require_baseline=True)  # the file it is given must exist
    evaluation = evaluate(run_dir, options)
    print(render_evaluation(evaluation, verbosity=_verbosity(args), width=_width(),
                            columns=args.columns, sort=args.sort))
    evaluation = write_evaluation(evaluation)
    sys.stdout.flush()  # the table and the score first, then what could not be written
    for line in evaluation.unwritten:
        _error(line)
    return evaluation.status


def _cmd_compare(args: argparse.Namespace) -> int:
    from pytest_dlbench.report.terminal import render_comparison
    from pytest_dlbench.results.evaluation import judged
    from pytest_dlbench.results.judge import compare

    baseline = _load_baseline(args.baseline)
    if baseline.summary is None:
        return baseline.status
    from pytest_dlbench.results.model import load_summary

    try:
        current = load_summary(args.current)
    except DlbenchError as exc:  # the current file missing is bad input, not "no baseline"
        _error(str(exc))
        return gate.USAGE_ERROR
    history = _compare_history(args.history, current)
    comparison = compare(current, baseline.summary, tolerance=args.tolerance, alpha=args.alpha,
                         drifts=history.drifts)
    comparison = dataclasses.replace(comparison,
                                     warnings=(*comparison.warnings, *history.warnings))
    print(render_comparison(comparison, verbosity=_verbosity(args), width=_width(),
                            sort=args.sort))
    return judged(current.run_dir or ".", current, comparison=comparison).status


def _compare_history(folder: str | None, current: SuiteSummary) -> HistoryDrifts:
    """``dlbench compare --history``: the drift between sessions that the history folder
    measured on the machine CURRENT was measured on (results/judge/history_drift.py)."""
    from pytest_dlbench.results.history import drifts_from_history, summary_machine
    from pytest_dlbench.results.judge import HistoryDrifts

    if folder is None:
        return HistoryDrifts()
    if not Path(folder).is_dir():
        raise DlbenchError(f"--history {folder}: no such folder (write one with "
                           "--bench-autosave)")
    return drifts_from_history(folder, current.run_dir, machine=summary_machine(current))


def _cmd_baseline(args: argparse.Namespace) -> int:
    from pytest_dlbench.core.output_files import check_outputs as check_output
    from pytest_dlbench.report.sessions import render_sessions
    from pytest_dlbench.results.history import merge_sessions
    from pytest_dlbench.results.model import load_summary, save_summary

    check_output({"OUT.json": args.output})
    merged = merge_sessions([load_summary(p) for p in args.inputs], names=args.inputs)
    save_summary(merged, args.output)
    print(printable_lines(render_sessions(merged, args.output, _width())))
    return gate.OK


def _add_report_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """The report and gate options of the pytest run (``--bench-NAME``) as ``--NAME``."""
    for option in REPORT_OPTIONS:
        if option.cli and (not names or option.name in names):
            parser.add_argument(option.pytest_flag, option.cli_flag, dest=option.dest,
                                **option.kwargs)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more detail")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="the score line only")


def _cmd_profile(args: argparse.Namespace) -> int:
    from pytest_dlbench.profile import profile_sections

    run_dir = check_run_dir(args.run_dir)
    sections = profile_sections(run_dir, verbose=args.verbose > 0, bench=args.bench)
    if not sections:
        which = f" of {args.bench}" if args.bench else ""
        _error(f"{run_dir}: no profile reports{which} (run with --bench-profile)")
        return gate.USAGE_ERROR
    for title, text in sections:  # notes written by the profiled child: shown, not obeyed
        print(printable_lines(f"== {title}\n{text}"))
    return gate.OK


def _cmd_machine(args: argparse.Namespace) -> int:
    from pytest_dlbench.measure.machine import machine_state
    from pytest_dlbench.results.figures import readiness_problems, render_state

    state = machine_state()
    if args.json:
        print(json.dumps({**state, "problems": readiness_problems(state)}, indent=2))
    else:
        print(render_state(state))
    if args.require_ready and readiness_problems(state):
        return gate.USAGE_ERROR
    return gate.OK


def _add_machine_command(commands: Any) -> None:
    machine = commands.add_parser(
        "machine", help="the machine's state that changes benchmark numbers, and what is off",
        epilog="exit status: 0, or 4 with --require-ready on a machine that is not ready",
    )
    machine.add_argument("--json", action="store_true", help="machine-readable")
    machine.add_argument("--bench-require-ready", "--require-ready", action="store_true",
                         dest="require_ready",
                         help="exit with status 4 when the machine is not ready (for CI)")
    machine.set_defaults(handler=_cmd_machine)


def _cmd_table(args: argparse.Namespace) -> int:
    from pytest_dlbench.report.terminal_tables import SWEEP_NOTE, render_sweep
    from pytest_dlbench.results.figures import summarize_dir, sweep_rows

    run_dir = check_run_dir(args.run_dir)
    rows = sweep_rows(summarize_dir(run_dir), matrix_only=args.matrix)
    if args.csv:  # the frame of pytest_dlbench.results.frame, as CSV
        from pytest_dlbench.results.history import frame_csv, sweep_frame

        sys.stdout.write(frame_csv(sweep_frame(rows)))
    else:
        print(printable_lines(render_sweep(rows, _width())))
        if rows:
            print(SWEEP_NOTE)
    return gate.OK


def _add_result_commands(commands: Any) -> None:
    report = commands.add_parser(
        "report", help="the table and score of a run directory, recomputed from its streams",
        epilog="exit status: 0 ok, 1 a benchmark failed, 4 bad input, 6 regressed against "
               "the baseline (or, for a --bench-against run, against its base side), 7 the "
               "baseline file does not exist, 8 an output (--save, --html) could not be "
               "written, 9 inconclusive (the noise too large for the tolerance)",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", nargs="?", default=None,
                        help="runs/<name>.<time> directory (default: the latest run of the "
                        "base)")
    report.add_argument("--bench-base", metavar="DIR", dest="bench_base", default=None,
                        help="without RUN_DIR: the base whose latest run to report (default "
                        "$DLBENCH_BASE, else .dlbench), as pytest's")
    _add_report_options(report)
    report.set_defaults(handler=_cmd_report)

    cmp = commands.add_parser(
        "compare", help="compare two saved summaries: CURRENT against BASELINE",
        epilog="exit status: 0 ok, 1 CURRENT has failed benchmarks, 4 bad input, "
               "6 regressed, 7 the baseline file does not exist, 9 inconclusive (the noise "
               "between runs too large for the tolerance)",
    )
    cmp.add_argument("baseline", metavar="BASELINE.json", help="the reference summary")
    cmp.add_argument("current", metavar="CURRENT.json", help="the summary to judge")
    _add_report_options(cmp, "tolerance", "alpha", "sort")  # not paired-*: no pairs
    cmp.add_argument("--history", metavar="DIR", default=None,
                     help="a results history (--bench-autosave): the drift between sessions "
                          "of CURRENT's machine is read from its sessions of one commit, "
                          "instead of the 5%% default, for a baseline of one session")
    cmp.set_defaults(handler=_cmd_compare)

    baseline = commands.add_parser(
        "baseline", help="merge the saved summaries (--bench-save, --bench-autosave) of "
                         "several sessions of one machine into one baseline: its figures over "
                         "every session, and the drift between sessions measured",
        epilog="exit status: 0 ok, 4 bad input (a missing or corrupt summary, another "
               "machine's)",
    )
    baseline.add_argument("output", metavar="OUT.json", help="the baseline to write")
    baseline.add_argument("inputs", metavar="SESSION.json", nargs="+",
                          help="saved summaries, one per session (two or more)")
    baseline.set_defaults(handler=_cmd_baseline)

    profile = commands.add_parser(
        "profile", help="print the profile reports of a finished run again",
        epilog="exit status: 0 ok, 4 not a run directory or nothing profiled",
    )
    profile.add_argument("run_dir", metavar="RUN_DIR", help="runs/<name>.<time> directory")
    profile.add_argument("bench", metavar="BENCH", nargs="?", help="only this benchmark")
    profile.add_argument("-v", "--verbose", action="count", default=0, help="every row")
    profile.set_defaults(handler=_cmd_profile)

    table = commands.add_parser(
        "table", help="the sweep table of a run: one row per benchmark, its matrix "
                      "parameters, done_percent_last, throughput_avg (the mean of the steps' "
                      "rates, not perf), time_per_iteration_secs_avg, total_time_secs",
        epilog="exit status: 0 ok, 4 not a run directory",
    )
    table.add_argument("run_dir", metavar="RUN_DIR", help="runs/<name>.<time> directory")
    table.add_argument("--csv", action="store_true", help="CSV (full precision) on stdout")
    table.add_argument("--matrix", action="store_true",
                       help="only the benchmarks generated by a matrix entry")
    table.set_defaults(handler=_cmd_table)

    from pytest_dlbench.loggers.cli import add_log_command

    add_log_command(commands)


def _command(argv: Sequence[str] | None) -> str | None:
    args = list(sys.argv[1:] if argv is None else argv)
    return next((a for a in args if not a.startswith("-")), None)


def build_parser() -> argparse.ArgumentParser:
    titles = " or ".join(entry.title for entry in LOGGERS.values())  # the registry's loggers
    parser = argparse.ArgumentParser(prog="dlbench", description=DESCRIPTION.format(loggers=titles),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    resolve = commands.add_parser(
        "resolve", help="print what a suite resolves to (every benchmark, its args)"
    )
    resolve.add_argument("suite", metavar="SUITE", help="a suite name or a path to a YAML file")
    resolve.add_argument("--json", action="store_true", help="machine-readable, keyed by name")
    resolve.add_argument(
        "--launch", action="store_true", help="also show args with launch-time placeholders filled"
    )
    resolve.add_argument(
        "--bench-base", metavar="DIR", dest="bench_base",
        help="the base folder a run would use (its data/ is {data} at launch), as pytest's",
    )
    _add_suite_options(resolve)
    resolve.set_defaults(handler=_cmd_resolve)
    _add_result_commands(commands)
    _add_machine_command(commands)
    from pytest_dlbench.cli_history import add_history_commands  # history, bisect

    add_history_commands(commands)
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
        status = args.handler(args)
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


if __name__ == "__main__":
    sys.exit(main())
