"""The files a report can be written to, shared by the pytest run and ``dlbench report``.

Their paths are checked before the run (``core/output_files.check_outputs``, through
``options.check_outputs``); each is written atomically (``core/output_files.write_atomic``). A write
that still fails at the end (a full disk) costs that file only: one line naming it and the
reason, after the table and the score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["Written", "write_outputs"]


@dataclass
class Written:
    """One line per file written, and one per file that could not be (its path, the reason)."""

    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def attempt(self, what: str, done: str, path: str | PathLike[str],
                write: Callable[[], Path]) -> None:
        try:
            self.lines.append(f"{done}: {write()}")
        except OSError as exc:
            self.failed.append(f"cannot write the {what} {path}: {exc.strerror or exc}")


def write_outputs(
    summary: Any,
    *,
    comparison: Any = None,
    save: str | PathLike[str] | None = None,
    html: str | PathLike[str] | None = None,
    export: str | PathLike[str] | None = None,
    price: float | None = None,
    suite: str | None = None,
    status: int | None = None,
    autosave: str | PathLike[str] | None = None,
    confirmation: Any = None,
) -> Written:
    """Write the JSON summary, the HTML page and the dashboard export that were asked for; a
    file that cannot be written is a line of ``failed``, and the others are still written.
    ``status``: the run's exit status, which the HTML page's banner states; ``confirmation``:
    the ``--bench-confirm`` record the HTML page lists (results/confirm.py)."""
    written = Written()
    if save:
        from pytest_dlbench.results.baseline import save_summary
        from pytest_dlbench.results.compare import gate_record

        # The gate's verdict beside the figures: the JSON says what the terminal said.
        verdict = gate_record(comparison, status)
        written.attempt("summary", "summary saved", save,
                        lambda: save_summary(summary, save, suite=suite, gate=verdict))
    if autosave is not None:  # "": <base>/history (results/history.py, docs/history.md)
        from pytest_dlbench.results.history import autosave_summary

        written.attempt("history entry", "history", autosave or "history",
                        lambda: autosave_summary(summary, autosave, suite=suite))
    if html:
        from pytest_dlbench.report.html import write_html  # lazily: jinja2 and matplotlib are heavy

        written.attempt("HTML report", "HTML report", html,
                        lambda: write_html(summary, html, comparison=comparison, price=price,
                                           status=status, history=autosave,
                                           confirmation=confirmation))
    if export:
        from pytest_dlbench.report.export import export_benchmark_action

        written.attempt("benchmark-action JSON", "benchmark-action JSON", export,
                        lambda: export_benchmark_action(summary, export))
    return written
