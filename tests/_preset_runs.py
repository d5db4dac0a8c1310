"""Stream records of a run whose benchmark has precision and compile dimensions (the shared
arguments of suite/presets.py), for the tests of how reports show them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_dlbench.results.figures import run_from_records, summarize_runs
from pytest_dlbench.results.model import SuiteSummary
from pytest_dlbench.suite.presets import run_dimensions

TOY = "pytest_dlbench.workloads.toy:main"


def spec_of(args: Sequence[str], definition: str = TOY, **extra: Any) -> dict[str, Any]:
    """A resolved spec's fields that eager_key and the config record read."""
    return {"definition": definition, "args": list(args), "plan": {"method": "per_gpu"},
            **extra}


def records(name: str, rate: float, args: Sequence[str] = (), *, definition: str = TOY,
            status: str = "ok", reason: str = "", weight: float = 1.0,
            compile_record: dict[str, Any] | None = None,
            loop_graphs: int = 0) -> list[dict[str, Any]]:
    """A run's stream records as the harness and a training workload write them."""
    spec = spec_of(args, definition, name=name, weight=weight)
    out: list[dict[str, Any]] = [
        {"event": "config", "spec": spec, "device": 0, "repeat": None,
         **run_dimensions(definition, args)}]
    if compile_record is not None:
        out.append({"event": "compile", "phase": "warmup", **compile_record})
    if status == "ok":
        for i in range(10):
            out.append({"event": "rate", "value": rate, "units": "items/s", "step": i,
                        "warmup": False, "time": 100.0 + i, "items": rate, "seconds": 1.0})
    if loop_graphs:
        out.append({"event": "compile", "phase": "loop", "graphs": loop_graphs,
                    "graph_breaks": 0})
    out.append({"event": "end", "status": status, "reason": reason})
    return out


#: A warm-up compile record: 3 graphs, 2 breaks, 12.34 s.
COMPILED = {"mode": "default", "backend": "inductor", "seconds": 12.34, "start": 50.0,
            "end": 62.34, "steps": 2, "graphs": 3, "graph_breaks": 2,
            "break_reasons": {"Failed to trace builtin operator": 2}, "frames": 3,
            "cache_hits": 0, "cache_misses": 6}


def suite_of(*runs: list[dict[str, Any]]) -> SuiteSummary:
    """The summary of runs given by their records."""
    return summarize_runs([run_from_records(r) for r in runs])
