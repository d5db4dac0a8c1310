"""The JSON-lines run stream: one record per line, ``{"event": ..., **fields}``.

A benchmark's child process may be killed at any moment (timeout, out of memory, segfault), so
the writer writes every record at once and the reader forgives a torn last line. Only the last
line: a bad line in the middle means the file was damaged some other way, and is an error.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import json
import os
import threading
from collections.abc import Iterator
from functools import cache
from os import PathLike
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any, Protocol, TypeVar

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import DlbenchError

__all__ = [
    "LOOP_START",
    "Event",
    "NullStream",
    "RecordScan",
    "Stream",
    "StreamError",
    "StreamWriteError",
    "StreamWriter",
    "check_record",
    "line_problem",
    "read_last",
    "read_stream",
]


#: Key of the ``rate`` record of the first step of a ``Bench.iterate`` call (true when there).
LOOP_START = "loop_start"


class Event(str, enum.Enum):
    """The kinds of record in a run stream, each ``{"event": kind, ...}`` (docs/running.md)."""

    CONFIG = "config"  # spec, device, repeat[, distributed]: first, written by the harness
    META = "meta"  # machine facts of the process that runs the benchmark
    BARRIER = "barrier"  # released, waited: the replicas' start barrier
    RATE = "rate"  # one observation: value, units, step, warmup, time[, items, seconds,
    #                loop_start: the first observation of a ``Bench.iterate`` call]
    REGION = "region"  # key, count, seconds, step: a timer region's total over a window
    LOSS = "loss"  # value, step
    MONITOR = "monitor"  # gpu, reason, interval: how telemetry is sampled
    TELEMETRY = "telemetry"  # one sample of the GPUs and the process tree
    MONITOR_SUMMARY = "monitor_summary"  # samples, errors, the summary of the samples
    WARNING = "warning"  # message: a usage check that warned
    # flops of one forward+backward over `items` rate items (the rate's unit: tokens for an
    # LM), counted_examples (2) of batch_examples, reason: counted after the run
    FLOPS = "flops"
    # phase "warmup": mode, backend, seconds, start, end, steps, graphs, graph_breaks,
    # break_reasons, frames, cache_hits, cache_misses (torch.compile before the timed loop);
    # phase "loop": graphs and graph_breaks compiled during the timed loop (a recompile)
    COMPILE = "compile"
    PROGRESS = "progress"  # done_percent, step, time: how much of its work the run has done
    COMMAND = "command"  # status (start|end), argv, returncode...: an external command's run
    # The profiled window after the scored steps (profile/window.py), every record flagged
    # ``profiled``: never scored, never a ``rate``.
    PROFILE = "profile"  # status (start|end), step, steps, timed, warmup, active, notes...
    PROFILE_STEP = "profile_step"  # value, units, step, k, phase, time[, items, seconds]
    PROFILE_REGION = "profile_region"  # key, step, seconds, start: one region interval
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


class _Closes(Protocol):
    def close(self) -> None: ...


class ClosesOnExit:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self: _Closes,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class StreamWriteError(DlbenchError, OSError):
    """A stream file that cannot be written (a full disk, a read-only or vanished folder): one
    line naming the file and the cause. What was written before stays a readable stream."""

    def __init__(self, path: str | PathLike[str], exc: OSError) -> None:
        self.path = str(path)
        self.cause = exc
        super().__init__(self.describe(path, exc))

    @staticmethod
    def describe(path: str | PathLike[str], exc: BaseException) -> str:
        cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"cannot write {path}: {cause}"


def _last_line(fd: int) -> bytes:
    """The last non-blank line of an open file (its tail is enough: records are short)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b""
    tail = os.pread(fd, min(size, 1 << 16), max(0, size - (1 << 16)))
    lines = [line for line in tail.split(b"\n") if line.strip()]
    return lines[-1] if lines else b""


