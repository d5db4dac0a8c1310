"""Loggers: benchmark runs to MLflow and Weights & Biases, fed from the run streams in the
parent process, never from inside the timed loop (docs/logging.md). Which loggers there are,
their options and how each is opened: loggers/registry.py.

No mlflow, wandb, torch or pytest import happens here; the logger packages are imported when a
session starts, and a missing one is a warning line (:class:`GuardedSink`) or, asked for up
front, the usage error of :func:`missing_logger`. The names below are loaded when first used:
pytest reads the loggers' options (loggers/registry.py) at every start, and that must not cost
the import of the sinks and the results they read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_dlbench.loggers.base import LoggerError, LoggerUnavailable, missing_logger
    from pytest_dlbench.loggers.sink import GuardedSink, LoggerSink, log_run_dir, open_sinks
    from pytest_dlbench.loggers.source import SessionFacts, manifest_facts, session_facts

#: Each public name and the module that defines it.
_HOMES = {
    "LoggerError": "base", "LoggerUnavailable": "base", "missing_logger": "base",
    "GuardedSink": "sink", "LoggerSink": "sink", "log_run_dir": "sink", "open_sinks": "sink",
    "SessionFacts": "source", "manifest_facts": "source", "session_facts": "source",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
