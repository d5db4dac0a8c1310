"""One step of ``dlbench bisect``: the paired verdict of a commit against GOOD, read back from its
``--bench-against`` run directory, as CHANGED, SAME or UNSURE (the core's ``judge_probe``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from os import PathLike

from pytest_dlbench.results.verdict import (
    ALPHA,
    CHANGED,
    SAME,
    TOLERANCE,
    UNSURE,
    Evidence,
    Rule,
    judge_probe,
)

__all__ = ["CHANGED", "SAME", "UNSURE", "Judgement", "judge_paired_run"]


@dataclass(frozen=True)
class Judgement:
    word: str  # CHANGED, SAME or UNSURE
    ratio: float | None  # candidate rate / GOOD's (above 1 is faster)
    ci: tuple[float, float] | None
    p: float | None
    pairs: int
    verdict: str  # the paired test's word (regressed, improved, unchanged, failed...)

    def closer_to(self, changed_ratio: float) -> bool:
        """Whether the ratio is nearer (in log) to ``changed_ratio`` than to 1: how an
        unsure step is decided when no more rounds are allowed."""
        if self.ratio is None or self.ratio <= 0 or changed_ratio <= 0:
            return False
        return abs(math.log(self.ratio) - math.log(changed_ratio)) < abs(math.log(self.ratio))


def judge_paired_run(run_dir: str | PathLike[str], bench: str, *,
                     tolerance: float = TOLERANCE, alpha: float = ALPHA) -> Judgement | None:
    """The judgement of ``bench`` in a ``--bench-against`` run directory; None when the run
    has no verdict for it (not paired, or the benchmark did not run on both sides)."""
    from pytest_dlbench.results.paired import summarize_paired_dir

    paired = summarize_paired_dir(run_dir, tolerance=tolerance, alpha=alpha)
    if paired is None:
        return None
    row = next((b for b in paired[2].benchmarks if b.name == bench), None)
    if row is None or row.ratio is None:
        return None
    ci = (float(row.ci[0]), float(row.ci[1])) if row.ci is not None else None
    found = Evidence(row.ratio, row.p_value, ci, paired=True)
    word = judge_probe(row.verdict, found, Rule(tolerance, alpha))
    return Judgement(word=word, ratio=row.ratio, ci=ci,
                     p=row.p_value, pairs=row.samples[0] if row.samples else 0,
                     verdict=row.verdict)
