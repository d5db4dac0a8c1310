"""voir's data lines are someone else's text (issue 40 item 3; run/voir_data.py): a line too long
or nested too deep for the stream's reader is left out with a warning, and the run keeps its
rates and ends ok; nothing the child writes makes the stream unreadable."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.core import untrusted
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import StreamWriter, line_problem, read_stream
from pytest_dlbench.run.voir_data import DataChannel

RATE = json.dumps({"rate": 100.0, "units": "items/s", "task": "train", "elapsed": 0.5})
DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
DEEP_TELEMETRY = json.dumps({"gpudata": {"0": 1}})[:-1] + ', "x": ' + DEEP + "}"
LONG = json.dumps({"gpudata": {"0": "x" * (untrusted.MAX_LINE_BYTES + 10)}})
# Under the line limit as a data line, over it as a record: each character is 3 bytes of UTF-8
# and 6 of the stream's \uXXXX.
WIDE = json.dumps({"gpudata": {"0": "\u00e9" * 300_000}}, ensure_ascii=False)
UNITS = json.dumps({"rate": 5.0, "units": "u" * 900_000, "task": "train"})


def kinds(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == kind]


def test_hostile_data_lines_leave_a_readable_stream_with_its_rates(tmp_path: Path) -> None:
    path = tmp_path / "run.data"
    stream = StreamWriter(path)
    bench = Bench(name="v", stream=stream, skip=1, stop=20)
    channel = DataChannel(bench, keep=io.StringIO())
    assert len(WIDE.encode()) < untrusted.MAX_LINE_BYTES
    lines = [RATE, DEEP, RATE, DEEP_TELEMETRY, LONG, RATE, WIDE, UNITS, DEEP, RATE]
    for line in lines:
        assert channel.feed(line) is None  # no RecursionError, nothing raised
    bench.close()
    stream.close()
    records = read_stream(path)  # strict: a corrupt line before the last one raises
    assert len(kinds(records, "rate")) == 5  # the four rates and the one with long units
    assert {r["units"] for r in kinds(records, "rate")} == {"items/s"}  # long units ignored
    assert not [r for r in kinds(records, "command") if r.get("status") == "telemetry"]
    assert channel.dropped == 5  # two deep, one deep telemetry, one long, one wide
    said = [r["message"] for r in kinds(records, "warning")]
    later = ("(later lines left out for this reason are only counted: the command record's "
             "data_dropped)")
    assert said[:2] == [
        f"voir data line 2 left out: nested deeper than 128 levels {later}",
        f"voir data line 5 left out: longer than {untrusted.MAX_LINE_BYTES} bytes "
        f"({len(LONG)} bytes) {later}",
    ]
    assert said[2].startswith("voir data line 7 left out: its telemetry record would be "
                              f"longer than {untrusted.MAX_LINE_BYTES} bytes as a record (")
    assert all(r["source"] == "observations" for r in kinds(records, "warning"))


def test_a_line_cut_by_the_reader_is_left_out() -> None:
    stream_records: list[dict[str, Any]] = []

    class Stream:
        def write(self, event: str, **fields: Any) -> dict[str, Any]:
            stream_records.append({"event": event, **fields})
            return stream_records[-1]

        def write_many(self, records: list[dict[str, Any]]) -> None:
            stream_records.extend(records)

        def close(self) -> None:
            pass

    bench = Bench(name="v", stream=Stream(), skip=0, stop=5)
    channel = DataChannel(bench)
    assert channel.feed(RATE, cut=10) is None  # its head parses, but it is not the whole line
    assert channel.dropped == 1 and not kinds(stream_records, "rate")
    assert f"({len(RATE) + 10} bytes)" in kinds(stream_records, "warning")[0]["message"]


def test_line_problem_says_what_the_reader_refuses() -> None:
    assert line_problem({"event": "x", "v": 1}) is None
    assert line_problem({"event": "x", "v": "a" * untrusted.MAX_LINE_BYTES}) is not None
    nested: Any = 1
    for _ in range(130):
        nested = [nested]
    assert line_problem({"event": "x", "v": nested}) == "nested deeper than 128 levels"
    fits = "a" * (untrusted.MAX_LINE_BYTES - len('{"event": "x", "v": ""}'))
    assert line_problem({"event": "x", "v": fits}) is None  # exactly the limit, as read back


SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    fd = int(os.environ["DATA_FD"])
    deep = "[" * 100_000 + "]" * 100_000
    long = json.dumps({"gpudata": {"0": "x" * (1 << 21)}})
    for i in range(12):
        rate = {"rate": 50.0 + i, "units": "items/s", "task": "train", "elapsed": 0.01}
        os.write(fd, (json.dumps(rate) + "\\n").encode())
        if i == 3:
            os.write(fd, (deep + "\\n").encode())
        if i == 5:
            os.write(fd, (long + "\\n").encode())
        if i == 7:
            tele = json.dumps({"gpudata": {"0": "\\u00e9" * 300_000}}, ensure_ascii=False)
            os.write(fd, (tele + "\\n").encode())
        time.sleep(0.01)
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_run_fed_hostile_voir_lines_keeps_its_rates_and_ends_ok(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    (pytester.path / "feed.py").write_text(SCRIPT)
    pytester.makefile(".yaml", s="""
        hostile:
          definition: {command: [python, '{suite_dir}/feed.py'], parser: voir}
          voir: {options: {skip: 2, stop: 8}}
        """.replace("\n        ", "\n"))
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    records = read_stream(run_dir / "hostile.D0.data")  # strict: no corrupt line
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"
    assert len(kinds(records, "rate")) == 10
    (end,) = [r for r in kinds(records, "command") if r["status"] == "end"]
    assert end["data_dropped"] == 3
    result.stdout.fnmatch_lines(["warning: hostile: voir data line 5 left out: nested deeper "
                                 "than 128 levels *"])
