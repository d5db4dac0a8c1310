"""``dlbench report [RUN_DIR]``: the table and score of a run directory, recomputed from its
streams, and compared, saved and written as HTML as the pytest run would (docs/reports.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pytest_dlbench.cli.common import (
    add_report_options,
    error,
    latest_run,
    load_baseline,
    verbosity,
)
from pytest_dlbench.layout import check_run_dir
from pytest_dlbench.options import check_outputs, evaluate_options

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
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
    add_report_options(report)
    report.set_defaults(handler=run)
    return report


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.report.console import report_width
    from pytest_dlbench.report.evaluation import render_evaluation, write_evaluation
    from pytest_dlbench.results.evaluation import evaluate
    from pytest_dlbench.results.history import default_history

    run_dir = check_run_dir(args.run_dir) if args.run_dir else latest_run(args)
    baseline = load_baseline(args.compare) if args.compare else None
    # Before anything is scored; --autosave alone writes into the run's <base>/history.
    check_outputs(lambda dest: getattr(args, dest), cli=True,
                  history_base=default_history(run_dir).parent)
    # Without --compare, a --bench-against run is judged against its base side, which is in
    # the run directory with the verdict's settings.
    options = evaluate_options(lambda dest: getattr(args, dest), baseline=baseline,
                               require_baseline=True)  # the file it is given must exist
    evaluation = evaluate(run_dir, options)
    print(render_evaluation(evaluation, verbosity=verbosity(args), width=report_width(),
                            columns=args.columns, sort=args.sort))
    evaluation = write_evaluation(evaluation)
    sys.stdout.flush()  # the table and the score first, then what could not be written
    for line in evaluation.unwritten:
        error(line)
    return evaluation.status
