"""The controller: the pytest process the user started.

It plans the device slots (and maps xdist workers onto them), makes the run directory, writes
the manifest of what the run set out to measure, runs items itself or hands them to workers,
and registers the reporter that scores the run at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_dlbench import layout
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.protocol import Status
from pytest_dlbench.loggers import manifest_facts
from pytest_dlbench.measure.machine import machine_state
from pytest_dlbench.measure.stream import Event, StreamWriter
from pytest_dlbench.options import check_outputs
from pytest_dlbench.plugin.against_setup import AGAINST_AND_COMPARE, AgainstSetup
from pytest_dlbench.plugin.launcher import Launcher
from pytest_dlbench.plugin.progress import ProgressReporter
from pytest_dlbench.plugin.reporter import BenchReporter
from pytest_dlbench.plugin.session import BenchSession, RunOptions
from pytest_dlbench.plugin.tracking import TrackingPlugin, check_loggers, loggers_asked
from pytest_dlbench.plugin.xdist import WaveScheduling
from pytest_dlbench.results import figures
from pytest_dlbench.results.figures import readiness_warning
from pytest_dlbench.run.barrier import BarrierServer
from pytest_dlbench.run.devices import Slot, check_inline_slots, discover_gpus, plan_slots
from pytest_dlbench.run.launch.torchrun import job_nodes
from pytest_dlbench.suite import BenchSpec, ResolvedSuite, SystemConfig
from pytest_dlbench.suite.selection import unknown_selection

__all__ = ["AGAINST_AND_COMPARE", "ControllerSession"]


class _WorkerNode(Protocol):
    """xdist's ``WorkerController``, as far as :meth:`~ControllerSession.pytest_configure_node`
    uses it (xdist ships no types)."""

    workerinput: dict[str, Any]


class ControllerSession(BenchSession):
    role = "controller"

    def __init__(
        self,
        config: pytest.Config,
        suites: Sequence[ResolvedSuite],
        system: SystemConfig,
        options: RunOptions,
    ) -> None:
        super().__init__(config, suites, system, options)
        #: What makes this machine not ready to benchmark
        #: (results/figures/machine.readiness_problems).
        self.not_ready: list[str] = []
        #: The replicas' start barrier, with several xdist workers (run/barrier.py).
        self._barrier_server: BarrierServer | None = None
        #: xdist's scheduler, when the run is distributed (plugin/xdist.py).
        self._scheduler: WaveScheduling | None = None
        #: The base side of a paired run and its removal (--bench-against).
        self._against_setup: AgainstSetup | None = None
        self._manifest_written = False
        self._readiness_said = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> ControllerSession:
        session = super().from_config(config)
        assert isinstance(session, ControllerSession)
        session._check_selection()
        if session.options.against is not None and config.getoption("bench_compare"):
            raise pytest.UsageError(AGAINST_AND_COMPARE)  # before the baseline file is read
        session._check_machine()
        reporter = BenchReporter(session)
        config.pluginmanager.register(reporter, BenchReporter.PLUGIN_NAME)
        if not config.option.collectonly:
            # An output that could not be written at the end stops the run before it starts.
            check_outputs(lambda dest: config.getoption(f"bench_{dest}"), cli=False)
        if session.options.against is not None:
            session._check_out_base(session.options.against)  # a bad revision leaves nothing
        loggers = loggers_asked(config)  # loggers/registry.py
        if loggers:
            check_loggers(config)  # a logger that is not installed leaves nothing behind
        if not config.option.collectonly:
            # A results directory that cannot be written stops the run before it starts (after
            # the baseline's check: a bad baseline leaves nothing behind).
            layout.prepare_base(session.options.base)
        barrier = session._map_workers_to_slots()
        session.launcher = Launcher(session, barrier)
        if not config.option.collectonly and session.options.isolation == "process":
            # The benchmarks run in children: this process only waits, and can show progress.
            progress = ProgressReporter(session.existing_run_dir)
            config.pluginmanager.register(progress, ProgressReporter.PLUGIN_NAME)
        if loggers:
            tracking = TrackingPlugin(session, reporter)  # it logs what the reporter decided
            config.pluginmanager.register(tracking, TrackingPlugin.PLUGIN_NAME)
        return session

    def _check_selection(self) -> None:
        """A ``--bench-select`` word that names no benchmark, group or tag (a typo: ``resnt``)
        is a usage error naming the close names, before anything runs."""
        specs = [spec for suite in self.suites for spec in suite.specs]
        line = unknown_selection(specs, self.options.select)
        if line is not None:
            names = " ".join(suite.name for suite in self.suites)
            raise pytest.UsageError(f"{line}; `dlbench resolve {names}` lists them")

    # -- machine readiness: one warning line at the start, or a usage error -------------------

    def _check_machine(self) -> None:
        if self.config.option.collectonly:
            return  # nothing is measured: whether the machine is ready does not matter
        self.not_ready = figures.readiness_problems(machine_state())
        if self.not_ready and self.config.getoption("bench_require_ready"):
            raise DlbenchError(figures.readiness_error(self.not_ready))

    def readiness_line(self) -> str | None:
        """The warning, the first time it is asked for (the header, or the session's start
        with -q): one line per session."""
        if not self.not_ready or self._readiness_said:
            return None
        self._readiness_said = True
        return readiness_warning(self.not_ready)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = super().pytest_report_header(config)
        line = self.readiness_line()
        return [*lines, line] if line else lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # -q and --no-header hide the header: the warning is written on its own instead.
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        if getattr(reporter, "showheader", True) and not getattr(reporter, "no_header", False):
            return
        line = self.readiness_line()
        if line is not None:
            reporter.write_line(line, yellow=True)

    def plan_slots(self) -> list[Slot]:
        found = discover_gpus()
        if found.note:  # GPUs counted without NVML: said once, in one line
            self.config.issue_config_time_warning(
                pytest.PytestWarning(f"dlbench: {found.note}"), stacklevel=2)
        slots = plan_slots(workers=self._workers(), cpus_per_slot=self.options.cpus_per_slot,
                           gpus=found)
        if self.options.isolation == "inline" and self._workers() is None:
            check_inline_slots(slots)  # one process, several GPUs: refused (a usage error)
        return slots

    # -- a paired run (--bench-against): the base revision's worktree ------------------------

    def _check_out_base(self, rev: str) -> None:
        """Check ``rev`` out in a temporary worktree (plugin/against_setup.py: removed when the
        session ends, whatever ends it) and resolve its suites; one line and exit status 4 when
        that cannot be done."""
        config = self.config
        setup = AgainstSetup.check_out(config, rev)
        if setup is None:  # --collect-only: the revision is checked, no worktree made
            return
        self._against_setup = setup
        self.against = setup.side
        try:
            setup.side.resolve(self.suites, self.options.overrides, self.selected_names)
        except DlbenchError as exc:
            self._remove_base()
            raise pytest.UsageError(str(exc)) from None
        for note in setup.warnings():
            config.issue_config_time_warning(pytest.PytestWarning(f"dlbench: {note}"),
                                             stacklevel=2)

    def _remove_base(self) -> None:
        if self._against_setup is not None:
            self._against_setup.remove()

    def make_run_dir(self) -> Path:
        return layout.make_run_dir(self.options.base, self.run_name)

    def _workers(self) -> int | None:
        """xdist workers of this run (None: not distributed). ``-n auto`` is already a number."""
        option = self.config.option
        if not getattr(option, "numprocesses", None) or getattr(option, "dist", "no") == "no":
            return None
        return int(option.numprocesses)

    def _map_workers_to_slots(self) -> str | None:
        """Worker k sees only slot k's GPU (and cores) from its first instruction: the variables
        are in the environment xdist starts it with, before anything can import torch. Returns
        the address of the replicas' start barrier, when there are several workers."""
        option = self.config.option
        if self._workers() is None or any(tx != "popen" for tx in option.tx):
            return None  # not distributed, or the user wrote --tx specs: theirs to decide
        option.tx = [
            "popen" + "".join(f"//env:{k}={v}" for k, v in slot.env().items() if "," not in v)
            for slot in self.slots
        ]
        if len(self.slots) < 2:
            return None
        self._barrier_server = BarrierServer()
        return self._barrier_server.address

    # -- the manifest: what this run set out to measure ----------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        super().pytest_collection_finish(session)
        if not self.config.option.collectonly and session.items:
            self._write_manifest(s for item in session.items if (s := getattr(item, "spec", None)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        # Under xdist the controller does not collect; the workers report the selected ids.
        if self._manifest_written:
            return
        names = {parsed.bench for i in ids if (parsed := layout.parse_item_id(i))}
        self._write_manifest(
            spec for suite in self.suites for spec in suite.specs if spec.name in names
        )

    def _write_manifest(self, selected: Iterable[BenchSpec]) -> None:
        specs = list(selected)
        facts = manifest_facts()
        # The commit, machine and versions too: `dlbench log` of this run later tags it as
        # logging during the run does.
        layout.write_manifest(self.run_dir(), self.run_name, specs, facts=facts,
                              nodes=job_nodes(self.system), suite_weighted=self._weighted(),
                              suite_weights=self._weights())
        if self.against is not None:
            self._write_base_manifest(specs, facts)
        self._manifest_written = True

    def _weighted(self) -> list[str]:
        """The weighted benchmarks the suites hold that a run of them all would run (enabled,
        with a definition), whatever ``-k``, ``-m`` or ``--bench-select`` selected: against
        them, the manifest's benchmarks are the whole suite's score or a subset's."""
        return [spec.name for suite in self.suites for spec in suite.specs
                if spec.enabled and spec.definition is not None and spec.weight > 0]

    def _weights(self) -> dict[str, float]:
        """The weight of each benchmark :meth:`_weighted` names."""
        return {spec.name: spec.weight for suite in self.suites for spec in suite.specs
                if spec.enabled and spec.definition is not None and spec.weight > 0}

    def _write_base_manifest(self, specs: list[BenchSpec], facts: dict[str, Any]) -> None:
        """``base/manifest.json`` (the base revision's specs of the selected benchmarks) and
        ``against.json`` (what the base is, the rounds and their order, the notes)."""
        setup = self._against_setup
        assert setup is not None
        side = setup.side
        base_specs = [side.specs[s.name] for s in specs if s.name in side.specs]
        base_dir = layout.base_dir(self.run_dir())
        base_dir.mkdir(parents=True, exist_ok=True)
        layout.write_manifest(base_dir, self.run_name, base_specs,
                              facts={**facts, "commit": side.sha})
        setup.write_against(self.run_dir(), rounds=self.options.repeat,
                            fixed_rounds=self.options.fixed_rounds)

    # -- xdist ----------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: _WorkerNode) -> None:
        worker_input = node.workerinput
        worker_input["dlbench_run_dir"] = str(self.run_dir())
        worker_input["dlbench_slots"] = json.dumps([s.to_dict() for s in self.slots])
        if self.launcher is not None and self.launcher.barrier_address:
            worker_input["dlbench_barrier"] = self.launcher.barrier_address
            # Several slots at once on this machine: each run's monitor counts every slot's
            # processes (this one's descendants) as the session's, not as a neighbour's.
            worker_input["dlbench_session"] = str(os.getpid())
        if self.against is not None:
            worker_input["dlbench_against"] = json.dumps(self.against.to_dict())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object:
        self._scheduler = WaveScheduling(config, log, on_lost=self._report_lost)
        return self._scheduler

    # -- a worker that died --------------------------------------------------------------------
    #
    # Its child died with it (PR_SET_PDEATHSIG) and the child's guard ended the child's stream.
    # Here: the replicas of its item on other workers stop waiting for it at the start barrier,
    # and every item it will not run is reported, in pytest and in the streams alike. Its other
    # items run on the worker xdist starts in its place (plugin/xdist.WaveScheduling).

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        if self._scheduler is not None:
            self._scheduler.node_down(node, error)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: object, sched: object) -> None:
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "?")
        self._end_lost_run(crashitem, f"crash: the xdist worker {worker} running it died")

    @pytest.hookimpl(tryfirst=True)  # before the reporter scores the streams
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        scheduler = self._scheduler
        if scheduler is None or not scheduler.crashed:
            return
        # xdist stops a run when its workers died too often: what never ran is reported.
        left = scheduler.unfinished()
        workers = ", ".join(scheduler.crashed)
        self._report_lost(left, f"not run: the run stopped after xdist workers died ({workers})")

    def _report_lost(self, nodeids: list[str], reason: str) -> None:
        for nodeid in nodeids:
            self._end_lost_run(nodeid, reason)
            fspath = nodeid.split("::")[0]
            report = pytest.TestReport(nodeid=nodeid, location=(fspath, None, fspath),
                                       keywords={}, outcome="failed", longrepr=reason,
                                       when="call")
            self.config.hook.pytest_runtest_logreport(report=report)

    def _end_lost_run(self, nodeid: str, reason: str) -> None:
        """Release the item's barrier, and end its stream unless it has its ``end`` already
        (written by the child, or by the child's guard: the writer refuses a second one)."""
        parsed = layout.parse_item_id(nodeid)
        spec = next((s for suite in self.suites for s in suite.specs
                     if parsed is not None and s.name == parsed.bench), None)
        if parsed is None or spec is None:
            return
        server = self._barrier_server
        barrier = self.launcher.barrier_for(spec, parsed.repeat) if self.launcher else None
        if server is not None and barrier is not None:
            server.release(barrier[1], barrier[2])
        path = layout.stream_path(self.run_dir(), spec.name, parsed.device, parsed.repeat)
        with contextlib.suppress(OSError), StreamWriter(path) as stream:
            if path.stat().st_size == 0:  # it never started: the score still knows what it was
                stream.write(Event.CONFIG, spec=spec.to_dict(), device=parsed.device,
                             repeat=parsed.repeat)
            stream.write(Event.END, status=Status.FAIL, reason=reason, time=time.time(),
                         writer="controller")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.launcher is not None:
            self.launcher.close()
        if self._barrier_server is not None:
            self._barrier_server.close()
        self._remove_base()

