"""Numbers as the reports write them: one set of formatters for the terminal, the HTML page,
the dashboard export and the profile reports (``report/`` and ``profile/`` both use them, so
they sit below both).

Each returns ``missing`` for an unknown value (None, NaN, infinity): ``"-"`` by default, the
terminal's and the export's; the HTML page passes :data:`DASH`. The exception is
:func:`number`, which spells ``nan`` and ``inf`` so that a broken measurement shows in the
table. No terminal probing, no clock, no locale: the output depends on the value only.

:func:`weighted_geomean` is the one mean of weighted figures: a score (results/figures/scoring.py)
and a comparison's ratios (results/judge/) are both made of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, TypeGuard

__all__ = [
    "DASH",
    "DEFAULT_UNITS",
    "FIGURE_UNITS",
    "MAX_FIGURE",
    "MISSING",
    "STORED_UNITS",
    "as_number",
    "in_range",
    "is_finite",
    "is_integer",
    "is_number",
    "weighted_geomean",
    "as_named",
    "byte_size",
    "column",
    "count",
    "duration",
    "fixed",
    "gap",
    "number",
    "p_value",
    "percent",
    "printable",
    "printable_lines",
    "rough_percent",
    "si",
    "significant",
    "time_figure",
]

#: The units of a rate when a benchmark names none.
DEFAULT_UNITS = "items/s"
#: An unknown value in the terminal and the export.
MISSING = "-"
#: An unknown value in the HTML page.
DASH = "—"


# -- one unit per figure ------------------------------------------------------------------------
# A figure that every output names (a frame's column, a logger's metric, a CSV's header) is in
# the unit its name says, the same in each: ``..._pct`` and ``..._percent`` in percent (3.2 is
# 3.2 %, as the terminal's ``std%`` shows "3.2%"), a rate of failures a fraction.

#: The unit of each such figure in every output that names it: ``percent`` (0-100) or
#: ``fraction`` (0-1). The frame (results/history/frames.py) and the loggers (loggers/source.py)
#: read it.
FIGURE_UNITS: dict[str, str] = {
    "std_pct": "percent",
    "done_percent": "percent",
    "failure_rate": "fraction",
}
#: How a summary holds it (``BenchSummary``, and the saved JSON: ``std_pct`` has been a fraction
#: there since its first version, kept so that every saved file reads as it always did).
STORED_UNITS: dict[str, str] = {
    "std_pct": "fraction",
    "done_percent": "percent",
    "failure_rate": "fraction",
}
_SCALE = {("fraction", "percent"): 100.0, ("percent", "fraction"): 0.01}


def as_named(name: str, value: Any) -> Any:
    """A summary's ``value`` of the figure ``name`` in the unit :data:`FIGURE_UNITS` gives it
    (the saved ``std_pct`` 0.541 -> 54.1); anything else, and a value that is not a number,
    as it is."""
    if not is_number(value) or name not in FIGURE_UNITS:
        return value
    scale = _SCALE.get((STORED_UNITS.get(name, FIGURE_UNITS[name]), FIGURE_UNITS[name]), 1.0)
    return value * scale


# -- what a JSON number is ----------------------------------------------------------------------
# Python counts True as the int 1; JSON and YAML do not: ``true`` is never a number here.


def is_number(value: Any) -> TypeGuard[int | float]:
    """An int or a float (NaN and infinities included), never a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integer(value: Any) -> TypeGuard[int]:
    """An int, never a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite(value: Any) -> TypeGuard[int | float]:
    """A finite int or float, never a bool (a figure a formula can take)."""
    return is_number(value) and math.isfinite(value)


#: The largest magnitude of a figure the statistics take: they sum rates and square them (a
#: variance), so a finite rate of 1e308 (``bench.log_rate(1e308)``, a step timed at 1e-306 s,
#: a hand-made baseline) would overflow; no measurement comes near.
MAX_FIGURE = 1e100


def in_range(value: Any) -> TypeGuard[int | float]:
    """A finite number no larger than :data:`MAX_FIGURE` in magnitude: a figure every formula
    takes."""
    return is_finite(value) and abs(value) <= MAX_FIGURE


def as_number(value: Any) -> float | None:
    """A JSON number as a float (NaN and infinities kept); None for anything else."""
    return float(value) if is_number(value) else None


def weighted_geomean(pairs: Iterable[tuple[float, float]]) -> float | None:
    """``exp(Σ w·ln(x) / Σ w)`` over (value, weight) pairs with w > 0 and x > 0."""
    used = [(x, w) for x, w in pairs if w > 0 and x > 0]
    total = sum(w for _, w in used)
    if not used or total <= 0:
        return None
    return math.exp(sum(w * math.log(x) for x, w in used) / total)


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


def column(values: list[float | None], *, missing: str = MISSING) -> list[str]:
    """A column of figures in one notation: plain decimals at about three significant digits,
    :func:`number`'s, and below 1e-4 the same digits written out (``0.0000218`` above
    ``0.000816``, where :func:`number` alone wrote ``2.18e-05`` above ``0.000816``); in
    scientific notation every one of them, only when one is below 1e-6 (its decimals would
    grow too long to read)."""
    tiny = any(v is not None and math.isfinite(v) and 0 < abs(v) < 1e-6 for v in values)

    def cell(v: float | None) -> str:
        if v is None:
            return missing
        if not math.isfinite(v):
            return number(v)
        if tiny:
            return f"{v:.2e}"
        if v != 0 and abs(v) < 1e-4:
            return f"{v:.{2 - math.floor(math.log10(abs(v)))}f}"
        return number(v)

    return [cell(v) for v in values]


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
    if value is None or not math.isfinite(value):
        return missing
    return f"{100 * value:.{digits}f}{' ' if space else ''}%"


def fixed(value: float | None, digits: int, *, missing: str = MISSING) -> str:
    """``digits`` decimals: ratios (3, since at a 3 % tolerance 0.97 could be either side of the
    threshold), speed-ups and scores (2)."""
    return missing if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def p_value(value: float | None, *, missing: str = MISSING) -> str:
    """Three decimals, and ``<0.001`` below them."""
    if value is None or not math.isfinite(value):
        return missing
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def byte_size(value: float | None, *, missing: str = MISSING) -> str:
    """Bytes in GiB or MiB with one decimal (``46.8 MiB``), whole KiB below (``375 KiB``), whole
    bytes under one KiB (``0 B``: a profiled operator that allocates nothing); signed when
    negative (memory a profiled operator released: ``-8.8 MiB``)."""
    if value is None or not math.isfinite(value):
        return missing
    magnitude = abs(value)
    sign = "-" if value < 0 else ""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if magnitude >= size:
            scaled = magnitude / size
            return f"{sign}{scaled:.1f} {unit}" if unit != "KiB" else f"{sign}{round(scaled)} KiB"
    whole = round(magnitude)
    return f"{sign if whole else ''}{whole} B"


def count(value: float | None, *, missing: str = MISSING) -> str:
    """A whole number with thousands separators: ``1,720``."""
    return missing if value is None or not math.isfinite(value) else f"{int(value):,}"


def si(value: float | None, *, missing: str = MISSING) -> str:
    """Decimal prefixes for large counts: ``75.1 M``, ``1.82 G`` (:func:`number` below 1000)."""
    if value is None:
        return missing
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{number(value / size)} {prefix}"
    return number(value)


def time_figure(value: float | None, *, missing: str = MISSING) -> str:
    """Seconds as a table's time column shows them (``total_time_secs``): four significant
    digits, ``0.0112``, ``80.11``, ``1,234``; decimals printed a 0.0112 s run as ``0.01``."""
    return significant(value, 4, zeros=False, missing=missing)


def duration(value: float | None, *, missing: str = MISSING) -> str:
    """Seconds in the unit that reads best: ``1.25 s``, ``83.2 ms``, ``420 µs``."""
    if value is None:
        return missing
    magnitude = abs(value)
    if magnitude >= 1:
        return f"{number(value)} s"
    if magnitude >= 1e-3:
        return f"{number(value * 1e3)} ms"
    if magnitude == 0:
        return "0 s"
    return f"{number(value * 1e6)} µs"


def rough_percent(fraction: float | None, *, missing: str = MISSING) -> str:
    """A share of a whole: ``42%``, one decimal below 10 % (``3.5%``)."""
    if fraction is None:
        return missing
    return f"{fraction * 100:.1f}%" if abs(fraction) < 0.1 else f"{fraction * 100:.0f}%"


def gap(value: float, best: float) -> str:
    """``value``'s gap to ``best`` as "-8.6 %"; blank for the best itself."""
    if value >= best or not best:
        return ""
    change = (value / best - 1.0) * 100
    return f"{change:.1f} %" if change <= -0.05 else "-<0.1 %"  # never "-0.0 %"


# C0 and C1 controls, DEL, and the bidirectional overrides and isolates (text that reorders
# what follows it on screen): what a terminal would obey rather than show.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` as one line a terminal shows rather than obeys: every control character (an
    escape sequence's ESC, a newline, a tab, a bidi override) written as ``\\x1b``/``\\u202e``.
    For text that came from a file or a benchmark (names, units, reasons, notes)."""
    return _CONTROL.sub(_escape, str(text))


def printable_lines(text: str) -> str:
    """:func:`printable` for each line of ``text``: its newlines kept, nothing else obeyed (the
    last step of every terminal output: pytest's table, ``dlbench report/compare/profile``)."""
    return "\n".join(printable(line) for line in text.split("\n"))
