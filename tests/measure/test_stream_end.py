"""The stream's ``end`` is its last record, exactly once; a failed write leaves a readable stream
and costs one line (issue 16.4)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.measure.stream import StreamWriteError, StreamWriter, read_stream
from pytest_dlbench.run.harness import execute


def events(path: Path) -> list[str]:
    return [r["event"] for r in read_stream(path)]


def test_records_after_end_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "s.data"
    with StreamWriter(path) as stream:
        stream.write("rate", value=1)
        stream.write("end", status="ok")
        stream.write("rate", value=2)
        stream.write_many([{"event": "loss", "value": 1}, {"event": "end", "status": "fail"}])
        assert stream.ended and stream.dropped == 3
    assert events(path) == ["rate", "end"]


def test_a_batch_stops_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "s.data"
    with StreamWriter(path) as stream:
        stream.write_many([{"event": "rate", "value": 1}, {"event": "end", "status": "ok"},
                           {"event": "rate", "value": 2}])
        assert stream.dropped == 1
    assert events(path) == ["rate", "end"]


def test_another_writer_of_an_ended_stream_adds_nothing(tmp_path: Path) -> None:
    """The parent, the child's guard or the controller cannot add a second end."""
    path = tmp_path / "s.data"
    with StreamWriter(path) as child:
        child.write("end", status="ok")
    with StreamWriter(path) as parent:
        assert parent.ended
        parent.write("end", status="crash", writer="parent")
    assert events(path) == ["end"]


def test_two_open_writers_end_a_stream_once(tmp_path: Path) -> None:
    path = tmp_path / "s.data"
    first, second = StreamWriter(path), StreamWriter(path)
    first.write("end", status="fail", writer="guard")
    second.write("end", status="fail", writer="controller")  # opened before: sees it at once
    first.close()
    second.close()
    assert [r.get("writer") for r in read_stream(path)] == ["guard"]


def test_a_failed_write_is_one_line_and_cuts_its_partial_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.data"
    stream = StreamWriter(path)
    stream.write("config", spec={})
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        if fd == stream._fd and len(data) > 10:
            real_write(fd, bytes(data)[:10])  # a part of the record goes to disk...
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # ...then the disk is full

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StreamWriteError) as info:
        stream.write("rate", value=1.0, units="items/s")
    monkeypatch.undo()
    assert isinstance(info.value, DlbenchError) and isinstance(info.value, OSError)
    assert str(info.value) == f"cannot write {path}: No space left on device"
    assert events(path) == ["config"]  # readable, no torn line
    stream.write("end", status="fail")
    stream.close()
    assert events(path) == ["config", "end"]


def test_a_run_whose_stream_cannot_be_written_fails_in_one_line(tmp_path: Path) -> None:
    class Full:
        def write(self, event: str, **fields: object) -> None:
            raise StreamWriteError(tmp_path / "s.data", OSError(errno.ENOSPC, "No space left"))

    outcome, exc = execute(lambda: None, Full())  # type: ignore[arg-type]
    assert (outcome.status, outcome.reason) == ("fail", f"cannot write {tmp_path / 's.data'}: "
                                                        "No space left")
    assert isinstance(exc, StreamWriteError)

    def benchmark() -> None:
        Full().write("rate", value=1)

    outcome, exc = execute(benchmark, Full())  # type: ignore[arg-type]
    assert outcome.reason == f"cannot write {tmp_path / 's.data'}: No space left"
    assert "\n" not in outcome.reason
