"""The rate's ceiling (results/figures/plausibility.py): a rate the wall clock cannot support is an
error of measurement that fails the run, never a figure; healthy runs, external commands and voir
runs are never flagged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.core.protocol import Status
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import LOOP_START, NullStream
from pytest_dlbench.measure.timing import FakeClock, FakeCudaBackend, MonotonicWallClock, Timer
from pytest_dlbench.results.figures import (
    FACTOR,
    WallClockCheck,
    run_from_records,
    summarize_bench,
    timed_by_bench,
    wall_clock_check,
)
from pytest_dlbench.suite.definitions import EXTERNAL_RUNNER, VOIR_RUNNER

STEP = 0.050  # seconds of device time per step
READ = 0.0005  # seconds of a window read: its sync and its records (untimed)


class UnderReporting(FakeCudaBackend):
    """A backend whose intervals are ``1 / by`` of the device time that passed: events on
    another stream than the work's, or a clock in the wrong unit."""

    def __init__(self, clock: FakeClock, by: float) -> None:
        super().__init__(clock)
        self.by = by

    def elapsed(self, start: Any, end: Any) -> float:
        return super().elapsed(start, end) / self.by


class SlowRead(FakeCudaBackend):
    """A backend whose synchronisation takes host time, as a window read's does."""

    def synchronize(self) -> None:
        super().synchronize()
        self.clock.advance(READ)


def fake_run(backend: FakeCudaBackend, clock: FakeClock, *, steps: int = 40,
             window: int = 10) -> list[dict[str, Any]]:
    """The stream of a Bench run on ``backend``: each step takes :data:`STEP` of the clock,
    the wall clock and the device clock are the same clock."""
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(backend, wall_clock=clock), skip=5, stop=steps,
                  window=window)

    def batches() -> Iterator[int]:
        while True:
            clock.advance(STEP)
            yield 64

    for _ in bench.iterate(batches(), batch_size=64):
        pass
    bench.close()
    config = {"event": "config", "spec": {"name": "fake", "skip": 5, "stop": steps,
                                           "definition": "tests.fake:main"}}
    return [config, *stream.records, {"event": "end", "status": "ok"}]


def steady(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("event") == "rate" and not r.get("warmup")]


# -- the Bench's timer on a fake device -------------------------------------------------------
def test_a_timer_that_under_reports_ten_times_fails_the_run_with_its_figures():
    clock = FakeClock(1000.0)
    records = fake_run(UnderReporting(clock, by=10), clock)
    check = wall_clock_check(steady(records))
    assert check is not None and check.flagged
    assert check.factor == pytest.approx(10, rel=0.05)
    assert check.supported == pytest.approx(64 / STEP, rel=0.05)  # what the device really did
    run = run_from_records(records)
    assert run.status is Status.FAIL
    assert run.reason.startswith("error of measurement: the rate (12,800 items/s) is 10")
    assert run.reason.endswith(" times what the wall clock supports (1,280 items/s over 2.00 s)")
    # The measurement is kept: the rate and the observations are still there.
    assert run.rate == pytest.approx(10 * 64 / STEP) and len(run.steady) == 40


def test_a_healthy_timer_with_a_slow_read_between_windows_is_not_flagged():
    clock = FakeClock(1000.0)
    records = fake_run(SlowRead(clock), clock)
    check = wall_clock_check(steady(records))
    assert check is not None and not check.flagged
    assert 1.0 < check.factor < 1.01  # the reads: 0.5 ms per 500 ms window
    assert run_from_records(records).ok


def stepped_run(wall_clock: Any, clock: FakeClock, jump: list[float]) -> list[dict[str, Any]]:
    """A healthy run on a fake device whose host's ``time.time()`` (``clock`` plus ``jump``)
    steps an hour forward in its 12th step: NTP, or a resume from a suspend."""
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(SlowRead(clock), wall_clock=wall_clock), skip=5,
                  stop=20, window=10)
    steps = 0

    def batches() -> Iterator[int]:
        nonlocal steps
        while True:
            clock.advance(STEP)
            steps += 1
            if steps == 12:
                jump[0] = 3600.0
            yield 64

    for _ in bench.iterate(batches(), batch_size=64):
        pass
    bench.close()
    config = {"event": "config", "spec": {"name": "fake", "skip": 5, "stop": 20,
                                           "definition": "tests.fake:main"}}
    return [config, *stream.records, {"event": "end", "status": "ok"}]


