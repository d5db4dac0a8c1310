"""The profile reports' terminal tables (their numbers: :mod:`pytest_dlbench.core.numbers`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["p95", "table"]


def p95(values: Sequence[float]) -> float:
    """95th percentile, linear between the closest ranks (the value itself for one)."""
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """First column left-aligned, the others right-aligned, two spaces apart."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in [list(header), *rows]:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                         strict=True)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)
