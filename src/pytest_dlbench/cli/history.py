"""``dlbench history``: each benchmark's rate over the commits of a results history
(``--bench-autosave``), and the steps in it (docs/history.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pytest_dlbench.cli.common import add_gate_options
from pytest_dlbench.layout import results_base
from pytest_dlbench.results import gate
from pytest_dlbench.results.history import HISTORY

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    history = commands.add_parser(
        "history", help="each benchmark's rate over the commits of a results history "
                        "(--bench-autosave), and the steps in it",
        epilog="exit status: 0 ok, 4 bad input (no such folder, a bad -k or --since)",
    )
    history.add_argument("--history", metavar="DIR", default=None,
                         help="the history folder (default $DLBENCH_BASE/history, else "
                              ".dlbench/history)")
    history.add_argument("-k", metavar="EXPR", default=None,
                         help="only the benchmarks whose name matches (pytest's -k: words, "
                              "and, or, not, parentheses)")
    history.add_argument("--since", metavar="REV", default=None,
                         help="only REV and the commits after it (git, in the repository here)")
    history.add_argument("--machine", metavar="ID", default=None,
                         help="only this machine's runs (the folder's name)")
    history.add_argument("--json", action="store_true", help="machine-readable")
    history.add_argument("-v", "--verbose", action="store_true", help="every commit")
    add_gate_options(history)
    history.set_defaults(handler=run)
    return history


def _default_history() -> Path:
    return results_base() / HISTORY


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.core.numbers import printable_lines
    from pytest_dlbench.report.history import render_history, series_dicts
    from pytest_dlbench.results.history import (
        bench_series,
        keyword_matcher,
        load_history,
        since,
    )

    folder = Path(args.history) if args.history else _default_history()
    select = keyword_matcher(args.k or "")
    entries, problems = load_history(folder, machine=args.machine)
    if args.since:
        entries = since(entries, args.since)
    series = bench_series(entries, select=select, tolerance=args.tolerance, alpha=args.alpha)
    if args.json:
        print(json.dumps({"history": str(folder), "problems": problems,
                          "series": series_dicts(series)}, indent=2))
    else:
        print(printable_lines(render_history(series, entries, problems, folder=folder,
                                             verbose=args.verbose)))
    return gate.OK
