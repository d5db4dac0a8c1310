"""What every pytest process of a suite run shares: the suites, the device slots, collection.

A suite run has up to three kinds of pytest process, each with its own session class:

- the controller (:mod:`.controller`): the process the user started; plans the device slots,
  makes the run directory, writes the manifest, runs items (or hands them to xdist workers)
  and reports;
- an xdist worker (:mod:`.worker`): pinned to one device slot, runs the items sent to it;
- a child (:mod:`.child`): runs one benchmark in-process, from the resolved spec the parent
  wrote into the run directory (``--bench-isolation=process``, the default).

The controller and workers launch children through :class:`~.launcher.Launcher`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_dlbench import layout
from pytest_dlbench.options import results_base
from pytest_dlbench.plugin.items import SuiteFile, suite_nodeid
from pytest_dlbench.profile import ProfileConfig
from pytest_dlbench.results.judge import ROUNDS
from pytest_dlbench.run.devices import Slot
from pytest_dlbench.run.harness import start_run
from pytest_dlbench.suite import (
    BenchSpec,
    ResolvedSuite,
    SuiteWarning,
    SystemConfig,
    find_suite,
    load_system,
    local_system,
    resolve_suite,
    select_specs,
)
from pytest_dlbench.suite.capability import RunFacts, skip_reason

if TYPE_CHECKING:
    from pytest_dlbench.plugin.launcher import Launcher
    from pytest_dlbench.run.against import BaseSide
    from pytest_dlbench.run.harness import RunContext

__all__ = ["BenchSession", "ReportedRun", "RunOptions"]


class ReportedRun(Protocol):
    """What the reporter (plugin/reporter.py) reads of a run: a suite's session, or the bench
    fixture's runs of your own tests (plugin/fixture_runs.py)."""

    config: pytest.Config
    against: BaseSide | None
    profiles: dict[str, ProfileConfig]

    @property
    def run_name(self) -> str: ...

    def existing_run_dir(self) -> Path | None: ...


@dataclass(frozen=True)
class RunOptions:
    """The run options every role reads (the report options are the reporter's)."""

    base: Path
    run_name: str | None
    repeat: int
    isolation: str
    select: tuple[str, ...]
    exclude: tuple[str, ...]
    overrides: tuple[str, ...]
    cpus_per_slot: int | None
    #: ``--bench-launcher``: ``warm`` forks children from a server that imported torch once,
    #: ``fresh`` starts a new interpreter per child.
    launcher: str = "warm"
    #: ``--bench-against``: the base revision of a paired run (None: not paired). Its rounds
    #: are the items' repeats (``name[D0-R3]`` is round 3 of both sides).
    against: str | None = None
    #: ``--bench-fixed-rounds``: a paired run runs every round (no early stop).
    fixed_rounds: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> RunOptions:
        repeat = config.getoption("bench_repeat")
        if repeat < 1:
            raise pytest.UsageError("--bench-repeat must be at least 1")
        run_name = config.getoption("bench_run_name")
        if run_name is not None:
            try:
                layout.check_run_name(run_name)
            except layout.UnsafeName as exc:
                raise pytest.UsageError(f"--bench-run-name: {exc}") from None
        against = config.getoption("bench_against")
        rounds = config.getoption("bench_rounds")
        fixed_rounds = bool(config.getoption("bench_fixed_rounds"))
        if config.getoption("bench_child_stream"):
            # A child runs one side of one round, as told by its command line; a paired run's
            # options reach it too through PYTEST_ADDOPTS or the ini file's addopts.
            against = rounds = None
            fixed_rounds = False
        if against is not None:
            if repeat != 1:
                raise pytest.UsageError(
                    "--bench-against runs --bench-rounds rounds of pairs: use --bench-rounds, "
                    "not --bench-repeat")
            if config.getoption("bench_isolation") == "inline":
                raise pytest.UsageError(
                    "--bench-against needs --bench-isolation=process (each side runs its own "
                    "code in its own process)")
            repeat = rounds or ROUNDS
        elif rounds is not None:
            raise pytest.UsageError("--bench-rounds goes with --bench-against "
                                    "(use --bench-repeat to run a benchmark several times)")
        elif fixed_rounds:
            raise pytest.UsageError("--bench-fixed-rounds goes with --bench-against")
        return cls(
            base=results_base(config),
            run_name=run_name,
            repeat=repeat,
            isolation=config.getoption("bench_isolation"),
            select=tuple(config.getoption("bench_select")),
            exclude=tuple(config.getoption("bench_exclude")),
            overrides=tuple(config.getoption("bench_override")),
            cpus_per_slot=config.getoption("bench_cpus_per_slot"),
            launcher=config.getoption("bench_launcher"),
            against=against,
            fixed_rounds=fixed_rounds,
        )


