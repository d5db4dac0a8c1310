"""Benchmarks of your own tests: the ``bench`` fixture in a test file run without ``--bench-suite``.

``pytest test_dl.py`` prints the same results table and score as a suite run, and honours the
report options (``--bench-html``, ``--bench-save``, ``--bench-export``, ``--bench-compare`` and
the gate's, ``--bench-confirm`` among them: plugin/confirm.py) and ``--bench-against``
(plugin/fixture_against.py) for them. A ``--bench-*``
option that nothing uses (no test used the fixture, or an option only a suite has, such as
``--bench-select``) is said in one line at the end.

:class:`FixtureRuns` is registered in every process of a run without ``--bench-suite``: it owns
the run directory (``<base>/runs/tests.<time>``, or ``--bench-run-name``), shared with xdist
workers; the controller makes a :class:`~.reporter.BenchReporter` over it when a report option
is given or a benchmark ran, and forwards its hooks. Nothing here imports torch or the suites:
an ordinary test run pays only a few lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.loggers.registry import logger_options
from pytest_dlbench.options import (
    REPORT_OPTIONS,
    RUN_OPTIONS,
    SUITE_OPTIONS,
    results_base,
)

if TYPE_CHECKING:
    from pytest_dlbench.plugin.fixture_against import FixtureAgainst
    from pytest_dlbench.plugin.reporter import BenchReporter
    from pytest_dlbench.profile import ProfileConfig
    from pytest_dlbench.run.against import BaseSide

__all__ = ["FixtureRuns", "given_options", "unused_options_line"]

#: The run directory the controller made, for its xdist workers.
WORKER_KEY = "dlbench_tests_run_dir"
#: What a fixture benchmark's run uses besides the report options (``--bench-confirm``: a
#: suspected verdict's test runs again, plugin/confirm.py; ``--bench-fixture-steps``: its
#: steps, plugin/fixture_steps.py).
FIXTURE_OPTIONS = {"--bench-base", "--bench-run-name", "--bench-confirm",
                   "--bench-fixture-steps"}
#: Used by the data fixtures too (``bench_data_dir`` is ``<base>/data``): never "not used".
DATA_OPTIONS = {"--bench-base"}
#: Report options that belong to a --bench-against run (not made for fixture benchmarks).
PAIRED_OPTIONS = {"--bench-paired-test", "--bench-paired-rate"}


def given_options(value: Callable[[str], Any]) -> list[str]:
    """The ``--bench-*`` flags given a value other than their default (``value(dest)``: the
    option's value, as ``config.getoption``), in the order of ``--help``."""
    flags = [(flag, kwargs.get("default")) for flag, kwargs in (*SUITE_OPTIONS, *RUN_OPTIONS)]
    flags += [(o.pytest_flag, o.kwargs.get("default"))
              for o in (*logger_options(), *REPORT_OPTIONS)]
    given = []
    for flag, default in flags:
        current = value(flag[2:].replace("-", "_"))
        if current != default and not (current == [] and default in (None, [])):
            given.append(flag)
    return given


def unused_options_line(given: list[str], *, benchmarks_ran: bool,
                        paired: bool = False) -> str | None:
    """One line for the options of a run without ``--bench-suite`` that nothing used: all of
    them when no benchmark ran, else those only a suite run has (``paired``: a
    ``--bench-against`` run, which uses the paired test's options)."""
    if not benchmarks_ran:
        given = [flag for flag in given if flag not in DATA_OPTIONS]
        if not given:
            return None
        return (f"dlbench: warning: {', '.join(given)} not used: no --bench-suite given and no "
                "test used the bench fixture")
    used = {o.pytest_flag for o in REPORT_OPTIONS} - PAIRED_OPTIONS | FIXTURE_OPTIONS
    if paired:  # --bench-launcher: how the rounds' children start (plugin/fixture_against.py)
        used |= PAIRED_OPTIONS | {"--bench-against", "--bench-rounds", "--bench-fixed-rounds",
                                  "--bench-launcher"}
    unused = [flag for flag in given if flag not in used]
    if not unused:
        return None
    return (f"dlbench: warning: {', '.join(unused)} not used: only a --bench-suite run has "
            f"{'them' if len(unused) > 1 else 'it'} (the bench fixture's benchmarks ran)")


class FixtureRuns:
    """The ``bench`` fixture's runs of one pytest process (no ``--bench-suite``)."""

    PLUGIN_NAME = "dlbench-fixture-runs"
    #: Read by the reporter: a fixture benchmark has no base side and no profile settings.
    against: BaseSide | None = None

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.profiles: dict[str, ProfileConfig] = {}
        self._run_dir: Path | None = None
        #: The reporter, in the controller (None in an xdist worker).
        self.reporter: BenchReporter | None = None
        #: ``--bench-against``: the base side and its rounds (plugin/fixture_against.py).
        self.paired: FixtureAgainst | None = None
        self._against_written = False

    @classmethod
    def register(cls, config: pytest.Config) -> FixtureRuns:
        """Register the runs (and, in the controller, their reporter): a bad report option or
        baseline is a usage error before anything runs."""
        from pytest_dlbench.plugin.fixture_against import child_stream

        runs = cls(config)
        config.pluginmanager.register(runs, cls.PLUGIN_NAME)
        if child_stream() is not None:
            return runs  # one side of a round of --bench-against: its parent reports
        if hasattr(config, "workerinput") or not given_options(config.getoption):
            return runs  # the reporter comes with the first benchmark, if one runs
        from pytest_dlbench.core.errors import DlbenchError

        try:
            runs._check_options()
        except DlbenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        runs._reporter()  # a baseline that cannot be used stops the run before it starts
        return runs

    def _reporter(self) -> BenchReporter:
        """The end of the run (plugin/reporter.py), made when it is known to be needed: an
        ordinary test run never imports what it needs (the suites' modules among them)."""
        if self.reporter is None:
            from pytest_dlbench.plugin.reporter import BenchReporter

            self.reporter = BenchReporter(self)
        return self.reporter

    def _check_options(self) -> None:
        config = self.config
        run_name = config.getoption("bench_run_name")
        if run_name is not None:
            from pytest_dlbench.layout import UnsafeName, check_run_name

            try:
                check_run_name(run_name)
            except UnsafeName as exc:
                raise pytest.UsageError(f"--bench-run-name: {exc}") from None
        against = config.getoption("bench_against")
        if against is not None:
            self._check_out_base(against)
        if config.option.collectonly:
            return
        from pytest_dlbench.options import check_outputs

        check_outputs(lambda dest: config.getoption(f"bench_{dest}"), cli=False)

    def _check_out_base(self, rev: str) -> None:
        """``--bench-against``: the base revision's worktree, removed however the session ends
        (--collect-only: the revision is checked, no worktree made)."""
        config = self.config
        if getattr(config.option, "numprocesses", None):
            raise pytest.UsageError("--bench-against runs the bench fixture's rounds from this "
                                    "process: leave -n out (or use --bench-suite)")
        from pytest_dlbench.plugin.fixture_against import FixtureAgainst

        self.paired = FixtureAgainst.create(config, rev)  # plugin/against_setup.py
        if self.paired is not None:
            self.against = self.paired.side
            # This process only waits for the rounds' children: it shows their progress, both
            # sides', and a line for each round (plugin/progress.py).
            from pytest_dlbench.plugin.progress import ProgressReporter

            progress = ProgressReporter(self.existing_run_dir, with_base=True)
            config.pluginmanager.register(progress, ProgressReporter.PLUGIN_NAME)

    # -- the run directory (what BenchReporter reads) -------------------------------------------

    @property
    def run_name(self) -> str:
        return str(self.config.getoption("bench_run_name") or "tests")

    def run_dir(self) -> Path:
        """Made by the first benchmark that runs (an xdist worker: the controller's folder)."""
        if self._run_dir is None:
            shared = getattr(self.config, "workerinput", {}).get(WORKER_KEY)
            if shared:
                self._run_dir = Path(shared)
            else:
                from pytest_dlbench import layout

                base = results_base(self.config)
                layout.prepare_base(base)
                self._run_dir = layout.make_run_dir(base, self.run_name)
        self._run_dir.mkdir(parents=True, exist_ok=True)
        return self._run_dir

    def existing_run_dir(self) -> Path | None:
        run_dir = self._run_dir
        return run_dir if run_dir is not None and run_dir.is_dir() else None

    def benchmarks_ran(self) -> bool:
        run_dir = self.existing_run_dir()
        if run_dir is None:
            return False
        from pytest_dlbench.layout import stream_paths

        return bool(stream_paths(run_dir))

    # -- hooks ------------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker writes into one run directory, named here and made by the first
        benchmark that runs (a test run without one leaves nothing behind)."""
        if self._run_dir is None:
            self._run_dir = _free_run_dir(results_base(self.config), self.run_name)
        node.workerinput[WORKER_KEY] = str(self._run_dir)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> Generator[None, None, None]:
        """Before any other plugin's (``-k`` and ``-m`` deselect there): each test that uses the
        fixture gets its benchmark's name among every test collected (plugin/fixture_names.py:
        a subset's rows keep the whole run's names), and a ``bench_steps`` marker that cannot
        be used stops the run before any test runs."""
        from pytest_dlbench.plugin.fixture_names import name_items
        from pytest_dlbench.plugin.fixture_steps import check_markers

        name_items(items)
        check_markers(items, config)
        yield

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """--bench-against: a test that uses the fixture runs its rounds in children."""
        paired = self.paired
        if paired is None or not paired.uses_bench(pyfuncitem):
            return None
        run_dir = self.run_dir()
        if not self._against_written:
            paired.write_against(run_dir)
            self._against_written = True
        paired.run_item(pyfuncitem, run_dir)
        return True

    # The reporter's hooks, forwarded (it is made when a benchmark ran, not registered).

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.reporter is not None:
            self.reporter.pytest_sessionstart(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not hasattr(self.config, "workerinput") and self.benchmarks_ran():
            self._reporter().pytest_sessionfinish(session, exitstatus)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if self.reporter is not None:
            self.reporter.pytest_terminal_summary(terminalreporter, exitstatus)
        line = unused_options_line(given_options(self.config.getoption),
                                   benchmarks_ran=self.benchmarks_ran(),
                                   paired=self.paired is not None)
        if line is not None:
            terminalreporter.write_line(line, yellow=True)


def _free_run_dir(base: Path, run_name: str) -> Path:
    """``<base>/runs/<run-name>.<time>``, a name no folder has yet (not made here)."""
    import datetime as dt

    from pytest_dlbench.layout import RUNS

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, suffix = base / RUNS / f"{run_name}.{stamp}", 1
    while candidate.exists():
        suffix += 1
        candidate = base / RUNS / f"{run_name}.{stamp}-{suffix}"
    return candidate
