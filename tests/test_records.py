"""RunRecords: a run's stream records parsed once, by kind, the one reader the telemetry, the
usage validation and the profile read a run through."""

from __future__ import annotations

from pathlib import Path

from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event, NullStream, StreamWriter

RECORDS = [
    {"event": "config", "spec": {"name": "toy"}, "device": 0},
    {"event": "meta", "host": "h"},
    {"event": "monitor", "gpu": False, "reason": "no NVML", "interval": 1.0},
    {"event": "telemetry", "time": 1.0, "rss_bytes": 10},
    {"event": "rate", "value": 1.0, "step": 0, "warmup": True, "time": 2.0},
    {"event": "rate", "value": 2.0, "step": 1, "warmup": False, "time": 3.0},
    {"event": "region", "key": "io", "count": 2, "seconds": 0.1, "step": 1},
    {"event": "loss", "value": 0.5, "step": 1},
    {"event": "profile", "status": "start", "step": 2, "profiled": True},
    {"event": "profile_step", "step": 2, "k": 0, "phase": "timed", "profiled": True},
    {"event": "profile_region", "key": "io", "step": 2, "seconds": 0.05, "profiled": True},
    {"event": "profile", "status": "end", "step": 2, "profiled": True},
    {"event": "monitor", "gpu": True},  # a second one: the first says how sampling started
    {"event": "monitor_summary", "errors": 1},
    {"event": "monitor_summary", "errors": 2, "last_error": "x"},
    {"event": "novel_kind", "x": 1},
    {"event": "end", "status": "fail", "reason": "killed"},
    {"event": "end", "status": "timeout", "reason": "appended by the parent"},
]


def test_records_by_kind() -> None:
    run = RunRecords.of(RECORDS)
    assert run.config["device"] == 0 and run.meta["host"] == "h"
    assert [r["step"] for r in run.rates] == [0, 1]
    assert [r["step"] for r in run.steady] == [1] and [r["step"] for r in run.warmup] == [0]
    assert len(run.regions) == len(run.losses) == len(run.telemetry) == 1
    assert run.profile_start["status"] == "start"
    assert len(run.profile_steps) == len(run.profile_regions) == 1
    assert run.kind("novel_kind") == ({"event": "novel_kind", "x": 1},)  # unknown kinds kept
    assert run.kind(Event.COMPILE) == () and run.flops is None


def test_which_record_of_a_repeated_kind_counts() -> None:
    run = RunRecords.of(RECORDS)
    assert run.end["status"] == "timeout"  # the last: the parent's, after a torn child
    assert run.monitor["gpu"] is False  # the first: how sampling started
    assert run.monitor_summary["errors"] == 2  # the last


def test_records_in_memory_and_read_back_are_the_same(tmp_path: Path) -> None:
    # A NullStream keeps the Event members it was given; the file holds their values.
    memory = NullStream()
    path = tmp_path / "toy.D0.data"
    with StreamWriter(path) as stream:
        for target in (memory, stream):
            target.write(Event.CONFIG, device=0)
            target.write(Event.RATE, value=1.0, step=0)
            target.write_many([{"event": Event.LOSS.value, "value": 0.1, "step": 0}])
            target.write(Event.END, status="ok")
    for run in (RunRecords.of(memory.records), RunRecords.read(path)):
        assert run.config["device"] == 0 and len(run.rates) == len(run.losses) == 1
        assert run.end["status"] == "ok" and len(run) == 4
        assert list(run) == list(run.records)  # iterable as plain records


def test_parsing_is_once() -> None:
    run = RunRecords.of(RECORDS)
    assert RunRecords.of(run) is run
