"""Compiled benchmarks against their eager siblings: compile time, graphs, graph breaks, speed-up.

A run's ``compile`` records (measure/stream.py ``Event.COMPILE``) say what ``torch.compile`` did
before the timed loop (phase ``warmup``) and whether anything was compiled again during it
(phase ``loop``). A compiled benchmark's **eager sibling** is the benchmark of the same run
whose ``config`` has the same definition, the same command line without ``--compile`` and
``--compile-backend``, and the same plan (suite/presets.eager_key): whatever the two are
called, a matrix over ``--compile`` or two hand-written entries pair the same way. Its speed-up
is ``perf(compiled) / perf(eager)``, when both have a perf; a side whose figure is in doubt
(results/figures/doubt.py: its std% flagged unreliable, or runs on a busy machine) puts the speed-up
in doubt, said on its row. Pure functions: no torch.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.numbers import as_number
from pytest_dlbench.results.figures.doubt import figure_doubt

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = ["CompileRow", "compile_rows", "compile_summary", "eager_siblings", "speedup_doubt"]


def compile_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One run's ``compile`` records in one mapping: the warm-up's fields (``seconds``,
    ``graphs``, ``graph_breaks``, ``mode``...), plus ``loop_graphs``/``loop_breaks`` when the
    timed loop compiled again. ``{}`` for a run that compiled nothing."""
    out: dict[str, Any] = {}
    for record in records:
        fields = {k: v for k, v in record.items() if k not in ("event", "phase")}
        if record.get("phase") == "loop":
            out["loop_graphs"] = int(out.get("loop_graphs", 0)) + int(fields.get("graphs") or 0)
            out["loop_breaks"] = (int(out.get("loop_breaks", 0))
                                  + int(fields.get("graph_breaks") or 0))
        else:
            out.update(fields)
    return out


@dataclass(frozen=True)
class CompileRow:
    """A compiled benchmark, what compiling cost, and its speed-up over its eager sibling."""

    bench: str
    eager: str | None  # the eager sibling's name; None when the run has none
    mode: str | None
    backend: str | None
    seconds: float | None  # mean compile time over the runs that compiled
    graphs: int | None
    graph_breaks: int | None
    loop_graphs: int  # graphs compiled during timed loops (recompiles): should be 0
    cached: bool  # every compiled graph came from the inductor/AOT caches
    speedup: float | None  # perf / eager perf
    failed: str | None  # the reason of a run that failed (to compile, usually)
    #: Why the speed-up cannot be taken at its word: a side's figure in doubt
    #: (:func:`speedup_doubt`); None when both sides are sound, or there is no speed-up.
    doubt: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bench": self.bench, "eager": self.eager, "mode": self.mode,
            "backend": self.backend, "seconds": self.seconds, "graphs": self.graphs,
            "graph_breaks": self.graph_breaks, "loop_graphs": self.loop_graphs,
            "cached": self.cached, "speedup": self.speedup, "failed": self.failed,
            "doubt": self.doubt,
        }


def speedup_doubt(compiled: BenchSummary, eager: BenchSummary) -> str | None:
    """Why a speed-up ``compiled.perf / eager.perf`` is in doubt: each side whose figure is
    (results/figures/doubt.figure_doubt), named (``eager mlp-eager: busy machine (2 of 3 runs)``);
    None when neither is. A ratio of two figures is no surer than the less sure of them."""
    parts = [f"{side} {b.name}: {why}" for side, b in (("compiled", compiled), ("eager", eager))
             if (why := figure_doubt(b)) is not None]
    return "; ".join(parts) or None


def eager_siblings(benches: Sequence[BenchSummary]) -> dict[str, BenchSummary]:
    """Compiled benchmark name -> its eager sibling, for those that have one in ``benches``."""
    eager: dict[str, BenchSummary] = {}
    for b in benches:
        if b.compile is None and b.variant is not None:
            eager.setdefault(b.variant, b)
    return {
        b.name: eager[b.variant]
        for b in benches
        if b.compile is not None and b.variant is not None and b.variant in eager
    }


def _max_int(values: Iterable[Any]) -> int | None:
    numbers = [int(v) for v in values if as_number(v) is not None]
    return max(numbers) if numbers else None


def compile_rows(summary: SuiteSummary | Sequence[BenchSummary]) -> list[CompileRow]:
    """One row per compiled benchmark, in the summary's order."""
    benches = list(summary if isinstance(summary, Sequence) else summary.benchmarks)
    siblings = eager_siblings(benches)
    rows = []
    for b in benches:
        if b.compile is None:
            continue
        stats = [r.compiled for r in b.runs if r.compiled]
        seconds = [s for x in stats if (s := as_number(x.get("seconds"))) is not None]
        sibling = siblings.get(b.name)
        speedup = doubt = None
        if sibling is not None and b.perf and sibling.perf:
            speedup = b.perf / sibling.perf
            doubt = speedup_doubt(b, sibling)
        failed = next((r.reason for r in b.runs if not r.ok and not r.skipped), None)
        misses = sum(int(x.get("cache_misses") or 0) for x in stats)
        hits = sum(int(x.get("cache_hits") or 0) for x in stats)
        rows.append(CompileRow(
            bench=b.name,
            eager=sibling.name if sibling is not None else None,
            mode=b.compile.get("mode"),
            backend=b.compile.get("backend"),
            seconds=statistics.fmean(seconds) if seconds else None,
            graphs=_max_int(x.get("graphs") for x in stats),
            graph_breaks=_max_int(x.get("graph_breaks") for x in stats),
            loop_graphs=sum(int(x.get("loop_graphs") or 0) for x in stats),
            cached=bool(stats) and hits > 0 and misses == 0,
            speedup=speedup,
            failed=failed,
            doubt=doubt,
        ))
    return rows
