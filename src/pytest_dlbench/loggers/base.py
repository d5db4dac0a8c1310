"""What every logger shares: the echo type, the errors, and importing an optional package."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "Echo",
    "LoggerError",
    "LoggerUnavailable",
    "missing_logger",
    "require",
    "stderr_line",
]

Echo = Callable[[str], None]

class LoggerError(Exception):
    """A logger cannot go on; the message is the 'why' of the warning line."""


class LoggerUnavailable(LoggerError):
    """The logger's package is not installed."""


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def missing_logger(name: str, module: str | None = None, extra: str | None = None) -> str | None:
    """None when logger ``name`` can be used (its package ``module``, default ``name``, is
    installed), else the one-line usage error saying what to install (the package ``extra``,
    default ``name``): ``mlflow is not installed: pip install mlflow``. Not the project's extra:
    pytest-dlbench is not on the package index, its extras only install from a checkout."""
    module, extra = module or name, extra or name
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return f"{name} is not installed: pip install {extra}"


def require(name: str, module: str | None = None, extra: str | None = None) -> Any:
    """Import the logger's package (``module``, default ``name``) or raise
    :class:`LoggerUnavailable` with the install hint (the ``extra``, default ``name``)."""
    module, extra = module or name, extra or name
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LoggerUnavailable(
            f"{name} is not installed ({type(exc).__name__}: {exc}): "
            f"pip install {extra}"
        ) from exc