def _is_end(line: bytes) -> bool:
    try:
        record = untrusted.loads(line)  # a last line nested 100k deep is no end, no crash
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("event") == Event.END


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    """An exclusive lock on an open file, between processes (where ``fcntl`` exists)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def line_problem(record: dict[str, Any]) -> str | None:
    """Why :func:`read_stream` would refuse ``record``'s line as :class:`StreamWriter` writes
    it (one line: too long, nested too deep, not JSON), or None. A writer of data someone else
    produced (voir's data lines, run/voir_data.py) checks it first: one such record mid-stream
    would make the whole stream corrupt, and a run that measured its rates would fail."""
    try:
        # ensure_ascii (json's default, the writer's): its length is its size in bytes.
        line = json.dumps(record, default=_to_json)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"not JSON ({type(exc).__name__})"
    if len(line) > untrusted.MAX_LINE_BYTES:  # its newline aside, as untrusted.lines counts
        return f"longer than {untrusted.MAX_LINE_BYTES} bytes as a record ({len(line)} bytes)"
    if untrusted.too_deep(line):
        return f"nested deeper than {untrusted.MAX_DEPTH} levels"
    return None


class StreamWriter(ClosesOnExit):
    """Appends records to ``path`` (parents created), each in one ``write`` to the file.

    Thread-safe: a monitor thread and the benchmark may write to the same stream.
    Non-finite floats are written as ``NaN``/``Infinity`` (Python's json dialect, which
    :func:`read_stream` reads back), so a NaN loss is recorded as what it was.

    The ``end`` record is the last one: once it is written (here, or found at the end of the
    file when it is opened), later records are dropped and counted in :attr:`dropped`. A record
    that cannot be written raises :class:`StreamWriteError` and leaves no torn line behind.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                               0o644)
        except OSError as exc:
            raise StreamWriteError(self.path, exc) from None
        self._lock = threading.Lock()
        self._closed = False
        #: Records refused because the stream had already ended.
        self.dropped = 0
        #: Whether the ``end`` record was written.
        self.ended = _is_end(_last_line(self._fd))

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write ``{"event": event, **fields}`` as one line; return the record."""
        record = {"event": event, **fields}
        # One write() call for the whole line keeps a torn record to the last line only.
        self._append([record])
        return record

    def write_many(self, records: list[dict[str, Any]]) -> None:
        """Write several records (each with its ``event``) in one write.

        Used for a timer window: its records exist only once the window is read, so writing
        them together loses nothing and keeps the per-step cost of streaming low.
        """
        if records:
            self._append(records)

    def _append(self, records: list[dict[str, Any]]) -> None:
        ends = next((i for i, r in enumerate(records) if r.get("event") == Event.END), None)
        kept = records if ends is None else records[: ends + 1]
        data = "".join(json.dumps(r, default=_to_json) + "\n" for r in kept).encode("utf-8")
        with self._lock:
            if self._closed:
                raise ValueError(f"stream {self.path} is closed")
            if ends is None:
                self._append_unless_ended(records, data)
                return
            # Processes that may end the same stream (the child, its parent, its guard, the
            # controller of a worker that died): one at a time, and the first one wins.
            with _locked(self._fd):
                self.ended = self.ended or _is_end(_last_line(self._fd))
                if self.ended:
                    self.dropped += len(records)
                    return
                self._write_all(data)
                self.dropped += len(records) - len(kept)
                self.ended = True

    def _append_unless_ended(self, records: list[dict[str, Any]], data: bytes) -> None:
        if self.ended:
            self.dropped += len(records)
            return
        self._write_all(data)

    def _write_all(self, data: bytes) -> None:
        size = os.fstat(self._fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            # A part of a record may be on disk: cut it, so the file stays a readable stream.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise StreamWriteError(self.path, exc) from None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)

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


def _lines(path: str | PathLike[str]) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(line number, line, last)`` of a stream's non-blank lines, one in memory at a time
    (a line over :data:`~pytest_dlbench.core.untrusted.MAX_LINE_BYTES` is None); ``last`` marks the
    last one, the only one a killed writer may have torn."""
    pending: tuple[int, bytes | None] | None = None
    for number, raw in untrusted.lines(path):
        if raw is not None and not raw.strip():
            continue
        if pending is not None:
            yield (*pending, False)
        pending = (number, raw)
    if pending is not None:
        yield (*pending, True)


def _parse(raw: bytes | None) -> dict[str, Any]:
    """One line's record; ``ValueError`` (one line) for a line that is not a JSON object, is
    nested too deep or too long to be one."""
    if raw is None:
        raise ValueError(f"longer than {untrusted.MAX_LINE_BYTES} bytes")
    record = untrusted.loads(raw.decode("utf-8"))  # its depth bounded before it is parsed
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    return record


