"""``dlbench log RUN_DIR --mlflow [URI] --wandb [PROJECT]``: send a finished run directory.

For runs made where the tracking server cannot be reached (a cluster's compute nodes): copy
the run directory, then log it. The result is the one logging during the run gives, and
logging a run directory again does not duplicate it (docs/logging.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_dlbench.options import LOGGER_OPTIONS
from pytest_dlbench.results.gate import LOGGER_FAILED, OK, USAGE_ERROR

__all__ = ["LOG_EPILOG", "add_log_command", "cmd_log"]

LOG_EPILOG = (f"exit status: {OK} logged (or already logged), {LOGGER_FAILED} a logger failed "
              f"(the warning line says why), {USAGE_ERROR} bad input: not a run directory, no "
              "logger asked for, or a logger that is not installed")


def add_log_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``log`` to the ``dlbench`` sub-commands; its handler is :func:`cmd_log`
    (``args.handler(args)`` returns the exit status)."""
    parser = subparsers.add_parser(
        "log", help="send a finished run directory to MLflow and/or Weights & Biases",
        description="Send a finished run directory to MLflow and/or Weights & Biases, for "
        "runs made where the tracking server cannot be reached: copy the run directory, then "
        "log it. Logging a run directory again does not duplicate it (docs/logging.md).",
        epilog=LOG_EPILOG,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="runs/<name>.<time> directory")
    for option in LOGGER_OPTIONS:  # --bench-mlflow ... of the pytest run, or --mlflow
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
    parser.set_defaults(handler=cmd_log)
    return parser


def _error(message: str) -> int:
    print(f"dlbench: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def cmd_log(args: argparse.Namespace) -> int:
    from pytest_dlbench.errors import DlbenchError
    from pytest_dlbench.loggers.base import missing_logger
    from pytest_dlbench.loggers.sink import log_run_dir
    from pytest_dlbench.run.layout import check_run_dir

    try:
        run_dir = check_run_dir(args.run_dir)
    except DlbenchError as exc:
        return _error(str(exc))
    wanted = [name for name in ("mlflow", "wandb") if getattr(args, name) is not None]
    if not wanted:
        return _error("nothing to log to: give --mlflow [URI] and/or --wandb [PROJECT]")
    for name in wanted:
        problem = missing_logger(name)
        if problem:
            return _error(problem)
    for artifact in args.artifact:
        if not Path(artifact).exists():
            return _error(f"{artifact}: no such file")
    sinks: list[Any] = []
    if args.mlflow is not None:
        from pytest_dlbench.loggers.mlflow_logger import MlflowSink

        sinks.append(MlflowSink(args.mlflow or None, experiment=args.experiment,
                                bench_base=args.bench_base, replace=args.replace))
    if args.wandb is not None:
        from pytest_dlbench.loggers.wandb_logger import WandbSink

        sinks.append(WandbSink(args.wandb or None, bench_base=args.bench_base,
                               replace=args.replace))
    guarded = log_run_dir(run_dir, sinks, artifacts=args.artifact)
    for sink in guarded:
        if sink.active and getattr(sink.sink, "skipped", False) is not True:
            print(f"dlbench: {sink.name}: logged {run_dir.name}: {_where(sink.sink)}")
    return LOGGER_FAILED if any(not s.active for s in guarded) else OK


def _where(sink: Any) -> str:
    if sink.name == "mlflow":
        runs = len(sink.run_ids)
        return f"{runs} benchmark run(s) under parent run {sink.parent_id} in {sink.uri}"
    logged, skipped = len(sink.logged), len(sink.skipped)
    where = sink.dir / "wandb" if sink.mode == "offline" else f"project {sink.project}"
    text = f"{logged} W&B run(s) ({sink.mode}) in {where}"
    return text + (f", {skipped} already there" if skipped else "")
