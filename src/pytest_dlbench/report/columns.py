"""The terminal table's columns and order: ``--bench-columns`` and ``--bench-sort`` (``--columns``
and ``--sort`` in ``dlbench report``), parsed here so that a wrong name is a usage error before
anything runs (options.py registers them; report/terminal.py lays the table out).

The default table is compact, to fit 80 columns: bench, perf, units, std%, perf_adj, weight, and
ratio and verdict when comparing. ``-v`` adds n, fail, total (and adj ratio, p). The
:data:`DETAILS` columns go to a second table, shown only when a benchmark has them.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.results.model import FIGURES

__all__ = [
    "ALL_COLUMNS",
    "COMPARE",
    "DETAILS",
    "MAIN",
    "SORT_KEYS",
    "VERBOSE",
    "VERBOSE_COMPARE",
    "parse_columns",
    "parse_sort",
    "sort_items",
]


def _declared(table: str) -> tuple[str, ...]:
    """The columns of the declared figures of ``table`` (results/model/figures.py), in order."""
    return tuple(f.column for f in FIGURES if f.table == table)


MAIN = _declared("main")
COMPARE = ("ratio", "verdict")
VERBOSE = _declared("verbose")
VERBOSE_COMPARE = ("adj ratio", "p")
#: The compiled benchmarks' columns (report/terminal_tables.compile_columns): the compiled
#: table's figures, shown beside the precision they were compiled at.
COMPILE = ("compile", "graphs", "breaks", "speedup")
#: The second table: what only some benchmarks have.
_DETAILS = _declared("details")
_AFTER = _DETAILS.index("precision") + 1
DETAILS = (*_DETAILS[:_AFTER], *COMPILE, *_DETAILS[_AFTER:])
ALL_COLUMNS = (*MAIN, *VERBOSE, *COMPARE, *VERBOSE_COMPARE, *DETAILS)

#: Other names a column is known by (pytest-benchmark's among them: ops is its rate).
_ALIASES = {
    "std": ("std%",), "stddev": ("std%",), "std_pct": ("std%",), "ops": ("perf",),
    "rounds": ("n",), "adj_ratio": ("adj ratio",), "tflops": ("TFLOP/s",),
    "time": ("total_time_secs",), "peak": ("nvml peak", "peak rss"),
    "memory": ("nvml peak", "peak rss", "torch alloc", "torch reserved"),
    "peak_mem": ("nvml peak", "peak rss"), "torch_mem": ("torch alloc", "torch reserved"),
    # Its name until it was NVML's figure alone (it was torch's reservation when that was more).
    "peak gpu mem": ("nvml peak",),
}


def _key(name: str) -> str:
    return re.sub(r"[\s_-]+", "_", name.strip().lower())


_NAMES: dict[str, tuple[str, ...]] = {
    **{_key(c): (c,) for c in ALL_COLUMNS},
    **{_key(a): cs for a, cs in _ALIASES.items()},
}


def parse_columns(text: str) -> tuple[str, ...]:
    """``"perf,std,mfu"`` -> the columns' headers, in that order (an argparse ``type``): an
    unknown name is an error naming the known ones."""
    out: list[str] = []
    for part in (p for p in text.split(",") if p.strip()):
        found = _NAMES.get(_key(part))
        if found is None:
            raise argparse.ArgumentTypeError(
                f"unknown column {quoted(part.strip())}; the columns: {', '.join(ALL_COLUMNS)}")
        out += [c for c in found if c not in out]
    if not out:
        raise argparse.ArgumentTypeError("no column named")
    return tuple(out)


#: ``--bench-sort``: the suite's order (default), names A to Z, or a figure. Figures sort
#: largest first, but ``ratio`` smallest first (regressions at the top); missing values last.
SORT_KEYS = ("suite", "name", "perf", "perf_adj", "std%", "weight", "fail", "ratio")
_SORT_ALIASES = {"fullname": "name", "std": "std%", "stddev": "std%", "ops": "perf",
                 "mean": "perf"}


def parse_sort(text: str) -> str:
    """A :data:`SORT_KEYS` entry (pytest-benchmark's ``name``, ``fullname``, ``stddev`` and
    ``mean`` too); an argparse ``type``."""
    key = _key(text)
    key = _SORT_ALIASES.get(key, key)
    if key not in SORT_KEYS:
        raise argparse.ArgumentTypeError(
            f"cannot sort by {quoted(text)}; sort by one of: {', '.join(SORT_KEYS)}")
    return key


T = TypeVar("T")


def sort_items(items: Iterable[T], sort: str | None,
               value: Callable[[T, str], float | str | None]) -> list[T]:
    """``items`` in ``sort``'s order (:data:`SORT_KEYS`); ``value(item, key)`` is its figure."""
    listed = list(items)
    if not sort or sort == "suite":
        return listed
    if sort == "name":
        return sorted(listed, key=lambda item: str(value(item, "name")))
    sign = 1.0 if sort == "ratio" else -1.0

    def key(item: T) -> tuple[int, float]:
        figure = value(item, sort)
        if not isinstance(figure, (int, float)) or figure != figure:  # None, text or NaN
            return (1, 0.0)
        return (0, sign * float(figure))

    return sorted(listed, key=key)


def select(row: dict[str, str], columns: Sequence[str], *,
           missing: str | None = None) -> dict[str, str]:
    """``row``'s bench and ``columns``, in that order: those it has, or every one with
    ``missing`` for those it has not (columns asked for by name are shown)."""
    if missing is not None:
        return {"bench": row["bench"], **{c: row.get(c, missing) for c in columns}}
    return {"bench": row["bench"], **{c: row[c] for c in columns if c in row}}
