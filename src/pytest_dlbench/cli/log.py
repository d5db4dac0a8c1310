"""``dlbench log RUN_DIR --mlflow [URI] --wandb [PROJECT]``: send a finished run directory to
the loggers of loggers/registry.py (each with its options).

For runs made where the tracking server cannot be reached (a cluster's compute nodes): copy
the run directory, then log it. The result is the one logging during the run gives, and
logging a run directory again does not duplicate it (docs/logging.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.layout import check_run_dir
from pytest_dlbench.loggers.registry import LOGGERS, asked_loggers, logger_options
from pytest_dlbench.results.gate import LOGGER_FAILED, OK, USAGE_ERROR

__all__ = ["LOG_EPILOG", "add_parser", "run"]

LOG_EPILOG = (f"exit status: {OK} logged (or already logged), {LOGGER_FAILED} a logger failed "
              f"(the warning line says why), {USAGE_ERROR} bad input: not a run directory, no "
              "logger asked for, or a logger that is not installed")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``log`` to the ``dlbench`` sub-commands; its handler is :func:`run`
    (``args.handler(args)`` returns the exit status)."""
    titles = " and/or ".join(entry.title for entry in LOGGERS.values())
    parser = subparsers.add_parser(
        "log", help=f"send a finished run directory to {titles}",
        description=f"Send a finished run directory to {titles}, for "
        "runs made where the tracking server cannot be reached: copy the run directory, then "
        "log it. Logging a run directory again does not duplicate it (docs/logging.md).",
        epilog=LOG_EPILOG,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="runs/<name>.<time> directory")
    for option in logger_options():  # --bench-mlflow ... of the pytest run, or --mlflow
        parser.add_argument(option.pytest_flag, option.cli_flag, dest=option.dest,
                            **option.kwargs)
    # Only here: in a pytest run the loggers' base is the run's --bench-base.
    parser.add_argument("--bench-base", "--base", metavar="DIR",
                        help="where the default sqlite store and wandb/ go (default: the run "
                             "directory's base, <base>/runs/<run>)")
    parser.add_argument("--artifact", action="append", default=[], metavar="FILE",
                        help="also attach FILE (an HTML report, a saved summary) to the session "
                             "run; repeatable")
    parser.add_argument("--replace", action="store_true",
                        help="log again even if already logged: the earlier runs are deleted")
    parser.set_defaults(handler=run)
    return parser


def _error(message: str) -> int:
    print(f"dlbench: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def _nothing_asked() -> str:
    """``nothing to log to: give --mlflow [URI] and/or --wandb [PROJECT]``."""
    switches = [entry.switch for entry in LOGGERS.values()]
    flags = " and/or ".join(f"{o.cli_flag} [{o.kwargs.get('metavar', 'VALUE')}]"
                            for o in switches)
    return f"nothing to log to: give {flags}"


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.loggers.sink import log_run_dir, open_sinks

    try:
        run_dir = check_run_dir(args.run_dir)
    except DlbenchError as exc:
        return _error(str(exc))

    def value(dest: str) -> Any:
        return getattr(args, dest, None)

    wanted = asked_loggers(value)
    if not wanted:
        return _error(_nothing_asked())
    for entry in wanted:
        problem = entry.missing()
        if problem:
            return _error(problem)
    for artifact in args.artifact:
        if not Path(artifact).exists():
            return _error(f"{artifact}: no such file")
    # The loggers' own lines (where the session went, or that it was already there) are the
    # command's output: on stdout, one line a logger (docs/logging.md, "After the fact").
    sinks = open_sinks(value, bench_base=args.bench_base, replace=args.replace, echo=print)
    guarded = log_run_dir(run_dir, sinks, artifacts=args.artifact)
    for sink in guarded:
        where = None if sink.done_line() is not None else sink.logged_where()
        if where is not None:  # a logger with no closing line of its own
            print(f"dlbench: {sink.name}: logged {run_dir.name}: {where}")
    return LOGGER_FAILED if any(not s.active for s in guarded) else OK
