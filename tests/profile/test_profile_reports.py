"""Report builders on made-up inputs: time (nesting, rest, overlap), memory (CPU-only and older
attribute names), system, summary notes, trace per rank, and the writer's round trip."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_dlbench.layout import profile_dir
from pytest_dlbench.measure.timing import CpuBackend, FakeClock, Timer
from pytest_dlbench.profile import (
    NoteReport,
    ProfileConfig,
    build_reports,
    load_meta,
    load_reports,
    render_reports,
    write_reports,
)
from pytest_dlbench.profile.memory import build_memory_report, is_operator, profiler_totals
from pytest_dlbench.profile.speed import build_speed_report
from pytest_dlbench.profile.system import build_system_report, dir_usage
from pytest_dlbench.profile.timereport import (
    IntervalSample,
    StepSample,
    build_time_report,
    time_report_from_windows,
)


def iv(key: str, step: int, start: float, end: float) -> IntervalSample:
    return IntervalSample(key, step, end - start, start)


def test_time_report_nesting_rest_and_shares() -> None:
    steps = [StepSample(i, 1.0) for i in range(4)]
    intervals = []
    for i in range(4):
        intervals += [
            iv("io", i, 0.0, 0.1),
            iv("forward", i, 0.1, 0.4),
            iv("attention", i, 0.15, 0.25),  # inside forward
            iv("backward", i, 0.4, 0.9),
            iv("comm", i, 0.6, 0.85),  # DDP: inside backward
        ]
    intervals.append(iv("forward", 99, 0.0, 5.0))  # a step that is not in the report
    report = build_time_report(steps, intervals)
    rows = {r.key: r for r in (*report.regions, report.rest, report.step)}
    assert rows["attention"].parent == "forward" and rows["comm"].parent == "backward"
    assert {r.key for r in report.top_level} == {"io", "forward", "backward"}
    assert rows["forward"].count == 4 and rows["forward"].total == pytest.approx(1.2)
    assert rows["rest"].mean == pytest.approx(0.1)
    top = sum(r.total for r in report.top_level)
    assert top + report.rest.total == pytest.approx(report.step.total)
    assert rows["backward"].share == pytest.approx(0.5)
    assert report.overlap == pytest.approx(0.0)
    text = report.render()
    assert "  attention (in forward)" in text and "  comm (in backward)" in text
    lines = text.splitlines()
    order = [line.split()[0] for line in lines[2:]]
    assert order == ["backward", "comm", "forward", "attention", "io", "rest", "step"]
    assert report.rows()[-1]["level"] == "step"


def test_time_report_says_when_top_level_regions_overlap() -> None:
    steps = [StepSample(0, 1.0)]
    report = build_time_report(steps, [iv("a", 0, 0.0, 0.6), iv("b", 0, 0.4, 0.9)])
    assert report.overlap == pytest.approx(0.2)
    assert report.rest.total == pytest.approx(-0.1)
    assert "top-level regions overlap by 200 ms" in report.render()


def test_time_report_statistics() -> None:
    steps = [StepSample(i, s) for i, s in enumerate([1.0, 2.0, 3.0, 4.0, 100.0])]
    report = build_time_report(steps, [])
    assert report.step.median == 3.0
    assert report.step.mean == pytest.approx(22.0)
    assert 4.0 < report.step.p95 <= 100.0
    assert report.rest.total == pytest.approx(110.0)


def test_timer_intervals_carry_their_step_and_start() -> None:
    clock = FakeClock()
    timer = Timer(CpuBackend(clock))
    timer.start("epoch")
    clock.advance(1.0)
    timer.begin()
    for _ in range(2):
        with timer.region("forward"):
            clock.advance(0.25)
            with timer.region("inner"):
                clock.advance(0.5)
        clock.advance(0.25)
        timer.step(1)
    with timer.region("late"):  # ends in the step in progress
        clock.advance(0.1)
    timer.end("epoch")
    window = timer.read(intervals=True)
    got = {(i.key, i.step): (i.seconds, i.start) for i in window.intervals}
    assert got[("forward", 1)] == pytest.approx((0.75, 0.0))
    assert got[("inner", 0)] == pytest.approx((0.5, 0.25))
    assert got[("late", 2)] == (pytest.approx(0.1), None)
    assert got[("epoch", 2)][1] is None
    assert timer.read().intervals == ()  # only when asked for
    report = time_report_from_windows(window)
    assert report.steps == 2
    assert {r.key: r.parent for r in report.regions} == {"forward": None, "inner": "forward"}
    assert report.rest.mean == pytest.approx(0.25)


def test_standalone_report_says_how_to_read_the_timer() -> None:
    clock = FakeClock()
    timer = Timer(CpuBackend(clock))
    timer.begin()
    with timer.region("forward"):
        clock.advance(1.0)
    timer.step(1)
    report = time_report_from_windows([timer.read()])
    assert "timer.read(intervals=True)" in report.render()


def cpu_event(key: str, cpu: float, mem: int = 0, **extra: Any) -> Any:
    # No device attribute at all: what an old CPU-only torch gives.
    return SimpleNamespace(key=key, count=2, self_cpu_time_total=cpu, cpu_time_total=cpu,
                           self_cpu_memory_usage=mem, cpu_memory_usage=mem, **extra)


def test_memory_report_on_cpu_has_no_device_columns() -> None:
    events = [
        cpu_event("aten::convolution_backward", 900.0, -4096),
        cpu_event("aten::empty", 5.0, 1 << 20),
        cpu_event("ProfilerStep*", 2000.0),
        cpu_event("forward", 1500.0, is_user_annotation=True),
        cpu_event("autograd::engine::evaluate_function: ConvolutionBackward0", 950.0),
        cpu_event("Optimizer.step#SGD.step", 100.0),
        cpu_event("cudaLaunchKernel", 10.0),
        cpu_event("aten::relu", 0.0),
    ]
    report = build_memory_report(events, device=False, steps=3, top=20)
    assert list(report.tables) == ["self_cpu_time", "self_cpu_memory"]
    assert [op.name for op in report.tables["self_cpu_time"]] == [
        "aten::convolution_backward", "aten::empty"]
    assert [op.name for op in report.tables["self_cpu_memory"]] == ["aten::empty"]
    data = report.to_dict()
    assert all("device" not in key for row in data["tables"]["self_cpu_time"] for key in row)
    assert all("device" not in key for row in report.rows() for key in row)
    text = report.render()
    assert "device" not in text.split("\n", 1)[1]
    assert "CPU only" in text
    assert profiler_totals(events, device=False) == (pytest.approx(5.465e-3), None)


def test_memory_report_reads_older_cuda_attribute_names() -> None:
    old = SimpleNamespace(key="aten::mm", count=1, self_cpu_time_total=10.0, cpu_time_total=10.0,
                          self_cpu_memory_usage=0, cpu_memory_usage=0,
                          self_cuda_time_total=70.0, cuda_time_total=70.0,
                          self_cuda_memory_usage=512, cuda_memory_usage=512,
                          device_type="DeviceType.CPU")
    report = build_memory_report([old], device=True, steps=1)
    (op,) = report.tables["self_device_time"]
    assert op.self_device_time == pytest.approx(70e-6) and op.self_device_memory == 512
    assert is_operator(old)


def test_system_report_from_telemetry_records(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"x" * 5000)
    records = [
        {"event": "monitor", "gpu": True, "interval": 1.0, "time": 10.0},
        {"event": "telemetry", "time": 10.0, "cpu_percent": None, "rss_bytes": 100,
         "gpus": [{"index": 0, "util": 50.0, "mem_used": 1000, "mem_total": 4000,
                   "energy_j": 0.0, "power_w": 100.0}]},
        {"event": "telemetry", "time": 12.0, "cpu_percent": 150.0, "rss_bytes": 300,
         "gpus": [{"index": 0, "util": 100.0, "mem_used": 3000, "mem_total": 4000,
                   "energy_j": 200.0, "power_w": 120.0}]},
    ]
    report = build_system_report(records, dirs={"data": tmp_path / "data",
                                                "results": tmp_path / "nope"})
    assert report.wall_s == 2.0 and report.rss_peak == 300 and report.cpu_percent_mean == 150.0
    (gpu,) = report.gpus
    assert (gpu.util_mean, gpu.util_max, gpu.mem_peak, gpu.energy_j) == (75.0, 100.0, 3000,
                                                                         200.0)
    data, results = report.dirs
    assert (data.bytes, data.files, data.complete) == (5000, 1, True)
    assert data.fs_total and data.fs_total > 0
    assert results.bytes is None
    text = report.render()
    assert "GPU 0" in text and "does not exist" in text
    again = type(report).from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == report


def test_dir_usage_stops_at_its_bound(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"{i}.txt").write_text("ab")
    usage = dir_usage("data", tmp_path, max_files=3)
    assert (usage.files, usage.bytes, usage.complete) == (3, 6, False)


def test_speed_report_uses_the_scored_window_for_io() -> None:
    records = [
        *({"event": "rate", "step": i, "warmup": i < 2, "items": 8, "seconds": 0.5,
           "value": 16.0} for i in range(6)),
        {"event": "region", "key": "io", "count": 3, "seconds": 3.0, "step": 2},  # has warm-up
        {"event": "region", "key": "io", "count": 3, "seconds": 0.3, "step": 5},
    ]
    profiled = [{"event": "profile_step", "step": 9, "items": 8, "seconds": 1.0}]
    report = build_speed_report(records, scored_rate=16.0, units="items/s", profiled=profiled,
                                profiler_cpu_s=2.0)
    assert report.io_time_per_batch == pytest.approx(0.1)
    assert report.io_throughput == pytest.approx(80.0)
    assert report.time_per_item == pytest.approx(1 / 16)
    assert report.profiled_throughput == 8.0
    assert report.profiler_device_s is None
    assert all(r["metric"] != "profiler_device_time" for r in report.rows())
    assert "scored steady window" in report.render()


def test_summary_without_watch_and_trace_per_rank(tmp_path: Path) -> None:
    config = ProfileConfig.from_mapping({"summary": True,
                                         "trace": {"enabled": True,
                                                   "trace_rank0_only": True}})
    records: list[dict[str, Any]] = [{"event": "profile", "status": "start", "step": 3}]
    from pytest_dlbench.profile.capture import Capture

    capture = Capture(config, device="cpu", rank=2)
    capture.started = True
    reports = build_reports(config, records, bench="resnet18", capture=capture, watched=None,
                            out_dir=tmp_path, rank=2)
    assert reports["summary"].render() == (
        "summary: resnet18 never called bench.watch(model, example)")
    assert reports["trace"].render() == "trace: none on rank 2 (trace_rank0_only)"
    assert isinstance(reports["summary"], NoteReport)


def test_write_load_render_round_trip(tmp_path: Path) -> None:
    steps = [StepSample(i, 1.0) for i in range(3)]
    intervals = [iv("forward", i, 0.0, 0.4) for i in range(3)]
    reports = {
        "time": build_time_report(steps, intervals),
        "memory": build_memory_report([cpu_event(f"aten::op{i}", 50.0 + i, 64) for i in range(7)],
                                      device=False, steps=3),
        "summary": NoteReport("summary", "summary: x never called bench.watch(model, example)"),
    }
    out = profile_dir(tmp_path / "resnet18.D0.data")
    assert out == tmp_path / "resnet18.D0.profile"
    assert profile_dir(tmp_path / "resnet18.D0.data", rank=3) == out / "rank3"
    paths = write_reports(reports, out, meta={"bench": "resnet18"})
    assert sorted(p.name for p in paths) == sorted([
        "time.json", "time.csv", "memory.json", "memory.csv", "summary.json", "summary.csv",
        "index.json"])
    loaded = load_reports(out)
    assert list(loaded) == ["time", "memory", "summary"]
    assert loaded == reports
    for verbose in (False, True):
        assert render_reports(loaded, verbose) == render_reports(reports, verbose)
    # verbose: true in the settings makes that report full without -v.
    settings = ProfileConfig.from_mapping({"memory": {"enabled": True, "verbose": True}})
    concise, full = render_reports(reports), render_reports(reports, config=settings.to_dict())
    assert full != concise and reports["memory"].render(True) in full
    assert reports["time"].render() in full
    assert load_meta(out) == {"bench": "resnet18"}
    with open(out / "time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["key"] for r in rows] == ["forward", "rest", "step"]
    # Without index.json (a run cut short while writing), the report files are read.
    (out / "index.json").unlink()
    assert load_reports(out) == reports
    assert load_reports(tmp_path / "missing") == {}
