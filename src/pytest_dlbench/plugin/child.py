"""A child: the process that runs one benchmark in-process, under the parent's supervision.

It runs the resolved spec the parent wrote into the run directory (``--bench-child-spec``), so
a suite edited during the run cannot make it diverge, and it imports only that benchmark's
definition. Its stream path, run directory and device slots come from the parent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_dlbench import layout
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.plugin.session import BenchSession, RunOptions
from pytest_dlbench.run.devices import Slot, plan_slots
from pytest_dlbench.suite import BenchSpec, ResolvedSuite, find_suite

__all__ = ["ChildSession"]


class ChildSession(BenchSession):
    role = "child"

    @classmethod
    def load_suites(cls, config: pytest.Config, options: RunOptions) -> list[ResolvedSuite]:
        spec_file = config.getoption("bench_child_spec")
        if not spec_file:
            raise pytest.UsageError("--bench-child-stream needs --bench-child-spec")
        spec = layout.read_spec(spec_file)
        (name,) = config.getoption("bench_suite")
        return [ResolvedSuite(path=find_suite(name, config.rootpath), specs=[spec])]

    @property
    def only_bench(self) -> str | None:
        return self.suites[0].specs[0].name

    @property
    def runs_inline(self) -> bool:
        return True

    def plan_slots(self) -> list[Slot]:
        given = os.environ.get(Env.SLOTS)
        if given:
            return [Slot.from_dict(d) for d in json.loads(given)]
        return plan_slots(cpus_per_slot=self.options.cpus_per_slot)

    def make_run_dir(self) -> Path:
        return Path(self.config.getoption("bench_child_run_dir"))

    def stream_path(self, spec: BenchSpec, device: int, repeat: int | None) -> Path:
        return Path(self.config.getoption("bench_child_stream"))
