"""Region marks cost the timed loop as little host time as they can (issue 37, item 10): the
CUDA-event backend looks its stream up once, not at every one of a step's 9 marks."""

from __future__ import annotations

from pytest_dlbench.measure.fakecuda import FakeCuda
from pytest_dlbench.measure.timing import Timer

REGIONS = ("io", "forward", "backward", "optimizer")  # workloads/train.py's step


def _train_like_steps(timer: Timer, gpu: FakeCuda, steps: int) -> None:
    timer.begin()
    for _ in range(steps):
        for key in REGIONS:
            with timer.region(key):
                gpu.launch(0.001)
        timer.step(8)


def test_the_stream_is_looked_up_once_per_timer_not_per_mark() -> None:
    gpu = FakeCuda(launch_overhead=0.0)  # the device's time alone in the figures
    timer = Timer(gpu.backend(), wall_clock=gpu.wall)
    _train_like_steps(timer, gpu, steps=5)
    window = timer.read()
    marks = 1 + 5 * (1 + 2 * len(REGIONS))  # begin, then per step 4 regions x 2 + the step
    assert gpu.events == marks  # every mark is an event on the device...
    assert gpu.stream_lookups == 1  # ...on a stream looked up once (was one per mark)
    # and the figures are those of the device's queue: 4 kernels of 1 ms a step
    assert [round(s.seconds, 9) for s in window.steps] == [0.004] * 5
    assert {r.key: (r.count, round(r.total_seconds, 9)) for r in window.regions} == {
        key: (5, 0.005) for key in REGIONS}


def test_constructing_the_backend_looks_nothing_up() -> None:
    """The look-up waits for the first mark: making a Bench must not touch CUDA."""
    gpu = FakeCuda()
    gpu.backend()
    assert (gpu.stream_lookups, gpu.events) == (0, 0)


def test_a_second_window_reuses_the_stream() -> None:
    gpu = FakeCuda()
    timer = Timer(gpu.backend(), wall_clock=gpu.wall)
    for _ in range(3):
        _train_like_steps(timer, gpu, steps=2)
        timer.read()
    assert gpu.stream_lookups == 1
