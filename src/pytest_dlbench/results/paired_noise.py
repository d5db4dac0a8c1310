"""A ``--bench-against`` verdict when the rounds' noise is too large for the tolerance: an
**inconclusive** paired verdict (issue 26, item 3, for the paired gate).

**Why.** The fixed design's rule (:func:`.stats.verdict`) claims a change when its ratio is
beyond the tolerance and the one-sided p is below alpha. Where the rounds spread little next
to the tolerance, an unchanged pair's ratio seldom lands beyond the band at all, and the band
keeps false alarms far below alpha. Where they spread far more (fresh processes of the
one-thread MLP step ran 15 to 30 % apart on the shared VM), an unchanged pair's ratio is beyond
the band about as often as not, and the band keeps nothing out: the false alarms are alpha
itself (6.2 % of the simulated A/A trials with runs 15 % apart, one-sided alpha 0.05), above
issue 26's 1 in 40.

**The rule** (:func:`paired_verdict`). The rounds' **reach** is how often an unchanged pair's
ratio would land beyond the tolerance on noise alone: ``Φ(-b / se)``, with ``b`` the tolerance
on the log scale in the change's direction (``-ln(1 - tolerance)`` for a slower ratio) and
``se`` the test's own standard error of the log ratio (``PairedStats.log_var``: the bootstrap's
for the quantile test). When the reach is above :data:`CLAIM_ALPHA_SHARE` of alpha (half:
0.025), the rounds are **noisy** and a change is claimed only at that level, the level of the
sequential design's interim looks:

- slower than the tolerance with p below alpha but above its share: **inconclusive** (the
  evidence would do on a quieter machine, not at this noise; more rounds narrow it);
- faster than the tolerance on the same evidence: **unchanged**, no improvement claimed (as
  against a saved baseline, results/noise.py: a faster reading is no sign of a regression);
- otherwise the fixed rule's verdict.

Quiet rounds keep the fixed rule, so the detection measured there is unchanged. Under the
normal approximation an unchanged pair is then called "regressed" at most half of alpha of the
time at every noise: below the reach's threshold the band keeps it out (a ratio beyond ``b``
is rarer than that), above it the level does; and the two meet at the threshold, where a ratio
beyond ``b`` has p at the level. The simulation (benchmarks/sequential_gate.py) measures it.

Pure: no pytest, no files.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from dataclasses import dataclass

from pytest_dlbench.results.stats import (
    IMPROVED,
    INCONCLUSIVE,
    REGRESSED,
    UNCHANGED,
    Verdict,
    score_verdict,
    verdict,
)

__all__ = ["CLAIM_ALPHA_SHARE", "Reach", "paired_score_verdict", "paired_verdict",
           "reach"]

#: The share of alpha at which a change is claimed where the tolerance band cannot keep an
#: unchanged pair's false alarms down by itself: a noisy last look (here) and every interim
#: look of the sequential design (results/sequential.py), whose noisy looks claim nothing.
CLAIM_ALPHA_SHARE = 0.5


@dataclass(frozen=True)
class Reach:
    """How far the rounds' noise carries an unchanged pair: its standard error of the log
    ratio (``se``) and the chance (``chance``) its ratio lands beyond the tolerance on the
    side of the change."""

    se: float
    chance: float

    def noisy(self, alpha: float, share: float = CLAIM_ALPHA_SHARE) -> bool:
        """The band no longer keeps an unchanged pair beyond it to ``share`` of alpha (the
        claim level; the sequential design's interim looks ask about alpha itself)."""
        return self.chance > alpha * share

    def describe(self, tolerance: float) -> str:
        """``±4.7 % standard error, so an unchanged pair lands beyond ±3 % about 1 time in
        4``."""
        times = 1 / self.chance if self.chance > 0 else math.inf
        return (f"±{100 * self.se:.1f} % standard error, so an unchanged pair lands beyond "
                f"±{100 * tolerance:g} % about 1 time in {times:.0f}")


def reach(ratio: float, log_var: float | None, tolerance: float) -> Reach | None:
    """The reach of the rounds behind ``ratio`` (module docstring); None without a variance."""
    if log_var is None or not math.isfinite(log_var) or log_var <= 0:
        return None
    se = math.sqrt(log_var)
    bound = -math.log1p(-tolerance) if ratio < 1 else math.log1p(tolerance)
    return Reach(se, statistics.NormalDist().cdf(-bound / se))


def paired_verdict(
    ratio: float, p: float | None, log_var: float | None, *, tolerance: float, alpha: float
) -> Verdict:
    """A paired verdict (a benchmark's, or the score's on its combined evidence): the fixed
    rule's, unless the rounds are noisy and the evidence is above the claim level (module
    docstring)."""
    judged = verdict(ratio, p, tolerance=tolerance, alpha=alpha)
    if judged.word not in (REGRESSED, IMPROVED) or p is None:
        return judged
    level = alpha * CLAIM_ALPHA_SHARE
    found = reach(ratio, log_var, tolerance)
    if found is None or not found.noisy(alpha) or p <= level:
        return judged
    why = (f"{judged.reason}, but the rounds are noisy ({found.describe(tolerance)}): a "
           f"change needs p <= {level:g} at this noise")
    if judged.word == IMPROVED:
        return Verdict(UNCHANGED, f"{why}; no improvement claimed")
    return Verdict(INCONCLUSIVE, why)


def paired_score_verdict(
    rate_ratio: float | None, p: float | None, log_var: float | None, weighted: Collection[str],
    *, tolerance: float, alpha: float,
) -> Verdict:
    """The score's paired verdict: :func:`.stats.score_verdict`, and a change its combined
    evidence alone claims judged by :func:`paired_verdict` on that evidence (a weighted
    benchmark that regressed at its own level stays evidence enough)."""
    score = score_verdict(rate_ratio, p, weighted, tolerance=tolerance, alpha=alpha)
    if rate_ratio is None or score.word not in (REGRESSED, IMPROVED) or score.word in weighted:
        return score
    noisy = paired_verdict(rate_ratio, p, log_var, tolerance=tolerance, alpha=alpha)
    return score if noisy.word == score.word else Verdict(noisy.word, f"rate {noisy.reason}")
