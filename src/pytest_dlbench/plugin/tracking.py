"""Logging a suite run to its loggers (MLflow, Weights & Biases...) while it runs
(docs/logging.md).

Registered by the controller when a logger's switch is given (``--bench-mlflow``,
``--bench-wandb``: the loggers of loggers/registry.py). Everything is
sent from the controller, from the streams the children wrote: each benchmark run once it has
ended, the session's score at the end. Nothing runs inside a benchmark's timed loop, and a
logger that fails says so in one line and stops; the run, its score and its exit status are
what they would have been without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.loggers.registry import LoggerEntry, asked_loggers
from pytest_dlbench.loggers.sink import GuardedSink, open_sinks
from pytest_dlbench.loggers.source import session_facts

if TYPE_CHECKING:
    from pytest_dlbench.plugin.controller import ControllerSession
    from pytest_dlbench.plugin.reporter import BenchReporter

__all__ = ["TrackingPlugin", "check_loggers", "loggers_asked"]


def _option(config: pytest.Config) -> Callable[[str], Any]:
    """A logger option's value by its dest: ``--bench-<dest>``."""
    return lambda dest: config.getoption(f"bench_{dest}")


def loggers_asked(config: pytest.Config) -> list[LoggerEntry]:
    """The loggers whose switch (``--bench-mlflow``...) was given."""
    return asked_loggers(_option(config))


def check_loggers(config: pytest.Config) -> None:
    """A logger asked for but not installed is a usage error that says what to install."""
    for entry in loggers_asked(config):
        message = entry.missing()
        if message:
            raise pytest.UsageError(f"{entry.switch.pytest_flag}: {message}")


class TrackingPlugin:
    PLUGIN_NAME = "dlbench-tracking"

    def __init__(self, session: ControllerSession, reporter: BenchReporter) -> None:
        self.session = session
        self.config = session.config
        #: Scores the run at the end: its evaluation is what the loggers send.
        self.reporter = reporter
        self.sinks: list[GuardedSink] = []
        self.started = False

    def _warn(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, yellow=True)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = self.config
        self.sinks = open_sinks(
            _option(config),
            bench_base=self.session.options.base,
            warn=self._warn,
            echo=lambda line: None,  # progress of the loggers: quiet in a pytest run
        )

    def _start(self) -> Path | None:
        run_dir = self.session.existing_run_dir()
        if run_dir is None:
            return None  # nothing ran yet
        if not self.started:
            self.started = True
            facts = session_facts(run_dir, live=True)
            for sink in self.sinks:
                sink.start_session(run_dir, facts)
        return run_dir

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # One benchmark run has ended (its stream has its end record): log it now.
        if report.when != "teardown":
            return
        stream = dict(report.user_properties).get("dlbench_stream")
        if isinstance(stream, str) and stream and self._start() is not None:
            for sink in self.sinks:
                sink.log_bench_run(stream)

    @pytest.hookimpl(trylast=True)  # after the reporter scored the run and wrote its files
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        evaluation = self.reporter.evaluation
        if evaluation is None or self._start() is None:
            return
        artifacts = evaluation.options.outputs.artifacts()
        for sink in self.sinks:
            sink.finish_session(evaluation, artifacts)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for sink in self.sinks:
            line = sink.done_line()  # where the runs are, and how to open them
            if line and reporter is not None:
                reporter.write_line(line)
