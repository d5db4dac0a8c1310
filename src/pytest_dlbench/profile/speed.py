"""The speed report: training and data-loading throughput, and the profiler's time totals.

Throughput and the ``io`` region's time per batch come from the scored steady-state window,
which no profiler touched; the profiled window's own throughput is shown next to them, so the
profiler's cost is visible, with the CPU and device time torch.profiler recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.profile._records import Record, Records, steady_rates, steady_region
from pytest_dlbench.profile.base import register

__all__ = ["SpeedReport", "build_speed_report"]


def _rate(records: Sequence[Record]) -> float | None:
    items = sum(float(r.get("items") or 0) for r in records)
    seconds = sum(float(r.get("seconds") or 0) for r in records)
    return items / seconds if seconds > 0 and items > 0 else None


@register
@dataclass(frozen=True)
class SpeedReport:
    name: ClassVar[str] = "speed"

    units: str
    throughput: float | None  # the scored rate (steady window, no profiler)
    time_per_item: float | None  # seconds, 1 / throughput
    items_per_step: float | None
    io_time_per_batch: float | None  # mean of the io region, steady window
    io_throughput: float | None  # items per second of the io region alone
    io_source: str  # "scored steady window", "profiled steps" or "" (no io region)
    profiled_steps: int
    first_step: int | None
    last_step: int | None
    profiled_throughput: float | None  # under the profiler
    profiler_cpu_s: float | None
    profiler_device_s: float | None  # None on a CPU-only run
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeedReport:
        names = set(cls.__dataclass_fields__) - {"name"}
        return cls(**{k: v for k, v in data.items() if k in names})

    def rows(self) -> list[dict[str, Any]]:
        u = self.units
        item = u.split("/")[0] if "/" in u else "items"
        return [
            {"metric": "throughput", "value": self.throughput, "unit": u},
            {"metric": "time_per_item", "value": self.time_per_item, "unit": f"s/{item}"},
            {"metric": "items_per_step", "value": self.items_per_step, "unit": item},
            {"metric": "io_time_per_batch", "value": self.io_time_per_batch, "unit": "s"},
            {"metric": "io_throughput", "value": self.io_throughput, "unit": u},
            {"metric": "profiled_steps", "value": self.profiled_steps, "unit": "steps"},
            {"metric": "profiled_throughput", "value": self.profiled_throughput, "unit": u},
            {"metric": "profiler_cpu_time", "value": self.profiler_cpu_s, "unit": "s"},
            *([{"metric": "profiler_device_time", "value": self.profiler_device_s, "unit": "s"}]
              if self.profiler_device_s is not None else []),
        ]

    def render(self, verbose: bool = False) -> str:
        u = self.units
        item = u.split("/")[0] if "/" in u else "item"
        item = item[:-1] if item.endswith("s") else item
        lines = [f"speed: {fmt.number(self.throughput)} {u} scored"
                 + (f", {fmt.duration(self.time_per_item)} per {item}"
                    if self.time_per_item is not None else "")]
        if self.io_time_per_batch is not None:
            lines.append(f"  data (io region): {fmt.duration(self.io_time_per_batch)} per batch, "
                         f"{fmt.number(self.io_throughput)} {u} ({self.io_source})")
        else:
            lines.append("  data (io region): the benchmark has no io region")
        span = (f" (steps {self.first_step}-{self.last_step})"
                if self.first_step is not None else "")
        profiled = f"  profiled: {self.profiled_steps} steps{span}"
        if self.profiled_throughput is not None:
            profiled += f", {fmt.number(self.profiled_throughput)} {u} under the profiler"
        lines.append(profiled)
        if self.profiler_cpu_s is not None:
            per = max(self.profiled_steps, 1)
            text = (f"  profiler time: CPU {fmt.duration(self.profiler_cpu_s)} "
                    f"({fmt.duration(self.profiler_cpu_s / per)}/step)")
            if self.profiler_device_s is not None:
                text += (f", device {fmt.duration(self.profiler_device_s)} "
                         f"({fmt.duration(self.profiler_device_s / per)}/step)")
            lines.append(text)
        if verbose and self.items_per_step is not None:
            lines.append(f"  items per step: {fmt.number(self.items_per_step)}")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def build_speed_report(
    records: Records,
    *,
    scored_rate: float | None,
    units: str,
    profiled: Sequence[Record],
    profiled_io: tuple[int, float] | None = None,
    profiler_cpu_s: float | None = None,
    profiler_device_s: float | None = None,
    note: str = "",
) -> SpeedReport:
    """``scored_rate``: the run's score rate (scoring's own figure); ``profiled``: the
    ``profile_step`` records of the profiler's active steps; ``profiled_io``: (count, seconds)
    of the io region in them, used when the scored window has no io totals."""
    steady = steady_rates(records)
    items = [float(r["items"]) for r in steady if isinstance(r.get("items"), (int, float))]
    if not items:
        items = [float(r["items"]) for r in profiled if isinstance(r.get("items"), (int, float))]
    items_per_step = sum(items) / len(items) if items else None
    io = steady_region(records, "io")
    source = "scored steady window"
    if io is None and profiled_io is not None and profiled_io[0]:
        io, source = profiled_io, "profiled steps"
    io_time = io[1] / io[0] if io else None
    io_rate = (items_per_step / io_time
               if io_time and items_per_step is not None and io_time > 0 else None)
    return SpeedReport(
        units=units,
        throughput=scored_rate,
        time_per_item=1.0 / scored_rate if scored_rate else None,
        items_per_step=items_per_step,
        io_time_per_batch=io_time,
        io_throughput=io_rate,
        io_source=source if io else "",
        profiled_steps=len(profiled),
        first_step=int(profiled[0]["step"]) if profiled else None,
        last_step=int(profiled[-1]["step"]) if profiled else None,
        profiled_throughput=_rate(profiled),
        profiler_cpu_s=profiler_cpu_s,
        profiler_device_s=profiler_device_s,
        note=note,
    )
