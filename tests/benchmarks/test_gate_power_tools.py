"""benchmarks/gate_power.py's pure parts: the neighbour's duty cycle (on a fake clock), its
processes stopped on every exit path, the arithmetic of the cell table, and the offline
re-judging (benchmarks/gate_offline.py) of synthetic run directories: each paired run's own
design, inconclusive as its own outcome, the saved mode's confirmations. No pytest runs."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from _bench_scripts import load_script
from _gate_power_runs import JITTER, paired_run
from _runs import steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.layout import CONFIRM_DONE, confirm_round_dir
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.judge import (
    FIXED,
    INCONCLUSIVE,
    REGRESSED,
    SEQUENTIAL,
    TOLERANCE,
    compare_paired,
)
from pytest_dlbench.results.model import load_baseline, save_summary

neighbour = load_script("neighbour")
gate_cells = load_script("gate_cells")
gate_offline = load_script("gate_offline")


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


# -- the offline re-judging: synthetic run directories ---------------------------------------
#: Six rounds 20 % slower, quiet: the sequential gate's first look that can reach its interim
#: level (the permutation test's p is 1/64 after 6 rounds) is clear.
BASE6, SLOWER6 = (100.0, 101.0) * 3, (80.8, 80.0) * 3


def test_a_sequential_run_stopped_at_6_rounds_is_judged_regressed_as_the_product_did(
        tmp_path: Path) -> None:
    run = paired_run(tmp_path, BASE6, SLOWER6)
    judged = gate_offline.judge_paired(run)
    assert (judged.verdict, judged.status) == (REGRESSED, gate.EXIT_REGRESSED)
    assert (judged.rounds, judged.ran, len(judged.pairs)) == (6, 6, 6)
    assert judged.status == evaluate(run).status  # what pytest and dlbench report say
    assert judged.p_value == pytest.approx(1 / 64)
    # The fixed rule on the first 4 rounds: the permutation test's smallest p, 1/16, is above
    # alpha: 20 % slower without the evidence, "inconclusive" ("unchanged" before issue 38's
    # one rule; the sequential look at 4 did not stop on it either).
    fixed = gate_offline.judge_paired(run, design=FIXED, rounds=4)
    assert fixed.verdict == INCONCLUSIVE and fixed.p_value == pytest.approx(1 / 16)
    every = compare_paired(summarize_dir(run), summarize_dir(layout.base_dir(run)),
                           tolerance=TOLERANCE, test="quantile", rate="window")
    assert every.get("gp").verdict == REGRESSED  # type: ignore[union-attr]
    # The sequential rule asked by name, at the run's own bound: the product's verdict.
    again = gate_offline.judge_paired(run, design=SEQUENTIAL, rounds=10, test="quantile")
    assert (again.verdict, again.rounds) == (REGRESSED, 6)


def test_a_regression_with_the_busy_runs_on_one_side_is_inconclusive(tmp_path: Path) -> None:
    run = paired_run(tmp_path, BASE6, SLOWER6, busy_base=True)
    judged = gate_offline.judge_paired(run)
    assert judged.verdict == INCONCLUSIVE  # results/judge/noise.py's paired doubt
    # The exit status is the product's (the score's verdict is not put in doubt: 6 today).
    assert judged.status == evaluate(run).status
    assert judged.outcome == gate_offline.outcome_of(judged.status)
    fixed = gate_offline.judge_paired(run, design=FIXED, rounds=6, test="t")
    assert fixed.verdict == INCONCLUSIVE  # the doubt applies to every rule


def saved_trial(folder: Path, baseline: Sequence[float], first: float,
                again: Sequence[float] = ()) -> tuple[Path, Path]:
    """(run directory, baseline file): a baseline of one run per rate, a first pass at
    ``first`` and, when ``again``, confirmation runs kept as the plugin keeps them."""
    base = folder / "base"
    base.mkdir(parents=True)
    for r, rate in enumerate(baseline):
        write_run(base, "gp", steady_at(rate, jitter=JITTER[:2] * 5),
                  repeat=r if len(baseline) > 1 else None)
    path = save_summary(summarize_dir(base), folder / "base.json")
    run = folder / "run"
    run.mkdir()
    write_run(run, "gp", steady_at(first, jitter=JITTER[:2] * 5))
    for k, rate in enumerate(again, start=1):
        write_run(confirm_round_dir(run, k), "gp", steady_at(rate, jitter=JITTER[:2] * 5))
    if again:
        (run / "confirm" / CONFIRM_DONE).write_text(json.dumps({"limit": len(again)}))
    return run, path


QUIET_BASELINE = (99.6, 100.4, 100.0)  # three runs, ±0.4 % between them


def test_saved_trials_apply_the_products_confirmation(tmp_path: Path) -> None:
    run, baseline = saved_trial(tmp_path, QUIET_BASELINE, 80.0, again=[100.0, 100.2])
    first = gate_offline.judge_saved(run, baseline, confirm=False)
    assert (first.verdict, first.status) == (REGRESSED, gate.EXIT_REGRESSED)
    judged = gate_offline.judge_saved(run, baseline)  # the confirmations did not repeat it
    assert judged.status != gate.EXIT_REGRESSED and judged.confirmation == "not held"
    product = evaluate(run, EvaluateOptions(baseline=load_baseline(str(baseline))))
    assert judged.status == product.status and judged.verdict == product.comparison.get(
        "gp").verdict  # type: ignore[union-attr]


def test_a_saved_inconclusive_is_its_own_outcome(tmp_path: Path) -> None:
    # One run a side, 8 % slower: beyond the tolerance, not beyond the default noise.
    run, baseline = saved_trial(tmp_path, [100.0], 92.0)
    judged = gate_offline.judge_saved(run, baseline)
    assert (judged.verdict, judged.status, judged.outcome) == (
        INCONCLUSIVE, gate.EXIT_INCONCLUSIVE, "inconclusive")


@dataclass
class OfflineTrial:
    mode: str
    rep: int
    slowdown: float
    status: int
    run_dir: str
    baseline: str | None = None
    minutes: float = 1.0


def report_args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"slowdowns": [0, 10], "rounds": None, "repeats": 1,
                                 "tolerances": [0.03], "also_rounds": [], **kw})


def cells_of(text: str, label: str) -> list[str]:
    """The cells of the report's row whose label starts with ``label``."""
    (line,) = [line for line in text.splitlines() if line.strip().startswith(label)]
    return re.split(r"\s{2,}", line.strip())


