"""Whether a benchmark's figure can be taken at its word: a std% flagged unreliable
(results/figures/scoring.py) or runs taken on a busy machine (results/figures/busy.py) put it in
doubt. The one rule the HTML banner (a run that "ran, figures in doubt") and the compiled speed-ups
(results/figures/compiled.py) read; the gate's own doubts are results/judge/noise.py's and
results/judge/paired.py's. Pure functions over summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.results.figures.busy import busy_share

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = ["figure_doubt", "figures_in_doubt"]


def figure_doubt(bench: BenchSummary) -> str | None:
    """Why ``bench``'s figure is in doubt, one phrase (``unreliable (std% 62%)``, ``busy
    machine (2 of 3 runs)``, or both joined by ``; ``; the causes are the report's own
    ``unreliable:`` and ``busy:`` lines); None when neither."""
    why = []
    if bench.unreliable:
        why.append(f"unreliable ({bench.unreliable.split(': ', 1)[0]})")
    busy, ok, _ = busy_share(bench)
    if busy:
        why.append(f"busy machine ({busy} of {ok} run{'s' if ok != 1 else ''})")
    return "; ".join(why) or None


def figures_in_doubt(summary: SuiteSummary) -> tuple[str, ...]:
    """The weighted, enabled benchmarks whose figure is in doubt (:func:`figure_doubt`): those
    the score is made of, in the summary's order."""
    return tuple(b.name for b in summary.benchmarks
                 if b.enabled and b.weight > 0 and figure_doubt(b) is not None)
