"""``dlbench compare BASELINE.json CURRENT.json``: two saved summaries side by side, judged by
the saved-baseline mode that ``dlbench report --compare`` uses (results/judge/saved.compare_saved;
docs/reports.md, "Baselines and the regression gate")."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.cli.common import add_report_options, error, load_baseline, verbosity, width
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.results import gate

if TYPE_CHECKING:
    from pytest_dlbench.results.judge import HistoryDrifts
    from pytest_dlbench.results.model import SuiteSummary

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    cmp = commands.add_parser(
        "compare", help="compare two saved summaries: CURRENT against BASELINE",
        epilog="exit status: 0 ok, 1 CURRENT has failed benchmarks, 4 bad input, "
               "6 regressed, 7 the baseline file does not exist, 9 inconclusive (the noise "
               "between runs too large for the tolerance)",
    )
    cmp.add_argument("baseline", metavar="BASELINE.json", help="the reference summary")
    cmp.add_argument("current", metavar="CURRENT.json", help="the summary to judge")
    add_report_options(cmp, "tolerance", "alpha", "sort")  # not paired-*: no pairs
    cmp.add_argument("--history", metavar="DIR", default=None,
                     help="a results history (--bench-autosave): the drift between sessions "
                          "of CURRENT's machine is read from its sessions of one commit, "
                          "instead of the 5%% default, for a baseline of one session")
    cmp.set_defaults(handler=run)
    return cmp


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.report.terminal import render_comparison
    from pytest_dlbench.results.evaluation import judged
    from pytest_dlbench.results.judge import compare_saved
    from pytest_dlbench.results.model import load_summary

    baseline = load_baseline(args.baseline)
    if baseline.summary is None:
        return baseline.status
    try:
        current = load_summary(args.current)
    except DlbenchError as exc:  # the current file missing is bad input, not "no baseline"
        error(str(exc))
        return gate.USAGE_ERROR
    saved = compare_saved(current, baseline.summary, tolerance=args.tolerance, alpha=args.alpha,
                          history=_compare_history(args.history, current))
    print(render_comparison(saved.comparison, verbosity=verbosity(args), width=width(),
                            sort=args.sort))
    return judged(current.run_dir or ".", saved.summary, comparison=saved.comparison).status


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
