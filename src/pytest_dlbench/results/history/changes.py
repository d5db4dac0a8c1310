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
   (a BIC-like penalty, its constant calibrated on A/A series:
   tests/results/test_history_changes.py);
   each segment's cost is kept by a running median (two heaps) as the segment grows, not
   sorted again; a series longer than :data:`WINDOW` commits is searched with segments of at
   most that many, so that the work grows linearly with the history (PELT prunes nothing in a
   long stretch without a change: it was quadratic there, and cubic with a sort per cost),
   then the changes that bound forced are taken away (one, or two around a short dip, whose
   saving is less than their penalty) and the rest moved to where they cost least between
   their neighbours, until neither changes anything;
3. keeps a change only when it is both large and sure: its size (the ratio of the two
   segments' medians) is beyond the tolerance, and the two-sided test of the level difference
   with the series' noise has ``p < alpha``; a change that fails is merged away and the
   remaining ones re-tested, until every step left passes.

Pure numpy/math; no pytest, no git (results/history/records.py maps indices to commits).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dlbench.results.judge.verdict import ALPHA, TOLERANCE, Evidence, Rule, judge_step

__all__ = ["MIN_SEGMENT", "PENALTY", "WINDOW", "Step", "Work", "detect_steps", "noise_scale",
           "segments"]

#: The penalty per change is ``PENALTY * log(n)`` in units of the noise (see the docstring).
PENALTY = 3.5
#: The fewest commits of a segment: one outlying commit is not a step.
MIN_SEGMENT = 2
#: The smallest noise assumed (log units: 0.05 %), so that identical values do not divide by 0.
NOISE_FLOOR = 5e-4
#: The longest segment the search draws in a longer series (docs/history.md, "How steps are
#: found"): its work grows as the series' length times this; a series no longer is searched
#: exactly.
WINDOW = 100
#: Costs this close (in noise units) are a tie: the running sums and a sum of deviations differ
#: in their last bits.
_TIE = 1e-9
#: The most neighbouring changes taken away together by the windowed search's clean-up.
_TAKEN = 4
#: The most rounds of taking away and moving the changes of a windowed search.
_ROUNDS = 8
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


@dataclass
class Work:
    """What one step detection did, counted (tests/results/test_history_changes.py checks that it
    grows near-linearly with the series, without timing it)."""

    additions: int = 0  # values added to a running median, or sorted to test a change
    evaluations: int = 0  # segment costs and tests evaluated


class _RunningL1:
    """The L1 cost of a segment that grows one value at a time: the sum of absolute deviations
    from its median, kept by two heaps (the lower half, negated, and the upper half) and their
    sums, so that an addition is O(log m) and the cost O(1) (a sort per cost made the search
    cubic in the series' length)."""

    __slots__ = ("high", "low", "sum_high", "sum_low")

    def __init__(self) -> None:
        self.low: list[float] = []  # the lower half, negated: -low[0] is the median
        self.high: list[float] = []
        self.sum_low = 0.0
        self.sum_high = 0.0

    def add(self, x: float) -> float:
        """Add ``x``; the segment's cost with it (one call where the search needs both)."""
        low, high = self.low, self.high
        if not low or x <= -low[0]:
            heapq.heappush(low, -x)
            self.sum_low += x
            if len(low) > len(high) + 1:
                y = -heapq.heappop(low)
                self.sum_low -= y
                heapq.heappush(high, y)
                self.sum_high += y
        else:
            heapq.heappush(high, x)
            self.sum_high += x
            if len(high) > len(low):
                y = heapq.heappop(high)
                self.sum_high -= y
                heapq.heappush(low, -y)
                self.sum_low += y
        # The lower of the two middle values of an even count: any point between them is a
        # median, with the same cost.
        median = -low[0]
        return (self.sum_high - median * len(high)) + (median * len(low) - self.sum_low)


def _segment_cost(values: Sequence[float], start: int, end: int, work: Work) -> float:
    """The L1 cost of ``values[start:end]`` (unscaled), by a sort: for the few costs outside the
    search's running medians."""
    segment = values[start:end]
    work.evaluations += 1
    work.additions += len(segment)
    centre = _median(segment)
    return math.fsum(abs(v - centre) for v in segment)


def _pelt(values: Sequence[float], penalty: float, laplace_b: float, min_size: int,
          window: int, work: Work) -> list[int]:
    """PELT under the L1 cost over segments of at most ``window`` values (none over ``window``
    when the series is no longer than it: the exact PELT)."""
    n = len(values)
    best = [math.inf] * (n + 1)  # best[t]: the least cost of values[:t]
    best[0] = -penalty
    last = [0] * (n + 1)
    # The starts PELT has not pruned, each with its segment values[s:t] as a running median
    # (in the order they were added: ascending, so that a tie goes to the earliest start).
    runs: dict[int, _RunningL1] = {0: _RunningL1()}
    for t in range(1, n + 1):
        x = values[t - 1]
        costs = {}
        for s, run in runs.items():
            cost = run.add(x)
            if t - s >= min_size:
                costs[s] = best[s] + cost / laplace_b
        work.additions += len(runs)
        work.evaluations += len(costs)
        if not costs:
            continue
        least = min(costs.values())
        # The earliest start within rounding of the least: the running sums differ from a
        # sum of deviations in the last bits, and a tie must not turn on them.
        last[t] = next(s for s, c in costs.items() if c <= least + _TIE)
        best[t] = least + penalty
        # PELT's pruning (K = 0 for this cost): a start already worse than the best by more
        # than the penalty can never be the best again; a start ``window`` values back can
        # start no segment that ends later.
        runs = {s: run for s, run in runs.items()
                if (s not in costs or costs[s] <= best[t] + _TIE) and t + 1 - s <= window}
        runs[t] = _RunningL1()
    changes = []
    t = n
    while t > 0:
        s = last[t]
        if s > 0:
            changes.append(s)
        t = s
    return sorted(changes)


def _keep_paid(values: Sequence[float], changes: list[int], penalty: float, laplace_b: float,
               work: Work) -> list[int]:
    """The changes left when those that save less than their penalties are taken away, one
    change or up to :data:`_TAKEN` neighbours at a time (short dips that the window made worth
    their changes), the move that saves the most first: the changes the search made only
    because a segment may not be longer than its window."""
    bounds = [0, *changes, len(values)]
    known: dict[tuple[int, int], float] = {}

    def cost(a: int, b: int) -> float:  # each segment sorted once, however often it is asked
        if (a, b) not in known:
            known[a, b] = _segment_cost(values, a, b, work) / laplace_b
        return known[a, b]

    while len(bounds) > 2:
        # (what taking it away saves, the first change, how many): negative is worth it
        moves = [(cost(bounds[i - 1], bounds[i + k]) - sum(cost(bounds[j - 1], bounds[j])
                                                          for j in range(i, i + k + 1))
                  - k * penalty, i, k)
                 for k in range(1, _TAKEN + 1) for i in range(1, len(bounds) - k)]
        saving, i, k = min(moves)
        if saving >= -_TIE:
            break
        del bounds[i:i + k]
    return bounds[1:-1]


def _refine(values: Sequence[float], changes: list[int], min_size: int, work: Work
            ) -> list[int]:
    """Each change moved, in turn, to where it costs least between its neighbours (a change
    drawn beside a segment the window cut short may sit a few commits off its step)."""
    bounds = [0, *changes, len(values)]
    for i in range(1, len(bounds) - 1):
        a, b = bounds[i - 1], bounds[i + 1]
        left, right = _RunningL1(), _RunningL1()
        before = [0.0] * (b - a + 1)  # before[k - a]: the cost of values[a:k]
        after = [0.0] * (b - a + 1)  # after[k - a]: the cost of values[k:b]
        for k in range(a, b):
            before[k + 1 - a] = left.add(values[k])
        for k in range(b - 1, a - 1, -1):
            after[k - a] = right.add(values[k])
        work.additions += 2 * (b - a)
        work.evaluations += 2 * (b - a)
        costs = {k: before[k - a] + after[k - a] for k in range(a + min_size, b - min_size + 1)}
        least = min(costs.values())
        bounds[i] = next(k for k, c in costs.items() if c <= least + _TIE)  # ties: the first
    return bounds[1:-1]


def segments(values: Sequence[float], penalty: float, scale: float,
             min_size: int = MIN_SEGMENT, *, window: int | None = None,
             work: Work | None = None) -> list[int]:
    """PELT under the L1 cost: the change points (indices where a segment starts, 0 left out)
    minimising the segments' cost plus ``penalty`` per change.

    A series longer than ``window`` (default :data:`WINDOW`) is searched with segments of at
    most ``window`` values, so that the work grows linearly with the series (PELT prunes no
    start of a long stretch without a change: it was quadratic there); a change made only
    because of that bound saves less than the penalty and is taken away afterwards, and those
    left are moved to where they cost least between their neighbours."""
    window = max(WINDOW if window is None else window, 2 * min_size)
    work = work if work is not None else Work()
    n = len(values)
    if n < 2 * min_size:
        return []
    laplace_b = scale / math.sqrt(2.0)  # a Laplace law with standard deviation `scale`
    # Around their median: the running sums of the costs lose no precision to a large level.
    centre = _median(values)
    centred = [v - centre for v in values]
    if n <= window:
        return _pelt(centred, penalty, laplace_b, min_size, n, work)
    changes = _pelt(centred, penalty, laplace_b, min_size, window, work)
    # The changes the window forced taken away, those left moved to where they cost least
    # between their new neighbours, until neither changes anything (a few rounds).
    for _ in range(_ROUNDS):
        kept = _keep_paid(centred, changes, penalty, laplace_b, work)
        moved = _refine(centred, kept, min_size, work)
        if moved == changes:
            break
        changes = moved
    return changes


def _test(values: Sequence[float], left: tuple[int, int], right: tuple[int, int],
          scale: float, dof: float, work: Work) -> Step:
    a, b = values[left[0]:left[1]], values[right[0]:right[1]]
    work.evaluations += 1
    work.additions += len(a) + len(b)
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
    work: Work | None = None,
) -> list[Step]:
    """The steps of the series ``values`` (logarithms of rates, in commit order): changes
    whose ratio is beyond ``tolerance`` (either way) with ``p < alpha``. ``work``, when given,
    counts what the detection did."""
    values = [float(v) for v in values]
    if any(not math.isfinite(v) for v in values):
        raise ValueError("detect_steps: the series has a value that is not finite")
    work = work if work is not None else Work()
    n = len(values)
    scale = noise_scale(values)
    changes = segments(values, penalty * math.log(max(n, 2)), scale, min_size, work=work)
    rule = Rule(tolerance, alpha)
    dof = max(1.0, MAD_EFFICIENCY * (n - 2))
    bounds = [0, *changes, n]

    def tested(i: int) -> tuple[Step, bool]:  # change i + 1 of bounds, and whether it holds
        step = _test(values, (bounds[i], bounds[i + 1]), (bounds[i + 1], bounds[i + 2]),
                     scale, dof, work)
        return step, judge_step(Evidence(step.ratio, step.p, log_mean=step.after - step.before),
                                rule)

    judged = [tested(i) for i in range(len(changes))]
    while True:
        weak = [i for i, (_, holds) in enumerate(judged) if not holds]
        if not weak:
            return [step for step, _ in judged]
        # Merge the least convincing change away and test again the two it bordered (the
        # others' segments are unchanged).
        worst = max(weak, key=lambda i: (judged[i][0].p,
                                         -abs(judged[i][0].after - judged[i][0].before)))
        del bounds[worst + 1], judged[worst]
        for i in (worst - 1, worst):
            if 0 <= i < len(judged):
                judged[i] = tested(i)