def read_stream(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """Read all records of a stream file.

    A corrupt or truncated last line (a writer killed mid-record) is dropped; a corrupt line
    anywhere else raises :class:`StreamError` (a ``ValueError``) naming ``file:line``.
    Blank lines are ignored. A file that is not a regular one is a ``ValueError``
    (:class:`~pytest_dlbench.core.untrusted.FileRefused`).
    """
    records: list[dict[str, Any]] = []
    for number, raw, last in _lines(path):
        try:
            record = _parse(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            if last:
                break
            raise StreamError(f"corrupt record: {' '.join(str(exc).split())}", path=path,
                              line=number) from exc
        records.append(record)
    return records


# -- the forgiving, typed reader of the reports ---------------------------------------------------


@cache
def _schemas() -> dict[str, Any]:
    """The fields the reports read, per record kind (pydantic, imported only to read)."""
    from pytest_dlbench.core.schema import Bool, Int, Loose, Map, Num, Str

    class Plan(Loose):
        method: Str | None = None

    class Spec(Loose):
        name: Str | None = None
        weight: Num | None = None
        enabled: Bool | None = None
        units: Str | None = None
        plan: Plan | None = None

    class Config(Loose):
        spec: Spec | None = None
        device: Int | None = None
        repeat: Int | None = None

    class Rate(Loose):
        value: Num
        time: Num = 0.0
        items: Num | None = None
        seconds: Num | None = None
        step: Int | None = None
        units: Str | None = None

    class Loss(Loose):
        value: Num
        step: Int | None = None

    class Region(Loose):
        key: Str
        seconds: Num
        count: Int | None = None
        step: Int | None = None

    class Telemetry(Loose):
        time: Num | None = None
        gpus: list[Map] | None = None

    class MonitorSummary(Loose):
        errors: Int | None = None

    class End(Loose):
        status: Str
        reason: Str | None = None

    return {
        Event.CONFIG: Config, Event.RATE: Rate, Event.LOSS: Loss, Event.REGION: Region,
        Event.TELEMETRY: Telemetry, Event.MONITOR_SUMMARY: MonitorSummary, Event.END: End,
    }


def check_record(record: dict[str, Any]) -> str | None:
    """Why a record cannot be read as its kind says (one line), or None. Kinds this version does
    not know are fine: new measurements add kinds, and readers ignore what they do not know."""
    from pytest_dlbench.core.schema import problem

    event = record.get("event")
    if not isinstance(event, str):
        return f"event: must be a string, got {event!r}"[:100]
    model = _schemas().get(event)
    return problem(model, record) if model is not None else None


class RecordScan:
    """Read a stream for a report: a bad line costs that line, never the run's measurements.
    The valid records, one line in memory at a time (iterate once), with what was left out:
    the reader of the reports (measure/records.RunRecords.collect keeps only what it needs of
    each record) and of :func:`read_last`.

    As :func:`read_stream`, a torn last line is dropped. A corrupt line before it is left out
    and noted, and the stream is marked :attr:`damaged`; a record whose fields have the wrong
    type (:func:`check_record`) is left out and noted. ``OSError`` if unreadable,
    ``ValueError`` (:class:`~pytest_dlbench.core.untrusted.FileRefused`) if not a regular file.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = path
        #: ``file:line: ...`` for each line left out (a corrupt line, a record of the wrong
        #: type), once iterated.
        self.notes: list[str] = []
        #: The first corrupt line before the last one (``file:line: corrupt record: ...``),
        #: once iterated: the file was damaged, not just cut short by a killed writer.
        self.damaged: str | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        path = self.path
        for number, raw, last in _lines(path):
            try:
                record = _parse(raw)
            except ValueError as exc:
                if last:
                    break
                note = f"{path}:{number}: corrupt record: {' '.join(str(exc).split())}"
                self.notes.append(note)
                self.damaged = self.damaged or note
                continue
            problem = check_record(record)
            if problem is not None:
                self.notes.append(
                    f"{path}:{number}: {record.get('event')} record left out: {problem}")
                continue
            yield record


def read_last(path: str | PathLike[str], event: str) -> dict[str, Any] | None:
    """The last valid record of kind ``event`` in a stream (None without one), read as
    :class:`RecordScan` reads (a damaged line elsewhere hides nothing) but one line in memory
    at a time: a stream of a million observations is never held whole to find its ``end``."""
    last = None
    for record in RecordScan(path):
        if record.get("event") == event:
            last = record
    return last
