"""The object the plugin registers when a suite is asked for: suites, collection, selection."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_dlbench.options import results_base
from pytest_dlbench.suite import (
    BenchSpec,
    ResolvedSuite,
    SuiteWarning,
    SystemConfig,
    fill_all,
    find_suite,
    load_system,
    local_system,
    resolve_suite,
    select_specs,
)

__all__ = ["BenchSession", "RunOptions", "is_njobs"]


def is_njobs(spec: BenchSpec) -> bool:
    """One job over all device slots, launched with torchrun (seed 000, "Execution Plan")."""
    return spec.plan.get("method") == "njobs"


@dataclass(frozen=True)
class RunOptions:
    base: Path
    run_name: str | None
    repeat: int
    isolation: str
    select: tuple[str, ...]
    exclude: tuple[str, ...]
    overrides: tuple[str, ...]
    child_stream: str | None
    child_run_dir: str | None
    child_bench: str | None
    cpus_per_slot: int | None

    @classmethod
    def from_config(cls, config: pytest.Config) -> RunOptions:
        base_path = results_base(config)
        repeat = config.getoption("bench_repeat")
        if repeat < 1:
            raise pytest.UsageError("--bench-repeat must be at least 1")
        return cls(
            base=base_path,
            run_name=config.getoption("bench_run_name"),
            repeat=repeat,
            isolation=config.getoption("bench_isolation"),
            select=tuple(config.getoption("bench_select")),
            exclude=tuple(config.getoption("bench_exclude")),
            overrides=tuple(config.getoption("bench_override")),
            child_stream=config.getoption("bench_child_stream"),
            child_run_dir=config.getoption("bench_child_run_dir"),
            child_bench=config.getoption("bench_child_bench"),
            cpus_per_slot=config.getoption("bench_cpus_per_slot"),
        )


def _plugin_args(args: Sequence[str]) -> list[str]:
    """The parent's ``-p NAME`` options, so the child loads (or blocks) the same plugins."""
    found: list[str] = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            found += ["-p", args[index + 1]]
        elif arg.startswith("-p") and len(arg) > 2:
            found += ["-p", arg[2:]]
    return found


