"""The memory report: the top operators of the profiled steps by self device time, self CPU
time and self memory, read from ``prof.key_averages()`` event objects (never from a printed
table).

Attribute names differ between torch versions (``self_device_time_total`` since 2.4,
``self_cuda_time_total`` before), so every one is read with ``getattr`` and a fallback. On a
CPU-only run the device columns do not exist: they are left out of the tables, the JSON and
the CSV, not filled with zeros.

Only operators are listed (``namespace::name``, such as ``aten::convolution_backward``): the
profiler's own step markers, the timer's region names, optimizer annotations and autograd's
nodes (``evaluate_function`` wrappers, ``AccumulateGrad``) are not operators.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.profile._tables import table
from pytest_dlbench.profile.base import register

__all__ = ["TABLES", "MemoryReport", "OpStats", "build_memory_report", "is_operator",
           "op_stats", "profiler_totals"]

_OPERATOR = re.compile(r"^[A-Za-z_]\w*::\w")
_NOT_OPERATORS = ("autograd::", "torch::autograd::", "profiler::", "ProfilerStep")
_US = 1e-6

#: table name -> (sort field, needs device columns)
TABLES: dict[str, tuple[str, bool]] = {
    "self_device_time": ("self_device_time", True),
    "self_cpu_time": ("self_cpu_time", False),
    "self_cpu_memory": ("self_cpu_memory", False),
    "self_device_memory": ("self_device_memory", True),
}
_DEVICE_FIELDS = ("self_device_time", "device_time", "self_device_memory", "device_memory")


def _get(event: Any, *names: str) -> Any:
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return value
    return None


def _is_cpu(event: Any) -> bool:
    device = getattr(event, "device_type", None)
    return device is None or "CPU" in str(device).upper()


def is_operator(event: Any) -> bool:
    """A real operator: ``namespace::op``, on the host side, not a user annotation."""
    name = str(getattr(event, "key", None) or getattr(event, "name", ""))
    if getattr(event, "is_user_annotation", False) or not _is_cpu(event):
        return False
    return bool(_OPERATOR.match(name)) and not name.startswith(_NOT_OPERATORS)


@dataclass(frozen=True)
class OpStats:
    """One operator over the profiled steps: times in seconds, memory in bytes (negative:
    released more than allocated). Device fields are None on a CPU-only run."""

    name: str
    calls: int
    self_cpu_time: float
    cpu_time: float
    self_cpu_memory: int
    cpu_memory: int
    self_device_time: float | None = None
    device_time: float | None = None
    self_device_memory: int | None = None
    device_memory: int | None = None

    def to_dict(self, device: bool) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if device or f.name not in _DEVICE_FIELDS}


def op_stats(event: Any, device: bool) -> OpStats:
    """An :class:`OpStats` from one ``key_averages()`` entry (a ``FunctionEventAvg``)."""

    def num(*names: str) -> float:
        value = _get(event, *names)
        return float(value) if value is not None else 0.0

    return OpStats(
        name=str(_get(event, "key", "name")),
        calls=int(_get(event, "count") or 0),
        self_cpu_time=num("self_cpu_time_total") * _US,
        cpu_time=num("cpu_time_total") * _US,
        self_cpu_memory=int(num("self_cpu_memory_usage")),
        cpu_memory=int(num("cpu_memory_usage")),
        self_device_time=num("self_device_time_total", "self_cuda_time_total") * _US
        if device else None,
        device_time=num("device_time_total", "cuda_time_total") * _US if device else None,
        self_device_memory=int(num("self_device_memory_usage", "self_cuda_memory_usage"))
        if device else None,
        device_memory=int(num("device_memory_usage", "cuda_memory_usage")) if device else None,
    )


def profiler_totals(events: Iterable[Any], device: bool) -> tuple[float, float | None]:
    """(CPU seconds, device seconds or None) of every event the profiler recorded.

    CPU: the self CPU time of the host-side events (their sum is the host's total). Device: the
    self device time of the device-side events (kernels, copies), each counted once; when a
    torch version lists none, the device time the host-side operators account for.
    """
    events = list(events)
    cpu = sum(float(_get(e, "self_cpu_time_total") or 0.0) for e in events if _is_cpu(e))
    if not device:
        return cpu * _US, None
    on_device = [e for e in events if not _is_cpu(e)]
    source = on_device or events
    dev = sum(float(_get(e, "self_device_time_total", "self_cuda_time_total") or 0.0)
              for e in source)
    return cpu * _US, dev * _US


@register
@dataclass(frozen=True)
class MemoryReport:
    name: ClassVar[str] = "memory"

    device: bool  # device columns present (a CUDA run)
    steps: int  # profiled steps the totals are over
    top: int
    tables: Mapping[str, tuple[OpStats, ...]]
    timeline: str | None = None  # file name of the memory timeline, when one was made
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "report": self.name,
            "device": self.device,
            "steps": self.steps,
            "top": self.top,
            "tables": {k: [op.to_dict(self.device) for op in ops]
                       for k, ops in self.tables.items()},
            "timeline": self.timeline,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryReport:
        return cls(
            device=bool(data.get("device")),
            steps=int(data.get("steps") or 0),
            top=int(data.get("top") or 0),
            tables={k: tuple(OpStats(**op) for op in ops)
                    for k, ops in (data.get("tables") or {}).items()},
            timeline=data.get("timeline"),
            note=str(data.get("note") or ""),
        )

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"table": name, "rank": i + 1, **op.to_dict(self.device)}
            for name, ops in self.tables.items()
            for i, op in enumerate(ops)
        ]

    def _table(self, name: str, limit: int) -> str:
        ops = self.tables.get(name, ())[:limit]
        cols = ["calls", "self CPU", "CPU total", "self CPU mem"]
        if self.device:
            cols = ["calls", "self device", "device total", "self CPU", "self device mem",
                    "self CPU mem"]
        rows = []
        for op in ops:
            cells = {
                "calls": fmt.count(op.calls),
                "self CPU": fmt.duration(op.self_cpu_time),
                "CPU total": fmt.duration(op.cpu_time),
                "self CPU mem": fmt.byte_size(op.self_cpu_memory),
                "self device": fmt.duration(op.self_device_time),
                "device total": fmt.duration(op.device_time),
                "self device mem": fmt.byte_size(op.self_device_memory),
            }
            rows.append([op.name, *(cells[c] for c in cols)])
        return table(["operator", *cols], rows, indent="    ")

    def render(self, verbose: bool = False) -> str:
        where = "device and CPU" if self.device else "CPU only"
        lines = [f"memory: top operators of {self.steps} profiled steps ({where})"]
        if self.note:
            lines.append(f"  {self.note}")
        limit = self.top if verbose else min(self.top, 5)
        titles = {
            "self_device_time": "by self device time",
            "self_cpu_time": "by self CPU time",
            "self_cpu_memory": "by self CPU memory",
            "self_device_memory": "by self device memory",
        }
        if verbose:
            shown = list(self.tables)
        else:
            # Concise: the time and memory tables of the device that matters.
            shown = ["self_device_time", "self_device_memory"] if self.device else \
                ["self_cpu_time", "self_cpu_memory"]
        for name in shown:
            if not self.tables.get(name):
                continue
            lines.append(f"  {titles[name]}")
            lines.append(self._table(name, limit))
        if self.timeline:
            lines.append(f"  memory timeline: {self.timeline}")
        return "\n".join(lines)


def build_memory_report(
    events: Iterable[Any], *, device: bool, steps: int, top: int = 20,
    timeline: str | None = None, note: str = "",
) -> MemoryReport:
    """The report from ``prof.key_averages()`` (or any objects with the same attributes)."""
    ops = [op_stats(e, device) for e in events if is_operator(e)]
    tables: dict[str, tuple[OpStats, ...]] = {}
    for name, (key, needs_device) in TABLES.items():
        if needs_device and not device:
            continue
        chosen = [op for op in ops if getattr(op, key)]
        if key.endswith("memory"):
            chosen = [op for op in chosen if getattr(op, key) > 0]
        chosen.sort(key=operator.attrgetter(key), reverse=True)
        tables[name] = tuple(chosen[:top])
    return MemoryReport(device=device, steps=steps, top=top, tables=tables,
                        timeline=timeline, note=note)
