"""Scaling rows: ``name.scaling.k`` benchmarks and their efficiency (milarun's scaling test).

Each step of a scaling suite is its own benchmark named ``<base>.scaling.<k>`` (k device slots);
steps cannot be aggregated, so they stay separate rows, and the efficiency of step k is
``perf_k / (k * perf_1)``: 1.0 is perfect linear scaling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ScalingRow", "scaling_rows"]

_NAME = re.compile(r"^(?P<base>.+)\.scaling\.(?P<k>\d+)$")


#: Efficiency above 100 % by more than this is flagged (a few % is measurement noise).
EFFICIENCY_SLACK = 0.05


@dataclass(frozen=True)
class ScalingRow:
    base: str
    slots: int
    perf: float | None
    speedup: float | None  # perf_k / perf_1
    efficiency: float | None  # speedup / k

    @property
    def unreliable(self) -> str | None:
        """More than linear scaling is not a result but a sign that a step was disturbed
        (most often the 1-slot run, slowed by other load)."""
        if self.efficiency is not None and self.efficiency > 1.0 + EFFICIENCY_SLACK:
            return (f"{self.base} at {self.slots} slots: efficiency {self.efficiency:.0%} is "
                    "above 100 %, a step was disturbed")
        return None


def scaling_rows(benchmarks: Iterable[Any]) -> list[ScalingRow]:
    """Rows for every ``<base>.scaling.<k>`` benchmark (objects with ``name`` and ``perf``),
    grouped by base and sorted by k. Without a successful k=1 step there is no efficiency."""
    groups: dict[str, dict[int, float | None]] = {}
    for bench in benchmarks:
        match = _NAME.match(bench.name)
        if match:
            groups.setdefault(match["base"], {})[int(match["k"])] = bench.perf
    rows = []
    for base, steps in groups.items():
        one = steps.get(1)
        for k in sorted(steps):
            perf = steps[k]
            speedup = perf / one if perf and one else None
            rows.append(ScalingRow(base, k, perf, speedup, speedup / k if speedup else None))
    return rows
