"""The lines under the results table about how a benchmark was observed (docs/suites.md,
"milabench's folders through voir"): an external command that ended with too few
observations, milabench's own figure of a voir benchmark beside ours, and the machines a
multi-node job spanned (docs/multinode.md)."""

from __future__ import annotations

from pytest_dlbench.core.numbers import number
from pytest_dlbench.results.model import SuiteSummary

__all__ = ["observation_lines"]


def observation_lines(summary: SuiteSummary) -> list[str]:
    """``warning: <bench>: too few observations: ...`` for each benchmark whose command ended
    early, ``milabench: <bench> <figure> <units> (...)`` for each voir benchmark, and
    ``nodes: <bench> spanned N nodes (world size W)`` for each multi-node one."""
    lines = [f"warning: {b.name}: {w}" for b in summary.benchmarks for w in b.warnings]
    lines += [
        f"milabench: {b.name} {number(b.milabench_perf)} {b.units} (milabench's perf: every "
        f"rate, warm-up included, min and max dropped from 5 rates on; perf {number(b.perf)} is "
        "the steady window)"
        for b in summary.benchmarks if b.milabench_perf is not None
    ]
    lines += [f"nodes: {b.name} spanned {b.nnodes} nodes (world size {b.world_size})"
              for b in summary.benchmarks if b.nnodes > 1]
    return lines
