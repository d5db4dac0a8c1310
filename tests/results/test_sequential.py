"""The sequential paired gate (results/judge/paired.py, issue 26 item 4): a benchmark's
--bench-against rounds stop once its verdict is clear, judged the same way during the run
(results/judge/paired.stop_before) and from the run directory (dlbench report)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from _git import git
from _paths import REPO_ROOT
from _runs import write_run

from pytest_dlbench import layout
from pytest_dlbench.results import gate
from pytest_dlbench.results.judge import (
    ALL_ROUNDS,
    CLEAR,
    FIXED,
    IMPROVED,
    REGRESSED,
    SEQUENTIAL,
    UNCHANGED,
    PairedStats,
    Rule,
    Stop,
    evidence_of,
    looks,
    quantile_stats,
    stop_before,
    summarize_paired_dir,
)
from pytest_dlbench.results.judge import judge_look as core_look


def judge_look(stats: PairedStats | None, *, tolerance: float, alpha: float) -> str | None:
    """The core's rule at an interim look, on what the rounds so far say."""
    return core_look(evidence_of(stats) if stats is not None else None, Rule(tolerance, alpha))

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    """benchmarks/sequential_gate.py: the synthetic pair streams and the calibration."""
    spec = importlib.util.spec_from_file_location(
        "sequential_gate", ROOT / "benchmarks" / "sequential_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sequential_gate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def stream(sim: ModuleType, *, change: float, noise: float, spells: bool = False,
           seed: int = 0, rounds: int = 10, steps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    return sim.pair_stream(np.random.default_rng(seed), rounds=rounds, steps=steps,
                           change=change, noise=noise, spells=spells)


# -- the rule -----------------------------------------------------------------------------
def test_looks_are_every_round_from_four() -> None:
    assert looks(10) == (4, 5, 6, 7, 8, 9, 10)
    assert looks(5) == (4, 5)
    assert looks(4) == (4,) and looks(2) == (2,)  # too few rounds: the fixed design


def stats(ratio: float, ci: tuple[float, float], p_lower: float, p_higher: float,
          n: int = 4) -> PairedStats:
    """A look whose variance of the log ratio is the one its 90 % interval implies."""
    spread = (math.log(ci[1]) - math.log(ci[0])) / (2 * 1.645)
    return PairedStats(n, ratio, ci, p_lower, p_higher, math.log(ratio), spread**2)


@pytest.mark.parametrize(("look", "word"), [
    (stats(0.80, (0.78, 0.82), 0.02, 1.0), REGRESSED),  # clear, and p at most alpha / 2
    (stats(1.20, (1.18, 1.22), 1.0, 0.02), IMPROVED),
    (stats(0.80, (0.78, 0.82), 0.04, 1.0), None),  # p below alpha, not below the interim level
    (stats(1.00, (0.99, 1.01), 0.5, 0.5), UNCHANGED),  # surely inside +-3 %
    (stats(0.80, (0.78, 0.82), 2 / 16, 1.0), None),  # the rounds disagree: more rounds
    (stats(0.95, (0.90, 0.99), 0.01, 1.0), None),  # interval across the band's edge
    (stats(0.98, (0.96, 1.00), 0.3, 0.7), None),
    # Futility against a regression: the interval's top crosses +3 %, but a regression beyond
    # -3 % is unlikely (90 % one-sided bound 0.972): stop, unchanged.
    (stats(0.995, (0.975, 1.035), 0.4, 0.6), UNCHANGED),
    # The same shape a little lower (bound 0.962): more rounds.
    (stats(0.985, (0.965, 1.025), 0.3, 0.7), None),
    # Faster beyond the tolerance without evidence: more rounds (an improvement may be shown).
    (stats(1.04, (1.00, 1.08), 0.9, 0.1), None),
])
def test_judge_look(look: PairedStats, word: str | None) -> None:
    assert judge_look(look, tolerance=0.03, alpha=0.05) == word


def test_an_interim_look_is_stricter_than_alpha() -> None:
    # Four rounds all slower: the permutation test's smallest p is 1/16, above alpha. The
    # fixed design would not fail on it, so no look may: an A/A pair of the real path whose
    # four rounds read 3-6 % slower failed the gate here under the old max(alpha, 2**-k).
    four_slower = stats(0.952, (0.933, 0.964), 1 / 16, 1.0)
    assert judge_look(four_slower, tolerance=0.03, alpha=0.05) is None
    assert judge_look(stats(1.05, (1.04, 1.07), 1.0, 1 / 16), tolerance=0.03, alpha=0.05) is None
    # Five rounds (1/32) are below alpha but not below half of it; six (1/64) are.
    five = stats(0.952, (0.933, 0.964), 1 / 32, 1.0)
    assert judge_look(five, tolerance=0.03, alpha=0.05) is None
    assert judge_look(stats(0.952, (0.933, 0.964), 1 / 64, 1.0), tolerance=0.03,
                      alpha=0.05) == REGRESSED
    # The level follows the alpha the user chose.
    assert judge_look(five, tolerance=0.03, alpha=0.10) == REGRESSED
    assert judge_look(four_slower, tolerance=0.03, alpha=0.10) is None


def test_noisy_rounds_claim_nothing_before_the_last_look() -> None:
    # The real quiet A/A pair of 2026-11-25: runs 20 % apart, round 7, p = 3/128 and the
    # interval clear of the band. Its standard error (7.6 %) lets an unchanged pair land
    # beyond -3 % a third of the time: no early claim, on to the last look.
    noisy = stats(0.779, (0.712, 0.915), 3 / 128, 1.0, n=7)
    assert judge_look(noisy, tolerance=0.03, alpha=0.05) is None
    assert judge_look(stats(1.3, (1.1, 1.4), 1.0, 0.001, n=7), tolerance=0.03,
                      alpha=0.05) is None
    # The same p on quiet rounds (an interval 2 % wide) is a clear regression.
    quiet = stats(0.90, (0.89, 0.91), 3 / 128, 1.0, n=7)
    assert judge_look(quiet, tolerance=0.03, alpha=0.05) == REGRESSED
    # Futility still stops noisy rounds (it never says "regressed").
    wide_but_within = stats(1.0, (0.975, 1.025), 0.5, 0.5, n=7)
    assert judge_look(wide_but_within, tolerance=0.03, alpha=0.05) == UNCHANGED


def test_the_quantile_twin_is_the_quantile_test(sim: ModuleType) -> None:
    # The simulation's vectorised test gives the figures of stats.quantile_stats exactly.
    base, cand = stream(sim, change=0.05, noise=0.03, spells=True, rounds=5, steps=20)
    assert sim.quantile_twin(base, cand) == quantile_stats(base.tolist(), cand.tolist())


def first(sim: ModuleType, base: np.ndarray, cand: np.ndarray) -> Stop:
    return sim.judge_trial(base, cand)[1]


def test_a_large_regression_stops_at_the_first_look_that_can_reach_alpha(
        sim: ModuleType) -> None:
    stop = first(sim, *stream(sim, change=0.20, noise=0.03))
    assert (stop.rounds, stop.word, stop.reason) == (6, REGRESSED, CLEAR)
    assert stop.describe() == "stopped after 6 of 10 rounds (clear)"


def test_an_exact_a_a_stops_for_futility(sim: ModuleType) -> None:
    stop = first(sim, *stream(sim, change=0.0, noise=0.01))
    assert (stop.rounds, stop.word, stop.reason) == (4, UNCHANGED, CLEAR)


def test_a_borderline_change_runs_every_round(sim: ModuleType) -> None:
    # 4 % slower with 7 % noise in spells: neither clearly beyond 3 % nor clearly inside
    # (two seeds where its interval straddles 0.97 at every look, one regressed at the end and
    # one not; others stop either way).
    for seed in (5, 7):
        fixed, stop = sim.judge_trial(*stream(sim, change=0.04, noise=0.03, spells=True,
                                              seed=seed))
        assert (stop.rounds, stop.reason) == (10, ALL_ROUNDS)
        assert stop.word == fixed  # the last look is the fixed design's verdict
        assert stop.describe() == "10 of 10 rounds"


def test_same_error_rates_as_the_fixed_design_in_fewer_rounds(sim: ModuleType) -> None:
    # Seeded and small (the calibration in docs/reports.md ran 200 trials a cell): verdicts
    # "regressed" within 2 trials of the fixed design's in every cell, and at most 70 % of its
    # rounds on average over the cells (67 % in the calibration: the interim level at half of
    # alpha costs a round on a clear change, and noisy looks claim nothing early, which makes
    # a clear 10 % change at 3 % noise run 7.8 rounds; issue 26's 60 % is not met, for fewer
    # false alarms).
    # 10 rounds, the calibration's (the default's 20 would sample permutations: slower).
    cells = sim.simulate(trials=6, rounds=10, steps=20, seed=1, changes=(0.0, 0.05, 0.10),
                         noises=(("1 %", 0.01, False), ("7 %, spells", 0.03, True)))
    for cell in cells:
        fixed = sum(w == REGRESSED for w in cell.fixed)
        sequential = sum(w == REGRESSED for w in cell.sequential)
        assert abs(fixed - sequential) <= 2, (cell.noise, cell.change, fixed, sequential)
        if cell.change == 0:
            assert sequential == 0  # no false alarm
    rounds = [r for cell in cells for r in cell.rounds]
    assert sum(rounds) / len(rounds) <= 0.70 * 10


# -- the run directory: the plugin's question and dlbench report's answer agree -------------
def paired_dir(tmp: Path, base: np.ndarray, cand: np.ndarray, *, rounds: int = 10,
               design: str = SEQUENTIAL) -> Path:
    """A --bench-against run directory whose rounds of ``x`` have these step rates."""
    run = tmp / "run"
    layout.base_dir(run).mkdir(parents=True, exist_ok=True)
    for r, (b, c) in enumerate(zip(base, cand, strict=True)):
        write_run(layout.base_dir(run), "x", [(float(v), 1.0) for v in b], repeat=r)
        write_run(run, "x", [(float(v), 1.0) for v in c], repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "quantile", "design": design,
                               "warnings": []})
    return run


