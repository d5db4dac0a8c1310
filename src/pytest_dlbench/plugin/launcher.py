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

import pytest

from pytest_dlbench import layout
from pytest_dlbench.core.protocol import Env, Outcome, Status
from pytest_dlbench.results.judge import PAIRED_RATE, PAIRED_TEST, stop_before
from pytest_dlbench.run import barrier as barriers
from pytest_dlbench.run.against import round_order, source_paths, with_python_path
from pytest_dlbench.run.child import run_child
from pytest_dlbench.run.forkserver import ForkServer, ForkServerError
from pytest_dlbench.run.launch.torchrun import njobs_launch, plan_nodes_reason
from pytest_dlbench.run.preloads import preload_for
from pytest_dlbench.suite import BenchSpec

if TYPE_CHECKING:
    from pytest_dlbench.plugin.session import BenchSession
    from pytest_dlbench.results.judge import Stop
    from pytest_dlbench.run.against import BaseSide
    from pytest_dlbench.run.devices import Slot

__all__ = ["Launched", "Launcher"]


def plugin_args(args: Sequence[str]) -> list[str]:
    """The parent's ``-p NAME`` options, so the child loads (or blocks) the same plugins."""
    found: list[str] = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            found += ["-p", args[index + 1]]
        elif arg.startswith("-p") and len(arg) > 2:
            found += ["-p", arg[2:]]
    return found


def _has_xdist_workers(config: pytest.Config) -> bool:
    """This pytest process is an xdist controller with workers (they launch the children)."""
    return bool(getattr(config.option, "numprocesses", None)) and (
        getattr(config.option, "dist", "no") != "no")


@dataclass(frozen=True)
class Launched:
    """What running one item gave: how it ended, and where its stream and output are. In a
    paired run (``--bench-against``) this is the candidate's run, and ``base`` the base side's
    run of the same round (None when the base revision does not have the benchmark)."""

    outcome: Outcome
    stream: Path
    log: Path
    base: Launched | None = None


@dataclass(frozen=True)
class Side:
    """Where and from what one side of a paired run runs a benchmark."""

    name: str  # layout.BASE or layout.CANDIDATE
    spec: BenchSpec
    suite: Path  # the suite file the child selects its item from
    run_dir: Path  # the side's folder (layout.side_dir)
    rootdir: Path
    inifile: Path | None
    python_path: tuple[str, ...]  # first on the child's PYTHONPATH (the side's src layout)


