"""One run of one benchmark: its stream, rendered arguments and ``Bench`` object."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.run.child import Outcome, machine_meta
from pytest_dlbench.suite import BenchSpec

__all__ = ["RunContext"]


@dataclass
class RunContext:
    spec: BenchSpec
    device_index: int
    repeat: int | None
    path: Path
    stream: StreamWriter
    args: list[str]
    data_dir: Path
    run_name: str
    items_scale: int = 1  # an njobs job's world size: its reporting rank counts for all
    bench: Any = None
    outcome: Outcome | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def make_bench(self, device: Any) -> Any:
        """The ``Bench`` handed to the benchmark function; writes the ``meta`` record."""
        from pytest_dlbench.measure.bench import Bench

        self.stream.write("meta", **machine_meta(device))
        self.bench = Bench(
            name=self.spec.name,
            args=list(self.args),
            device=device,
            stream=self.stream,
            skip=self.spec.skip,
            stop=self.spec.stop,
            data_dir=self.data_dir,
            units=self.spec.units or "items/s",
            items_scale=self.items_scale,
            start_barrier=self._start_barrier(),
        )
        return self.bench

    def _start_barrier(self) -> Callable[[], dict[str, Any]] | None:
        """The replicas' start barrier, when the parent set one up (per_gpu under xdist)."""
        address = os.environ.get("DLBENCH_BARRIER")
        key = os.environ.get("DLBENCH_BARRIER_KEY")
        parties = int(os.environ.get("DLBENCH_BARRIER_PARTIES", "0") or 0)
        if not address or not key or parties < 2:
            return None
        from pytest_dlbench.run import barrier

        timeout = min(self.spec.max_duration, 300.0)
        return lambda: barrier.wait(address, key, parties, timeout=timeout)

    def finish_bench(self) -> None:
        if self.bench is not None:
            self.bench.close()

    def close(self) -> None:
        if self.bench is not None:
            # Already closed on the normal path; after a failure the last window may not be
            # readable (that is why the run failed), and the end record is already written.
            with contextlib.suppress(Exception):
                self.bench.close()
        self.stream.close()
