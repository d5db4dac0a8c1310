"""The loggers, by name: one entry each, as pytest-xdist names its schedulers.

A logger is one module (its sink: :class:`~pytest_dlbench.loggers.sink.LoggerSink`) and one
:class:`LoggerEntry` here: its options (``--bench-NAME`` in pytest, ``--NAME`` in ``dlbench
log``), the package it needs and how its sink is made. The pytest options, the controller, the
session's tracking, :func:`~pytest_dlbench.loggers.sink.open_sinks` and ``dlbench log`` read
this table; none of them names a logger.

Nothing here imports a logger's module or its package: the entries' ``open`` do, when a session
asks for the logger, so that the options cost nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, Protocol

from pytest_dlbench.loggers.base import Echo, missing_logger
from pytest_dlbench.options import ReportOption

if TYPE_CHECKING:
    from pytest_dlbench.loggers.sink import LoggerSink

__all__ = [
    "LOGGERS",
    "LoggerEntry",
    "OpenSink",
    "Value",
    "asked_loggers",
    "logger_options",
    "logging_title",
    "register",
    "unregister",
]

#: An option's value by its ``dest``: pytest's ``config.getoption(f"bench_{dest}")``,
#: ``dlbench log``'s ``getattr(args, dest)``. None: not given.
Value = Callable[[str], Any]


class OpenSink(Protocol):
    """Makes a logger's sink from its options' values; contacts nothing (the sink's
    ``start_session`` does)."""

    def __call__(self, value: Value, *, bench_base: str | PathLike[str] | None, replace: bool,
                 echo: Echo) -> LoggerSink: ...


@dataclass(frozen=True)
class LoggerEntry:
    """One logger: ``name`` is its warning line's and its switch's (``--bench-NAME``)."""

    name: str
    title: str  # what ``dlbench log --help`` calls it: "MLflow"
    #: Its options; the first is the switch: None is "not asked", ``""`` "asked without a value".
    options: tuple[ReportOption, ...]
    open: OpenSink
    module: str | None = None  # the package it imports (default: ``name``)
    extra: str | None = None  # the pytest-dlbench extra that installs it (default: ``name``)

    @property
    def switch(self) -> ReportOption:
        return self.options[0]

    def asked(self, value: Value) -> bool:
        return value(self.switch.dest) is not None

    def missing(self) -> str | None:
        """None when the logger's package is installed, else the one-line usage error."""
        return missing_logger(self.name, self.module, self.extra)


def _open_mlflow(value: Value, *, bench_base: str | PathLike[str] | None, replace: bool,
                 echo: Echo) -> LoggerSink:
    from pytest_dlbench.loggers.mlflow_logger import MlflowSink  # mlflow's own import waits

    return MlflowSink(value("mlflow") or None, experiment=value("experiment"),
                      bench_base=bench_base, replace=replace, echo=echo)


def _open_wandb(value: Value, *, bench_base: str | PathLike[str] | None, replace: bool,
                echo: Echo) -> LoggerSink:
    from pytest_dlbench.loggers.wandb_logger import WandbSink

    return WandbSink(value("wandb") or None, bench_base=bench_base, replace=replace, echo=echo)


#: The loggers by name, in the order they are opened and their options shown.
LOGGERS: dict[str, LoggerEntry] = {entry.name: entry for entry in (
    LoggerEntry("mlflow", "MLflow", (
        ReportOption("mlflow", dict(
            nargs="?", const="", default=None, metavar="URI",
            help="log to MLflow: URI, else $MLFLOW_TRACKING_URI, else "
            "sqlite:///<bench-base>/mlflow.db (docs/logging.md)")),
        ReportOption("experiment", dict(
            metavar="NAME", default=None,
            help="MLflow experiment (default: $MLFLOW_EXPERIMENT_NAME, else the suite name)")),
    ), _open_mlflow),
    LoggerEntry("wandb", "Weights & Biases", (
        ReportOption("wandb", dict(
            nargs="?", const="", default=None, metavar="PROJECT",
            help="log to Weights & Biases: PROJECT (default $WANDB_PROJECT, else "
            "pytest-dlbench); offline unless $WANDB_MODE says otherwise")),
    ), _open_wandb),
)}


def register(entry: LoggerEntry) -> None:
    """Add a logger (its options appear in parsers built after this)."""
    if entry.name in LOGGERS:
        raise ValueError(f"a logger named {entry.name!r} is already registered")
    LOGGERS[entry.name] = entry


def unregister(name: str) -> None:
    LOGGERS.pop(name, None)


def logger_options() -> list[ReportOption]:
    """Every logger's options: the switches first (``--bench-mlflow``, ``--bench-wandb``),
    then their settings (``--bench-experiment``), as ``--help`` has always listed them."""
    entries = list(LOGGERS.values())
    return [e.switch for e in entries] + [o for e in entries for o in e.options[1:]]


def logging_title(title: str) -> str:
    """The logging options' group title in ``pytest --help``, naming the registered loggers:
    ``dlbench: logging (MLflow, Weights & Biases)``."""
    names = ", ".join(entry.title for entry in LOGGERS.values())
    return f"{title} ({names})" if names else title


def asked_loggers(value: Value) -> list[LoggerEntry]:
    """The loggers whose switch was given."""
    return [entry for entry in LOGGERS.values() if entry.asked(value)]
