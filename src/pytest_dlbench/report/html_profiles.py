"""The profiles section of the HTML report: each profiled run's reports as tables.

The terminal shows a profile as text (profile/*.py ``render``); the page shows the same reports
(read back from ``<run_dir>/<stem>.profile/index.json``) as tables: the timer's regions with
their share of the step as a bar, the top operators with the columns of torch's
``key_averages().table()`` (self and total time, their % of the profiled time, the time per
call), the model summary's torchinfo tree folded, and links to the trace, the memory snapshot and
the timeline files. A report with no table of its own (system, a note) is its terminal text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench import layout
from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.profile._tables import table
from pytest_dlbench.profile.base import NoteReport
from pytest_dlbench.profile.writer import INDEX_FILE, load_reports

__all__ = ["Cell", "Link", "OpTable", "ProfileView", "RegionRow", "profile_views"]

DASH = fmt.DASH


@dataclass(frozen=True)
class RegionRow:
    """One row of the regions table: a timer region, ``rest`` or ``step``."""

    label: str
    count: str
    mean: str
    median: str
    p95: str
    total: str
    share: str
    bar: float  # the bar's width, % of the cell (the share, 0-100)
    nested: bool
    kind: str  # "region", "rest" or "step"


@dataclass(frozen=True)
class Cell:
    text: str
    bar: float | None = None  # a share bar behind the text (0-100), for the % columns


@dataclass(frozen=True)
class OpTable:
    """One top-operators table (by self device time, self CPU time, memory)."""

    title: str
    columns: list[str]
    rows: list[list[Cell]]
    note: str = ""  # what the % columns are a share of


@dataclass(frozen=True)
class Link:
    label: str
    href: str
    note: str  # the size, and what opens it


@dataclass
class ProfileView:
    title: str
    headline: str = ""  # the time report's first line
    speed: list[tuple[str, str]] = field(default_factory=list)
    regions: list[RegionRow] = field(default_factory=list)
    region_notes: list[str] = field(default_factory=list)
    operators: list[OpTable] = field(default_factory=list)
    model: str = ""  # the summary report's first lines
    tree: str = ""  # torchinfo's table, shown folded
    links: list[Link] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)  # (report, its terminal text)


def _href(path: Path, link_base: Path | None) -> str:
    """A link to a file of the run directory: relative to the page's folder when it is known
    (the page and the run directory can be moved together), else a ``file:`` URI."""
    path = path.resolve()
    if link_base is not None:
        try:
            return Path(os.path.relpath(path, link_base.resolve())).as_posix()
        except ValueError:  # another drive (Windows)
            pass
    return path.as_uri()


def _share_bar(share: float | None) -> float:
    if share is None:
        return 0.0
    return round(max(0.0, min(1.0, share)) * 100, 1)


def _regions(report: Any) -> tuple[list[RegionRow], list[str]]:
    rows = []
    for r in (*report.ordered(), report.rest, report.step):
        kind = "step" if r is report.step else "rest" if r is report.rest else "region"
        rows.append(RegionRow(
            label=f"{r.key} (in {r.parent})" if r.parent else r.key,
            count=fmt.count(r.count), mean=fmt.duration(r.mean), median=fmt.duration(r.median),
            p95=fmt.duration(r.p95), total=fmt.duration(r.total),
            share=fmt.rough_percent(r.share), bar=_share_bar(r.share),
            nested=bool(r.parent), kind=kind,
        ))
    notes = [report.note] if report.note else []
    if report.steps and report.overlap > 0.01 * report.step.total:
        notes.append(f"top-level regions overlap by {fmt.duration(report.overlap)}: rest is "
                     "short by that much")
    return rows, notes


_OP_TITLES = {
    "self_device_time": "Top operators by self device time",
    "self_cpu_time": "Top operators by self CPU time",
    "self_cpu_memory": "Top operators by self CPU memory",
    "self_device_memory": "Top operators by self device memory",
}


def _op_tables(report: Any, speed: Any) -> list[OpTable]:
    """The memory report's tables with key_averages().table()'s columns. The % columns are
    shares of the profiler's total time over the profiled steps (the speed report's, the sum
    of every host event's self CPU time, as torch's table divides by), else of the listed
    operators."""
    cpu_total = getattr(speed, "profiler_cpu_s", None)
    dev_total = getattr(speed, "profiler_device_s", None)
    tables = []
    for name, ops in report.tables.items():
        if not ops:
            continue
        cpu_whole = cpu_total or sum(op.self_cpu_time for op in ops)
        dev_whole = dev_total or sum(op.self_device_time or 0.0 for op in ops)
        of = ("% of the profiler's total time over the profiled steps" if cpu_total
              else "% of the listed operators' time")

        def pct(value: float | None, whole: float) -> Cell:
            if value is None or not whole:
                return Cell(DASH)
            return Cell(fmt.rough_percent(value / whole), _share_bar(value / whole))

        def per_call(value: float | None, calls: int) -> str:
            return fmt.duration(value / calls) if value is not None and calls else DASH

        columns = ["operator", "self CPU %", "self CPU", "CPU total %", "CPU total",
                   "CPU per call"]
        if report.device:
            columns += ["self device %", "self device", "device total", "device per call"]
        columns += ["self CPU mem"] + (["self device mem"] if report.device else []) + ["calls"]
        rows = []
        for op in ops:
            row = [Cell(op.name), pct(op.self_cpu_time, cpu_whole),
                   Cell(fmt.duration(op.self_cpu_time)), pct(op.cpu_time, cpu_whole),
                   Cell(fmt.duration(op.cpu_time)), Cell(per_call(op.cpu_time, op.calls))]
            if report.device:
                row += [pct(op.self_device_time, dev_whole),
                        Cell(fmt.duration(op.self_device_time)),
                        Cell(fmt.duration(op.device_time)),
                        Cell(per_call(op.device_time, op.calls))]
            row.append(Cell(fmt.byte_size(op.self_cpu_memory)))
            if report.device:
                row.append(Cell(fmt.byte_size(op.self_device_memory)))
            row.append(Cell(fmt.count(op.calls)))
            rows.append(row)
        tables.append(OpTable(_OP_TITLES.get(name, name), columns, rows, of))
    return tables


def _speed(report: Any) -> list[tuple[str, str]]:
    u = report.units
    rows = [("scored throughput", f"{fmt.number(report.throughput)} {u}"),
            ("time per item", fmt.duration(report.time_per_item))]
    if report.io_time_per_batch is not None:
        rows.append(("data (io region) per batch",
                     f"{fmt.duration(report.io_time_per_batch)} ({report.io_source})"))
        rows.append(("data throughput", f"{fmt.number(report.io_throughput)} {u}"))
    span = (f" (steps {report.first_step}-{report.last_step})"
            if report.first_step is not None else "")
    rows.append(("profiled steps", f"{report.profiled_steps}{span}"))
    if report.profiled_throughput is not None:
        rows.append(("throughput under the profiler",
                     f"{fmt.number(report.profiled_throughput)} {u}"))
    if report.profiler_cpu_s is not None:
        rows.append(("profiler CPU time", fmt.duration(report.profiler_cpu_s)))
    if report.profiler_device_s is not None:
        rows.append(("profiler device time", fmt.duration(report.profiler_device_s)))
    return rows


def _view(title: str, reports: Mapping[str, Any], folder: Path,
          link_base: Path | None) -> ProfileView:
    view = ProfileView(title)
    speed = reports.get("speed")
    for name, report in reports.items():
        if isinstance(report, NoteReport):
            view.texts.append((name, report.render(False)))
        elif name == "speed":
            view.speed = _speed(report)
            if report.note:
                view.texts.append((name, report.note))
        elif name == "time":
            view.headline = report.render(False).splitlines()[0]
            view.regions, view.region_notes = _regions(report) if report.steps else ([], [])
        elif name == "memory":
            view.operators = _op_tables(report, speed)
            if report.timeline:
                view.links.append(_link("memory timeline", folder / report.timeline, None,
                                        "open it in a browser", link_base))
        elif name == "summary":
            view.model = "\n".join(line.strip() for line in report.render(False).splitlines())
            view.tree = report.text or _layer_table(report.layers)
        elif name == "trace":
            view.links.append(_link("trace", folder / report.file, report.bytes,
                                    "open it in https://ui.perfetto.dev", link_base))
        elif name == "snapshot":
            view.links.append(_link("memory snapshot", folder / report.file, report.bytes,
                                    "open it in https://pytorch.org/memory_viz", link_base))
        else:
            view.texts.append((name, report.render(True)))
    return view


def _layer_table(layers: Any) -> str:
    """The model's layers as the terminal shows them when torchinfo's own table is missing."""
    if not layers:
        return ""
    rows = [["  " * (r.depth - 1) + r.module, r.output_shape, fmt.count(r.params),
             fmt.count(r.mult_adds)] for r in layers]
    return table(["layer", "output", "params", "mult-adds"], rows, indent="")


def _link(label: str, path: Path, size: int | None, opens: str,
          link_base: Path | None) -> Link:
    note = f"{fmt.byte_size(size)}; {opens}" if size is not None else opens
    return Link(f"{label}: {path.name}", _href(path, link_base), note)


def profile_views(run_dir: str | os.PathLike[str] | None,
                  link_base: str | os.PathLike[str] | None = None) -> list[ProfileView]:
    """One view per profiled run of ``run_dir`` (rank 0's), in stream order; ``link_base``:
    the folder the page is written to (its links are relative to it)."""
    if not run_dir or not Path(run_dir).is_dir():
        return []
    base = Path(link_base) if link_base is not None else None
    views = []
    for stream in layout.stream_paths(run_dir):
        folder = layout.profile_dir(stream)
        if not (folder / INDEX_FILE).is_file():
            continue
        title = f"profile of {stream.name.removesuffix(layout.STREAM_SUFFIX)}"
        views.append(_view(title, load_reports(folder), folder, base))
    return views
