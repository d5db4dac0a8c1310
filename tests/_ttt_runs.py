"""A time-to-train run written as the external runner writes it (``Bench.log_step``): what the
time-to-train tests and the tests of names in its outputs share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.layout import stream_path
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.results.model import TOTAL_TIME


def write_ttt_run(
    run_dir: Path,
    name: str,
    seconds: Sequence[float],
    *,
    items: float = 64,
    metric: str | None = TOTAL_TIME,
    weight: float = 1.0,
    matrix: dict[str, Any] | None = None,
    world: int = 1,
    method: str = "per_gpu",
    progress: float | None = None,
    status: str = "ok",
    repeat: int | None = None,
) -> Path:
    """A run whose steps are written by ``Bench.log_step`` (as the external runner does)."""
    path = stream_path(run_dir, name, 0, repeat)
    spec: dict[str, Any] = {"name": name, "weight": weight, "plan": {"method": method},
                            "skip": 1, "stop": len(seconds) - 1, "tags": []}
    if metric:
        spec["metric"] = metric
    if matrix:
        spec["matrix"] = matrix
    with StreamWriter(path) as stream:
        extra = {"distributed": {"world_size": world, "nnodes": 1, "nproc_per_node": world,
                                 "rank": 0}} if world > 1 else {}
        stream.write("config", spec=spec, device=0, repeat=repeat, **extra)
        bench = Bench(name=name, stream=stream, skip=1, stop=len(seconds) - 1)
        for s in seconds:
            bench.log_step(items, s, per_rank=False)
        if progress is not None:
            bench.log_progress(progress)
        bench.close()
        stream.write("end", status=status, reason="" if status == "ok" else "boom")
    return path
