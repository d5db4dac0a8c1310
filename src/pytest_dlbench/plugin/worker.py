"""An xdist worker: pinned to one device slot, it runs the items the controller sends it.

The slots, the run directory, the start barrier's address and the session's root (the
controller's pid, when several slots run at once) come from the controller in
``workerinput``; the worker's own slot index is in its environment from its first instruction
(:meth:`~.controller.ControllerSession._map_workers_to_slots`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.plugin.launcher import Launcher
from pytest_dlbench.plugin.session import BenchSession
from pytest_dlbench.run.against import BaseSide
from pytest_dlbench.run.devices import Slot, pin_to_slot

__all__ = ["WorkerSession"]


def _worker_input(config: pytest.Config) -> dict[str, Any]:
    """What the controller gave this worker (``pytest_configure_node``)."""
    return config.workerinput  # type: ignore[attr-defined]  # xdist sets it on a worker's config


class WorkerSession(BenchSession):
    role = "worker"

    @classmethod
    def from_config(cls, config: pytest.Config) -> WorkerSession:
        session = super().from_config(config)
        assert isinstance(session, WorkerSession)
        worker_input = _worker_input(config)
        root = worker_input.get("dlbench_session")
        session.launcher = Launcher(session, worker_input.get("dlbench_barrier"),
                                    session_root=int(root) if root else None)
        if worker_input.get("dlbench_against"):
            # The controller's worktree, which it removes: the worker only resolves its suites.
            session.against = BaseSide.from_dict(json.loads(worker_input["dlbench_against"]))
            session.against.resolve(session.suites, session.options.overrides,
                                    session.selected_names)
        own = os.environ.get(Env.SLOT)
        if own is not None:  # before the fork server starts: it runs on the worker's cores
            pin_to_slot(session.slots[int(own)])
        return session

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.launcher is not None:
            self.launcher.close()

    def plan_slots(self) -> list[Slot]:
        given = _worker_input(self.config)["dlbench_slots"]
        return [Slot.from_dict(d) for d in json.loads(given)]

    def make_run_dir(self) -> Path:
        return Path(_worker_input(self.config)["dlbench_run_dir"])