def test_the_offline_report_counts_as_the_product_judged(tmp_path: Path) -> None:
    clear = paired_run(tmp_path / "clear", BASE6, SLOWER6)
    doubt = paired_run(tmp_path / "doubt", BASE6, SLOWER6, busy_base=True)
    dropped, base1 = saved_trial(tmp_path / "dropped", QUIET_BASELINE, 80.0, [100.0, 100.2])
    unsure, base2 = saved_trial(tmp_path / "unsure", [100.0], 92.0)
    trials = [OfflineTrial("paired", 0, 10, gate.EXIT_REGRESSED, str(clear)),
              OfflineTrial("paired", 0, 0, evaluate(doubt).status, str(doubt)),
              OfflineTrial("saved", 0, 10, gate.EXIT_INCONCLUSIVE, str(dropped), str(base1)),
              OfflineTrial("saved", 0, 0, gate.EXIT_INCONCLUSIVE, str(unsure), str(base2))]
    text = gate_offline.offline_report(trials, report_args(rounds=10), {})  # as they ran
    assert "warning" not in text, text  # the offline judgement reproduces every exit status
    header = cells_of(text, "mode")
    assert header[3:5] == ["0 % (false alarms)", "10 %"]
    exit_row = cells_of(text, "paired --bench-against")
    assert exit_row[4] == "1/1 100 %"
    own = cells_of(text, "paired as the product judged")
    assert own[0].endswith("sequential rule, quantile (steps pooled), up to 10 rounds, "
                           "tolerance 3% (the product's defaults)")
    assert own[3:5] == exit_row[3:5]
    fixed = cells_of(text, "paired, fixed rule, quantile (steps pooled), first 4 rounds")
    assert fixed[1:3] == ["4", "1"] and len(fixed) == 5  # labelled by its rule, 2 cells
    assert cells_of(text, "saved as the product judged")[3:5] == [
        "0/1 0 %, 1 inconcl.", "0/1 0 %, 1 inconcl."]
    assert cells_of(text, "saved, first pass alone")[3:5] == [
        "0/1 0 %, 1 inconcl.", "1/1 100 %"]  # the confirmation dropped the regression
    assert "1 of 2 trials confirmed a first-pass verdict: 1 not held" in text
    assert "2 of 2 paired trials stopped before round 10" in text
    # An exit status the product's own judgement does not give is flagged.
    trials[0].status = gate.OK
    text = gate_offline.offline_report(trials, report_args(rounds=10), {})  # as they ran
    assert "warning: 1 trials whose exit status and the offline judgement" in text
    assert "paired rep 0 10 % exit 0 vs 6" in text


