"""The profiled window of Bench, on fake clocks and a fake profiler: scored records untouched,
phases, per-step regions, cut-short runs, log_rate, and the CUDA snapshot with fakes."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.measure.timing import FakeCudaBackend, Timer
from pytest_dlbench.profile import ProfileConfig, finish_profile, load_reports
from pytest_dlbench.profile.capture import Capture
from pytest_dlbench.profile.window import ProfiledWindow
from pytest_dlbench.results.figures import run_from_records


class Batch:
    def __init__(self, n: int) -> None:
        self.shape = (n, 3)


class FakeProfiler:
    """Stands in for torch.profiler.profile: records what it was asked."""

    made: list[FakeProfiler] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[str] = []
        FakeProfiler.made.append(self)

    def start(self) -> None:
        self.calls.append("start")

    def step(self) -> None:
        self.calls.append("step")

    def stop(self) -> None:
        self.calls.append("stop")

    def key_averages(self) -> list[Any]:
        return [
            _event("aten::mm", 4, cpu=300.0, device=900.0, cpu_mem=0, device_mem=4096),
            _event("aten::add_", 8, cpu=120.0, device=40.0, cpu_mem=0, device_mem=0),
            _event("ProfilerStep*", 2, cpu=50.0, device=0.0, cpu_mem=0, device_mem=0),
            _event("forward", 2, cpu=10.0, device=0.0, cpu_mem=0, device_mem=0,
                   annotation=True),
            _event("ampere_sgemm_128x64", 4, cpu=0.0, device=900.0, cpu_mem=0, device_mem=0,
                   device_type="DeviceType.CUDA"),
        ]

    def events(self) -> list[Any]:
        return []

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text(json.dumps({"traceEvents": [{"name": "aten::mm"}]}))


def _event(key: str, count: int, *, cpu: float, device: float, cpu_mem: int, device_mem: int,
           annotation: bool = False, device_type: str = "DeviceType.CPU") -> Any:
    return SimpleNamespace(
        key=key, count=count, self_cpu_time_total=cpu, cpu_time_total=cpu * 1.5,
        self_cpu_memory_usage=cpu_mem, cpu_memory_usage=cpu_mem,
        self_device_time_total=device, device_time_total=device,
        self_device_memory_usage=device_mem, device_memory_usage=device_mem,
        device_type=device_type, is_user_annotation=annotation,
    )


class FakeCudaMemory:
    """Stands in for torch.cuda.memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def _record_memory_history(self, enabled: Any = "all", max_entries: int = 0) -> None:
        self.calls.append(("history", enabled if enabled is None else max_entries))

    def _snapshot(self) -> dict[str, Any]:
        self.calls.append(("snapshot", None))
        return {"segments": [], "device_traces": []}

    def _dump_snapshot(self, filename: str) -> None:
        self.calls.append(("dump", filename))
        Path(filename).write_bytes(pickle.dumps(self._snapshot()))


CONFIG = ProfileConfig.from_mapping({
    "time": {"enabled": True, "warmup": 1, "steps": 2},
    "memory": {"enabled": True, "warmup": 1, "steps": 2},
    "speed": True,
    "trace": {"enabled": True, "warmup": 1, "steps": 2},
})


def run(durations: list[float], *, profile: ProfileConfig | None = None, skip: int = 2,
        stop: int = 4, window: int = 3, device: str = "cpu", capture: Capture | None = None,
        per_epoch: int = 100) -> tuple[Bench, NullStream]:
    clock = FakeCudaBackend()
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(clock, wall_clock=lambda: 100.0), skip=skip,
                  stop=stop, window=window, device=device,
                  profiled=ProfiledWindow(profile, capture=capture) if profile else None)
    if profile is not None and capture is None and bench.profiled.capture is not None:
        pytest.fail("tests pass a capture with a fake profiler")
    steps = iter(durations)
    while not bench.done:
        ran = 0
        for _ in bench.iterate([Batch(4)] * per_epoch):
            with bench.timer.region("io"):
                clock.advance(0.01)
            with bench.timer.region("forward"):
                clock.advance(0.2)
            with bench.timer.region("backward"):
                clock.advance(next(steps) - 0.25)
            clock.advance(0.04)  # the rest of the step
            bench.log_loss(1.0)
            ran += 1
        if ran == 0:
            break
    bench.close()
    return bench, stream


def fake_capture(config: ProfileConfig = CONFIG, device: str = "cpu", **kwargs: Any) -> Capture:
    return Capture(config, device=device, rank=0, profiler_factory=FakeProfiler, **kwargs)


def events(stream: NullStream, *names: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if r["event"] in names]


DURATIONS = [1.0, 0.5, 0.6, 0.7, 0.8, 0.9] + [2.0] * 20


