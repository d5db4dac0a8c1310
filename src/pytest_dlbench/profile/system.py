"""The system report: what the run's telemetry says (GPU utilisation and memory, CPU, RSS,
energy, wall time) and how much disk the data and results directories take.

The telemetry is the monitor's ``telemetry`` records already in the stream (docs/telemetry.md),
summarised with the monitor's own function, so the figures are the run report's. Disk usage is
measured when the report is made: the directory's size (files walked, up to a bound) and its
file system's use.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.measure.monitor.summary import summarize_telemetry
from pytest_dlbench.profile._tables import table
from pytest_dlbench.profile.base import register

__all__ = ["MAX_FILES", "DirUsage", "GpuUsage", "SystemReport", "build_system_report",
           "dir_usage"]

#: Files walked per directory; a larger tree is reported as "at least" its partial size.
MAX_FILES = 200_000


@dataclass(frozen=True)
class GpuUsage:
    index: int
    util_mean: float | None  # percent
    util_max: float | None
    mem_mean: float | None  # bytes
    mem_peak: int | None
    mem_total: int | None
    energy_j: float | None
    power_peak_w: float | None


@dataclass(frozen=True)
class DirUsage:
    label: str  # "data" or "results"
    path: str
    bytes: int | None  # the directory's files; None when it does not exist
    files: int
    complete: bool  # False: more than MAX_FILES files, ``bytes`` is a lower bound
    fs_total: int | None
    fs_used: int | None
    fs_free: int | None


def dir_usage(label: str, path: str | os.PathLike[str], max_files: int = MAX_FILES) -> DirUsage:
    """Size of the files under ``path`` (links not followed) and its file system's usage."""
    root = Path(path)
    if not root.exists():
        return DirUsage(label, str(root), None, 0, True, None, None, None)
    size = files = 0
    complete = True
    stack = [root]
    while stack and complete:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            size += entry.stat(follow_symlinks=False).st_size
                            files += 1
                            if files >= max_files:
                                complete = False
                                break
                    except OSError:
                        continue
        except OSError:
            continue
    try:
        disk = shutil.disk_usage(root)
        fs: tuple[int | None, int | None, int | None] = (disk.total, disk.used, disk.free)
    except OSError:
        fs = (None, None, None)
    return DirUsage(label, str(root), size, files, complete, *fs)