def test_a_wall_clock_step_is_no_gap_between_windows():
    """Step times judged on time.time() put a clock step (NTP, a suspend and resume) in one gap
    between windows and failed a correct run as an error of measurement. The Timer's default
    wall clock reads time.time() once and carries it by the monotonic clock."""
    clock, jump = FakeClock(1000.0), [0.0]
    assert not run_from_records(stepped_run(lambda: clock() + jump[0], clock, jump)).ok
    clock, jump = FakeClock(1000.0), [0.0]
    wall = MonotonicWallClock(wall=lambda: clock() + jump[0], monotonic=clock)
    records = stepped_run(wall, clock, jump)
    check = wall_clock_check(steady(records))
    assert check is not None and not check.flagged and check.factor < 1.01
    assert run_from_records(records).ok
    # What a Bench gets unless a test injects a clock; its times are still the calendar's.
    timer = Timer()
    assert isinstance(timer.wall_clock, MonotonicWallClock)
    assert abs(timer.wall_clock() - time.time()) < 1.0


def test_a_flagged_run_is_a_failure_of_its_benchmark_never_its_perf():
    clock = FakeClock(1000.0)
    bad = run_from_records(fake_run(UnderReporting(clock, by=10), clock))
    clock = FakeClock(5000.0)
    good = run_from_records(fake_run(SlowRead(clock), clock))
    summary = summarize_bench("fake", [bad, good])
    assert (summary.n, summary.fail) == (2, 1)
    assert summary.perf == pytest.approx(good.rate)


def epoch_run(backend: FakeCudaBackend, clock: FakeClock, *, per_epoch: int, epochs: int,
              pause: float, window: int = 10) -> list[dict[str, Any]]:
    """A benchmark's epoch loop: one ``iterate`` call an epoch of ``per_epoch`` steps, and
    ``pause`` seconds of its own between epochs (a new DataLoader's workers, an evaluation)."""
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(backend, wall_clock=clock), skip=2,
                  stop=per_epoch * epochs - 2, window=window)

    class Epoch:
        def __iter__(self) -> Iterator[int]:
            clock.advance(pause)  # making the iterator: before the call's first step
            return self.steps()

        def steps(self) -> Iterator[int]:
            for _ in range(per_epoch):
                clock.advance(STEP)
                yield 64

    while not bench.done:
        for _ in bench.iterate(Epoch(), batch_size=64):
            pass
    bench.close()
    return steady(stream.records)


def test_the_first_record_of_each_iterate_call_says_so():
    clock = FakeClock(1000.0)
    records = epoch_run(FakeCudaBackend(clock), clock, per_epoch=5, epochs=4, pause=0.5)
    starts = [r["step"] for r in records if r.get(LOOP_START)]
    assert starts == [5, 10, 15]  # steps 0 and 1 are the warm-up's; step 0 began the first call


@pytest.mark.parametrize(("per_epoch", "epochs"), [(5, 8), (1, 20), (10, 4)])
def test_pauses_before_iterate_calls_are_the_benchmarks_own_time(per_epoch: int, epochs: int):
    # Epochs shorter than a window, one step a call, and epochs of exactly one window: every
    # gap is the benchmark's (1 s a call, past twice the steps' own time), none a read.
    clock = FakeClock(1000.0)
    records = epoch_run(FakeCudaBackend(clock), clock, per_epoch=per_epoch, epochs=epochs,
                        pause=1.0)
    check = wall_clock_check(records)
    assert check is None or not check.flagged
    # Without the marker the same records read as a timer missing most of the wall clock
    # (steps each timed alone are never judged).
    unmarked = wall_clock_check([{k: v for k, v in r.items() if k != LOOP_START}
                                 for r in records])
    assert unmarked is None if per_epoch == 1 else unmarked is not None and unmarked.flagged


def test_an_under_reporting_timer_is_caught_between_its_pauses():
    # Epochs of three windows with 0.5 s between them: the reads inside each epoch still show
    # a timer that reports a tenth of the time.
    clock = FakeClock(1000.0)
    records = epoch_run(UnderReporting(clock, by=10), clock, per_epoch=30, epochs=3, pause=0.5)
    check = wall_clock_check(records)
    assert check is not None and check.flagged
    assert check.factor > 5  # 10, less each read's allowance and the gaps not judged


def test_a_real_cpu_run_of_the_toy_workload_is_not_flagged():
    pytest.importorskip("torch")
    from pytest_dlbench.workloads import toy

    stream = NullStream()
    bench = Bench(stream=stream, args=["--batch-size", "16"], skip=2, stop=30, window=5)
    toy.main(bench)
    bench.close()
    check = wall_clock_check(steady(stream.records))
    assert check is not None and not check.flagged, check


