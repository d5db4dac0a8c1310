"""Loggers: benchmark runs to MLflow and Weights & Biases, fed from the run streams in the
parent process, never from inside the timed loop (docs/logging.md).

No mlflow, wandb, torch or pytest import happens here; the logger packages are imported when a
session starts, and a missing one is a warning line (:class:`GuardedSink`) or, asked for up
front, the usage error of :func:`missing_logger`.
"""

from __future__ import annotations

from pytest_dlbench.loggers.base import LoggerError, LoggerUnavailable, missing_logger
from pytest_dlbench.loggers.sink import GuardedSink, LoggerSink, log_run_dir, open_sinks
from pytest_dlbench.loggers.source import (
    SessionFacts,
    manifest_facts,
    session_facts,
)

__all__ = [
    "GuardedSink",
    "LoggerError",
    "LoggerSink",
    "LoggerUnavailable",
    "SessionFacts",
    "log_run_dir",
    "manifest_facts",
    "missing_logger",
    "open_sinks",
    "session_facts",
]
