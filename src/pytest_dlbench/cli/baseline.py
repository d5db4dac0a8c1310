"""``dlbench baseline OUT.json SESSION.json...``: one baseline from the saved summaries of
several sessions of one machine, its figures over every session and the drift between sessions
measured (docs/reports.md)."""

from __future__ import annotations

import argparse
from typing import Any

from pytest_dlbench.cli.common import width
from pytest_dlbench.core.numbers import printable_lines
from pytest_dlbench.results import gate

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
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
    baseline.set_defaults(handler=run)
    return baseline


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.core.output_files import check_outputs as check_output
    from pytest_dlbench.report.sessions import render_sessions
    from pytest_dlbench.results.history import merge_sessions
    from pytest_dlbench.results.model import load_summary, save_summary

    check_output({"OUT.json": args.output})
    merged = merge_sessions([load_summary(p) for p in args.inputs], names=args.inputs)
    save_summary(merged, args.output)
    print(printable_lines(render_sessions(merged, args.output, width())))
    return gate.OK
