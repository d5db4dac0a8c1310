"""Change detection over a benchmark's history (results/history/changes.py): PELT under the L1 cost
is the exact optimum, noise alone makes (almost) no step on A/A series, a 15 % step is found at
its commit, a single outlier is not a step, and the work grows near-linearly with the
series (issue 40)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_dlbench.results.history import (
    MIN_SEGMENT,
    NOISE_FLOOR,
    PENALTY,
    WINDOW,
    Work,
    detect_steps,
    noise_scale,
    segments,
)
from pytest_dlbench.results.history.changes import _l1_cost


def brute_force(values: list[float], penalty: float, scale: float) -> list[int]:
    """Every segmentation with segments of MIN_SEGMENT or more: the cheapest one's changes."""
    n = len(values)
    b = scale / math.sqrt(2.0)
    best: tuple[float, list[int]] = (math.inf, [])
    for k in range(n):
        for cuts in itertools.combinations(range(MIN_SEGMENT, n - MIN_SEGMENT + 1), k):
            bounds = [0, *cuts, n]
            if any(y - x < MIN_SEGMENT for x, y in zip(bounds, bounds[1:], strict=False)):
                continue
            cost = sum(_l1_cost(values, x, y, b) for x, y in zip(bounds, bounds[1:],
                                                                   strict=False))
            cost += penalty * k
            if cost < best[0] - 1e-9:
                best = (cost, list(cuts))
    return best[1]


