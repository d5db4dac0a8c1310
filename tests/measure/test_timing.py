"""Timer algorithm tests, all on fake clocks (host and device)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from _paths import REPO_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlbench.measure.fakecuda import FakeCuda
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

SRC = REPO_ROOT / "src"


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
        "import pytest_dlbench.measure.bench, pytest_dlbench.measure.fakecuda\n"
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


# -- the queue-model fake CUDA device (measure/fakecuda.py) --------------------------------------
# The real CudaEventBackend runs on a simulated device whose host enqueues work and runs ahead;
# events are stamped when the device reaches them. Durations are binary fractions: exact sums.


def gpu_timer(**kw: Any) -> tuple[Timer, FakeCuda]:
    gpu = FakeCuda(**kw)
    return Timer(gpu.backend(), wall_clock=gpu.wall), gpu


def test_queue_model_event_is_stamped_when_the_device_reaches_it():
    gpu = FakeCuda(launch_overhead=0.0)
    backend = gpu.backend()
    a = backend.record()
    gpu.launch(2.0)
    gpu.launch(0.5)
    b = backend.record()
    assert gpu.clock.now == 0.0  # launches returned at once: the host is 2.5 s ahead
    assert not b.query()
    with pytest.raises(RuntimeError, match="must be completed"):
        a.elapsed_time(b)
    assert backend.elapsed(a, b) == 2.5  # waits for the end event, as CUDA does
    assert gpu.clock.now == 2.5 and gpu.event_syncs == 1


def test_queue_model_events_obey_the_torch_contract():
    gpu = FakeCuda()
    untimed, timed, never = gpu.Event(), gpu.Event(enable_timing=True), gpu.Event(True)
    untimed.record()
    timed.record(gpu.current_stream())
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.elapsed_time(timed)
    with pytest.raises(ValueError, match="must be recorded"):
        timed.elapsed_time(never)
    assert never.query()  # torch: an event never recorded counts as complete
    with pytest.raises(RuntimeError, match="does not match"):
        timed.record(FakeCuda().current_stream())


def test_queue_model_synchronize_and_item_block_the_host_until_the_queue_drains():
    gpu = FakeCuda(launch_overhead=0.0)
    gpu.launch(3.0)
    gpu.host(1.0)  # overlaps the kernel
    assert gpu.depth == 1
    gpu.item()
    assert gpu.clock.now == 3.0 and gpu.depth == 0 and gpu.hidden_syncs == 1
    gpu.launch(2.0)
    gpu.synchronize()
    assert gpu.clock.now == 5.0 and gpu.synchronize_calls == 1
    assert gpu.busy == 5.0 and gpu.kernels == 2


def run_steps(timer: Timer, gpu: FakeCuda, steps: int, *, host: float, kernels: list[float],
              hidden_sync: bool = False) -> list[float]:
    """A training loop on the fake: host work, then the step's kernels; returns host seconds
    per step (what a perf_counter around the step body would show)."""
    host_seconds = []
    timer.begin()
    for _ in range(steps):
        t0 = gpu.clock.now
        gpu.host(host)  # e.g. fetching the batch
        for seconds in kernels:
            gpu.launch(seconds)
        if hidden_sync:
            gpu.item()  # e.g. loss.item() or GradScaler's found_inf check
        timer.step(1)
        host_seconds.append(gpu.clock.now - t0)
    return host_seconds


def test_queue_model_sync_free_loop_overlaps_host_and_device():
    timer, gpu = gpu_timer(launch_overhead=2.0**-10)
    host = run_steps(timer, gpu, 20, host=0.25, kernels=[0.5, 0.25, 0.25])
    assert gpu.synchronize_calls == gpu.event_syncs == gpu.hidden_syncs == 0
    steps = [s.seconds for s in timer.read().steps]
    # The first step starts on an idle device and includes its host work; then the device is
    # the bottleneck and the host's work hides behind it.
    assert steps[0] == 0.25 + 2.0**-10 + 1.0  # the later launches queue behind the first kernel
    assert steps[1:] == [1.0] * 19
    assert host == [0.25 + 3 * 2.0**-10] * 20  # the host ran ahead ...
    assert gpu.max_depth > 20  # ... with work queued, and the timer never waited
    assert gpu.synchronize_calls == 1


def test_queue_model_bounded_queue_throttles_the_host_to_the_device():
    timer, gpu = gpu_timer(launch_overhead=0.0, queue_limit=16)  # a step queues 5 entries
    host = run_steps(timer, gpu, 40, host=0.125, kernels=[0.25] * 4)
    assert gpu.max_depth == 16 and gpu.queue_waits > 0
    assert [s.seconds for s in timer.read().steps][1:] == [1.0] * 39
    assert host[:2] == [0.125, 0.125]  # ahead while the queue has room
    assert host[-10:] == [1.0] * 10  # then launches block: the host runs at the device's pace


def test_queue_model_hidden_sync_shows_up_as_serialisation():
    timer, gpu = gpu_timer(launch_overhead=0.0)
    host = run_steps(timer, gpu, 10, host=0.375, kernels=[0.5, 0.5], hidden_sync=True)
    steps = [s.seconds for s in timer.read().steps]
    assert gpu.hidden_syncs == 10
    # Host and device take turns: each step costs host + device time, not the larger of the two,
    # and the host never gets ahead (what the host measures is what the events measure).
    assert steps == [0.375 + 1.0] * 10
    assert host == steps
    assert gpu.max_depth <= 3  # two kernels and the end event, never more


def test_timer_syncs_once_per_read_and_never_inside_a_window():
    # Would catch a future per-step sync (in step(), a region, or a backend's record()).
    timer, gpu = gpu_timer(launch_overhead=0.0)
    for window in range(3):
        timer.begin()
        for _ in range(5):
            with timer.region("forward"):
                gpu.launch(0.5)
            gpu.launch(0.25)
            timer.step(4)
            blocked = (gpu.synchronize_calls, gpu.event_syncs, gpu.hidden_syncs, gpu.queue_waits)
            assert blocked == (window, window * 10, 0, 0)  # nothing since the last read
        window_read = timer.read()
        assert gpu.synchronize_calls == window + 1  # one per read
        assert [s.seconds for s in window_read.steps] == [0.75] * 5
        assert window_read.regions == [RegionTotal("forward", 5, 2.5)]


def test_timer_begin_with_work_queued_gives_early_times_unless_synchronised():
    for sync in (False, True):
        timer, gpu = gpu_timer(launch_overhead=0.0)
        gpu.launch(30.0)  # setup work still queued when the timed loop starts
        if sync:
            timer.synchronize()
        done = []
        timer.begin()
        for _ in range(3):
            gpu.host(0.25)
            gpu.launch(1.0)
            timer.step(1)
            done.append(gpu.device_done())
        steps = timer.read().steps
        times = [s.time for s in steps]
        if sync:
            assert times == done
            assert steps[0].seconds == 1.25  # the first step's host work counts
        else:
            assert times == [t - 30.0 for t in done]  # early by the backlog
            assert steps[0].seconds == 1.0  # host work hidden behind the backlog


def test_begin_follow_takes_a_restart_time_from_the_device_clock():
    # A restart without a sync (the profiled window's, after each step's profiler bookkeeping)
    # while the host is ahead: its wall time follows the last step's end on the device clock.
    for follow in (True, False):
        timer, gpu = gpu_timer(launch_overhead=0.0)
        timer.begin(follow=follow)  # nothing to follow yet: the wall clock, on an idle device
        done, seen = [], []
        for i in range(6):
            gpu.launch(1.0)
            timer.step(1)
            done.append(gpu.device_done())
            gpu.host(0.125)  # bookkeeping, in no step: the host gets ahead
            timer.begin(follow=follow)
            if i == 2:
                seen += timer.read().steps  # a read with a restart pending, carried over
        seen += timer.read().steps
        assert [s.seconds for s in seen] == [1.0] * 6
        if follow:
            assert [s.time for s in seen] == done
        else:  # the restarts take the host's time, early while the device is behind
            assert [s.time for s in seen][1:3] == [done[1] - 0.875, done[2] - 1.75]
    timer, clock = cpu_timer()
    timer.begin()
    clock.advance(1.0)
    timer.step(1)
    clock.advance(100.0)
    timer.begin(follow=True)  # on the host clock, the same as a plain begin()
    clock.advance(2.0)
    timer.step(1)
    assert [s.time for s in timer.read().steps] == [1001.0, 1103.0]


@settings(max_examples=60, deadline=None)
@given(
    work=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=30),
    backlog=st.integers(0, 500),
    restarts=st.sets(st.integers(0, 30)),
    reads=st.sets(st.integers(0, 30)),
)
def test_any_schedule_on_the_queue_model_stamps_each_step_when_the_device_ends_it(
    work, backlog, restarts, reads
):
    # Integer seconds keep the sums exact. Whatever the backlog, restarts and reads, a step's
    # `time` is when the device finished it, and the timer never blocks the host in a window.
    timer, gpu = gpu_timer(launch_overhead=0.0)
    gpu.launch(backlog)
    timer.synchronize()
    timer.begin()
    done, seen = [], []
    for i, (host, device) in enumerate(work):
        gpu.host(host)
        gpu.launch(device)
        timer.step(1)
        done.append(gpu.device_done())
        if i in restarts:
            gpu.host(1)
            timer.begin(follow=True)
        if i in reads:
            syncs = gpu.synchronize_calls
            seen += timer.read().steps
            assert gpu.synchronize_calls == syncs + 1
            timer.begin()
    seen += timer.read().steps
    assert [s.time for s in seen] == done
    assert gpu.hidden_syncs == gpu.queue_waits == 0