def test_a_run_stopped_early_is_judged_again_the_same(sim: ModuleType, tmp_path: Path) -> None:
    base, cand = stream(sim, change=0.20, noise=0.03, rounds=6, steps=20)
    run = paired_dir(tmp_path, base, cand)
    # The plugin, before round 6: clear; before round 5 or 4: those looks cannot reach the
    # interim level (and before round 3, no look yet).
    stop = stop_before(run, "x", devices=[0], before=6, rounds=10)
    assert stop == Stop(6, 10, REGRESSED, CLEAR)
    assert stop_before(run, "x", devices=[0], before=5, rounds=10) is None
    assert stop_before(run, "x", devices=[0], before=4, rounds=10) is None
    assert stop_before(run, "x", devices=[0], before=3, rounds=10) is None
    # A slot whose rounds have not run yet (no xdist: one slot after the other): no stop.
    assert stop_before(run, "x", devices=[0, 1], before=6, rounds=10) is None
    # dlbench report: the same verdict, and where the rounds stopped.
    _, _, comparison = summarize_paired_dir(run)  # type: ignore[misc]
    x = comparison.get("x")
    assert x is not None and x.verdict == REGRESSED and x.samples == (6, 6)
    assert x.note == "stopped after 6 of 10 rounds (clear)"
    saved = json.loads(json.dumps(comparison.to_dict()))
    assert saved["against"]["design"] == SEQUENTIAL
    assert saved["against"]["stops"]["x"] == {"rounds_used": 6, "rounds": 10, "stopped": CLEAR}


