"""The JSON-lines run stream: one record per line, ``{"event": ..., **fields}``.

A benchmark's child process may be killed at any moment (timeout, out of memory, segfault), so
the writer flushes after every record and the reader forgives a torn last line. Only the last
line: a bad line in the middle means the file was damaged some other way, and is an error.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
import threading
from os import PathLike
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any, Protocol, TypeVar

from pytest_dlbench.errors import DlbenchError

__all__ = ["Event", "NullStream", "Stream", "StreamError", "StreamWriter", "read_stream"]


class Event(str, enum.Enum):
    """The kinds of record in a run stream, each ``{"event": kind, ...}`` (docs/running.md)."""

    CONFIG = "config"  # spec, device, repeat[, distributed]: first, written by the harness
    META = "meta"  # machine facts of the process that runs the benchmark
    BARRIER = "barrier"  # released, waited: the replicas' start barrier
    RATE = "rate"  # one observation: value, units, step, warmup, time[, items, seconds]
    REGION = "region"  # key, count, seconds, step: a timer region's total over a window
    LOSS = "loss"  # value, step
    MONITOR = "monitor"  # gpu, reason, interval: how telemetry is sampled
    TELEMETRY = "telemetry"  # one sample of the GPUs and the process tree
    MONITOR_SUMMARY = "monitor_summary"  # samples, errors, the summary of the samples
    WARNING = "warning"  # message: a usage check that warned
    PROGRESS = "progress"  # done_percent, step, time: how much of its work the run has done
    COMMAND = "command"  # status (start|end), argv, returncode...: an external command's run
    END = "end"  # status, reason, time[, writer, returncode]: last, exactly once

    def __str__(self) -> str:
        return self.value


class StreamError(DlbenchError, ValueError):
    """A stream file has a corrupt record before its last line."""

    def __init__(self, message: str, *, path: str | PathLike[str], line: int) -> None:
        self.path = str(path)
        self.line = line
        super().__init__(f"{self.path}:{line}: {message}")


class Stream(Protocol):
    """What benchmarks and the harness write to: a :class:`StreamWriter` or :class:`NullStream`."""

    def write(self, event: str, **fields: Any) -> dict[str, Any]: ...

    def write_many(self, records: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


def _to_json(value: Any) -> Any:
    """``json.dumps`` default hook for values that are not plain JSON."""
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    # numpy scalars, 0-d arrays and one-element tensors; .tolist() for bigger arrays/tensors.
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (ValueError, RuntimeError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


_C = TypeVar("_C", bound="ClosesOnExit")


class ClosesOnExit:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()  # type: ignore[attr-defined]


class StreamWriter(ClosesOnExit):
    """Appends records to ``path`` (parents created), flushing after each one.

    Thread-safe: a monitor thread and the benchmark may write to the same stream.
    Non-finite floats are written as ``NaN``/``Infinity`` (Python's json dialect, which
    :func:`read_stream` reads back), so a NaN loss is recorded as what it was.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write ``{"event": event, **fields}`` as one line and flush it; return the record."""
        record = {"event": event, **fields}
        # One write() call for the whole line keeps a torn record to the last line only.
        line = json.dumps(record, default=_to_json) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"stream {self.path} is closed")
            self._file.write(line)
            self._file.flush()
        return record

    def write_many(self, records: list[dict[str, Any]]) -> None:
        """Write several records (each with its ``event``) in one write and one flush.

        Used for a timer window: its records exist only once the window is read, so writing
        them together loses nothing and keeps the per-step cost of streaming low.
        """
        if not records:
            return
        text = "".join(json.dumps(r, default=_to_json) + "\n" for r in records)
        with self._lock:
            if self._file.closed:
                raise ValueError(f"stream {self.path} is closed")
            self._file.write(text)
            self._file.flush()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __repr__(self) -> str:
        return f"StreamWriter({str(self.path)!r})"


class NullStream(ClosesOnExit):
    """Same interface as :class:`StreamWriter`, keeping records in ``.records`` (no file).

    Values are kept as given (not converted to JSON), which is what a test usually wants.
    """

    path = None

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.closed = False

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, **fields}
        self.records.append(record)
        return record

    def write_many(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)

    def close(self) -> None:
        self.closed = True


def read_stream(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """Read all records of a stream file.

    A corrupt or truncated last line (a writer killed mid-record) is dropped; a corrupt line
    anywhere else raises :class:`StreamError` (a ``ValueError``) naming ``file:line``.
    Blank lines are ignored.
    """
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    # Index of the last non-blank line: the only one allowed to be torn.
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    records: list[dict[str, Any]] = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError(f"expected a JSON object, got {type(record).__name__}")
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            if i == last:
                break
            raise StreamError(f"corrupt record: {exc}", path=path, line=i + 1) from exc
        records.append(record)
    return records
