"""Launching one benchmark item in a child process (or an njobs job of them), from the
controller or an xdist worker: the child's command line and environment, the replicas' start
barrier, torchrun for njobs, and the supervised run (:func:`~pytest_dlbench.run.child.run_child`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_dlbench.run import layout
from pytest_dlbench.run.protocol import Env, Outcome, Status
from pytest_dlbench.suite import BenchSpec

if TYPE_CHECKING:
    from pytest_dlbench.plugin.session import BenchSession

__all__ = ["Launched", "Launcher"]


def _plugin_args(args: Sequence[str]) -> list[str]:
    """The parent's ``-p NAME`` options, so the child loads (or blocks) the same plugins."""
    found: list[str] = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            found += ["-p", args[index + 1]]
        elif arg.startswith("-p") and len(arg) > 2:
            found += ["-p", arg[2:]]
    return found


@dataclass(frozen=True)
class Launched:
    """What running one item gave: how it ended, and where its stream and output are."""

    outcome: Outcome
    stream: Path
    log: Path


class Launcher:
    """Runs items of ``session`` (the controller's or a worker's) in child processes."""

    def __init__(self, session: BenchSession, barrier_address: str | None = None) -> None:
        self.session = session
        self.config = session.config
        self.barrier_address = barrier_address

    def run(self, spec: BenchSpec, device: int, repeat: int | None) -> Launched:
        from pytest_dlbench.run.child import run_child

        session = self.session
        stream = session.stream_path(spec, device, repeat)
        log = layout.log_path(stream)
        spec_file = layout.write_spec(session.run_dir(), spec)
        cmd = self.child_command(spec, device, repeat, stream, spec_file)
        env = {**os.environ, **self.child_env(spec, device, repeat)}
        cpus = session.slots[device].cpus
        if spec.is_njobs:
            wanted, have = self.njobs_slots(spec), len(session.slots)
            if wanted > have:
                reason = f"needs {wanted} device slots, this run has {have}"
                return Launched(Outcome(Status.SKIPPED, reason), stream, log)
            from pytest_dlbench.run.launch.torchrun import plan_nodes_reason

            reason = plan_nodes_reason(spec.plan.get("nodes"), session.system)
            if reason:  # a step of a sweep over nodes (docs/time-to-train.md)
                return Launched(Outcome(Status.SKIPPED, reason), stream, log)
            launch = self.njobs_launch(spec, cmd)
            cmd, env = launch.argv, {**env, **launch.env}
            # Every slot's cores (an xdist worker is pinned to its own); ranks split them.
            cpus = tuple(sorted({c for slot in session.slots for c in slot.cpus}))
        barrier = self.barrier_for(spec, repeat)
        try:
            outcome = run_child(
                cmd, stream=stream, log=log, timeout=spec.max_duration,
                cwd=self.config.rootpath, env=env, cpus=cpus,
            )
        finally:
            if barrier is not None:  # this replica no longer holds the others back
                from pytest_dlbench.run import barrier as barriers

                barriers.leave(*barrier)
        return Launched(outcome, stream, log)

    def child_command(self, spec: BenchSpec, device: int, repeat: int | None, stream: Path,
                      spec_file: Path) -> list[str]:
        """``python -m pytest <suite>::<item>`` running this one item inline, from its resolved
        spec. The suite's absolute path, not the node id: a suite shipped with the package lies
        outside the rootdir, where node ids do not name the file."""
        session, config = self.session, self.config
        suite_path = next(s.path for s in session.suites if spec in s.specs)
        selection = f"{suite_path}::{layout.item_name(spec.name, device, repeat)}"
        cmd = [
            sys.executable, "-m", "pytest", selection,
            "-p", "no:cacheprovider",  # the parent's --lf data must not be touched
            "-q", "-s", "--no-header",
            "--rootdir", str(config.rootpath),
            "--bench-suite", str(suite_path),
            "--bench-isolation", "inline",
            "--bench-child-stream", str(stream),
            "--bench-child-spec", str(spec_file),
            "--bench-child-run-dir", str(session.run_dir()),
            "--bench-base", str(session.options.base),
            "--bench-repeat", str(session.options.repeat),
            "--bench-run-name", session.run_name,
        ]
        if config.inipath is not None:
            cmd += ["-c", str(config.inipath)]
        if config.getoption("bench_profile") is not None:
            cmd.append(f"--bench-profile={config.getoption('bench_profile')}")
        if config.getoption("bench_system"):
            cmd += ["--bench-system", str(Path(config.getoption("bench_system")).resolve())]
        if config.pluginmanager.hasplugin("xdist"):
            cmd += ["-n", "0"]  # the child runs exactly one item, never with workers
        # Hypothesis' plugin costs ~1 s of start-up per child and no benchmark uses it.
        cmd += ["-p", "no:hypothesispytest", *_plugin_args(config.invocation_params.args)]
        return cmd

    def child_env(self, spec: BenchSpec, device: int, repeat: int | None) -> dict[str, str]:
        slots = self.session.slots
        env = {
            "PYTHONUNBUFFERED": "1",
            Env.SLOTS: json.dumps([s.to_dict() for s in slots]),
        }
        if not spec.is_njobs:
            # An njobs job spans every slot: each rank picks its GPU and cores itself.
            env.update(slots[device].env())
        barrier = self.barrier_for(spec, repeat)
        if barrier:
            env[Env.BARRIER], env[Env.BARRIER_KEY], parties = barrier
            env[Env.BARRIER_PARTIES] = str(parties)
        return {**env, **spec.env}

    def barrier_for(self, spec: BenchSpec, repeat: int | None) -> tuple[str, str, int] | None:
        """(address, key, parties) when this item's replicas run at once on several workers."""
        slots = self.session.slots
        if not self.barrier_address or spec.is_njobs or len(slots) < 2:
            return None
        return self.barrier_address, f"{spec.name}.R{repeat or 0}", len(slots)

    def njobs_slots(self, spec: BenchSpec) -> int:
        """Ranks per node of an njobs job: ``plan.slots`` (a scaling step) or every slot."""
        return int(spec.plan.get("slots") or len(self.session.slots))

    def njobs_launch(self, spec: BenchSpec, child_cmd: list[str]):  # -> torchrun.Launch
        """The torchrun job (one node, or every node of the system) running ``child_cmd``."""
        from pytest_dlbench.run.launch.torchrun import njobs_launch

        env = self.child_env(spec, 0, None)
        gpus = [slot.gpu for slot in self.session.slots if slot.gpu is not None]
        if gpus:  # an xdist worker sees its own GPU only; the job needs every slot's
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        # Unique per job: a rendezvous id reused by a concurrent or stale job would join it.
        run_id = f"{spec.name}-{os.getpid()}-{time.time_ns()}"
        return njobs_launch(
            child_cmd,
            system=self.session.system,
            nproc=self.njobs_slots(spec),  # one rank per device slot of a node
            run_id=run_id,
            cwd=self.config.rootpath,
            env=env,
        )