@pytest.mark.parametrize("seed", range(40))
def test_pelt_finds_the_optimal_segmentation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 11))
    levels = np.repeat(rng.normal(0, 0.1, 3), [n // 3, n // 3, n - 2 * (n // 3)])
    values = list(levels + rng.normal(0, 0.02, n))
    penalty = float(rng.uniform(0.5, 6.0))
    scale = noise_scale(values)
    assert segments(values, penalty, scale) == brute_force(values, penalty, scale)


def aa_series(rng: np.random.Generator, n: int, noise: float, heavy: bool) -> list[float]:
    draws = rng.standard_t(3, n) / math.sqrt(3.0) if heavy else rng.normal(0, 1, n)
    return list(math.log(1000.0) + noise * draws)


@pytest.mark.parametrize("heavy", [False, True], ids=["normal", "student-t3"])
@pytest.mark.parametrize(("n", "most"), [(10, 0.03), (20, 0.015), (40, 0.01)])
def test_noise_alone_makes_almost_no_step(n: int, most: float, heavy: bool) -> None:
    """The false-step rate on A/A histories (2 % noise, the default 3 % tolerance): the share
    of series where a step is reported although the rate never changed."""
    rng = np.random.default_rng(n + heavy)
    trials = 400
    false_steps = sum(bool(detect_steps(aa_series(rng, n, 0.02, heavy)))
                      for _ in range(trials))
    assert false_steps / trials <= most


@pytest.mark.parametrize("heavy", [False, True], ids=["normal", "student-t3"])
def test_a_15_percent_step_is_found_at_its_commit(heavy: bool) -> None:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(200):
        values = aa_series(rng, 10, 0.02, heavy)
        values = [v + (math.log(0.85) if i >= 6 else 0.0) for i, v in enumerate(values)]
        steps = detect_steps(values)
        found += [s.index for s in steps] == [6]
    assert found / 200 >= 0.9


def test_step_size_confidence_and_sides() -> None:
    values = [math.log(100.0)] * 5 + [math.log(85.0)] * 5
    values = [v + 0.005 * (-1) ** i for i, v in enumerate(values)]
    (step,) = detect_steps(values)
    assert step.index == 5 and step.n_before == 5 and step.n_after == 5
    assert step.ratio == pytest.approx(0.85, rel=0.01)
    assert step.p < 0.01 and step.confidence > 0.99


def test_one_outlier_is_not_a_step() -> None:
    values = [math.log(100.0 * (1 + 0.01 * (-1) ** i)) for i in range(12)]
    values[6] = math.log(60.0)  # one run on a loaded machine
    assert detect_steps(values) == []


def test_small_changes_stay_within_the_tolerance() -> None:
    values = [math.log(100.0)] * 6 + [math.log(98.0)] * 6  # 2 %: below the 3 % tolerance
    assert detect_steps(values) == []
    assert [s.index for s in detect_steps(values, tolerance=0.01)] == [6]


def test_short_and_flat_series() -> None:
    assert detect_steps([]) == [] and detect_steps([1.0, 2.0, 3.0]) == []
    assert noise_scale([5.0] * 8) == NOISE_FLOOR
    with pytest.raises(ValueError, match="not finite"):
        detect_steps([1.0, math.nan, 1.0, 1.0])


# -- the work: near-linear, and the same steps as the plain search (issue 40) ---------------
def plain_pelt(values: list[float], penalty: float, scale: float) -> list[int]:
    """PELT as it was before the running medians and the window: a sort per segment cost, every
    start kept until pruned (quadratic to cubic in a long series without a change)."""
    n, b = len(values), scale / math.sqrt(2.0)
    if n < 2 * MIN_SEGMENT:
        return []
    best, last, candidates = [math.inf] * (n + 1), [0] * (n + 1), [0]
    best[0] = -penalty
    for t in range(MIN_SEGMENT, n + 1):
        costs = {s: best[s] + _l1_cost(values, s, t, b) for s in candidates
                 if t - s >= MIN_SEGMENT}
        last[t] = min(costs, key=lambda s: costs[s])
        best[t] = costs[last[t]] + penalty
        candidates = [s for s in candidates if s not in costs or costs[s] <= best[t]]
        candidates.append(t)
    changes, t = [], n
    while t > 0:
        changes, t = ([last[t], *changes] if last[t] else changes), last[t]
    return changes


def history_like(rng: np.random.Generator, n: int) -> list[float]:
    """A long history: 2 % noise, a few steps, a few regressions fixed later (dips of 3 to 40
    commits), 2 % of the runs taken on a loaded machine (30 % slow)."""
    level = np.zeros(n)
    for _ in range(int(rng.integers(0, 4))):
        start = int(rng.integers(2, max(n - 10, 3)))
        level[start:start + int(rng.integers(3, 40))] += rng.normal(0, 0.12)
    for _ in range(int(rng.integers(0, 3))):
        level[int(rng.integers(2, n - 2)):] += rng.normal(0, 0.1)
    noise = 0.02 * rng.normal(0, 1, n)
    noise[rng.random(n) < 0.02] -= 0.3
    return list(math.log(1000.0) + level + noise)


@pytest.mark.parametrize("n", [12, 40, WINDOW])
def test_a_series_within_the_window_is_searched_exactly_as_before(n: int) -> None:
    for seed in range(12):
        values = history_like(np.random.default_rng(seed), n)
        scale = noise_scale(values)
        penalty = PENALTY * math.log(n)
        assert segments(values, penalty, scale) == plain_pelt(values, penalty, scale), seed


@pytest.mark.parametrize("seed", range(4))
def test_a_longer_series_finds_the_steps_of_the_plain_search(seed: int) -> None:
    """Beyond the window the search bounds a segment's length, then takes away the changes
    the bound forced and moves the rest to their best place: the same steps as the plain
    search (which takes seconds here, and minutes at a few thousand commits)."""
    rng = np.random.default_rng(100 + seed)
    values = history_like(rng, 2 * WINDOW + 50)
    scale = noise_scale(values)
    penalty = PENALTY * math.log(len(values))
    assert segments(values, penalty, scale) == plain_pelt(values, penalty, scale)


@pytest.mark.parametrize("shape", ["flat", "one step"])
def test_the_work_grows_near_linearly_with_the_history(shape: str) -> None:
    """Counted, not timed: four times the commits must cost well under sixteen times the work
    (the plain search evaluated 9.2 times the segment costs, over 35 times the points, from
    500 to 2,000 commits of a flat series)."""
    work = {}
    for n in (500, 2000):
        rng = np.random.default_rng(3)
        values = [math.log(1000.0) + 0.02 * rng.normal()
                  + (math.log(0.85) if shape == "one step" and i >= n // 2 else 0.0)
                  for i in range(n)]
        work[n] = Work()
        steps = detect_steps(values, work=work[n])
        assert [s.index for s in steps] == ([n // 2] if shape == "one step" else [])
    assert work[500].evaluations > 500 and work[500].additions > 500  # it counts its work
    assert work[2000].evaluations / work[500].evaluations < 8
    assert work[2000].additions / work[500].additions < 8
