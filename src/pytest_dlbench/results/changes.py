"""Where a benchmark's rate stepped over a series of commits: change-point detection made for
noisy benchmark series (docs/history.md explains the choice and cites its sources).

The series is the log of one benchmark's rate per commit, in commit order. :func:`detect_steps`

1. estimates the noise from the series itself, robustly: the median absolute deviation of the
   first differences (a step is one large difference among many, so it barely moves it);
2. segments the series with **PELT** (Killick, Fearnhead & Eckley 2012: the exact minimiser of
   "cost of the segments + a penalty per change", pruned) under the **L1 cost** (a Laplace
   likelihood: each segment's sum of absolute deviations from its median, scaled by the noise),
   so that a single run taken on a loaded machine pulls a segment's level far less than it
   would under squared error; segments have at least two commits, so one outlying commit is
   never a step by itself; the penalty per change is ``PENALTY * log(n)`` in noise units
   (a BIC-like penalty, its constant calibrated on A/A series: tests/test_history_changes.py);
3. keeps a change only when it is both large and sure: its size (the ratio of the two
   segments' medians) is beyond the tolerance, and the two-sided test of the level difference
   with the series' noise has ``p < alpha``; a change that fails is merged away and the
   remaining ones re-tested, until every step left passes.

Pure numpy/math; no pytest, no git (results/history.py maps indices to commits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dlbench.results.verdict import ALPHA, TOLERANCE, Evidence, Rule, judge_step

__all__ = ["PENALTY", "MIN_SEGMENT", "Step", "detect_steps", "noise_scale", "segments"]

#: The penalty per change is ``PENALTY * log(n)`` in units of the noise (see the docstring).
PENALTY = 3.5
#: The fewest commits of a segment: one outlying commit is not a step.
MIN_SEGMENT = 2
#: The smallest noise assumed (log units: 0.05 %), so that identical values do not divide by 0.
NOISE_FLOOR = 5e-4
#: The efficiency of the MAD as an estimate of a normal law's scale (Rousseeuw & Croux 1993).
MAD_EFFICIENCY = 0.37


@dataclass(frozen=True)
class Step:
    """A change of level between ``index - 1`` and ``index`` of the series."""

    index: int  # the first point of the new level
    before: float  # the level before (median of the segment, in the series' own units)
    after: float
    n_before: int
    n_after: int
    p: float  # two-sided p-value of the level difference

    @property
    def ratio(self) -> float:
        """after / before (of the rates: the series is their logarithm)."""
        return math.exp(self.after - self.before)

    @property
    def confidence(self) -> float:
        return 1.0 - self.p


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def noise_scale(values: Sequence[float]) -> float:
    """The standard deviation of one point's noise, from the first differences' MAD
    (1.4826 * MAD / sqrt 2: a difference has twice a point's variance); at least
    :data:`NOISE_FLOOR`."""
    if len(values) < 3:
        return NOISE_FLOOR
    diffs = [values[i + 1] - values[i] for i in range(len(values) - 1)]
    centre = _median(diffs)
    mad = _median([abs(d - centre) for d in diffs])
    return max(1.4826 * mad / math.sqrt(2.0), NOISE_FLOOR)


def _l1_cost(values: Sequence[float], start: int, end: int, scale: float) -> float:
    segment = values[start:end]
    centre = _median(segment)
    return sum(abs(v - centre) for v in segment) / scale


def segments(values: Sequence[float], penalty: float, scale: float,
             min_size: int = MIN_SEGMENT) -> list[int]:
    """PELT under the L1 cost: the change points (indices where a segment starts, 0 left out)
    minimising the segments' cost plus ``penalty`` per change."""
    n = len(values)
    if n < 2 * min_size:
        return []
    laplace_b = scale / math.sqrt(2.0)  # a Laplace law with standard deviation `scale`
    best = [math.inf] * (n + 1)  # best[t]: the least cost of values[:t]
    best[0] = -penalty
    last = [0] * (n + 1)
    candidates = [0]  # the starts PELT has not pruned
    for t in range(min_size, n + 1):
        costs = {s: best[s] + _l1_cost(values, s, t, laplace_b)
                 for s in candidates if t - s >= min_size}
        if not costs:
            continue
        last[t] = min(costs, key=lambda s: costs[s])
        best[t] = costs[last[t]] + penalty
        # PELT's pruning (K = 0 for this cost): a start already worse than the best by more
        # than the penalty can never be the best again.
        candidates = [s for s in candidates if s not in costs or costs[s] <= best[t]]
        candidates.append(t)
    changes = []
    t = n
    while t > 0:
        s = last[t]
        if s > 0:
            changes.append(s)
        t = s
    return sorted(changes)


def _test(values: Sequence[float], left: tuple[int, int], right: tuple[int, int],
          scale: float, dof: float) -> Step:
    a, b = values[left[0]:left[1]], values[right[0]:right[1]]
    before, after = _median(a), _median(b)
    # The medians' standard errors with the series' noise (a median's efficiency under a
    # normal law is 2/pi: its variance is pi/2 times the mean's).
    se = scale * math.sqrt(math.pi / 2.0 * (1.0 / len(a) + 1.0 / len(b)))
    from scipy.stats import t as student

    # The noise is estimated from the series by a MAD (37 % efficient): Student's t with that
    # many effective degrees of freedom, not the normal law, on a short series.
    p = float(2.0 * student.sf(abs(after - before) / se, dof))
    return Step(index=right[0], before=before, after=after, n_before=len(a), n_after=len(b),
                p=p)


def detect_steps(
    values: Sequence[float],
    *,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    penalty: float = PENALTY,
    min_size: int = MIN_SEGMENT,
) -> list[Step]:
    """The steps of the series ``values`` (logarithms of rates, in commit order): changes
    whose ratio is beyond ``tolerance`` (either way) with ``p < alpha``."""
    values = [float(v) for v in values]
    if any(not math.isfinite(v) for v in values):
        raise ValueError("detect_steps: the series has a value that is not finite")
    n = len(values)
    scale = noise_scale(values)
    changes = segments(values, penalty * math.log(max(n, 2)), scale, min_size)
    rule = Rule(tolerance, alpha)
    dof = max(1.0, MAD_EFFICIENCY * (n - 2))
    while True:
        bounds = [0, *changes, n]
        steps = [_test(values, (bounds[i - 1], bounds[i]), (bounds[i], bounds[i + 1]), scale,
                       dof)
                 for i in range(1, len(bounds) - 1)]
        weak = [s for s in steps if not judge_step(
            Evidence(s.ratio, s.p, log_mean=s.after - s.before), rule)]
        if not weak:
            return steps
        # Merge the least convincing change away and test the rest again.
        worst = max(weak, key=lambda s: (s.p, -abs(s.after - s.before)))
        changes = [c for c in changes if c != worst.index]