class BenchSession:
    """Registered as a plugin when ``--bench-suite`` is given (one per pytest process)."""

    PLUGIN_NAME = "dlbench-session"

    def __init__(
        self,
        config: pytest.Config,
        suites: Sequence[ResolvedSuite],
        system: SystemConfig,
        options: RunOptions,
    ) -> None:
        self.config = config
        self.suites = list(suites)
        self.system = system
        self.options = options
        self._by_path = {s.path: s for s in self.suites}
        self.selected_names = {
            s.name
            for suite in self.suites
            for s in select_specs(suite.specs, options.select, options.exclude)
        }

    @classmethod
    def from_config(cls, config: pytest.Config) -> BenchSession:
        options = RunOptions.from_config(config)
        root = config.rootpath
        system_file = config.getoption("bench_system")
        system = load_system(system_file) if system_file else local_system()
        suites = []
        for name in config.getoption("bench_suite"):
            suite = resolve_suite(find_suite(name, root), options.overrides)
            for note in suite.warnings:
                config.issue_config_time_warning(SuiteWarning(note), stacklevel=2)
            suites.append(suite)
        session = cls(config, suites, system, options)
        session._plan_devices()
        session._register_markers()
        session._point_collection_at_suites()
        if session._is_controller():
            from pytest_dlbench.plugin.reporter import BenchReporter

            config.pluginmanager.register(BenchReporter(session), BenchReporter.PLUGIN_NAME)
        return session

    # -- devices ------------------------------------------------------------------------------

    def _workers(self) -> int | None:
        """xdist workers of this run (None: not distributed). ``-n auto`` is already a number."""
        option = self.config.option
        if not getattr(option, "numprocesses", None) or getattr(option, "dist", "no") == "no":
            return None
        return int(option.numprocesses)

    def _plan_devices(self) -> None:
        """The device slots, the same list in the controller, its workers and their children
        (items ``name[Dk]`` must be identical everywhere); this process's own slot, if any."""
        from pytest_dlbench.run.devices import Slot, pin_to_slot, plan_slots

        worker_input = getattr(self.config, "workerinput", None)
        self.barrier_address: str | None = (worker_input or {}).get("dlbench_barrier")
        given = os.environ.get("DLBENCH_SLOTS") if self.options.child_stream else None
        if worker_input is not None and "dlbench_slots" in worker_input:
            given = worker_input["dlbench_slots"]
        if given:
            self.slots = [Slot.from_dict(d) for d in json.loads(given)]
        else:
            self.slots = plan_slots(
                workers=self._workers(), cpus_per_slot=self.options.cpus_per_slot
            )
            self._map_workers_to_slots()
        own = os.environ.get("DLBENCH_SLOT")
        if worker_input is not None and own is not None:
            pin_to_slot(self.slots[int(own)])

    def _map_workers_to_slots(self) -> None:
        """Worker k sees only slot k's GPU (and cores) from its first instruction: the variables
        are in the environment xdist starts it with, before anything can import torch."""
        option = self.config.option
        workers = self._workers()
        if workers is None or any(tx != "popen" for tx in option.tx):
            return  # not distributed, or the user wrote --tx specs: theirs to decide
        option.tx = [
            "popen" + "".join(f"//env:{k}={v}" for k, v in slot.env().items() if "," not in v)
            for slot in self.slots
        ]
        if len(self.slots) > 1:
            from pytest_dlbench.run.barrier import BarrierServer

            self._barrier_server = BarrierServer()
            self.barrier_address = self._barrier_server.address

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        server = getattr(self, "_barrier_server", None)
        if server is not None:
            server.close()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object:
        from pytest_dlbench.plugin.xdist import WaveScheduling

        return WaveScheduling(config, log)

    # -- configuration ------------------------------------------------------------------------

    def _register_markers(self) -> None:
        tags = sorted({t for suite in self.suites for s in suite.specs for t in s.tags})
        for tag in tags:
            self.config.addinivalue_line("markers", f"{tag}: benchmark tag from a dlbench suite")

    def _point_collection_at_suites(self) -> None:
        """Collect the suites themselves; without explicit paths, only them (not testpaths)."""
        paths = [str(s.path) for s in self.suites]
        args = self.config.args
        if self.config.args_source != pytest.Config.ArgsSource.ARGS:
            args[:] = paths
            # What is collected now comes from --bench-suite, not from testpaths (the header
            # would say "testpaths: tests" otherwise).
            self.config.args_source = pytest.Config.ArgsSource.ARGS
            return
        present = {str(Path(a.split("::")[0]).resolve()) for a in args}
        args.extend(p for p in paths if p not in present)

    # -- hooks --------------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        for suite in self.suites:
            disabled = len(suite.disabled)
            extra = f", {disabled} disabled" if disabled else ""
            lines.append(
                f"dlbench: suite {suite.name} ({suite.path}): "
                f"{len(suite.specs)} benchmarks{extra}"
            )
        return lines

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.File | None:
        suite = self._by_path.get(file_path.resolve())
        if suite is None:
            return None
        from pytest_dlbench.plugin.items import SuiteFile

        return SuiteFile.from_parent(parent, path=file_path, suite=suite, session_plugin=self)

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        kept, dropped = [], []
        for item in items:
            spec: BenchSpec | None = getattr(item, "spec", None)
            if spec is not None and (not spec.enabled or spec.name not in self.selected_names):
                dropped.append(item)
            else:
                kept.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    # -- the manifest: what this run set out to measure ----------------------------------------

    def _is_controller(self) -> bool:
        return self.options.child_stream is None and not hasattr(self.config, "workerinput")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self._is_controller() and not self.config.option.collectonly and session.items:
            self.write_manifest(s for item in session.items if (s := getattr(item, "spec", None)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        # Under xdist the controller does not collect; the workers report the selected ids.
        if getattr(self, "_manifest_written", False):
            return
        names = {i.split("::")[-1].split("[")[0] for i in ids}
        self.write_manifest(
            spec for suite in self.suites for spec in suite.specs if spec.name in names
        )

    def write_manifest(self, specs) -> None:
        """``manifest.json``: the benchmarks selected to run, so the report knows which weighted
        benchmark never produced a stream (the score's "incomplete" rule)."""
        import json

        benchmarks = {}
        for spec in specs:
            benchmarks[spec.name] = {
                "weight": spec.weight,
                "enabled": spec.enabled,
                "units": spec.units,
                "plan": spec.plan,
                "suite": str(spec.origin),
            }
        manifest = {"version": 1, "suite": self.run_name, "benchmarks": benchmarks}
        path = self.run_dir() / "manifest.json"
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        self._manifest_written = True

    # -- runs ---------------------------------------------------------------------------------

    @property
    def run_name(self) -> str:
        return self.options.run_name or "+".join(s.name for s in self.suites)

    def run_dir(self) -> Path:
        """This run's results folder, made once by the controller and shared with workers."""
        if getattr(self, "_run_dir", None) is None:
            given = self.options.child_run_dir
            worker_input = getattr(self.config, "workerinput", None)
            if given:
                self._run_dir = Path(given)
            elif worker_input and worker_input.get("dlbench_run_dir"):
                self._run_dir = Path(worker_input["dlbench_run_dir"])
            else:
                from pytest_dlbench.run.child import make_run_dir

                self._run_dir = make_run_dir(self.options.base, self.run_name)
        return self._run_dir

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: object) -> None:
        worker_input = node.workerinput  # type: ignore[attr-defined]
        worker_input["dlbench_run_dir"] = str(self.run_dir())
        worker_input["dlbench_slots"] = json.dumps([s.to_dict() for s in self.slots])
        if self.barrier_address:
            worker_input["dlbench_barrier"] = self.barrier_address

    def data_dir(self) -> Path:
        path = self.options.base / "data"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def device_slots(self, spec: BenchSpec) -> list[int]:
        """One item per slot for per_gpu; one item (the whole job) for njobs."""
        if spec.plan.get("method") == "njobs":
            return [0]
        return [slot.index for slot in self.slots]

    def child_command(self, item: pytest.Item, stream: Path) -> list[str]:
        """``python -m pytest <nodeid>`` running this one item inline, with the same suite."""
        suite = item.parent.suite  # type: ignore[attr-defined]
        config = self.config
        cmd = [
            sys.executable, "-m", "pytest", item.nodeid,
            "-p", "no:cacheprovider",  # the parent's --lf data must not be touched
            "-q", "-s", "--no-header",
            "--rootdir", str(config.rootpath),
            "--bench-suite", str(suite.path),
            "--bench-isolation", "inline",
            "--bench-child-stream", str(stream),
            "--bench-child-run-dir", str(self.run_dir()),
            "--bench-child-bench", item.spec.name,  # type: ignore[attr-defined]
            "--bench-base", str(self.options.base),
            "--bench-repeat", str(self.options.repeat),
            "--bench-run-name", self.run_name,
        ]
        if config.inipath is not None:
            cmd += ["-c", str(config.inipath)]
        for override in self.options.overrides:
            cmd += ["--bench-override", override]
        if config.getoption("bench_system"):
            cmd += ["--bench-system", str(Path(config.getoption("bench_system")).resolve())]
        if config.pluginmanager.hasplugin("xdist"):
            cmd += ["-n", "0"]  # the child runs exactly one item, never with workers
        # Hypothesis' plugin costs ~1 s of start-up per child and no benchmark uses it.
        cmd += ["-p", "no:hypothesispytest", *_plugin_args(config.invocation_params.args)]
        return cmd

    def child_env(self, item: pytest.Item) -> dict[str, str]:
        spec: BenchSpec = item.spec  # type: ignore[attr-defined]
        env = {
            "PYTHONUNBUFFERED": "1",
            "DLBENCH_CHILD": "1",
            "DLBENCH_SLOTS": json.dumps([s.to_dict() for s in self.slots]),
        }
        if not is_njobs(spec):
            # An njobs job spans every slot: each rank picks its GPU and cores itself.
            env.update(self.slots[item.device].env())  # type: ignore[attr-defined]
        barrier = self.barrier_for(item)
        if barrier:
            env["DLBENCH_BARRIER"], env["DLBENCH_BARRIER_KEY"], parties = barrier
            env["DLBENCH_BARRIER_PARTIES"] = str(parties)
        return {**env, **spec.env}

    def barrier_for(self, item: pytest.Item) -> tuple[str, str, int] | None:
        """(address, key, parties) when this item's replicas run at once on several workers."""
        spec: BenchSpec = item.spec  # type: ignore[attr-defined]
        if not self.barrier_address or spec.plan.get("method") == "njobs" or len(self.slots) < 2:
            return None
        key = f"{spec.name}.R{item.repeat or 0}"  # type: ignore[attr-defined]
        return self.barrier_address, key, len(self.slots)

    def njobs_slots(self, spec: BenchSpec) -> int:
        """Ranks per node of an njobs job: ``plan.slots`` (a scaling step) or every slot."""
        return int(spec.plan.get("slots") or len(self.slots))

    def njobs_launch(self, item: pytest.Item, child_cmd: list[str]):  # -> distributed.Launch
        """The torchrun job (one node, or every node of the system) running ``child_cmd``."""
        import time

        from pytest_dlbench.run.launch.torchrun import njobs_launch

        spec: BenchSpec = item.spec  # type: ignore[attr-defined]
        env = self.child_env(item)
        gpus = [slot.gpu for slot in self.slots if slot.gpu is not None]
        if gpus:  # an xdist worker sees its own GPU only; the job needs every slot's
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        # Unique per job: a rendezvous id reused by a concurrent or stale job would join it.
        run_id = f"{spec.name}-{os.getpid()}-{time.time_ns()}"
        return njobs_launch(
            child_cmd,
            system=self.system,
            nproc=self.njobs_slots(spec),  # one rank per device slot of a node
            run_id=run_id,
            cwd=self.config.rootpath,
            env=env,
        )

    def start_run(self, item: pytest.Item):  # -> RunContext
        from pytest_dlbench.run.child import stream_path
        from pytest_dlbench.run.context import RunContext
        from pytest_dlbench.run.devices import placeholder_context
        from pytest_dlbench.run.launch.torchrun import RankInfo, open_rank_stream

        spec: BenchSpec = item.spec  # type: ignore[attr-defined]
        device = item.device  # type: ignore[attr-defined]
        repeat = item.repeat  # type: ignore[attr-defined]
        if self.options.child_stream:
            path = Path(self.options.child_stream)
        else:
            path = stream_path(self.run_dir(), spec.name, device, repeat)
        data_dir = self.data_dir()
        context = placeholder_context(
            system=self.system, run_name=self.run_name, bench_name=spec.name, data_dir=data_dir
        )
        # An njobs rank: only the reporting rank writes, for the whole job (docs/multinode.md).
        rank = RankInfo.from_env()
        stream = open_rank_stream(path, rank)
        stream.write("config", spec=spec.to_dict(), device=device, repeat=repeat,
                     **rank.describe())
        return RunContext(
            spec=spec,
            device_index=device,
            repeat=repeat,
            path=path,
            stream=stream,
            args=fill_all(spec.args, context),
            data_dir=data_dir,
            run_name=self.run_name,
            items_scale=rank.items_scale,
        )
