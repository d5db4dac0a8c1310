"""Numbers as the reports write them: one set of formatters for the terminal, the HTML page and
the dashboard export.

Each returns ``missing`` for an unknown value (None, NaN, infinity): ``"-"`` by default, the
terminal's and the export's; the HTML page passes :data:`DASH`. The exception is
:func:`number`, which spells ``nan`` and ``inf`` so that a broken measurement shows in the
table. No terminal probing, no clock, no locale: the output depends on the value only.
"""

from __future__ import annotations

import math

__all__ = [
    "DASH",
    "MISSING",
    "byte_size",
    "fixed",
    "gap",
    "number",
    "p_value",
    "percent",
    "significant",
]

#: An unknown value in the terminal and the export.
MISSING = "-"
#: An unknown value in the HTML page.
DASH = "—"


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def number(value: float | None) -> str:
    """About three significant digits, never scientific notation for everyday magnitudes."""
    if value is None:
        return MISSING
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude == 0:
        return "0"
    if magnitude >= 1e-4:
        return f"{value:.3g}"
    return f"{value:.2e}"


def significant(
    value: float | None, digits: int = 4, *, zeros: bool = True, missing: str = DASH
) -> str:
    """``digits`` significant digits, thousands separators for big numbers (a table cell).

    ``zeros`` keeps trailing zeros ("157.0", not "157") so a column reads at one precision.
    """
    if value is None or not math.isfinite(value):
        return missing
    if value == 0:
        return "0"
    # Compared after rounding, so 999.96 becomes "1,000" rather than "1000.".
    if abs(float(f"{value:.{digits}g}")) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:#.{digits}g}" if zeros else f"{value:.{digits}g}"


def percent(
    value: float | None, digits: int = 1, *, space: bool = False, missing: str = MISSING
) -> str:
    """A fraction as a percentage: ``0.123`` -> ``"12.3%"`` (``"12.3 %"`` with ``space``)."""
    if not _known(value):
        return missing
    return f"{100 * value:.{digits}f}{' ' if space else ''}%"  # type: ignore[operator]


def fixed(value: float | None, digits: int, *, missing: str = MISSING) -> str:
    """``digits`` decimals: ratios (3, since at a 3 % tolerance 0.97 could be either side of the
    threshold), speed-ups and scores (2)."""
    return f"{value:.{digits}f}" if _known(value) else missing


def p_value(value: float | None, *, missing: str = MISSING) -> str:
    """Three decimals, and ``<0.001`` below them."""
    if not _known(value):
        return missing
    return "<0.001" if value < 0.001 else f"{value:.3f}"  # type: ignore[operator]


def byte_size(value: float | None, *, missing: str = MISSING) -> str:
    """Bytes in GiB, MiB or KiB, one unit a value."""
    if not _known(value):
        return missing
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if value >= size:  # type: ignore[operator]
            return f"{value / size:.1f} {unit}"  # type: ignore[operator]
    return f"{value / 2**10:.0f} KiB"  # type: ignore[operator]


def gap(value: float, best: float) -> str:
    """``value``'s gap to ``best`` as "-8.6 %"; blank for the best itself."""
    if value >= best or not best:
        return ""
    change = (value / best - 1.0) * 100
    return f"{change:.1f} %" if change <= -0.05 else "-<0.1 %"  # never "-0.0 %"
