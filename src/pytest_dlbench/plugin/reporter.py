"""The end of a suite run in pytest: summary table, baseline gate, saved and exported files.

Registered by the session object in the controller only (not in xdist workers, not in the child
process that runs one benchmark). The work is done by scoring, compare, baseline and report.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.results import gate
from pytest_dlbench.run.layout import stream_paths

if TYPE_CHECKING:
    from pytest_dlbench.plugin.controller import ControllerSession

__all__ = ["BenchReporter"]


class BenchReporter:
    PLUGIN_NAME = "dlbench-reporter"

    def __init__(self, session_plugin: ControllerSession) -> None:
        self.plugin = session_plugin
        config = session_plugin.config
        self.config = config
        self.save_path = config.getoption("bench_save")
        self.compare_path = config.getoption("bench_compare")
        self.html_path = config.getoption("bench_html")
        self.export_path = config.getoption("bench_export")
        self.price = config.getoption("bench_price")
        self.tolerance = config.getoption("bench_tolerance")
        self.alpha = config.getoption("bench_alpha")
        self.paired_test = config.getoption("bench_paired_test")
        self.paired_rate = config.getoption("bench_paired_rate")
        self.summary: Any = None
        self.base_summary: Any = None  # the base side of a --bench-against run
        self.comparison: Any = None
        self.baseline: Any = None
        self.notes: list[str] = []
        self.missing_required = ""
        self._load_baseline(config.getoption("bench_require_baseline"))

    def _load_baseline(self, required: bool) -> None:
        """A corrupt or foreign baseline stops the run before anything is measured."""
        if not self.compare_path:
            return
        loaded = gate.load_baseline(self.compare_path)
        if loaded.status == gate.USAGE_ERROR:
            raise pytest.UsageError(loaded.message)
        if loaded.status == gate.BASELINE_MISSING:
            if required:
                self.missing_required = loaded.message
            else:
                self.notes.append(f"warning: {loaded.message}; nothing to compare with")
                self.config.issue_config_time_warning(
                    pytest.PytestWarning(f"dlbench: {loaded.message}"), stacklevel=2
                )
        self.baseline = loaded.summary

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.missing_required:
            pytest.exit(f"{self.missing_required} (--bench-require-baseline)",
                        gate.BASELINE_MISSING)

    def _run_dir(self) -> Path | None:
        run_dir = self.plugin._run_dir  # None: nothing ran, so no folder was made
        return run_dir if run_dir is not None and run_dir.is_dir() else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        run_dir = self._run_dir()
        if run_dir is None or not stream_paths(run_dir):
            return
        from pytest_dlbench.results.scoring import summarize_dir

        self.summary = summarize_dir(run_dir)
        if self.plugin.against is not None:
            self._compare_paired(run_dir)
        if self.baseline is not None:
            from pytest_dlbench.results.compare import compare

            comparison = compare(self.summary, self.baseline, tolerance=self.tolerance,
                                 alpha=self.alpha)
            # The reports name the file the baseline came from, as `dlbench report` does.
            self.comparison = dataclasses.replace(comparison, baseline_path=str(self.compare_path))
        self._write_files()
        if session.exitstatus == pytest.ExitCode.OK:  # pytest's own failures come first
            # The verdict of `dlbench report` on the same run directory (a weighted benchmark
            # that failed in the score, or never ran, fails the run even if no item failed).
            session.exitstatus = gate.final_status(failed=gate.run_failed(self.summary),
                                                   comparison=self.comparison)

    def _compare_paired(self, run_dir: Path) -> None:
        """A --bench-against run: the paired verdicts from both sides' streams."""
        from pytest_dlbench.results.paired import summarize_paired_dir

        result = summarize_paired_dir(run_dir, tolerance=self.tolerance, alpha=self.alpha,
                                      test=self.paired_test, rate=self.paired_rate)
        if result is not None:
            _, self.base_summary, self.comparison = result

    def _write_files(self) -> None:
        from pytest_dlbench.report.outputs import write_outputs

        self.notes += write_outputs(
            self.summary,
            comparison=self.comparison,
            save=self.save_path,
            html=self.html_path,
            export=self.export_path,
            price=self.price,
            suite=self.plugin.run_name,
        )

    def _write_profiles(self, terminalreporter: Any, *, verbose: bool) -> None:
        """Each profiled benchmark's reports: concise, or in full with ``-v``."""
        if not self.plugin.profiles:
            return
        from pytest_dlbench.profile import profile_sections

        for title, text in profile_sections(self._run_dir(), verbose=verbose):
            terminalreporter.write_sep("-", title)
            for line in text.splitlines():
                terminalreporter.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.summary is None:
            for note in self.notes:
                terminalreporter.write_line(note)
            return
        from pytest_dlbench.report.terminal import render_summary

        verbosity = self.config.get_verbosity()
        width = terminalreporter._tw.fullwidth
        paired = self.comparison is not None and self.comparison.against is not None
        text = render_summary(
            self.summary,
            None if paired and verbosity >= 0 else self.comparison,
            verbosity=-1 if verbosity < 0 else verbosity,
            width=width,
            price=self.price,
        )
        if paired and verbosity >= 0:
            from pytest_dlbench.report.terminal import render_paired

            text += "\n\n" + render_paired(self.comparison, self.base_summary,
                                           verbosity=verbosity, width=width)
        if verbosity < 0:
            terminalreporter.write_line(text)
        else:
            terminalreporter.write_sep("=", "dlbench")
            for line in text.splitlines():
                terminalreporter.write_line(line)
        if verbosity >= 0:
            self._write_profiles(terminalreporter, verbose=verbosity > 0)
        for note in self.notes:
            terminalreporter.write_line(note)
        terminalreporter.write_line(f"results: {self._run_dir()}")
        if session_regressed(self.comparison):
            terminalreporter.write_line(
                f"performance regressed: {', '.join(self.comparison.regressions) or 'score'} "
                f"(exit status {gate.REGRESSED})",
                red=True,
            )


def session_regressed(comparison: Any) -> bool:
    return comparison is not None and comparison.regressed