def test_scored_records_are_the_same_with_and_without_profiling() -> None:
    plain, plain_stream = run(DURATIONS)
    profiled, prof_stream = run(DURATIONS, profile=CONFIG, capture=fake_capture())
    scored = ("rate", "region")
    assert events(prof_stream, *scored) == events(plain_stream, *scored)
    assert len(events(prof_stream, "rate")) == 6 == plain.observations == profiled.observations
    # Scoring reads the very same numbers.
    a, b = run_from_records(plain_stream.records), run_from_records(prof_stream.records)
    assert (a.rate, a.block_rates, a.steady) == (b.rate, b.block_rates, b.steady)
    # The profiled steps came after them, flagged.
    extra = events(prof_stream, "profile_step", "profile_region", "profile")
    assert extra and all(r["profiled"] is True for r in extra)
    assert profiled.profiled_steps == 3 + 3  # timed (1 + 2), then profiler (1 + 2)
    losses = events(prof_stream, "loss")
    assert [r["step"] for r in losses] == list(range(12))
    assert [bool(r.get("profiled")) for r in losses] == [False] * 6 + [True] * 6


def test_window_phases_and_profiler_schedule() -> None:
    FakeProfiler.made.clear()
    bench, stream = run(DURATIONS, profile=CONFIG, capture=fake_capture())
    steps = events(stream, "profile_step")
    assert [r["step"] for r in steps] == list(range(6, 12))
    assert [r["k"] for r in steps] == list(range(6))
    assert [r["phase"] for r in steps] == ["timed"] * 3 + ["warmup", "active", "active"]
    assert [r["seconds"] for r in steps] == pytest.approx([2.0] * 6)
    assert all(r["items"] == 4 for r in steps)
    (prof,) = FakeProfiler.made
    # Started after the timed phase, stepped once per profiled step, stopped at the end.
    assert prof.calls == ["start", "step", "step", "step", "stop"]
    assert prof.kwargs["schedule"] == (0, 1, 2)
    assert prof.kwargs["profile_memory"] and prof.kwargs["record_shapes"]
    assert not prof.kwargs["with_stack"]
    start, end = events(stream, "profile")
    assert (start["status"], start["step"], start["steps"], start["timed"]) == ("start", 6, 6, 3)
    assert (end["status"], end["steps"], end["profiled_steps"]) == ("end", 6, 2)


def test_region_intervals_are_recorded_per_step() -> None:
    _, stream = run(DURATIONS, profile=CONFIG, capture=fake_capture())
    regions = events(stream, "profile_region")
    assert {r["step"] for r in regions} == set(range(6, 12))
    forward = [r for r in regions if r["key"] == "forward"]
    assert [r["seconds"] for r in forward] == pytest.approx([0.2] * 6)
    # Starts are offsets in the step: io at 0, forward after io, backward after forward.
    io = next(r for r in regions if r["key"] == "io")
    backward = next(r for r in regions if r["key"] == "backward")
    assert io["start"] == pytest.approx(0.0)
    assert forward[0]["start"] == pytest.approx(0.01)
    assert backward["start"] == pytest.approx(0.21)


def test_done_waits_for_the_window_across_epochs() -> None:
    bench, stream = run(DURATIONS, profile=CONFIG, capture=fake_capture(), per_epoch=4)
    assert bench.done and bench.observations == 6 and bench.profiled_steps == 6
    assert len(events(stream, "rate")) == 6
    assert len(events(stream, "profile_step")) == 6


def test_a_run_cut_short_in_the_window_keeps_what_it_has(tmp_path: Path) -> None:
    FakeProfiler.made.clear()
    clock = FakeCudaBackend()
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(clock), skip=1, stop=2, window=10,
                  profiled=ProfiledWindow(CONFIG, capture=fake_capture()))
    for i, _ in enumerate(bench.iterate([Batch(2)] * 5)):  # 3 scored + 2 profiled, then out
        clock.advance(0.5)
        assert i < 5
    assert not bench.done
    bench.close()
    (prof,) = FakeProfiler.made if FakeProfiler.made else (None,)
    assert prof is None  # the timed phase (3 steps) never ended: no profiler started
    end = events(stream, "profile")[-1]
    assert end["status"] == "end" and end["steps"] == 2
    assert "the run ended after 2 of the 6 profiled steps" in end["notes"]["speed"]
    assert events(stream, "rate") and len(events(stream, "rate")) == 3
    # The reports say what happened instead of failing.
    paths = finish_profile(bench, tmp_path, tmp_path / "cut.D0.data", stream.records)
    reports = load_reports(tmp_path / "cut.D0.profile")
    assert paths[-1].name == "index.json"
    assert reports["time"].steps == 1  # the time report's warm-up step is left out
    assert "ended after 2 of the 6" in reports["speed"].note


def test_a_profiler_that_cannot_start_is_a_note_and_the_run_goes_on() -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("profiler already running\nsecond line")

    capture = Capture(CONFIG, device="cpu", rank=0, profiler_factory=broken)
    bench, stream = run(DURATIONS, profile=CONFIG, capture=capture)
    assert bench.done and len(events(stream, "rate")) == 6
    note = events(stream, "profile")[-1]["notes"]["memory"]
    assert note == "torch.profiler could not start: RuntimeError: profiler already running"


