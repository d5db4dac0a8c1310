"""What several ``dlbench`` verbs share: the error line, the terminal's width, the report and
gate options of the pytest run, the baseline file read, and the latest run of the base.

Only what building the parser needs is imported here, so that ``dlbench --help`` stays cheap.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pytest_dlbench.core.numbers import printable
from pytest_dlbench.layout import results_base
from pytest_dlbench.options import REPORT_OPTIONS
from pytest_dlbench.results import gate
from pytest_dlbench.results.model import BaselineLoad
from pytest_dlbench.results.model import load_baseline as gate_load_baseline

__all__ = ["add_gate_options", "add_report_options", "error", "latest_run", "load_baseline",
           "short_flag", "verbosity", "width"]


def short_flag(flag: str) -> str:
    """``--bench-select`` -> ``--select``: the other spelling every ``dlbench`` command takes."""
    return "--" + flag.removeprefix("--bench-")


def error(message: str) -> None:
    print(f"dlbench: error: {printable(message)}", file=sys.stderr)


def width() -> int:
    return shutil.get_terminal_size((100, 24)).columns  # honours $COLUMNS


def verbosity(args: argparse.Namespace) -> int:
    return args.verbose - args.quiet


def add_report_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """The report and gate options of the pytest run (``--bench-NAME``) as ``--NAME``."""
    for option in REPORT_OPTIONS:
        if option.cli and (not names or option.name in names):
            parser.add_argument(option.pytest_flag, option.cli_flag, dest=option.dest,
                                **option.kwargs)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more detail")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="the score line only")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """The verdict's tolerance and alpha, as the pytest run spells them (``history``,
    ``bisect``)."""
    for option in REPORT_OPTIONS:
        if option.name in ("tolerance", "alpha"):
            parser.add_argument(option.pytest_flag, option.cli_flag, dest=option.dest,
                                **option.kwargs)


def load_baseline(path: str) -> BaselineLoad:
    """The baseline file, read; its one-line error printed when it cannot be used."""
    loaded = gate_load_baseline(path)
    if loaded.status == gate.BASELINE_MISSING:
        error(f"{loaded.message} (a baseline is required: save one with --save)")
    elif loaded.status:
        error(loaded.message)
    return loaded


def latest_run(args: argparse.Namespace) -> Path:
    """No RUN_DIR: the latest run of the base (--bench-base, else $DLBENCH_BASE, else
    .dlbench, as pytest's), named on stderr so that nobody wonders which run it was."""
    from pytest_dlbench.layout import latest_run_dir

    run_dir = latest_run_dir(results_base(args.bench_base))
    print(f"dlbench: the latest run: {run_dir}", file=sys.stderr)
    return run_dir
