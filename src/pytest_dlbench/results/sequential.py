"""The sequential paired gate: stop a benchmark's ``--bench-against`` rounds as soon as its
verdict is clear (issue 26, item 4).

A group-sequential design with **repeated confidence intervals** (Jennison & Turnbull) on the
paired test the fixed design uses: after rounds 4, 6, 8, ... (:func:`looks`) the rounds so far
are judged with the same test (the quantile test by default) and the benchmark stops when the
interval (the test's own, at ``1 - 2 alpha``) is clear of the tolerance band:

- wholly below ``1 - tolerance`` (or above ``1 + tolerance``) **and** the one-sided p-value is
  as small as the rounds allow (``max(alpha, 2**-k)``: the permutation test of k rounds cannot
  go below ``2**-k``): a clear regression (improvement), judged as one now;
- wholly inside ``[1 - tolerance, 1 + tolerance]``: a clear "unchanged" (futility: the change
  is surely too small to count, and more rounds cannot make it a regression);
- or, **futility against a regression**: the ratio is not faster than the tolerance and the
  one-sided lower bound at :data:`FUTILITY_CONFIDENCE` (the estimate less ``z`` standard
  errors of the test's own variance) is above ``1 - tolerance``: a regression beyond the
  tolerance is then unlikely, and the gate only fails on those. The fixed design could still
  call such a benchmark "improved" at its last round; stopping gives up that claim only when
  the ratio is within the tolerance. A futility stop is non-binding: it can never add a false
  alarm, only stop a real regression early as "unchanged", and its level was chosen by the
  simulation for the detection it keeps (5 % caught as often as the fixed design within the
  simulation's error) at the rounds it saves (an A/A pair at the shared VM's noise needed all
  10 rounds in 4 of 6 real trials to get its two-sided interval within ±3 %).

Nothing clear by the last round: the fixed design's verdict on every round (stats.verdict).
A change near the tolerance keeps its interval across the band's edge, so it runs every round,
as the fixed design does. The level and the first look were calibrated by simulation
(``benchmarks/sequential_gate.py``, docs/reports.md "Stopping early"): the same false alarms
and detection of 5 % and 10 % as the fixed 10 rounds, in fewer rounds on average.

The rule is one pure function over what the rounds so far say (:func:`judge_look`), and
:func:`first_stop` walks the looks over a benchmark's rounds: the plugin asks it before it runs
a round, and ``dlbench report`` asks it again, so a finished run directory gives the verdict the
run gave. The first look where the rule fires is the verdict even where more rounds ran (a run
with several device slots and no xdist waves runs a slot's rounds ahead of the others'): the
design's error rates hold for the first crossing only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from pytest_dlbench.results.gate import PAIRED_TEST
from pytest_dlbench.results.stats import IMPROVED, REGRESSED, UNCHANGED, PairedStats

__all__ = [
    "ALL_ROUNDS",
    "CLEAR",
    "DESIGNS",
    "FIRST_LOOK",
    "FIXED",
    "FUTILITY_CONFIDENCE",
    "LOOK_EVERY",
    "SEQUENTIAL",
    "Stop",
    "first_stop",
    "judge_look",
    "looks",
]

#: The designs of a paired run (``against.json``'s ``design``): ``sequential`` stops a
#: benchmark early when its verdict is clear; ``fixed`` runs every round (``--bench-fixed-rounds``,
#: and every run directory written before issue 26).
SEQUENTIAL = "sequential"
FIXED = "fixed"
DESIGNS = (SEQUENTIAL, FIXED)

#: The first interim look and the rounds between looks: even, so that ABBA order has put each
#: side first equally often at every look; 4, the first even count where the rule can fire (a
#: permutation test of 4 rounds reaches p = 1/16; the bootstrap interval of 2 is meaningless).
FIRST_LOOK = 4
LOOK_EVERY = 2

#: The one-sided confidence of the futility bound against a regression (module docstring):
#: 90 %, the estimate less 1.28 standard errors.
FUTILITY_CONFIDENCE = 0.90

#: Why a benchmark's rounds ended (``Stop.reason``).
CLEAR = "clear"  # the rule fired at an interim look
ALL_ROUNDS = "all rounds"  # the last look: the fixed design's verdict


@dataclass(frozen=True)
class Stop:
    """Where a benchmark's rounds stopped and why: after ``rounds`` of ``of`` rounds, with the
    verdict ``word`` (REGRESSED, IMPROVED or UNCHANGED) for ``reason`` (CLEAR or ALL_ROUNDS)."""

    rounds: int
    of: int
    word: str
    reason: str

    @property
    def early(self) -> bool:
        return self.rounds < self.of

    def describe(self) -> str:
        """``stopped after 4 of 10 rounds (clear)``, or ``10 of 10 rounds``."""
        if self.early:
            return f"stopped after {self.rounds} of {self.of} rounds ({self.reason})"
        return f"{self.rounds} of {self.of} rounds"


def looks(rounds: int) -> tuple[int, ...]:
    """The rounds after which a benchmark is judged: every :data:`LOOK_EVERY` from
    :data:`FIRST_LOOK` before the last, and the last (``looks(10) == (4, 6, 8, 10)``)."""
    return (*range(FIRST_LOOK, rounds, LOOK_EVERY), rounds)


def judge_look(stats: PairedStats | None, rounds: int, *, tolerance: float, alpha: float,
               test: str = PAIRED_TEST) -> str | None:
    """The rule at an interim look after ``rounds`` rounds: REGRESSED or IMPROVED when the
    change is clearly beyond the tolerance, UNCHANGED when it is clearly inside it, None when
    more rounds are needed (see the module's docstring). The tests whose p-values come from
    the 2**k sign patterns of k rounds (quantile, wilcoxon) may stop at their smallest p; the
    t-test's p is continuous and must be below alpha."""
    if stats is None or stats.ci is None or stats.n < 2:
        return None
    low, high = stats.ci
    strongest = alpha if test == "t" else max(alpha, 2.0**-rounds)
    p = stats.p
    if high < 1 - tolerance and p is not None and p <= strongest and stats.ratio < 1:
        return REGRESSED
    if low > 1 + tolerance and p is not None and p <= strongest and stats.ratio > 1:
        return IMPROVED
    if 1 - tolerance <= low and high <= 1 + tolerance:
        return UNCHANGED
    if stats.ratio <= 1 + tolerance and _no_regression(stats, tolerance):
        return UNCHANGED
    return None


def _no_regression(stats: PairedStats, tolerance: float) -> bool:
    """Whether the ratio's lower bound at :data:`FUTILITY_CONFIDENCE` is above ``1 - tolerance``
    (on the log scale, with the normal quantile and the test's own variance of the log ratio)."""
    if stats.log_var is None or not math.isfinite(stats.log_var) or stats.log_var < 0:
        return False
    z = statistics.NormalDist().inv_cdf(FUTILITY_CONFIDENCE)
    return stats.log_mean - z * math.sqrt(stats.log_var) >= math.log(1 - tolerance)


def first_stop(
    look_at: Callable[[int], PairedStats | None],
    rounds: int,
    *,
    final: Callable[[PairedStats | None], str],
    tolerance: float,
    alpha: float,
    test: str = PAIRED_TEST,
    available: int | None = None,
) -> tuple[Stop, PairedStats | None] | None:
    """Walk the looks of a benchmark of ``rounds`` rounds: ``look_at(k)`` is what its first k
    rounds say; ``final`` the fixed design's verdict of the last look. The first interim look
    where :func:`judge_look` fires is the Stop; else the last look's. Only the looks within
    ``available`` rounds (those that ran) are taken: None when the rule has not fired by then
    and the last round did not run (more rounds are needed, or the run was interrupted)."""
    have = rounds if available is None else min(available, rounds)
    for k in looks(rounds):
        if k > have:
            return None
        stats = look_at(k)
        if k == rounds:
            return Stop(k, rounds, final(stats), ALL_ROUNDS), stats
        word = judge_look(stats, k, tolerance=tolerance, alpha=alpha, test=test)
        if word is not None:
            return Stop(k, rounds, word, CLEAR), stats
    return None
