"""``dlbench profile RUN_DIR [BENCH]``: the profile reports of a finished run again
(docs/profiling.md)."""

from __future__ import annotations

import argparse
from typing import Any

from pytest_dlbench.cli.common import error
from pytest_dlbench.core.numbers import printable_lines
from pytest_dlbench.layout import check_run_dir
from pytest_dlbench.results import gate

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    profile = commands.add_parser(
        "profile", help="print the profile reports of a finished run again",
        epilog="exit status: 0 ok, 4 not a run directory or nothing profiled",
    )
    profile.add_argument("run_dir", metavar="RUN_DIR", help="runs/<name>.<time> directory")
    profile.add_argument("bench", metavar="BENCH", nargs="?", help="only this benchmark")
    profile.add_argument("-v", "--verbose", action="count", default=0, help="every row")
    profile.set_defaults(handler=run)
    return profile


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.profile import profile_sections

    run_dir = check_run_dir(args.run_dir)
    sections = profile_sections(run_dir, verbose=args.verbose > 0, bench=args.bench)
    if not sections:
        which = f" of {args.bench}" if args.bench else ""
        error(f"{run_dir}: no profile reports{which} (run with --bench-profile)")
        return gate.USAGE_ERROR
    for title, text in sections:  # notes written by the profiled child: shown, not obeyed
        print(printable_lines(f"== {title}\n{text}"))
    return gate.OK