@register
@dataclass(frozen=True)
class SystemReport:
    name: ClassVar[str] = "system"

    wall_s: float | None
    samples: int
    interval: float | None
    gpu: bool
    gpu_reason: str  # why there is no GPU telemetry ("" with GPUs)
    gpus: tuple[GpuUsage, ...]
    cpu_percent_mean: float | None  # process tree, 100 = one core
    rss_peak: int | None
    energy_j: float | None
    disk_read_bytes: int | None
    disk_write_bytes: int | None
    dirs: tuple[DirUsage, ...]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SystemReport:
        names = set(cls.__dataclass_fields__) - {"name"}
        values = {k: v for k, v in data.items() if k in names}
        values["gpus"] = tuple(GpuUsage(**g) for g in data.get("gpus") or ())
        values["dirs"] = tuple(DirUsage(**d) for d in data.get("dirs") or ())
        return cls(**values)

    def rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = [
            {"metric": "wall_time", "device": "", "value": self.wall_s, "unit": "s"},
            {"metric": "cpu_percent_mean", "device": "", "value": self.cpu_percent_mean,
             "unit": "%"},
            {"metric": "rss_peak", "device": "", "value": self.rss_peak, "unit": "B"},
            {"metric": "disk_read", "device": "", "value": self.disk_read_bytes, "unit": "B"},
            {"metric": "disk_write", "device": "", "value": self.disk_write_bytes, "unit": "B"},
            {"metric": "energy", "device": "", "value": self.energy_j, "unit": "J"},
        ]
        for g in self.gpus:
            dev = f"gpu{g.index}"
            rows += [
                {"metric": "gpu_util_mean", "device": dev, "value": g.util_mean, "unit": "%"},
                {"metric": "gpu_util_max", "device": dev, "value": g.util_max, "unit": "%"},
                {"metric": "gpu_mem_mean", "device": dev, "value": g.mem_mean, "unit": "B"},
                {"metric": "gpu_mem_peak", "device": dev, "value": g.mem_peak, "unit": "B"},
                {"metric": "gpu_energy", "device": dev, "value": g.energy_j, "unit": "J"},
            ]
        for d in self.dirs:
            rows += [
                {"metric": f"{d.label}_dir_size", "device": d.path, "value": d.bytes,
                 "unit": "B"},
                {"metric": f"{d.label}_fs_used", "device": d.path, "value": d.fs_used,
                 "unit": "B"},
                {"metric": f"{d.label}_fs_total", "device": d.path, "value": d.fs_total,
                 "unit": "B"},
            ]
        return rows

    def render(self, verbose: bool = False) -> str:
        head = (f"system: wall {fmt.duration(self.wall_s)}, "
                f"CPU {fmt.number(self.cpu_percent_mean)}% "
                f"of a core (mean), peak RSS {fmt.byte_size(self.rss_peak)}")
        if self.energy_j is not None:
            head += f", GPU energy {fmt.number(self.energy_j / 1000)} kJ"
        lines = [head]
        if self.gpus:
            rows = [[f"GPU {g.index}", f"{fmt.number(g.util_mean)}%", f"{fmt.number(g.util_max)}%",
                     fmt.byte_size(g.mem_mean), fmt.byte_size(g.mem_peak),
                     fmt.byte_size(g.mem_total)]
                    for g in self.gpus]
            lines.append(table(["device", "util mean", "util max", "mem mean", "mem peak",
                                "mem total"], rows))
        elif not self.gpu:
            lines.append(f"  no GPU telemetry: {self.gpu_reason or 'no GPU sampled'}")
        for d in self.dirs:
            if d.bytes is None:
                lines.append(f"  {d.label} dir {d.path}: does not exist")
                continue
            size = ("" if d.complete else ">= ") + fmt.byte_size(d.bytes)
            text = f"  {d.label} dir: {size} in {fmt.count(d.files)} files"
            if d.fs_total:
                used = (d.fs_used or 0) / d.fs_total
                text += f"; its disk {used * 100:.0f}% used, {fmt.byte_size(d.fs_free)} free"
            if verbose:
                text += f" ({d.path})"
            lines.append(text)
        if verbose:
            lines.append(f"  telemetry: {self.samples} samples"
                         + (f" every {fmt.duration(self.interval)}" if self.interval else "")
                         + f"; disk read {fmt.byte_size(self.disk_read_bytes)}, "
                           f"written {fmt.byte_size(self.disk_write_bytes)}")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def _wall(records: Iterable[Mapping[str, Any]]) -> float | None:
    times = [float(r["time"]) for r in records
             if isinstance(r.get("time"), (int, float)) and not isinstance(r.get("time"), bool)]
    return max(times) - min(times) if len(times) >= 2 else None


def build_system_report(
    records: Iterable[Mapping[str, Any]],
    *,
    dirs: Mapping[str, str | os.PathLike[str] | None] | None = None,
) -> SystemReport:
    """``dirs``: label -> directory whose disk usage to report (``data``, ``results``)."""
    summary = summarize_telemetry(records)
    gpus = tuple(
        GpuUsage(g.index, g.mean_util, g.max_util, g.mean_mem_used, g.peak_mem_used,
                 g.mem_total, g.energy_j, g.peak_power_w)
        for g in summary.gpus
    )
    wall = summary.duration_s if summary.samples >= 2 else _wall(records)
    note = "" if summary.samples else "no telemetry in the stream (the run had no monitor)"
    return SystemReport(
        wall_s=wall,
        samples=summary.samples,
        interval=summary.interval,
        gpu=summary.gpu,
        gpu_reason=summary.reason,
        gpus=gpus,
        cpu_percent_mean=summary.mean_cpu_percent,
        rss_peak=summary.peak_rss_bytes,
        energy_j=summary.energy_j,
        disk_read_bytes=summary.disk_read_bytes,
        disk_write_bytes=summary.disk_write_bytes,
        dirs=tuple(dir_usage(label, path) for label, path in (dirs or {}).items()
                   if path is not None),
        note=note,
    )
