"""The sequential paired gate: stop a benchmark's ``--bench-against`` rounds as soon as its
verdict is clear (issue 26, item 4).

A group-sequential design with **repeated confidence intervals** (Jennison & Turnbull) on the
paired test the fixed design uses: after rounds 4, 5, 6, ... (:func:`looks`) the rounds so far
are judged with the same test (the quantile test by default) and the benchmark stops when the
interval (the test's own, at ``1 - 2 alpha``) is clear of the tolerance band:

- wholly below ``1 - tolerance`` (or above ``1 + tolerance``) **and** the one-sided p-value is
  at most :data:`.verdict.CLAIM_ALPHA_SHARE` of alpha (half: 0.025) **and** the rounds are
  not noisy: a clear regression (improvement), judged as one now. Each look is another chance
  for noise to cross, so an interim look is stricter than the last one, at a constant level
  (Pocock's shape): looks at alpha raised the simulated A/A false alarms at 15 % between runs
  from the fixed design's 6.2 % to 8.2 %. Where the runs' noise is small next to the tolerance
  the band itself keeps false alarms rare: below a reach of alpha (:func:`.verdict.reach`: an
  unchanged pair's ratio lands beyond the tolerance less than alpha of the time), an interval
  clear of the band sits 1.645 standard errors beyond it, and a look's false alarm is at most
  ``Φ(-3.29)``, 0.05 %. Above it the clearance shrinks to nothing, every look is a test at its
  full level, and seven of them let through more than one: a real quiet A/A pair whose runs
  were 20 % apart (reach 0.34) stopped "regressed" at round 7 on p = 3/128
  (benchmarks/README.md). Such rounds claim nothing before the last look (futility may still
  stop them); they seldom stopped early anyway (98 % of the rounds in the simulation at 15 %
  between runs). The threshold costs rounds where early looks are short: a clear 10 % change
  at 3 % noise ran 7.8 rounds instead of 6.2 (at the last look's half of alpha, 8.4), for no
  false alarm fewer in those cells. With the permutation test, whose smallest p after k rounds
  is ``2**-k``, the first look that can call a regression is round 6 (1/64). An earlier rule
  took ``max(alpha, 2**-k)`` and stopped at round 4 on p = 1/16: a real A/A pair whose four
  rounds all read 3-6 % slower failed the gate there (benchmarks/README.md);
- wholly inside ``[1 - tolerance, 1 + tolerance]``: a clear "unchanged" (futility: the change
  is surely too small to count, and more rounds cannot make it a regression);
- or, **futility against a regression**: the ratio is not faster than the tolerance and the
  one-sided lower bound at :data:`.verdict.FUTILITY_CONFIDENCE` (90 %: the estimate less ``z``
  standard errors of the test's own variance) is above ``1 - tolerance``: a regression beyond the
  tolerance is then unlikely, and the gate only fails on those. The fixed design could still call
  such a benchmark "improved" at its last round; stopping gives up that claim only when the ratio is
  within the tolerance. A futility stop is non-binding: it can never add a false alarm, only stop a
  real regression early as "unchanged", and its level was chosen by the simulation for the detection
  it keeps (5 % caught as often as the fixed design within the simulation's error) at the rounds it
  saves (an A/A pair at the shared VM's noise needed all 10 rounds in 4 of 6 real trials to get its
  two-sided interval within ±3 %).

Nothing clear by the last round: the fixed design's verdict on every round (results/verdict.py).
A change near the tolerance keeps its interval across the band's edge, so it runs every round,
as the fixed design does. The level and the first look were calibrated by simulation
(``benchmarks/sequential_gate.py``, docs/reports.md "Stopping early"): the same false alarms
and detection of 5 % and 10 % as the fixed 10 rounds, in fewer rounds on average.

The rule is one pure function over what the rounds so far say (results/verdict.judge_look), and
:func:`first_stop` walks the looks over a benchmark's rounds: the plugin asks it before it runs
a round, and ``dlbench report`` asks it again, so a finished run directory gives the verdict the
run gave. The first look where the rule fires is the verdict even where more rounds ran (a run
with several device slots and no xdist waves runs a slot's rounds ahead of the others'): the
design's error rates hold for the first crossing only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_dlbench.results.stats import PairedStats
from pytest_dlbench.results.verdict import Rule, judge_look

__all__ = [
    "ALL_ROUNDS",
    "CLEAR",
    "DESIGNS",
    "FIRST_LOOK",
    "FIXED",
    "LOOK_EVERY",
    "SEQUENTIAL",
    "Stop",
    "first_stop",
    "looks",
]

#: The designs of a paired run (``against.json``'s ``design``): ``sequential`` stops a
#: benchmark early when its verdict is clear; ``fixed`` runs every round (``--bench-fixed-rounds``,
#: and every run directory written before issue 26).
SEQUENTIAL = "sequential"
FIXED = "fixed"
DESIGNS = (SEQUENTIAL, FIXED)

#: The first interim look and the rounds between looks. 4: the bootstrap interval of fewer
#: rounds is meaningless, and at 4 and 5 only futility can stop the permutation test (its
#: smallest p, 1/16 and 1/32, is above the interim level); a regression or an improvement
#: needs round 6 (1/64). A look after every round: futility may stop at 5, a clear change at
#: 6 or 7. At an odd look ABBA order has put one side first
#: once more than the other; a first-run or second-run effect e then moves the log ratio by
#: e/k, a fifth of it at round 5, and it alternates in sign from round to round.
FIRST_LOOK = 4
LOOK_EVERY = 1

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
    :data:`FIRST_LOOK` before the last, and the last (``looks(10) == (4, 5, ..., 10)``)."""
    return (*range(FIRST_LOOK, rounds, LOOK_EVERY), rounds)


def first_stop(
    look_at: Callable[[int], PairedStats | None],
    rounds: int,
    *,
    final: Callable[[PairedStats | None], str],
    tolerance: float,
    alpha: float,
    available: int | None = None,
) -> tuple[Stop, PairedStats | None] | None:
    """Walk the looks of a benchmark of ``rounds`` rounds: ``look_at(k)`` is what its first k
    rounds say; ``final`` the fixed design's verdict of the last look. The first interim look
    where the core's ``judge_look`` fires is the Stop; else the last look's. Only the looks within
    ``available`` rounds (those that ran) are taken: None when the rule has not fired by then
    and the last round did not run (more rounds are needed, or the run was interrupted)."""
    have = rounds if available is None else min(available, rounds)
    for k in looks(rounds):
        if k > have:
            return None
        stats = look_at(k)
        if k == rounds:
            return Stop(k, rounds, final(stats), ALL_ROUNDS), stats
        word = judge_look(stats.evidence() if stats is not None else None,
                          Rule(tolerance, alpha))
        if word is not None:
            return Stop(k, rounds, word, CLEAR), stats
    return None
