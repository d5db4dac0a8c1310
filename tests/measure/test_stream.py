"""JSON-lines stream: flushed writes, forgiving reads of a torn last line only."""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
from pathlib import Path

import pytest

from pytest_dlbench.measure.stream import NullStream, StreamError, StreamWriter, read_stream


def test_write_creates_parents_and_returns_the_record(tmp_path: Path):
    path = tmp_path / "runs" / "r.2024" / "bench.D0.data"
    with StreamWriter(path) as stream:
        record = stream.write("rate", value=1.5, units="items/s")
    assert record == {"event": "rate", "value": 1.5, "units": "items/s"}
    assert path.read_text().splitlines() == [json.dumps(record)]
    assert stream.closed


def test_each_record_is_flushed_while_the_writer_is_open(tmp_path: Path):
    path = tmp_path / "s.data"
    stream = StreamWriter(path)
    try:
        for i in range(3):
            stream.write("loss", value=float(i), step=i)
            # Another process (the harness) reads while this one is still running.
            assert [r["step"] for r in read_stream(path)] == list(range(i + 1))
    finally:
        stream.close()


def test_append_mode_keeps_earlier_records(tmp_path: Path):
    path = tmp_path / "s.data"
    with StreamWriter(path) as a:
        a.write("config", name="x")
    with StreamWriter(path) as b:
        b.write("end", status="ok")
    assert [r["event"] for r in read_stream(path)] == ["config", "end"]


def test_event_cannot_be_passed_twice(tmp_path: Path):
    with StreamWriter(tmp_path / "s") as stream, pytest.raises(TypeError):
        stream.write("rate", event="other")  # type: ignore[misc]


def test_write_after_close_is_an_error(tmp_path: Path):
    stream = StreamWriter(tmp_path / "s")
    stream.close()
    with pytest.raises(ValueError, match="closed"):
        stream.write("rate", value=1)


def test_values_that_are_not_json_are_converted(tmp_path: Path):
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    path = tmp_path / "s"
    with StreamWriter(path) as stream:
        stream.write(
            "meta",
            path=Path("/data/x"),
            when=dt.datetime(2024, 1, 2, 3, 4, 5),
            tags={"b", "a"},
            thing=Opaque(),
        )
    (rec,) = read_stream(path)
    assert rec == {
        "event": "meta",
        "path": "/data/x",
        "when": "2024-01-02T03:04:05",
        "tags": ["a", "b"],
        "thing": "opaque!",
    }


def test_numpy_and_torch_values_are_converted(tmp_path: Path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    path = tmp_path / "s"
    with StreamWriter(path) as stream:
        stream.write(
            "x",
            f32=np.float32(0.5),
            i64=np.int64(3),
            arr=np.array([1, 2]),
            scalar=torch.tensor(2.5),
            vec=torch.tensor([1.0, 2.0]),
        )
    (rec,) = read_stream(path)
    assert rec == {
        "event": "x",
        "f32": 0.5,
        "i64": 3,
        "arr": [1, 2],
        "scalar": 2.5,
        "vec": [1.0, 2.0],
    }


def test_non_finite_floats_round_trip(tmp_path: Path):
    path = tmp_path / "s"
    with StreamWriter(path) as stream:
        stream.write("loss", value=math.nan)
        stream.write("rate", value=math.inf)
    nan, inf = read_stream(path)
    assert math.isnan(nan["value"])
    assert inf["value"] == math.inf


def test_truncated_last_line_is_dropped(tmp_path: Path):
    path = tmp_path / "s"
    with StreamWriter(path) as stream:
        stream.write("rate", value=1.0)
        stream.write("rate", value=2.0)
    with open(path, "a") as f:
        f.write('{"event": "rate", "val')  # writer killed mid-record
    assert [r["value"] for r in read_stream(path)] == [1.0, 2.0]


def test_torn_multibyte_character_on_the_last_line_is_dropped(tmp_path: Path):
    path = tmp_path / "s"
    path.write_bytes(b'{"event": "a"}\n' + '{"event": "\u00e9'.encode()[:-1])
    assert read_stream(path) == [{"event": "a"}]


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path):
    path = tmp_path / "bench.D0.data"
    path.write_text('{"event": "a"}\n\n{"event": oops}\n{"event": "b"}\n')
    with pytest.raises(StreamError) as info:
        read_stream(path)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{path}:3: corrupt record")
    assert info.value.line == 3


def test_a_line_that_is_not_an_object_is_corrupt(tmp_path: Path):
    path = tmp_path / "s"
    path.write_text('[1, 2]\n{"event": "b"}\n')
    with pytest.raises(ValueError, match=r":1: corrupt record: expected a JSON object"):
        read_stream(path)


def test_blank_lines_and_empty_files(tmp_path: Path):
    path = tmp_path / "s"
    path.write_text("")
    assert read_stream(path) == []
    path.write_text('\n{"event": "a"}\n\n')
    assert read_stream(path) == [{"event": "a"}]


def test_concurrent_writers_never_interleave_lines(tmp_path: Path):
    path = tmp_path / "s"
    with StreamWriter(path) as stream:

        def worker(k: int) -> None:
            for i in range(200):
                stream.write("sample", thread=k, i=i, pad="x" * 500)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    records = read_stream(path)
    assert len(records) == 800
    for k in range(4):
        assert [r["i"] for r in records if r["thread"] == k] == list(range(200))


def test_null_stream_keeps_records_in_memory():
    with NullStream() as stream:
        rec = stream.write("rate", value=3)
        assert stream.records == [rec] == [{"event": "rate", "value": 3}]
        assert stream.path is None
    assert stream.closed
