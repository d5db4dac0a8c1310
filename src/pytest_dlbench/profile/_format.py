"""Numbers and tables for the reports' terminal text (no dependency on the report package)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pytest_dlbench.report.format import number

__all__ = ["fmt_bytes", "fmt_count", "fmt_num", "fmt_pct", "fmt_seconds", "fmt_si", "p95", "table"]


def fmt_num(value: float | None) -> str:
    """About three significant digits: the report's number format."""
    return number(value)


def fmt_count(value: float | None) -> str:
    return "-" if value is None else f"{int(value):,}"


def fmt_si(value: float | None) -> str:
    """``75.1 M``, ``1.82 G``: decimal prefixes for large counts."""
    if value is None:
        return "-"
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{fmt_num(value / size)} {prefix}"
    return fmt_num(value)


def fmt_seconds(value: float | None) -> str:
    """``83.2 ms``, ``1.25 s``, ``420 µs``."""
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 1:
        return f"{fmt_num(value)} s"
    if magnitude >= 1e-3:
        return f"{fmt_num(value * 1e3)} ms"
    if magnitude == 0:
        return "0 s"
    return f"{fmt_num(value * 1e6)} µs"


def fmt_bytes(value: float | None) -> str:
    """Binary units, like the run report: ``46.8 MiB``; negative for a release of memory."""
    if value is None:
        return "-"
    magnitude = abs(value)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if magnitude >= size:
            return f"{fmt_num(value / size)} {unit}"
    return f"{int(value)} B"


def fmt_pct(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    return f"{fraction * 100:.1f}%" if abs(fraction) < 0.1 else f"{fraction * 100:.0f}%"


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