class BenchSession:
    """Registered as a plugin when ``--bench-suite`` is given (one per pytest process)."""

    PLUGIN_NAME = "dlbench-session"
    #: ``controller``, ``worker`` or ``child``: which process of the run this is.
    role = "controller"

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
        self.slots: list[Slot] = self.plan_slots()
        self._run_dir: Path | None = None
        self.profiles = self._profile_settings(config.getoption("bench_profile"))
        #: The base side of a paired run (``--bench-against``), set by the controller (which
        #: makes its worktree) and by xdist workers (from the controller's description).
        self.against: BaseSide | None = None
        #: What starts the children of the items run here: set by the controller and the
        #: workers once their checks passed (a child runs its benchmark itself: None).
        self.launcher: Launcher | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> BenchSession:
        options = RunOptions.from_config(config)
        system_file = config.getoption("bench_system")
        system = load_system(system_file) if system_file else local_system()
        session = cls(config, cls.load_suites(config, options), system, options)
        session._register_markers()
        session._point_collection_at_suites()
        return session

    @classmethod
    def load_suites(cls, config: pytest.Config, options: RunOptions) -> list[ResolvedSuite]:
        suites = []
        for name in config.getoption("bench_suite"):
            suite = resolve_suite(find_suite(name, config.rootpath), options.overrides)
            for note in suite.warnings:
                config.issue_config_time_warning(SuiteWarning(note), stacklevel=2)
            suites.append(suite)
        return suites

    def _profile_settings(self, cli_text: str | None) -> dict[str, ProfileConfig]:
        """Each benchmark's profiling settings (``--bench-profile`` and its ``profile:`` key),
        checked here so that a bad one is a usage error before anything runs."""
        cli = ProfileConfig.parse_cli(cli_text) if cli_text is not None else None
        settings = {}
        for suite in self.suites:
            for spec in suite.specs:
                mapping = spec.config.get("profile")
                own = (ProfileConfig.from_mapping(mapping, where=f"{spec.origin}: {spec.name}: "
                                                  "profile") if mapping is not None else None)
                if cli is not None or own is not None:
                    merged = ProfileConfig.merge(cli, own)
                    if merged:
                        settings[spec.name] = merged
        return settings

    # -- what each role decides --------------------------------------------------------------

    def plan_slots(self) -> list[Slot]:
        """The device slots: the same list in every process of the run (items ``name[Dk]``
        must be identical everywhere)."""
        raise NotImplementedError

    def make_run_dir(self) -> Path:
        raise NotImplementedError

    def run_dir(self) -> Path:
        """This run's results folder: made once by the controller, shared with the others."""
        if self._run_dir is None:
            self._run_dir = self.make_run_dir()
        return self._run_dir

    def existing_run_dir(self) -> Path | None:
        """The run's results folder if it was made and is there; None when nothing ran (asking
        never makes it)."""
        run_dir = self._run_dir
        return run_dir if run_dir is not None and run_dir.is_dir() else None

    @property
    def runs_inline(self) -> bool:
        """Items call their benchmark in this process (a child, or ``--bench-isolation=inline``)."""
        return self.options.isolation == "inline"

    @property
    def only_bench(self) -> str | None:
        """Only this benchmark's definition is imported (a child runs one benchmark)."""
        return None

    def stream_path(self, spec: BenchSpec, device: int, repeat: int | None) -> Path:
        return layout.stream_path(self.run_dir(), spec.name, device, repeat)

    # -- shared -------------------------------------------------------------------------------

    @property
    def run_name(self) -> str:
        return self.options.run_name or "+".join(s.name for s in self.suites)

    def data_dir(self) -> Path:
        path = self.options.base / layout.DATA
        path.mkdir(parents=True, exist_ok=True)
        return path

    def skip_reason(self, spec: BenchSpec) -> str | None:
        """Why this run cannot run ``spec`` (milabench's ``requires_capabilities`` and
        ``num_machines`` against the slots and the system file), or None."""
        gpus = any(slot.gpu is not None for slot in self.slots)
        facts = RunFacts.of(self.system, slots=len(self.slots), gpus=gpus)
        return skip_reason(spec, facts)

    def device_slots(self, spec: BenchSpec) -> list[int]:
        """One item per slot for per_gpu; one item (the whole job) for njobs."""
        return [0] if spec.is_njobs else [slot.index for slot in self.slots]

    def start_run(self, spec: BenchSpec, device: int, repeat: int | None) -> RunContext:
        """Open the stream of a benchmark run in this process and write its ``config``."""
        return start_run(
            spec,
            device=device,
            repeat=repeat,
            path=self.stream_path(spec, device, repeat),
            data_dir=self.data_dir(),
            run_name=self.run_name,
            system=self.system,
            profile=self.profiles.get(spec.name),
        )

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
        args[:] = [self._suite_arg(a) for a in args]
        present = {str(Path(a.split("::")[0]).resolve()) for a in args}
        args.extend(p for p in paths if p not in present)

    def _suite_arg(self, arg: str) -> str:
        """``smoke.yaml::toy[D0]``, an item id of a suite outside the root directory (a shipped
        one) as pytest printed it (plugin/items.suite_nodeid), pointed at the suite's file."""
        head, sep, rest = arg.partition("::")
        if Path(head).exists():
            return arg
        for suite in self.suites:
            if head in (suite.path.name, suite.name):
                return f"{suite.path}{sep}{rest}"
        return arg

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

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        suite = self._by_path.get(file_path.resolve())
        if suite is None:
            return None
        return SuiteFile.from_parent(parent, path=file_path, suite=suite, session_plugin=self,
                                     nodeid=suite_nodeid(file_path, self.config.rootpath))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The fork server (the warm launcher) imports what the selected benchmarks need.
        specs = [s for item in session.items if (s := getattr(item, "spec", None)) is not None]
        if self.launcher is not None and specs and not self.config.option.collectonly:
            self.launcher.start_server(specs)

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        kept, dropped = [], []
        for item in items:
            spec: BenchSpec | None = getattr(item, "spec", None)
            if spec is not None and (
                not spec.enabled or spec.definition is None  # no definition: resolver's note
                or spec.name not in self.selected_names
            ):
                dropped.append(item)
            else:
                kept.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
