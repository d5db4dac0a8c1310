"""The defaults of the gate's paired runs and confirmations (``--bench-rounds``,
``--bench-paired-test``, ``--bench-paired-rate``, ``--bench-confirm``), read by the option
table at start-up: kept light, nothing imported. The rule's own defaults (tolerance, alpha)
are the verdict core's (results/judge/verdict.py).
"""

from __future__ import annotations

__all__ = ["CONFIRM", "PAIRED_RATE", "PAIRED_RATES", "PAIRED_TEST", "ROUNDS"]

#: ``--bench-against``: the most rounds of (base, candidate) pairs per benchmark, and the
#: paired test (results/judge/paired.py). Even, so that ABBA order puts each side first equally
#: often. The sequential design stops a benchmark once its verdict is clear, so the most rounds
#: is what an undecided pair costs: at 10, a quarter of identical pairs on a noisy 2-core
#: machine could not exclude a 3 % regression and ended inconclusive; at 20 a few in a hundred,
#: for about two rounds more on average (docs/reports.md, "Stopping early").
#: On a shared machine whose load slows whole runs in spells, the quantile test is the one that
#: caught 5 % slowdowns; the per-run tests (t, wilcoxon) lost them to the spells.
ROUNDS = 20
PAIRED_TEST = "quantile"
#: What each run of a pair contributes (results/judge/paired.py): ``window``, its rate over the
#: steady window (Σitems/Σseconds, the scored figure), or ``median``, the median of its steady
#: steps' rates, which a burst of load over a few steps of one run does not move.
PAIRED_RATES = ("window", "median")
PAIRED_RATE = "window"
#: Default of ``--bench-confirm``: confirmation runs at most, per suspected benchmark. Two: a
#: false alarm of the first pass rarely repeats twice beyond the tolerance, and a suite with
#: no suspect pays nothing (results/judge/confirm.py).
CONFIRM = 2
