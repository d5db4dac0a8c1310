"""benchmarks/gate_power.py's pure parts: the neighbour's duty cycle (on a fake clock), its
processes stopped on every exit path, and the arithmetic of the cell table. No pytest runs."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


neighbour = _load("neighbour")
gate_cells = _load("gate_cells")


# -- the duty cycle ------------------------------------------------------------------------------
class FakeClock:
    """Time moves only when the neighbour works (one copy: ``copy_s``) or sleeps."""

    def __init__(self, copy_s: float) -> None:
        self.now, self.copy_s, self.on = 0.0, copy_s, 0.0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += self.copy_s
        self.on += self.copy_s

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("duty", [0.1, 0.25, 0.5, 0.75])
@pytest.mark.parametrize("copy_s", [0.01, 0.2])  # copies short, and long against a 0.5 s burst
def test_the_long_run_fraction_on_is_the_duty_cycle(duty: float, copy_s: float) -> None:
    clock = FakeClock(copy_s)
    on, total = neighbour.run_duty_cycle(duty, work=clock.work, clock=clock, sleep=clock.sleep,
                                         rng=random.Random(1), mean_on_s=0.5, until=5_000.0)
    assert total >= 5_000
    assert on == pytest.approx(clock.on)
    assert on / total == pytest.approx(duty, abs=0.02)


def test_bursts_are_random_not_a_square_wave() -> None:
    rng = random.Random(2)
    lengths = [next(neighbour.burst_lengths(0.5, rng)) for _ in range(2000)]
    assert sum(lengths) / len(lengths) == pytest.approx(0.5, rel=0.1)
    assert min(lengths) < 0.05 and max(lengths) > 2.0  # exponential: short and long ones


def test_always_on_never_sleeps_and_a_stop_ends_the_cycle() -> None:
    clock = FakeClock(0.01)
    bursts = iter(range(3))
    on, total = neighbour.run_duty_cycle(
        1.0, work=clock.work, clock=clock, sleep=clock.sleep, rng=random.Random(0),
        keep_going=lambda: next(bursts, None) is not None)
    assert on == total > 0
    with pytest.raises(ValueError, match="duty"):
        neighbour.run_duty_cycle(0.0, work=clock.work, clock=clock, sleep=clock.sleep,
                                 rng=random.Random(0))


# -- the cache size ------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "size"), [("32768K", 32 << 20), ("32 MiB", 32 << 20),
                                            ("512K\n", 512 << 10), ("1048576", 1 << 20),
                                            ("big", None)])
def test_cache_sizes_are_parsed(text: str, size: int | None) -> None:
    assert neighbour.parse_size(text) == size


def test_the_last_level_cache_is_the_highest_level(tmp_path: Path) -> None:
    for index, (level, size) in enumerate([(1, "32K"), (3, "16384K"), (2, "1024K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    assert neighbour.last_level_cache_bytes(tmp_path) == 16 << 20


def test_one_neighbour_per_core_but_one() -> None:
    assert [neighbour.default_procs(n) for n in (1, 2, 16)] == [1, 1, 15]


# -- the processes: stopped and reaped on every exit path ----------------------------------------
SLEEPER = "import time; print('ready', flush=True); time.sleep(60)"
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")


def _python(code: str):
    return lambda i: [sys.executable, "-c", code]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True  # reaped: no zombie left either
    return False


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_the_neighbours_are_stopped_when_the_trial_raises(error: type[BaseException]) -> None:
    group = neighbour.Neighbour(25, 2, _python(SLEEPER))
    with pytest.raises(error), group:
        pids = [p.pid for p in group.processes]
        assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
        raise error("the trial failed")
    assert all(_gone(pid) for pid in pids)
    assert group.processes == []


def test_a_neighbour_ignoring_sigterm_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(neighbour, "STOP_TIMEOUT_S", 0.2)
    with neighbour.Neighbour(50, 1, _python(STUBBORN)) as group:
        (process,) = group.processes
    assert process.returncode == -9 and _gone(process.pid)


def test_a_neighbour_that_never_gets_ready_stops_the_others() -> None:
    started = []

    def command(i: int) -> list[str]:
        return [sys.executable, "-c", SLEEPER if i == 0 else "raise SystemExit(3)"]

    group = neighbour.Neighbour(50, 2, command)
    original = group._wait_ready

    def wait_ready(process) -> None:
        started.append(process.pid)
        original(process)

    group._wait_ready = wait_ready
    with pytest.raises(neighbour.NeighbourFailed, match="not ready"), group:
        pass
    assert len(started) == 2 and all(_gone(pid) for pid in started)


def test_no_neighbour_at_zero_percent() -> None:
    with neighbour.Neighbour(0, 3, _python(SLEEPER)) as group:
        assert group.processes == []


# -- the cell table ------------------------------------------------------------------------------
@dataclass
class FakeTrial:
    mode: str
    neighbour: float
    slowdown: float
    status: int
    rounds: int | None = None
    minutes: float = 1.0
    reason: str = ""


def test_exit_statuses_are_outcomes() -> None:
    assert [gate_cells.outcome(s) for s in (6, 9, 0, 1, 2, 4)] == [
        "regressed", "inconclusive", "passed", "other", "other", "other"]


def test_a_cell_counts_its_outcomes_rounds_and_cost() -> None:
    trials = [
        FakeTrial("paired", 25, 10, 6, rounds=4, minutes=0.5),
        FakeTrial("paired", 25, 10, 6, rounds=6, minutes=1.5),
        FakeTrial("paired", 25, 10, 9, rounds=10, minutes=1.0),
        FakeTrial("paired", 25, 10, 1, rounds=None, minutes=1.0, reason="E  boom"),
        FakeTrial("paired", 0, 10, 0, rounds=10),
        FakeTrial("saved", 25, 10, 0, rounds=2),
    ]
    found = gate_cells.cells(trials)
    assert [(c.key.mode, c.key.neighbour) for c in found] == [
        ("paired", 0), ("paired", 25), ("saved", 25)]
    cell = found[1]
    assert cell.trials == 4
    assert cell.counts == {"regressed": 2, "inconclusive": 1, "passed": 0, "other": 1}
    assert cell.share("regressed") == 0.5
    assert cell.mean_rounds == pytest.approx((4 + 6 + 10) / 3)  # the failed run: unknown
    assert cell.minutes_per_trial == pytest.approx(1.0)
    assert cell.reasons == ("E  boom",)
    header, *rows = gate_cells.cell_rows(found)
    assert header[3:] == ["trials", "regressed", "inconclusive", "passed", "other",
                          "mean rounds", "min/trial"]
    assert rows[1] == ["paired", "25 %", "10 %", "4", "50 %", "25 %", "0 %", "25 %", "6.7",
                       "1.00"]
    assert gate_cells.other_lines(found) == ["other in paired / neighbour 25 % / 10 %: E  boom"]


def test_the_inconclusive_status_can_be_named() -> None:
    (cell,) = gate_cells.cells([FakeTrial("saved", 0, 0, 7)], inconclusive=7)
    assert cell.counts["inconclusive"] == 1 and cell.mean_rounds is None


def test_rounds_are_counted_from_stream_names(tmp_path: Path) -> None:
    names = ["gp.D0.R0.data", "gp.D0.R1.data", "gp.D0.R3.data", "other.D0.R7.data",
             "gp.D0.R1.log", "manifest.json"]
    assert gate_cells.rounds_used(names, "gp") == 3
    assert gate_cells.rounds_used(["gp.D0.data"], "gp") == 1
    for name in names:
        (tmp_path / name).write_text("")
    assert gate_cells.rounds_in(tmp_path, "gp") == 3
    assert gate_cells.rounds_in(tmp_path, "absent") is None


def test_confirmation_rounds_are_counted(tmp_path: Path) -> None:
    assert gate_cells.confirmations_in(tmp_path, "gp") == 0
    for k, name in enumerate(["gp.D0.data", "gp.D0.data", "other.D0.data"]):
        (tmp_path / "confirm" / str(k)).mkdir(parents=True)
        (tmp_path / "confirm" / str(k) / name).write_text("")
    (tmp_path / "confirm" / "confirmed.json").write_text("{}")
    assert gate_cells.confirmations_in(tmp_path, "gp") == 2
