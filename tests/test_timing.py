"""Timer algorithm tests, all on fake clocks (host and device)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlbench.measure.timing import (
    STANDARD_KEYS,
    CpuBackend,
    FakeClock,
    FakeCudaBackend,
    RegionTotal,
    StepObservation,
    Timer,
    TimerError,
    Window,
    backend_for,
)

SRC = Path(__file__).resolve().parents[1] / "src"


def cpu_timer(wall: float = 1000.0) -> tuple[Timer, FakeClock]:
    clock = FakeClock(50.0)  # a perf_counter-like origin unrelated to the wall clock
    timer = Timer(CpuBackend(clock=clock), wall_clock=lambda: wall + clock.now - 50.0)
    return timer, clock


def test_steps_are_contiguous_intervals_from_begin():
    timer, clock = cpu_timer()
    timer.begin()
    for seconds, items in [(0.5, 4), (0.25, 4), (1.0, 2)]:
        clock.advance(seconds)
        timer.step(items)
    window = timer.read()
    assert window.steps == [
        StepObservation(0, 4, 0.5, 1000.5),
        StepObservation(1, 4, 0.25, 1000.75),
        StepObservation(2, 2, 1.0, 1001.75),
    ]
    assert window.items == 10
    assert window.seconds == pytest.approx(1.75)
    assert window.rate == pytest.approx(10 / 1.75)
    assert timer.time_origin == 1000.0


def test_read_returns_only_what_is_new_and_indices_continue():
    timer, clock = cpu_timer()
    timer.begin()
    clock.advance(1.0)
    timer.step(1)
    assert timer.pending == 1
    first = timer.read()
    assert timer.pending == 0
    clock.advance(2.0)
    timer.step(3)  # continues the chain across the read: starts at the previous end
    second = timer.read()
    assert [s.index for s in first.steps] == [0]
    assert second.steps == [StepObservation(1, 3, 2.0, 1003.0)]
    assert timer.read() == Window([], [])


def test_begin_restarts_the_chain_and_excludes_the_gap():
    timer, clock = cpu_timer()
    timer.begin()
    clock.advance(1.0)
    timer.step(1)
    clock.advance(100.0)  # e.g. building the next epoch's iterator: not a step
    timer.begin()
    clock.advance(2.0)
    timer.step(1)
    steps = timer.read().steps
    assert [s.seconds for s in steps] == [1.0, 2.0]
    assert [s.time for s in steps] == [1001.0, 1103.0]


def test_begin_after_the_last_step_carries_into_the_next_window():
    timer, clock = cpu_timer()
    timer.begin()
    clock.advance(1.0)
    timer.step(1)
    clock.advance(10.0)
    timer.begin()
    assert [s.seconds for s in timer.read().steps] == [1.0]
    clock.advance(3.0)
    timer.step(1)
    (obs,) = timer.read().steps
    assert obs.seconds == 3.0
    assert obs.time == 1014.0  # the chain's own wall start, not the previous step's end


def test_step_before_begin_is_an_error():
    timer, _ = cpu_timer()
    with pytest.raises(TimerError, match="before Timer.begin"):
        timer.step(1)


def test_regions_nested_and_overlapping():
    timer, clock = cpu_timer()
    timer.start("batch")
    with timer.region("forward"):
        clock.advance(1.0)
        timer.start("io")  # overlaps forward and ends after it
        clock.advance(0.5)
    clock.advance(0.25)
    timer.end("io")
    with timer.region("backward"):
        clock.advance(2.0)
    timer.end("batch")
    with timer.region("forward"):
        clock.advance(3.0)
    totals = {r.key: r for r in timer.read().regions}
    assert totals["forward"] == RegionTotal("forward", 2, 4.5)
    assert totals["io"] == RegionTotal("io", 1, 0.75)
    assert totals["backward"] == RegionTotal("backward", 1, 2.0)
    assert totals["batch"] == RegionTotal("batch", 1, 3.75)
    assert timer.read().regions == []


def test_same_region_cannot_be_open_twice():
    timer, _ = cpu_timer()
    timer.start("forward")
    with pytest.raises(TimerError, match="'forward' is already open"):
        timer.start("forward")
    with pytest.raises(TimerError, match="'comm' is not open"):
        timer.end("comm")


def test_region_ends_on_exception_and_open_region_spans_reads():
    timer, clock = cpu_timer()
    with pytest.raises(KeyError), timer.region("forward"):
        clock.advance(1.0)
        raise KeyError("boom")
    assert timer.open_regions == ()
    timer.start("epoch")
    clock.advance(2.0)
    assert timer.read().regions == [RegionTotal("forward", 1, 1.0)]
    assert timer.open_regions == ("epoch",)
    clock.advance(3.0)
    timer.end("epoch")
    assert timer.read().regions == [RegionTotal("epoch", 1, 5.0)]


def test_user_keys_are_allowed_and_standard_keys_listed():
    assert set(STANDARD_KEYS) == {"epoch", "batch", "forward", "backward", "comm", "io", "other"}
    timer, clock = cpu_timer()
    with timer.region("optimizer.zero_grad"):
        clock.advance(0.125)
    assert timer.read().regions == [RegionTotal("optimizer.zero_grad", 1, 0.125)]


def test_fake_cuda_synchronises_once_per_read_and_never_while_recording():
    device = FakeCudaBackend()
    timer = Timer(device, wall_clock=lambda: 0.0)
    timer.begin()
    for _ in range(20):
        with timer.region("forward"):
            device.advance(0.25)
        device.advance(0.75)
        timer.step(8)
    assert device.synchronizations == 0
    window = timer.read()
    assert device.synchronizations == 1
    assert [s.seconds for s in window.steps] == [1.0] * 20
    assert window.regions == [RegionTotal("forward", 20, 5.0)]
    assert window.steps[-1].time == 20.0
    assert timer.read() == Window([], [])
    assert device.synchronizations == 1  # nothing pending: no sync


def test_fake_cuda_refuses_to_read_an_incomplete_event():
    device = FakeCudaBackend()
    start = device.record()
    device.advance(1.0)
    end = device.record()
    with pytest.raises(RuntimeError, match="synchronize"):
        device.elapsed(start, end)
    device.synchronize()
    assert device.elapsed(start, end) == 1.0


def test_fake_clock_is_monotonic():
    clock = FakeClock()
    with pytest.raises(ValueError):
        clock.advance(-1.0)


def test_backend_for_picks_by_device_type():
    assert isinstance(backend_for(None), CpuBackend)
    assert isinstance(backend_for("cpu"), CpuBackend)
    torch = pytest.importorskip("torch")
    from pytest_dlbench.measure.timing import CudaEventBackend

    assert isinstance(backend_for(torch.device("cpu")), CpuBackend)
    # Constructing the backend needs torch, not a GPU: events are made only when recording.
    assert isinstance(backend_for("cuda:1"), CudaEventBackend)
    assert isinstance(backend_for(torch.device("cuda", 0)), CudaEventBackend)
    assert isinstance(backend_for(0), CudaEventBackend)
    with pytest.raises(ValueError, match="cuda device"):
        CudaEventBackend("cpu")


def test_importing_the_modules_does_not_import_torch():
    code = (
        "import sys\n"
        "import pytest_dlbench.measure.timing, pytest_dlbench.measure.stream\n"
        "import pytest_dlbench.measure.bench\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    env = {"PYTHONPATH": str(SRC), "PATH": ""}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=40),
    reads=st.sets(st.integers(min_value=0, max_value=40)),
)
def test_any_read_schedule_sees_every_step_once(durations, reads):
    # Integer milliseconds keep the float sums exact.
    device = FakeCudaBackend()
    timer = Timer(device, wall_clock=lambda: 7.0)
    timer.begin()
    seen: list[StepObservation] = []
    for i, ms in enumerate(durations):
        device.advance(ms)
        timer.step(i + 1)
        if i in reads:
            seen += timer.read().steps
    seen += timer.read().steps
    assert [s.index for s in seen] == list(range(len(durations)))
    assert [s.items for s in seen] == [i + 1 for i in range(len(durations))]
    assert [s.seconds for s in seen] == durations
    cumulative = [7.0 + sum(durations[: i + 1]) for i in range(len(durations))]
    assert [s.time for s in seen] == cumulative
    assert device.synchronizations <= len(reads) + 1
