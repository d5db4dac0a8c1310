"""The files a report can be written to, shared by the pytest run and ``dlbench report``.

Their paths are checked before the run (``core/output_files.check_outputs``, through
``options.check_outputs``); each is written atomically (``core/output_files.write_atomic``). A write
that still fails at the end (a full disk) costs that file only: one line naming it and the
reason, after the table and the score.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["Written", "history_problem", "write_outputs"]


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
    the ``--bench-confirm`` record the HTML page lists (results/judge/confirm.py)."""
    written = Written()
    if save:
        from pytest_dlbench.results.gate import gate_record
        from pytest_dlbench.results.model import save_summary

        # The gate's verdict beside the figures: the JSON says what the terminal said.
        verdict = gate_record(comparison, status)
        written.attempt("summary", "summary saved", save,
                        lambda: save_summary(summary, save, suite=suite, gate=verdict))
    if autosave is not None:  # "": <base>/history (results/history/records.py, docs/history.md)
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


def history_problem(folder: Path) -> str | None:
    """What stops ``--bench-autosave`` writing into the history ``folder`` (None: nothing),
    found before the run rather than after it: the folder is not a directory (or lies under a
    file), cannot be made or written in (a read-only mount), or this machine's folder in it
    (``<folder>/<machine id>``, results/history/records.autosave) is not a directory. Makes the
    folder, as the autosave would."""
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                return (f"{folder} is not a directory" if part == folder
                        else f"{folder}: {part} is not a directory")
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{folder}: cannot make {exc.filename or folder}: {exc.strerror or exc}"
    from pytest_dlbench.measure.machine import machine_info
    from pytest_dlbench.results.history import machine_id

    machine = folder / machine_id(machine_info())
    if machine.exists() or machine.is_symlink():
        if not machine.is_dir():
            return f"{machine} is not a directory (this machine's folder of the history)"
        where = machine
    else:
        where = folder
    try:  # an entry is written next to a temporary file: one can be made here
        fd, probe = tempfile.mkstemp(prefix=".autosave.", suffix=".probe", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{folder}: cannot write in {where}: {exc.strerror or exc}"
    return None
