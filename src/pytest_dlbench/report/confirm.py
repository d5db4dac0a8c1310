"""How a confirmation (``--bench-confirm``, results/judge/confirm.py) is shown: per confirmed
benchmark, its first pass and its confirmation runs, one line each, and the verdict kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_dlbench.core.numbers import printable

if TYPE_CHECKING:
    from pytest_dlbench.results.judge import BenchConfirmation, Confirmation

__all__ = ["confirmation_lines", "render_confirmation"]


def _ratio(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def _ratios(values: Sequence[float]) -> str:
    return ", ".join(_ratio(v) for v in values)


def _runs(bench: BenchConfirmation) -> str:
    """``2 runs, ratios 0.801, 0.799`` (and the failed runs, which are no evidence)."""
    ok = len(bench.ratios)
    text = f"{ok} run{'s' if ok != 1 else ''}"
    if ok:
        text += f", ratio{'s' if ok != 1 else ''} {_ratios(bench.ratios)}"
    if bench.failed:
        text += f" ({bench.failed} failed)"
    return text


def confirmation_lines(confirmation: Confirmation) -> list[tuple[str, str]]:
    """(first pass, confirmation) of each confirmed benchmark, as the HTML report lists them."""
    lines = []
    for bench in confirmation.benchmarks:
        name = printable(bench.name)
        first = f"{name}: first pass {bench.first}, ratio {_ratio(bench.first_ratio)}"
        if bench.suspected != bench.first:  # an inconclusive slowdown
            first += f" (slower beyond the tolerance: {bench.suspected}? run again)"
        if bench.ratios:
            after = (f"{name}: confirmation {_runs(bench)}; with the first pass "
                     f"{bench.combined}, ratio {_ratio(bench.combined_ratio)}: "
                     f"{bench.verdict} ({bench.outcome})")
        else:
            after = (f"{name}: confirmation {_runs(bench)}: {bench.verdict} "
                     f"({bench.outcome}: no confirmation run succeeded)")
        lines.append((first, after))
    return lines


def render_confirmation(confirmation: Confirmation | None) -> str:
    """The terminal's lines under the table ("" when nothing was confirmed)."""
    if confirmation is None or not confirmation.benchmarks:
        return ""
    head = (f"confirmation (--bench-confirm={confirmation.limit}: the changes the first pass "
            "suspected, run again; docs/reports.md)")
    body = [f"  {line}" for pair in confirmation_lines(confirmation) for line in pair]
    return "\n".join([head, *body])