def test_log_rate_benchmarks_get_a_profiled_window_too() -> None:
    FakeProfiler.made.clear()
    config = ProfileConfig.from_mapping({"memory": {"enabled": True, "warmup": 0, "steps": 2}})
    stream = NullStream()
    bench = Bench(stream=stream, skip=1, stop=2,
                  profiled=ProfiledWindow(config, capture=fake_capture(config)))
    calls = 0
    while not bench.done:
        bench.log_rate(10.0 + calls)
        calls += 1
        assert calls < 20
    assert calls == 3 + 2
    assert [r["value"] for r in events(stream, "rate")] == [10.0, 11.0, 12.0]
    steps = events(stream, "profile_step")
    assert [(r["value"], r["phase"], r["profiled"]) for r in steps] == [
        (13.0, "active", True), (14.0, "active", True)]
    (prof,) = FakeProfiler.made
    assert prof.calls == ["start", "step", "step", "stop"]


def test_fake_cuda_snapshot_from_the_end_of_warmup(tmp_path: Path) -> None:
    config = ProfileConfig.from_mapping({
        "snapshot": {"enabled": True, "warmup": 1, "steps": 2},
        "memory": {"enabled": True, "warmup": 1, "steps": 2},
        "trace": True,
        "speed": True,
    })
    memory = FakeCudaMemory()
    out = tmp_path / "m.D0.profile"
    capture = fake_capture(config, device="cuda", cuda_memory=memory,
                           snapshot_path=out / "snapshot.pickle")
    seen: list[tuple[int, list[str]]] = []
    clock = FakeCudaBackend()
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(clock), device="cuda", skip=0, stop=2,
                  profiled=ProfiledWindow(config, capture=capture))
    for _ in bench.iterate([Batch(2)] * 10):
        clock.advance(0.1)
        seen.append((capture.k, [c[0] for c in memory.calls]))
    # History starts after 1 profiled step (the warm-up) and the dump comes 2 steps later.
    assert seen == [(0, []), (0, []), (0, []), (1, ["history"]), (2, ["history"])]
    assert [c[0] for c in memory.calls] == ["history", "dump", "snapshot", "history"]
    assert memory.calls[-1] == ("history", None)  # recording switched off again
    bench.close()
    paths = finish_profile(bench, tmp_path, tmp_path / "m.D0.data", stream.records)
    names = {p.name for p in paths}
    assert {"snapshot.pickle", "trace.json", "memory.json", "index.json"} <= names
    reports = load_reports(out)
    assert reports["snapshot"].steps == 2 and reports["snapshot"].bytes > 0
    memory_report = reports["memory"]
    assert memory_report.device
    assert [op.name for op in memory_report.tables["self_device_time"]] == ["aten::mm",
                                                                           "aten::add_"]
    assert memory_report.tables["self_device_memory"][0].self_device_memory == 4096
    assert "self device" in memory_report.render()
    # Device total: the kernels, counted once.
    assert reports["speed"].profiler_device_s == pytest.approx(900e-6)


def test_snapshot_on_cpu_is_one_line_and_adds_no_step(tmp_path: Path) -> None:
    config = ProfileConfig.parse_cli("snapshot,system")
    stream = NullStream()
    bench = Bench(stream=stream, skip=0, stop=2, profiled=ProfiledWindow(config))
    assert bench.profiled.capture is None  # no window to run
    for _ in bench.iterate([Batch(1)] * 10):
        pass
    bench.close()
    assert bench.observations == 2 and bench.profiled_steps == 0
    finish_profile(bench, tmp_path, tmp_path / "s.D0.data", stream.records)
    reports = load_reports(tmp_path / "s.D0.profile")
    assert reports["snapshot"].render() == "snapshot needs CUDA; skipped"
    assert list(reports) == ["system", "snapshot"]


def test_no_profile_no_files(tmp_path: Path) -> None:
    bench, stream = run(DURATIONS)
    assert finish_profile(bench, tmp_path, tmp_path / "x.D0.data", stream.records) == []
    assert not (tmp_path / "x.D0.profile").exists()


def test_regions_are_named_in_the_trace_only_from_the_window_thread() -> None:
    import threading

    opened: list[str] = []

    class Range:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            opened.append(f"+{self.name}")

        def __exit__(self, *exc: object) -> None:
            opened.append(f"-{self.name}")

    capture = fake_capture(ProfileConfig.parse_cli("memory"))
    capture._record_function = Range
    timer = Timer(FakeCudaBackend())
    capture.start(timer=timer, first_step=0)  # the profiler starts at once (no time report)
    assert timer.on_region == capture._on_region
    with timer.region("forward"):
        worker = threading.Thread(target=lambda: timer.on_region("comm", True))
        worker.start()
        worker.join()
    assert opened == ["+forward", "-forward"]  # comm came from another thread: not named
    capture.stop()
    assert timer.on_region is None
