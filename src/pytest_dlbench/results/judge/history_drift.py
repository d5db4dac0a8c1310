"""The drift between sessions read from a machine's ``--bench-autosave`` history, for a saved
baseline of one session (results/judge/noise.py): autosaved sessions of a known commit with a clean
tree, of this machine, grouped by commit (a change of code is never drift), the run judged left
out, a session known by what it measured (:func:`session_key`: one file copied under two names
counts once). A file that cannot be read is left out and named in the warnings.
docs/reports.md, "The drift between sessions".
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.results.judge.noise import Drift, estimate_drift

__all__ = ["HistoryDrifts", "history_drifts", "session_key"]

#: The files left out that a comparison's warnings name one by one; the rest are counted.
SHOWN_LEFT_OUT = 3


@dataclass(frozen=True)
class HistoryDrifts:
    """What a history folder says of the drift between sessions: each benchmark's estimate,
    and one line per file of the history that could not be read (left out)."""

    drifts: dict[str, Drift] = field(default_factory=dict)
    folder: Path | None = None
    left_out: tuple[str, ...] = ()

    @property
    def warnings(self) -> tuple[str, ...]:
        """The comparison's warnings about the files left out: a few, then a count."""
        lines = [f"history {self.folder}: {line} (the drift between sessions is read from "
                 "the other files)" for line in self.left_out[:SHOWN_LEFT_OUT]]
        more = len(self.left_out) - SHOWN_LEFT_OUT
        if more > 0:
            lines.append(f"history {self.folder}: {more} more files left out")
        return tuple(lines)


def session_key(summary: Any) -> str:
    """What identifies a session (a saved summary, results/model/summary.SuiteSummary): its run
    directory (the run's name and time, when it has one) and a hash of its figures (each
    benchmark's perf and run rates). Two files of one session have both the same; two
    sessions, never both."""
    figures = sorted((b.name, b.perf, list(b.rates)) for b in summary.benchmarks)
    # repr: a float's exact digits (and nan or inf, which JSON does not spell).
    text = repr([getattr(summary, "run_dir", None), figures])
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def history_drifts(entries: Iterable[Any], *, leave_out: Path | None = None
                   ) -> dict[str, Drift]:
    """Each benchmark's drift between sessions from history entries (results/history/records.Entry)
    of one machine (the module's rules); the entry of the run directory ``leave_out`` is not
    used."""
    groups: dict[str, dict[str, list[tuple[float, ...]]]] = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    for entry in entries:
        if not entry.autosaved or not entry.commit or entry.dirty:
            continue
        run_dir = entry.summary.run_dir
        if leave_out is not None and run_dir and Path(run_dir).resolve() == leave_out:
            continue
        key = session_key(entry.summary)
        if key in seen:  # the same session under another file name: counted once
            continue
        seen.add(key)
        for bench in entry.summary.benchmarks:
            rates = tuple(r for r in bench.rates if math.isfinite(r) and r > 0)
            if rates:
                groups[bench.name][entry.commit].append(rates)
    found: dict[str, Drift] = {}
    for name, by_commit in groups.items():
        usable = [sessions for sessions in by_commit.values() if len(sessions) >= 2]
        sessions = sum(len(s) for s in usable)
        commits = "1 commit" if len(usable) == 1 else f"{len(usable)} commits"
        drift = estimate_drift(usable, f"{sessions} sessions of {commits} in the history")
        if drift is not None:
            found[name] = drift
    return found