def test_the_first_look_wins_over_rounds_run_after_it(sim: ModuleType, tmp_path: Path) -> None:
    # A run whose rounds went on past a clear look (a slot's rounds ahead of the others'): the
    # design's error rates hold for the first crossing, so that look is the verdict.
    base, cand = stream(sim, change=0.0, noise=0.01, rounds=8, steps=20)
    _, _, comparison = summarize_paired_dir(paired_dir(tmp_path, base, cand))  # type: ignore
    assert comparison.get("x").samples == (4, 4)  # type: ignore[union-attr]
    assert comparison.against.stops["x"]["rounds_used"] == 4  # type: ignore[union-attr,index]


def test_the_fixed_design_judges_every_round(sim: ModuleType, tmp_path: Path) -> None:
    base, cand = stream(sim, change=0.0, noise=0.01, rounds=6, steps=20)
    run = paired_dir(tmp_path, base, cand, rounds=6, design=FIXED)
    _, _, comparison = summarize_paired_dir(run)  # type: ignore[misc]
    x = comparison.get("x")
    assert x is not None and x.samples == (6, 6) and x.note == ""
    assert comparison.against.stops["x"] == {  # type: ignore[union-attr,index]
        "rounds_used": 6, "rounds": 6, "stopped": ALL_ROUNDS}


def test_an_interrupted_sequential_run_judges_the_rounds_it_has(
    sim: ModuleType, tmp_path: Path
) -> None:
    base, cand = stream(sim, change=0.04, noise=0.03, spells=True, rounds=5, steps=20)
    _, _, comparison = summarize_paired_dir(paired_dir(tmp_path, base, cand))  # type: ignore
    x = comparison.get("x")
    assert x is not None and x.samples == (5, 5)  # no look fired: every pair, no stop
    assert "x" not in comparison.against.stops  # type: ignore[union-attr,operator]


# -- a real run ------------------------------------------------------------------------------
SUITE = textwrap.dedent(
    """
    sleepy: {definition: defs.py:run, weight: 1, voir: {options: {skip: 1, stop: 8}}}
    """
)
STEP = textwrap.dedent(
    """
    import time


    def run(bench):
        for _ in bench.iterate(range(1000), batch_size=1):
            time.sleep({seconds})
    """
)


@pytest.mark.slow
def test_a_clear_regression_stops_a_real_run_early(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "defs.py").write_text(STEP.replace("{seconds}", "0.02"))
    (repo / "s.yaml").write_text(SUITE)
    (repo / "pytest.ini").write_text("[pytest]\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "defs.py").write_text(STEP.replace("{seconds}", "0.026"))  # 30 % slower
    git(repo, "commit", "-qam", "slower")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "-p", "no:cacheprovider",
         "--bench-against=HEAD~1", "--bench-rounds=10", "-rs"],
        cwd=repo, capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "160"},
    )
    out = result.stdout + result.stderr
    assert result.returncode == gate.EXIT_REGRESSED, out
    assert "sleepy: stopped after 6 of 10 rounds (clear)" in out
    assert "4 skipped" in out
    (run,) = (repo / ".dlbench" / "runs").iterdir()
    assert len(list(run.glob("sleepy.*.data"))) == 6
    assert len(list((run / "base").glob("sleepy.*.data"))) == 6
    # dlbench report on the run directory: the same verdict and status.
    report = subprocess.run([sys.executable, "-m", "pytest_dlbench.cli", "report", str(run)],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == gate.EXIT_REGRESSED, report.stdout + report.stderr
    assert "sleepy: stopped after 6 of 10 rounds (clear)" in report.stdout
