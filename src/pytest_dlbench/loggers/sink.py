"""The logger sinks: the protocol the session calls, the guard that keeps a logger from ever
costing the run anything, and logging a finished run directory through the same calls.

The sinks asked for are made from the registry of loggers (loggers/registry.py): a new logger
is a module with its sink and one entry there. During a pytest run, the controller (the process
that reports results, never a benchmark's child or an xdist worker) calls, for each sink::

    sink.start_session(run_dir, facts)        # once, when the run directory exists
    sink.log_bench_run(stream_path)           # after each item finished: its stream is complete
                                              # (a path that does not exist is ignored)
    sink.finish_session(evaluation, artifacts)  # once, with the end of the run (the
                                                # Evaluation the report shows) and its files

:func:`log_run_dir` makes the same calls from a finished run directory (``dlbench log``), with
the evaluation ``dlbench report`` makes, so both paths produce the same runs and metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_dlbench.core.errors import one_line
from pytest_dlbench.loggers.base import Echo, LoggerError, stderr_line
from pytest_dlbench.loggers.registry import Value, asked_loggers
from pytest_dlbench.loggers.source import SessionFacts, session_facts, streams
from pytest_dlbench.results.evaluation import EvaluateOptions, Evaluation, evaluate

__all__ = [
    "GuardedSink",
    "LoggerSink",
    "guard",
    "log_run_dir",
    "open_sinks",
]

#: The longest "why" of a warning line (a server's error page can be one long line).
MAX_WHY = 300


def _why(exc: BaseException) -> str:
    """The "why" of a logger's warning line: a :class:`LoggerError`'s own message (it was
    written for the user), else ``Type: first line``; on one line, at most :data:`MAX_WHY`."""
    text = " ".join((str(exc) if isinstance(exc, LoggerError) else one_line(exc)).split())
    return text if len(text) <= MAX_WHY else text[: MAX_WHY - 3] + "..."


@runtime_checkable
class LoggerSink(Protocol):
    """Where a session's runs are sent (MLflow, W&B). ``name`` appears in the warning line."""

    name: str

    def start_session(self, run_dir: Path, facts: SessionFacts) -> None: ...

    def log_bench_run(self, stream_path: Path) -> None: ...

    def finish_session(self, evaluation: Evaluation, artifacts: Sequence[Path]) -> None: ...

    def close(self) -> None:
        """Release what is open (an active run) after a failure; must not raise or block."""
        ...

    def logged_where(self) -> str | None:
        """What ``dlbench log`` says after ``logged <run>:`` (the runs and where they went);
        None when the session was already logged and skipped."""
        ...


class GuardedSink:
    """A sink whose failures never reach the caller.

    The first exception of any call (the package not installed, a server that cannot be
    reached, a bug) becomes exactly one line, ``dlbench: <name> logging disabled: <why>``,
    passed to ``warn``; the sink is then closed and every later call does nothing.
    ``KeyboardInterrupt`` and ``SystemExit`` are not caught.
    """

    def __init__(self, sink: LoggerSink, warn: Echo = stderr_line) -> None:
        self.sink = sink
        self.name = sink.name
        self.warn = warn
        self.failure: str | None = None

    @property
    def active(self) -> bool:
        return self.failure is None

    def _call(self, method: str, *args: Any) -> None:
        if self.failure is not None:
            return
        try:
            getattr(self.sink, method)(*args)
        except Exception as exc:  # noqa: BLE001 - logging must never fail the run
            self.failure = _why(exc)
            self.warn(f"dlbench: {self.name} logging disabled: {self.failure}")
            with contextlib.suppress(Exception):  # already disabled and warned once
                self.sink.close()

    def start_session(self, run_dir: str | PathLike[str], facts: SessionFacts) -> None:
        self._call("start_session", Path(run_dir), facts)

    def log_bench_run(self, stream_path: str | PathLike[str]) -> None:
        self._call("log_bench_run", Path(stream_path))

    def finish_session(
        self, evaluation: Evaluation, artifacts: Sequence[str | PathLike[str]] = ()
    ) -> None:
        self._call("finish_session", evaluation, [Path(a) for a in artifacts])

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing is best effort
            self.sink.close()

    def done_line(self) -> str | None:
        """The sink's closing line (MLflow: where the session was logged and the command that
        opens it), when it logged everything; None otherwise."""
        done = getattr(self.sink, "done", None)
        return done if self.failure is None and isinstance(done, str) else None

    def logged_where(self) -> str | None:
        """The sink's :meth:`LoggerSink.logged_where`, when it logged everything."""
        return self.sink.logged_where() if self.failure is None else None


def guard(sink: LoggerSink | GuardedSink, warn: Echo = stderr_line) -> GuardedSink:
    return sink if isinstance(sink, GuardedSink) else GuardedSink(sink, warn)


def log_run_dir(
    run_dir: str | PathLike[str],
    sinks: LoggerSink | GuardedSink | Sequence[LoggerSink | GuardedSink],
    *,
    artifacts: Sequence[str | PathLike[str]] = (),
    warn: Echo = stderr_line,
) -> list[GuardedSink]:
    """Send a finished run directory to ``sinks``, with the calls a live session makes.

    The run is evaluated from the streams as ``dlbench report`` evaluates it; ``artifacts``
    (an HTML report, a saved summary) go to the session run. Returns the guarded sinks: a
    sink's ``failure`` says why it stopped (None when everything was sent).
    """
    run_dir = Path(run_dir)
    items = sinks if isinstance(sinks, Sequence) else [sinks]
    guarded = [guard(s, warn) for s in items]
    facts = session_facts(run_dir)
    for sink in guarded:
        sink.start_session(run_dir, facts)
    for path in streams(run_dir):
        for sink in guarded:
            sink.log_bench_run(path)
    if any(s.active for s in guarded):
        evaluation = evaluate(run_dir, EvaluateOptions(suite=facts.suite))
        for sink in guarded:
            sink.finish_session(evaluation, [Path(a) for a in artifacts])
    return guarded


def open_sinks(
    value: Value | None = None,
    *,
    bench_base: str | PathLike[str] | None = None,
    replace: bool = False,
    warn: Echo = stderr_line,
    echo: Echo = stderr_line,
    **options: Any,
) -> list[GuardedSink]:
    """The guarded sinks of the loggers asked for (loggers/registry.py), in its order.

    ``value(dest)`` reads the loggers' options (pytest's ``config.getoption("bench_" + dest)``,
    ``dlbench log``'s arguments); or give them as keywords, ``open_sinks(mlflow="",
    wandb="my-project")``. A switch None means not asked, ``""`` asked without a value
    (``--bench-mlflow`` alone: the default tracking URI; ``--bench-wandb`` alone: the default
    project). ``replace`` logs a session again even when it was logged. Nothing is imported or
    contacted until ``start_session``."""
    read = value if value is not None else options.get
    return [GuardedSink(entry.open(read, bench_base=bench_base, replace=replace, echo=echo), warn)
            for entry in asked_loggers(read)]