def test_a_fixed_trial_is_judged_by_the_sequential_rule_on_its_first_rounds(
        tmp_path: Path) -> None:
    fixed = paired_run(tmp_path / "fixed", [100.0, 101.0] * 5, [80.8, 80.0] * 5, design=FIXED)
    judged = gate_offline.sequential_on_same_rounds(fixed)
    assert judged is not None and (judged.status, judged.rounds) == (gate.EXIT_REGRESSED, 6)
    # A run that stopped by its own sequential rule has nothing more to say.
    own = paired_run(tmp_path / "own", BASE6, SLOWER6)
    assert gate_offline.sequential_on_same_rounds(own) is None
    # gate_power's trials keep it, and read it back.
    gate_power = load_script("gate_power")
    raw = {"mode": "paired", "rep": 0, "slowdown": 10.0, "status": 6, "minutes": 1.0,
           "run_dir": str(fixed), "sequential_status": 6, "sequential_rounds": 6}
    (kept,) = gate_power.load_trials({"trials": [raw]})
    assert (kept.sequential_status, kept.sequential_rounds) == (6, 6)


def test_fixed_design_trials_get_a_sequential_row_at_the_defaults(tmp_path: Path) -> None:
    rounds = 10
    run = paired_run(tmp_path, [100.0, 101.0] * 5, [80.8, 80.0] * 5, design=FIXED,
                     rounds=rounds)
    text = gate_offline.offline_report(
        [OfflineTrial("paired", 0, 10, gate.EXIT_REGRESSED, str(run))],
        report_args(slowdowns=[10], rounds=rounds), {})
    assert "warning" not in text, text
    own = cells_of(text, "paired as the product judged")
    assert own[0].endswith("fixed rule, quantile (steps pooled), first 10 rounds, tolerance 3%")
    assert own[3] == "1/1 100 %"
    sequential = cells_of(text, "paired, sequential rule, quantile (steps pooled), up to 10")
    assert sequential[0].endswith("(the product's defaults)") and sequential[3] == "1/1 100 %"
    assert gate_offline.judge_paired(run, design=SEQUENTIAL).rounds == 6  # stopped early
    assert gate_offline.judge_paired(run).rounds == rounds
    assert "stopped before round" not in text  # every round ran


def test_the_stopping_lean_model_reports_its_three_ratios(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """benchmarks/stopping_lean.py judges model trials as the product does and prints where
    their ratios lie: at the stop, over the first 4 rounds, over every round."""
    stopping_lean = load_script("stopping_lean")

    assert stopping_lean.main(["--trials", "6", "--rounds", "6", "--steps", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("6 A/A trials, noise 0.1, up to 6 rounds")
    for line, name in zip(lines[1:], ("at the stop", "of rounds 1-4", "of all rounds"),
                          strict=True):
        assert re.fullmatch(rf"ratio {name}: +\d of \d above 1, mean log ratio [+-]\d\.\d{{4}} "
                            r"\(sign test p [\d.e-]+\)", line), line
