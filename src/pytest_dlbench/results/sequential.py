"""The sequential paired gate: stop a benchmark's ``--bench-against`` rounds as soon as its
verdict is clear (issue 26, item 4).

A group-sequential design with **repeated confidence intervals** (Jennison & Turnbull) on the
paired test the fixed design uses: after rounds 4, 5, 6, ... (:func:`looks`) the rounds so far
are judged with the same test, and the core's rule for an interim look
(results/verdict.judge_look) stops the benchmark when the test's interval is clear of the
tolerance band: wholly beyond it, with p at most the claim level and the rounds not noisy (a
clear change), wholly inside it, or with a regression futile (unchanged). Nothing clear by the
last round: the fixed design's verdict on every round (results/verdict.py). Why each of these,
and the calibration by simulation (``benchmarks/sequential_gate.py``: the same false alarms and
detection of 5 % and 10 % as the fixed 10 rounds, in fewer rounds on average), are in
docs/reports.md, "Stopping early" and "Stopping early, calibrated".

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