# -- what is not judged -----------------------------------------------------------------------
def timed_records(factor: float, *, windows: int = 6, per_window: int = 5, step: float = 1.0,
                  pause: float = 0.0, every: int = 0) -> list[dict[str, Any]]:
    """Steady rate records as the timer writes them: chains of ``per_window`` contiguous steps
    of ``step`` seconds; each window's wall clock is ``factor`` times its timed seconds
    (``pause`` more after every ``every``-th window)."""
    out: list[dict[str, Any]] = []
    start = 1000.0
    for w in range(windows):
        time = start
        for _ in range(per_window):
            time += step
            out.append({"event": "rate", "value": 64 / step, "units": "items/s",
                        "step": len(out), "warmup": False, "time": time, "items": 64.0,
                        "seconds": step})
        start += per_window * step * factor + (pause if every and (w + 1) % every == 0 else 0)
    return out


def run_of(records: list[dict[str, Any]], **spec: Any) -> list[dict[str, Any]]:
    config = {"event": "config", "spec": {"name": "x", **spec}}
    return [config, *records, {"event": "end", "status": "ok"}]


@pytest.mark.parametrize("definition", [EXTERNAL_RUNNER, VOIR_RUNNER])
def test_a_command_or_voir_run_times_its_own_steps_and_is_not_judged(definition: str):
    records = timed_records(10.0)
    assert wall_clock_check(records).flagged  # type: ignore[union-attr]  # judged on its own
    assert run_from_records(run_of(records, definition=definition)).ok
    assert not run_from_records(run_of(records, definition="tests.fake:main")).ok


def test_a_run_with_command_records_is_not_judged():
    records = timed_records(10.0)
    command = {"event": "command", "status": "start", "argv": ["train.sh"]}
    assert not timed_by_bench({}, [command])
    assert run_from_records([command, *run_of(records)]).ok


@pytest.mark.parametrize("drop", ["time", "seconds", "items"])
def test_records_without_a_field_are_not_judged(drop: str):
    records = timed_records(10.0)
    for record in records:
        del record[drop]
    assert wall_clock_check(records) is None


def test_one_chain_or_steps_each_timed_alone_are_not_judged():
    assert wall_clock_check(timed_records(10.0, windows=1)) is None
    assert wall_clock_check(timed_records(10.0, per_window=1)) is None  # log_step's records
    assert wall_clock_check([]) is None


# -- the factor -------------------------------------------------------------------------------
def test_the_ceiling_is_twice_what_the_wall_clock_supports():
    # 20 windows of 5 s: the last window's gap is not in the span, and 0.1 s of each is forgiven.
    below = wall_clock_check(timed_records(1.9, windows=20))
    above = wall_clock_check(timed_records(2.2, windows=20))
    assert below is not None and not below.flagged
    assert above is not None and above.flagged
    assert FACTOR == 2


def test_a_long_pause_between_iterate_calls_is_not_a_false_alarm():
    # An epoch's new data loader (5 s) after every 4th window of 0.5 s: the span is 2.7 times
    # the timed seconds, past the ceiling even with the reads forgiven, but the median window
    # is healthy.
    records = timed_records(1.01, windows=12, step=0.1, pause=5.0, every=4)
    check = wall_clock_check(records)
    assert check is not None and check.factor > FACTOR and check.span_factor > FACTOR
    assert not check.flagged


def test_a_microbenchmark_s_slow_reads_are_not_held_against_its_timer():
    # The smoke suite's toy on a loaded 2-core CPU: windows of 7 steps of 0.5 ms, then a 25 ms
    # read; the wall clock supports a fraction of the rate, all of it the reads'.
    records = timed_records(1 + 0.025 / 0.0035, per_window=7, step=0.0005)
    check = wall_clock_check(records)
    assert check is not None and check.factor > 3 * FACTOR
    assert not check.flagged
    # Reads of a second (no read takes that) are not forgiven.
    assert wall_clock_check(timed_records(1 + 1 / 0.0035, per_window=7,
                                          step=0.0005)).flagged  # type: ignore[union-attr]


def test_the_reason_names_the_figures():
    check = WallClockCheck(rate=1000.0, supported=100.0, span=12.5, window_factor=10.0,
                           span_factor=10.0)
    assert check.reason("img/s") == ("error of measurement: the rate (1,000 img/s) is 10 times "
                                     "what the wall clock supports (100 img/s over 12.5 s)")


def test_the_check_reads_a_stream_file_by_its_columns(tmp_path: Path):
    from pytest_dlbench.measure.stream import StreamWriter
    from pytest_dlbench.results.figures import load_run

    path = tmp_path / "x.D0.data"
    with StreamWriter(path) as writer:
        writer.write_many(run_of(timed_records(10.0), definition="tests.fake:main"))
    run = load_run(path)
    assert run.status is Status.FAIL and run.reason.startswith("error of measurement")