class Launcher:
    """Runs items of ``session`` (the controller's or a worker's) in child processes."""

    def __init__(self, session: BenchSession, barrier_address: str | None = None, *,
                 session_root: int | None = None) -> None:
        """``session_root``: the pid of the controller whose several slots run at once (a
        worker's), handed to the children (``DLBENCH_SESSION``: their monitor's busy check)."""
        self.session = session
        self.config = session.config
        self.barrier_address = barrier_address
        self.session_root = session_root
        self._server: ForkServer | None = None
        #: Paired runs: the benchmarks whose verdict is clear, and where they stopped.
        self._stops: dict[str, Stop] = {}

    # -- the warm launcher (--bench-launcher=warm, docs/running.md) -----------------------------

    def start_server(self, specs: Sequence[BenchSpec] | None = None) -> None:
        """Start the fork server, when this process launches children and the warm launcher is
        on (an xdist controller launches nothing), for ``specs`` (the selected benchmarks: a
        ``-k toy`` run does not wait for open_clip; default every benchmark of the suites). Its
        imports go on while the first child's spec is written. A paired run's sides start
        fresh (:meth:`server_for`)."""
        session, config = self.session, self.config
        if (self._server is not None or session.options.launcher != "warm"
                or session.options.isolation != "process" or config.option.collectonly
                or session.against is not None  # both sides of a paired run start fresh
                or (session.role == "controller" and _has_xdist_workers(config))):
            return
        if specs is None:
            specs = [s for suite in session.suites for s in suite.specs]
        definitions = [s.definition for s in specs]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._server = ForkServer(cwd=config.rootpath, env=env,
                                  preload=preload_for(definitions, roots=[config.rootpath]))
        try:
            self._server.start()
        except (OSError, ForkServerError) as exc:
            self._server.broken = f"the fork server did not start: {exc}"

    def server_for(self, spec: BenchSpec, side: Side | None) -> ForkServer | None:
        """The warm server for this run, or None to start it fresh: an njobs job (torchrun
        starts its ranks) and a side of a paired run. A side's server would give every run of
        that side the same interpreter state (its str hash seed, its memory layout), a
        difference between the sides that no round pairs away: gate_power's A/A trials saw false
        alarms with a warm server per side (benchmarks/README.md)."""
        if spec.is_njobs or side is not None:
            return None
        self.start_server()
        server = self._server
        return server if server is not None and not server.broken else None

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

    def run(self, spec: BenchSpec, device: int, repeat: int | None) -> Launched:
        against = self.session.against
        if against is None:
            return self._run(spec, device, repeat)
        return self._run_pair(against, spec, device, repeat)

    def _run(self, spec: BenchSpec, device: int, repeat: int | None,
             side: Side | None = None) -> Launched:
        session = self.session
        run_dir = side.run_dir if side is not None else session.run_dir()
        spec = side.spec if side is not None else spec
        stream = (layout.stream_path(run_dir, spec.name, device, repeat) if side is not None
                  else session.stream_path(spec, device, repeat))
        log = layout.log_path(stream)
        spec_file = layout.write_spec(run_dir, spec)
        cmd = self.child_command(spec, device, repeat, stream, spec_file, side=side)
        env = {**os.environ, **self.child_env(spec, device, repeat, side=side)}
        if side is not None:
            env = with_python_path(env, side.python_path)
        cwd = side.rootdir if side is not None else self.config.rootpath
        cpus = session.slots[device].cpus
        if spec.is_njobs:
            wanted, have = self.njobs_slots(spec), len(session.slots)
            if wanted > have:
                reason = f"needs {wanted} device slots, this run has {have}"
                return Launched(Outcome(Status.SKIPPED, reason), stream, log)
            nodes_reason = plan_nodes_reason(spec.plan.get("nodes"), session.system)
            if nodes_reason:  # a step of a sweep over nodes (docs/time-to-train.md)
                return Launched(Outcome(Status.SKIPPED, nodes_reason), stream, log)
            launch = self.njobs_launch(spec, cmd, cwd=cwd)
            cmd, env = launch.argv, {**env, **launch.env}
            # The job's slots' cores (an xdist worker is pinned to its own); ranks split them.
            cpus = tuple(sorted({c for slot in self.job_slots(spec) for c in slot.cpus}))
        barrier = self.barrier_for(spec, repeat, side=side)
        try:
            outcome = run_child(
                cmd, stream=stream, log=log, timeout=spec.max_duration,
                cwd=cwd, env=env, cpus=cpus, server=self.server_for(spec, side),
            )
        finally:
            if barrier is not None:  # this replica no longer holds the others back
                barriers.leave(*barrier)
        return Launched(outcome, stream, log)

    # -- paired runs (--bench-against) ----------------------------------------------------------

    def sides(self, against: BaseSide, spec: BenchSpec) -> dict[str, Side]:
        """The candidate (this working tree) and, when the base revision has the benchmark,
        the base side (its worktree)."""
        config, session = self.config, self.session
        suite = next(s.path for s in session.suites if spec in s.specs)
        rootdir = Path(config.rootpath)
        sides = {layout.CANDIDATE: Side(
            layout.CANDIDATE, spec, suite, layout.side_dir(session.run_dir(), layout.CANDIDATE),
            rootdir, config.inipath, tuple(source_paths(against.repo, rootdir)),
        )}
        base_spec = against.specs.get(spec.name)
        if base_spec is not None:
            base_root = against.map_path(rootdir)
            if not base_root.is_dir():  # the rootdir's folder is new since the base revision
                base_root = against.path
            ini = against.map_path(config.inipath) if config.inipath is not None else None
            sides[layout.BASE] = Side(
                layout.BASE, base_spec, against.suite_paths[spec.name],
                layout.side_dir(session.run_dir(), layout.BASE), base_root,
                ini if ini is not None and ini.is_file() else None,
                tuple(source_paths(against.path, base_root)),
            )
        return sides

    def early_stop(self, spec: BenchSpec, repeat: int | None) -> str | None:
        """Why round ``repeat`` of a paired run need not run: the benchmark's verdict was
        already clear after the rounds before it (the sequential design, results/judge/paired.py;
        ``--bench-fixed-rounds`` runs every round). None: run it."""
        session = self.session
        if (session.against is None or session.options.fixed_rounds or not repeat
                or spec.name not in session.against.specs):
            return None
        stop = self._stops.get(spec.name)
        if stop is None:
            option = self.config.getoption
            stop = stop_before(
                session.run_dir(), spec.name, devices=session.device_slots(spec),
                before=repeat, rounds=session.options.repeat,
                tolerance=option("bench_tolerance"), alpha=option("bench_alpha"),
                test=option("bench_paired_test") or PAIRED_TEST,
                rate=option("bench_paired_rate") or PAIRED_RATE)
            if stop is None:
                return None
            self._stops[spec.name] = stop
        return f"{stop.describe()}: {stop.word}"

    def _run_pair(self, against: BaseSide, spec: BenchSpec, device: int,
                  repeat: int | None) -> Launched:
        """Round ``repeat`` of a paired run: both sides, in ABBA order, on the same slot."""
        sides = self.sides(against, spec)
        done: dict[str, Launched] = {}
        for name in round_order(repeat or 0):
            if name not in sides:
                continue  # the base revision does not have this benchmark
            done[name] = self._run(spec, device, repeat, side=sides[name])
            if done[name].outcome.status is Status.SKIPPED:
                break  # the same on the other side (not enough device slots)
        candidate = done.get(layout.CANDIDATE) or self._run(spec, device, repeat,
                                                            side=sides[layout.CANDIDATE])
        return Launched(candidate.outcome, candidate.stream, candidate.log, done.get(layout.BASE))

    def child_command(self, spec: BenchSpec, device: int, repeat: int | None, stream: Path,
                      spec_file: Path, *, side: Side | None = None) -> list[str]:
        """``python -m pytest <suite>::<item>`` running this one item inline, from its resolved
        spec. The suite's absolute path, not the node id: a suite shipped with the package lies
        outside the rootdir, where node ids do not name the file. A side of a paired run names
        its own suite, rootdir and ini file (the base side's are in its worktree)."""
        session, config = self.session, self.config
        if side is not None:
            suite_path, rootdir, inipath = side.suite, side.rootdir, side.inifile
            run_dir = side.run_dir
        else:
            suite_path = next(s.path for s in session.suites if spec in s.specs)
            rootdir, inipath, run_dir = config.rootpath, config.inipath, session.run_dir()
        selection = f"{suite_path}::{layout.item_name(spec.name, device, repeat)}"
        # Every value as --opt=value: a value that starts with '-' (--bench-run-name=-x) is
        # never read as an option of its own.
        cmd = [
            sys.executable, "-m", "pytest", selection,
            "-p", "no:cacheprovider",  # the parent's --lf data must not be touched
            "-q", "-s", "--no-header",
            f"--rootdir={rootdir}",
            f"--bench-suite={suite_path}",
            "--bench-isolation=inline",
            f"--bench-child-stream={stream}",
            f"--bench-child-spec={spec_file}",
            f"--bench-child-run-dir={run_dir}",
            f"--bench-base={session.options.base}",
            f"--bench-repeat={session.options.repeat}",
            f"--bench-run-name={session.run_name}",
        ]
        if inipath is not None:
            cmd.append(f"--config-file={inipath}")
        if config.getoption("bench_profile") is not None:
            cmd.append(f"--bench-profile={config.getoption('bench_profile')}")
        if config.getoption("bench_system"):
            cmd.append(f"--bench-system={Path(config.getoption('bench_system')).resolve()}")
        if config.pluginmanager.hasplugin("xdist"):
            cmd += ["-n", "0"]  # the child runs exactly one item, never with workers
        # Start-up a child does not need: hypothesis' plugin (~1 s), assertion rewriting of
        # conftests and plugins (a benchmark is no test module), and the two full garbage
        # collections of unraisableexception at exit (0.5 s).
        cmd += ["-p", "no:hypothesispytest", "-p", "no:unraisableexception", "--assert=plain",
                *plugin_args(config.invocation_params.args)]
        return cmd

    def child_env(self, spec: BenchSpec, device: int, repeat: int | None, *,
                  side: Side | None = None) -> dict[str, str]:
        slots = self.session.slots
        env = {
            "PYTHONUNBUFFERED": "1",
            Env.SLOTS: json.dumps([s.to_dict() for s in slots]),
            # Marks every process of this run (and which worker started it): see protocol.
            Env.RUN_DIR: str(self.session.run_dir()),
            Env.WORKER: os.environ.get("PYTEST_XDIST_WORKER", "controller"),
        }
        if self.session_root is not None:
            env[Env.SESSION] = str(self.session_root)
            env[Env.SESSION_CPUS] = ",".join(map(str, sorted({c for s in slots for c in s.cpus})))
        if not spec.is_njobs:
            # An njobs job spans its slots (njobs_launch): each rank picks its GPU and cores.
            env.update(slots[device].env())
        barrier = self.barrier_for(spec, repeat, side=side)
        if barrier:
            env[Env.BARRIER], env[Env.BARRIER_KEY], parties = barrier
            env[Env.BARRIER_PARTIES] = str(parties)
        return {**env, **spec.env}

    def barrier_for(self, spec: BenchSpec, repeat: int | None, *,
                    side: Side | None = None) -> tuple[str, str, int] | None:
        """(address, key, parties) when this item's replicas run at once on several workers
        (each side of a paired round has its own start)."""
        slots = self.session.slots
        if not self.barrier_address or spec.is_njobs or len(slots) < 2:
            return None
        key = f"{spec.name}.R{repeat or 0}" + (f".{side.name}" if side is not None else "")
        return self.barrier_address, key, len(slots)

    def njobs_slots(self, spec: BenchSpec) -> int:
        """Ranks per node of an njobs job: ``plan.slots`` (a scaling step) or every slot."""
        return int(spec.plan.get("slots") or len(self.session.slots))

    def job_slots(self, spec: BenchSpec) -> list[Slot]:
        """The slots an njobs job runs on: the first :meth:`njobs_slots` of them."""
        return list(self.session.slots[: self.njobs_slots(spec)])

    def njobs_launch(self, spec: BenchSpec, child_cmd: list[str],
                     cwd: Path | None = None):  # -> torchrun.Launch
        """The torchrun job (one node, or every node of the system) running ``child_cmd``."""
        env = self.child_env(spec, 0, None)
        # Only the job's GPUs: rank k takes the k-th (rank.py), and the monitor of rank 0
        # samples what CUDA_VISIBLE_DEVICES shows, so a 1-rank scaling step on 8 GPUs must not
        # see (and count the idle power of) the other 7. An xdist worker sees its own GPU only;
        # the job needs its slots'.
        gpus = [slot.gpu for slot in self.job_slots(spec) if slot.gpu is not None]
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            # As for one slot (Slot.env): these are NVML's (PCI bus) indices, and CUDA's default
            # order (fastest first) would make them name other GPUs on a mixed node.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        # Unique per job: a rendezvous id reused by a concurrent or stale job would join it.
        run_id = f"{spec.name}-{os.getpid()}-{time.time_ns()}"
        return njobs_launch(
            child_cmd,
            system=self.session.system,
            nproc=self.njobs_slots(spec),  # one rank per device slot of a node
            run_id=run_id,
            cwd=cwd or self.config.rootpath,
            env=env,
        )
