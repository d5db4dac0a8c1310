"""The terminal report's tables beside the benchmark table: compiled benchmarks, scaling, the
sweep (MMoCLIP's result table), per device and the device matrix (milarun's --compare-gpus),
and the aligned text table they all use (report/terminal.py assembles them).

Each one formats what results/ computed (results/compiled, scaling, sweep; a benchmark's
per-device std% is its summary's): nothing here is a formula of its own but the device matrix's
ratios to the median device.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from pytest_dlbench.core.numbers import MISSING, fixed, number, percent, printable, time_figure
from pytest_dlbench.results.figures import (
    CompileRow,
    compile_rows,
    param_names,
    scaling_rows,
    sweep_rows,
)
from pytest_dlbench.results.model import BenchSummary, SuiteSummary

__all__ = [
    "SLOW_DEVICE",
    "SPEEDUP_DOUBT",
    "SWEEP_NOTE",
    "compile_columns",
    "compile_lines",
    "device_rows",
    "display_width",
    "fitted_name_width",
    "gpu_matrix",
    "render_sweep",
    "scaling_lines",
    "shorten",
    "sweep_lines",
    "table",
]

#: A device this much slower than the median device is flagged (milarun, --compare-gpus).
SLOW_DEVICE = 0.05


#: The narrowest a shortened name column gets (then the table is split into blocks instead).
MIN_NAME = 12
#: Between two columns: one space makes adjacent numbers hard to read.
GAP = "  "


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: two for a CJK character or an emoji, none for a
    combining mark (wcwidth), so that a table stays aligned."""
    from wcwidth import wcswidth, wcwidth

    width = wcswidth(text)
    if width >= 0:
        return int(width)
    return sum(max(int(wcwidth(c)), 0) for c in text)  # an unassigned character: as if 0


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, cut in the middle: ``resnet50-…-bs256`` (the start
    and the end of a benchmark name are what tell two apart)."""
    if display_width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    keep = width - 1
    tail = ""
    for char in reversed(text):
        if display_width(char + tail) > keep // 2:
            break
        tail = char + tail
    head = ""  # what the tail left: a wide character may not fit its half
    for char in text:
        if display_width(head + char) > keep - display_width(tail):
            break
        head += char
    return head + "…" + tail


def _pad(text: str, size: int, left: bool) -> str:
    fill = " " * max(size - display_width(text), 0)
    return text + fill if left else fill + text


def table(rows: list[dict[str, str]], width: int, left: Sequence[str] = (),
          shrink: str | None = "bench", name_width: int | None = None) -> str:
    """Right-aligned columns, except ``left`` ones; never wrapped. Cells are shown escaped
    (:func:`~pytest_dlbench.core.numbers.printable`: a name or a unit from a file cannot move the
    cursor). To fit ``width``, the ``shrink`` column's long values are shortened in the middle
    (down to :data:`MIN_NAME` columns, or to ``name_width``: two tables of one run shorten a
    name alike); a table still too wide is cut into blocks of columns, the first column
    repeated in each."""
    if not rows:
        return ""
    columns, cells, sizes = _layout(rows, width, shrink, name_width)
    lines: list[str] = []
    for block in _blocks(sizes, width):
        if lines:
            lines.append("")
        for values in ([*columns], *cells):
            line = GAP.join(_pad(values[i], sizes[i], columns[i] in left) for i in block)
            lines.append(line.rstrip())
    return "\n".join(lines)


def fitted_name_width(rows: list[dict[str, str]], width: int, shrink: str = "bench") -> int:
    """The width ``table(rows, width)`` gives its ``shrink`` column."""
    columns, _, sizes = _layout(rows, width, shrink, None)
    return sizes[columns.index(shrink)] if shrink in columns else width


def _layout(rows: list[dict[str, str]], width: int, shrink: str | None,
            name_width: int | None) -> tuple[list[str], list[list[str]], list[int]]:
    """The columns, the cells (escaped, the names shortened) and each column's width."""
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    cells = [[printable(row.get(c, MISSING)) for c in columns] for row in rows]
    sizes = [max([display_width(c), *(display_width(r[i]) for r in cells)])
             for i, c in enumerate(columns)]
    if shrink in columns:
        i = columns.index(shrink)
        total = sum(sizes) + len(GAP) * (len(columns) - 1)
        size = max(MIN_NAME, display_width(shrink), sizes[i] - max(total - width, 0))
        if total - sizes[i] + size > width:  # cut into blocks anyway: names a third of it
            size = max(size, width // 3)
        if name_width is not None:
            size = min(size, max(name_width, display_width(shrink)))
        names = [r[i] for r in cells]
        # Never so short that two names read alike.
        while size < sizes[i] and len({shorten(n, size) for n in names}) < len(set(names)):
            size += 1
        if size < sizes[i]:
            sizes[i] = size
            for r in cells:
                r[i] = shorten(r[i], size)
    return columns, cells, sizes


def _blocks(sizes: list[int], width: int) -> list[list[int]]:
    """The columns of each block: all of them when they fit ``width``, else as many as fit
    after the first column (at least one each)."""
    if sum(sizes) + len(GAP) * (len(sizes) - 1) <= width or len(sizes) <= 2:
        return [list(range(len(sizes)))]
    blocks: list[list[int]] = []
    block = [0]
    used = sizes[0]
    for i in range(1, len(sizes)):
        if len(block) > 1 and used + len(GAP) + sizes[i] > width:
            blocks.append(block)
            block, used = [0], sizes[0]
        block.append(i)
        used += len(GAP) + sizes[i]
    blocks.append(block)
    return blocks


# -- compiled benchmarks --------------------------------------------------------------------------
def compile_columns(b: BenchSummary, row: CompileRow | None) -> dict[str, str]:
    """Compile time (the warm-up steps until nothing new compiled: tracing, compiling or
    loading from the caches: :func:`compile_lines` says which), graphs, graph breaks and the
    speed-up over the eager sibling (marked ``?`` when a side's figure is in doubt:
    :func:`compile_lines` says why); ``-`` for an eager benchmark."""
    if row is None:
        return {"compile": MISSING, "graphs": MISSING, "breaks": MISSING, "speedup": MISSING}
    seconds = MISSING if row.seconds is None else f"{fixed(row.seconds, 1)} s"
    return {
        "compile": seconds,
        "graphs": MISSING if row.graphs is None else str(row.graphs),
        "breaks": MISSING if row.graph_breaks is None else str(row.graph_breaks),
        "speedup": MISSING if row.speedup is None else
        f"{fixed(row.speedup, 2)}x{SPEEDUP_DOUBT if row.doubt else ''}",
    }


#: The mark of a speed-up in doubt (results/figures/compiled.speedup_doubt), its reason under the
#: table.
SPEEDUP_DOUBT = "?"


def compile_lines(summary: SuiteSummary) -> list[str]:
    """Compiled benchmarks whose graphs all came from the compile caches (what their compile
    time was), and those that compiled again inside their timed loop (a changed shape or
    guard), and the speed-ups in doubt (a side unreliable or busy: results/figures/compiled.py)."""
    lines = []
    for row in compile_rows(summary):
        if row.doubt and row.speedup is not None:
            lines.append(printable(f"speedup in doubt: {row.bench} {fixed(row.speedup, 2)}x "
                                   f"({row.doubt})"))
        if row.cached and row.seconds is not None:
            # Said in words: "29.5 s cached" in the cell read as a time the cache had saved.
            lines.append(f"compile: {row.bench} {fixed(row.seconds, 1)} s with every graph a "
                         "cache hit: tracing and loading them, not compiling")
        if row.loop_graphs:
            lines.append(f"warning: {row.bench} compiled {row.loop_graphs} graph(s) inside its "
                         "timed loop: the recompiles are in its observations")
    return lines


# -- devices (-v) --------------------------------------------------------------------------------
def device_rows(summary: SuiteSummary) -> list[dict[str, str]]:
    """Each benchmark's runs per device: count, failures, mean rate, std% (the summary's, by
    the benchmark's rule) and the ratio to the median device."""
    rows = []
    for b in summary.benchmarks:
        devices = sorted({r.device for r in b.runs})
        median = statistics.median(b.per_device.values()) if b.per_device else None
        for d in devices:
            runs = [r for r in b.runs if r.device == d]
            rate = b.per_device.get(d)
            rows.append({
                "bench": b.name,
                "device": f"D{d}",
                "n": str(len(runs)),
                "fail": str(sum(not r.ok for r in runs)),
                "rate": number(rate),
                "std%": percent(b.device_std_pct(d)),
                "vs median": fixed(rate / median, 2) if rate is not None and median else MISSING,
            })
    return rows


def _slow_mark(ratio: float) -> str:
    """A device's ratio to the median device, starred when it is slow."""
    return fixed(ratio, 2) + ("*" if ratio <= 1 - SLOW_DEVICE else " ")


def gpu_matrix(summary: SuiteSummary, width: int) -> list[str]:
    """Seed 001's --compare-gpus: each device's perf over the median device's, per benchmark."""
    benches: list[BenchSummary] = [b for b in summary.benchmarks if len(b.per_device) >= 2]
    title = (f"devices vs the median device (perf / median; * = {100 * SLOW_DEVICE:g}% or more "
             "slower)")
    if not benches:
        return [title, "  one device per benchmark: nothing to compare"]
    devices = sorted({d for b in benches for d in b.per_device})
    ratios: dict[int, list[float]] = {d: [] for d in devices}
    rows = []
    for b in benches:
        median = statistics.median(b.per_device.values())
        row = {"bench": b.name}
        for d in devices:
            rate = b.per_device.get(d)
            if rate is None or median <= 0:
                row[f"D{d}"] = "-"
                continue
            ratio = rate / median
            ratios[d].append(ratio)
            row[f"D{d}"] = _slow_mark(ratio)
        rows.append(row)
    # The geometric mean over benchmarks: one figure per device, as the score is per suite.
    overall = {"bench": "all (geomean)"}
    for d in devices:
        values = [r for r in ratios[d] if r > 0]
        g = math.exp(statistics.fmean(math.log(v) for v in values)) if values else None
        overall[f"D{d}"] = MISSING if g is None else _slow_mark(g)
    rows.append(overall)
    slow = [f"D{d}" for d in devices if overall[f"D{d}"].endswith("*")]
    lines = [title, table(rows, width, left=["bench"])]
    if slow:
        lines.append(f"slow devices: {', '.join(slow)}")
    return lines


# -- scaling and the sweep -----------------------------------------------------------------------
def scaling_lines(summary: SuiteSummary, width: int) -> list[str]:
    """``name.scaling.k`` benchmarks: speed-up and efficiency against one slot (milarun)."""
    rows = [
        {
            "scaling": r.base,
            "slots": str(r.slots),
            "perf": number(r.perf),
            "speedup": fixed(r.speedup, 2),
            "efficiency": percent(r.efficiency, 0),
        }
        for r in scaling_rows(summary.benchmarks)
    ]
    flags = [f"unreliable: {r.unreliable}" for r in scaling_rows(summary.benchmarks)
             if r.unreliable]
    return ["", table(rows, width, left=["scaling"]), *flags] if rows else []


def render_sweep(rows: Sequence[Any], width: int = 100) -> str:
    """Seed 004's result table (results/figures/sweep.py): the matrix parameters, then
    done_percent_last, throughput_avg, throughput_per_gpu_avg, time_per_iteration_secs_avg,
    total_time_secs; and the status."""
    if not rows:
        return "no benchmarks"
    names = param_names(rows)
    cells = []
    for r in rows:
        row = {"bench": r.bench}
        row.update({k: str(r.params.get(k, MISSING)) for k in names})
        row.update({
            "gpus": MISSING if r.gpus is None else str(r.gpus),
            "global_batch": MISSING if r.global_batch is None else str(r.global_batch),
            "done_percent_last": fixed(r.done_percent_last, 1),
            "throughput_avg": fixed(r.throughput_avg, 2),
            "throughput_per_gpu_avg": fixed(r.throughput_per_gpu_avg, 2),
            # Significant digits, not decimals: a 0.0112 s run is not "0.01".
            "time_per_iteration_secs_avg": time_figure(r.time_per_iteration_secs_avg),
            "total_time_secs": time_figure(r.total_time_secs),
            "status": r.status,
        })
        if all(x.global_batch is None for x in rows):
            del row["global_batch"]
        cells.append(row)
    return table(cells, width, left=["bench", *names, "status"])


def sweep_lines(summary: SuiteSummary, width: int) -> list[str]:
    """The sweep table of the matrix benchmarks, when the run has some (MMoCLIP)."""
    rows = sweep_rows(summary, matrix_only=True)
    if not rows:
        return []
    return ["", "sweep (matrix benchmarks; times in seconds)", render_sweep(rows, width),
            SWEEP_NOTE]


#: Below every sweep table: its throughput is not the benchmark table's perf.
SWEEP_NOTE = "throughput_avg: the mean of the steps' rates; not perf (items / window seconds)"
