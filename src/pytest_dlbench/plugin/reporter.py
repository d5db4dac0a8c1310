"""The end of a suite run in pytest: summary table, baseline gate, saved and exported files.

Registered by the session object in the controller only (not in xdist workers, not in the child
process that runs one benchmark). The end of the run is decided by
:func:`~pytest_dlbench.results.evaluation.evaluate`, as ``dlbench report`` decides it, and shown
and written by :mod:`pytest_dlbench.report.evaluation`; the loggers receive the same
:class:`~pytest_dlbench.results.evaluation.Evaluation` (plugin/tracking.py).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.core.numbers import printable, printable_lines
from pytest_dlbench.layout import stream_paths
from pytest_dlbench.options import evaluate_options
from pytest_dlbench.plugin.confirm import confirm_suspects
from pytest_dlbench.profile import profile_sections
from pytest_dlbench.report.evaluation import render_evaluation, write_evaluation
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import evaluate

if TYPE_CHECKING:
    from pytest_dlbench.plugin.session import ReportedRun
    from pytest_dlbench.results.evaluation import Evaluation
    from pytest_dlbench.results.model import BaselineLoad

__all__ = ["BenchReporter", "GateVerdictLine"]


def end_pytest_line(config: pytest.Config) -> None:
    """End pytest's line of dots (``[100%]``) before the session's end writes anything: under
    xdist pytest leaves it open (no file name written, so ``write_line`` does not end it), and
    the loggers' and the confirmation's lines were glued to it (``[100%]dlbench: mlflow: ...``).
    The progress line is taken away first (it is drawn below pytest's)."""
    progress = config.pluginmanager.get_plugin("dlbench-progress")
    if progress is not None:
        progress.finish()
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    if getattr(terminal._tw, "width_of_current_line", 0):
        terminal._tw.line()
    terminal.currentfspath = None  # pytest's own newline is written: not again


class GateVerdictLine:
    """When a gate ran, its verdict is the last line pytest prints (``dlbench: regressed (exit
    status 6)``): after pytest's own summary line (``6 passed, 4 skipped in 12.3s``, which counts
    items, not the gate). A ``pytest_sessionfinish`` wrapper tried first is the outermost: the
    terminal summary and pytest's last line are written inside it, this line after them.
    Nothing is added when no gate ran."""

    PLUGIN_NAME = "dlbench-gate-verdict"

    def __init__(self, reporter: BenchReporter) -> None:
        self.reporter = reporter

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        evaluation = self.reporter.evaluation
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        if evaluation is not None and evaluation.comparison is not None and terminal is not None:
            status = int(session.exitstatus)
            terminal.write_line(printable(gate.verdict_line(evaluation.comparison, status)),
                                red=status != gate.OK, green=status == gate.OK, bold=True)
        return result


class BenchReporter:
    PLUGIN_NAME = "dlbench-reporter"

    def __init__(self, session_plugin: ReportedRun) -> None:
        self.plugin = session_plugin
        self.config = session_plugin.config
        #: The end of the run, once it is scored (None: nothing ran).
        self.evaluation: Evaluation | None = None
        #: Ctrl-C cut the confirmation or the outputs short (the run exits 2).
        self.interrupted = False
        #: Lines for the terminal summary before the files written (a baseline not found).
        self.notes: list[str] = []
        self.missing_required = ""
        #: ``--bench-compare``, read before the run (None: not asked).
        self.baseline = self._load_baseline(self.config.getoption("bench_compare"),
                                            self.config.getoption("bench_require_baseline"))
        # The gate's verdict closes the output: in a suite run and in the bench fixture's
        # (whose runs forward this reporter's hooks without registering it).
        manager = self.config.pluginmanager
        if not manager.has_plugin(GateVerdictLine.PLUGIN_NAME):
            manager.register(GateVerdictLine(self), GateVerdictLine.PLUGIN_NAME)

    def _load_baseline(self, path: str | None, required: bool) -> BaselineLoad | None:
        """A corrupt or foreign baseline stops the run before anything is measured."""
        from pytest_dlbench.results.model import load_baseline

        if not path:
            return None
        loaded = load_baseline(path)
        if loaded.status == gate.USAGE_ERROR:
            raise pytest.UsageError(loaded.message)
        if loaded.status == gate.BASELINE_MISSING:
            if not required:  # a mistyped path: one line, exit status 4, before the run
                raise pytest.UsageError(f"--bench-compare: {loaded.message}")
            self.missing_required = loaded.message
        return loaded

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.missing_required:
            pytest.exit(printable(f"{self.missing_required} (--bench-require-baseline)"),
                        gate.BASELINE_MISSING)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        end_pytest_line(self.config)  # what follows (confirmation, loggers) on lines of its own
        run_dir = self.plugin.existing_run_dir()
        if run_dir is None or not stream_paths(run_dir):
            return
        config = self.config
        options = evaluate_options(
            lambda dest: config.getoption(f"bench_{dest}"),
            baseline=self.baseline,
            require_baseline=config.getoption("bench_require_baseline"),
            paired=self.plugin.against is not None,
            suite=self.plugin.run_name,
        )
        evaluation, interrupted = self._confirmed(evaluate(run_dir, options))
        self.interrupted = interrupted
        try:
            self.evaluation = write_evaluation(evaluation)
        except KeyboardInterrupt:
            # Ctrl-C while the outputs are written (save, autosave, the HTML): the table and
            # the score still print (the evaluation is whole), then one line, exit status 2.
            self.evaluation = evaluation
            self.notes.append(
                "interrupted while the outputs were written: a file not listed above may be "
                f"missing or partial; dlbench report {run_dir} writes them again")
            self.interrupted = interrupted = True
        if session.exitstatus == pytest.ExitCode.OK:  # pytest's own failures come first
            # The verdict of `dlbench report` on the same run directory (a weighted benchmark
            # that failed in the score, or never ran, fails the run even if no item failed).
            session.exitstatus = self.evaluation.status
        if interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _confirmed(self, evaluation: Evaluation) -> tuple[Evaluation, bool]:
        """``--bench-confirm``: the suspected verdicts run again (plugin/confirm.py), and
        whether Ctrl-C cut that short (the first pass's evaluation is kept)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")

        def say(line: str) -> None:
            if terminal is not None:
                terminal.write_line(line)

        try:
            confirmed = confirm_suspects(self.plugin, evaluation, say=say,
                                         limit=self.config.getoption("bench_confirm"))
        except KeyboardInterrupt:
            self.notes.append("confirmation interrupted: the first pass's verdicts stand")
            return evaluation, True
        return confirmed or evaluation, False

    def _write_profiles(self, terminalreporter: Any, evaluation: Evaluation, *,
                        verbose: bool) -> None:
        """Each profiled benchmark's reports: concise, or in full with ``-v``."""
        if not self.plugin.profiles:
            return
        for title, text in profile_sections(evaluation.run_dir, verbose=verbose):
            terminalreporter.write_sep("-", printable(title))
            for line in printable_lines(text).splitlines():  # notes from the profiled child
                terminalreporter.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        evaluation = self.evaluation
        if evaluation is None:
            for note in self.notes:
                terminalreporter.write_line(printable(note))
            return
        verbosity = self.config.get_verbosity()
        text = render_evaluation(evaluation, verbosity=max(verbosity, -1),
                                 width=terminalreporter._tw.fullwidth,
                                 columns=self.config.getoption("bench_columns"),
                                 sort=self.config.getoption("bench_sort"))
        if verbosity < 0:
            terminalreporter.write_line(text)
        else:
            terminalreporter.write_sep("=", "dlbench")
            for line in text.splitlines():
                terminalreporter.write_line(line)
            self._write_profiles(terminalreporter, evaluation, verbose=verbosity > 0)
        for note in (*self.notes, *evaluation.written):
            terminalreporter.write_line(printable(note))
        for line in evaluation.unwritten:  # after the table and the score: they are not lost
            terminalreporter.write_line(f"error: {printable(line)}", red=True)
        terminalreporter.write_line(f"results: {printable(evaluation.run_dir)}")
        if evaluation.regressed:
            assert evaluation.comparison is not None
            # Interrupted (the confirmation or the outputs), the run exits 2, not 6: the line
            # says the first pass's verdict and the status the run really has.
            status = (f"the first pass's verdict, interrupted: exit status "
                      f"{int(pytest.ExitCode.INTERRUPTED)}" if self.interrupted
                      else f"exit status {gate.EXIT_REGRESSED}")
            terminalreporter.write_line(
                "performance regressed: "
                f"{printable(', '.join(evaluation.comparison.regressions) or 'score')}"
                f" ({status})",
                red=True,
            )
