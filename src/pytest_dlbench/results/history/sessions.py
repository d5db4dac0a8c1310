"""A baseline merged from several sessions (``dlbench baseline``): the figures of every
session's runs together, and each session's rates kept apart, so that the noise model
(results/judge/noise.py) can estimate how far one session's figure drifts from another's.

Runs of one pytest session share its state (the warm launcher's server, the clocks and load of
those minutes): repeats within it say nothing of the drift between sessions, which is what a
saved-baseline comparison meets (the baseline was measured in another session). Saving the
baseline in several sessions, nights or CI jobs, and merging them, measures that drift on the
machine itself, and averages it out of the baseline's figure.

The inputs are saved summaries (``--bench-save``) or ``--bench-autosave`` history files, all of
one machine; a benchmark missing from some sessions is merged from those that have it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.layout import Manifest, ManifestEntry
from pytest_dlbench.results.figures.scoring import summarize_runs
from pytest_dlbench.results.history.records import summary_machine
from pytest_dlbench.results.model.run_result import RunResult
from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = ["SessionsError", "merge_sessions", "session_count"]


class SessionsError(DlbenchError):
    """Summaries that cannot be merged into one baseline: one line naming the input."""


def session_count(bench: BenchSummary) -> int:
    """How many sessions a benchmark's figure comes from (1 unless merged)."""
    return bench.session_count


def _sessions_of(bench: BenchSummary) -> tuple[tuple[float, ...], ...]:
    """A benchmark's sessions: those it was merged from, else its own runs as one."""
    return bench.session_rates or ((bench.rates,) if bench.rates else ())


def _check_machines(summaries: Sequence[SuiteSummary], names: Sequence[str]) -> None:
    """Every input that says where it was measured says the same machine (the history's
    machine id: host name, CPU, GPUs; ``$DLBENCH_MACHINE`` names it when set)."""
    known = [(n, m) for n, s in zip(names, summaries, strict=True)
             if (m := summary_machine(s)) is not None]
    for name, machine in known[1:]:
        if machine != known[0][1]:
            raise SessionsError(f"{name}: measured on machine {machine}, {known[0][0]} on "
                                f"{known[0][1]}: a baseline merges sessions of one machine "
                                "only (set DLBENCH_MACHINE to name a machine whose host name "
                                "changes)")


def merge_sessions(summaries: Sequence[SuiteSummary],
                   names: Sequence[str] | None = None) -> SuiteSummary:
    """One summary of every session's runs (each a :class:`SuiteSummary`, itself possibly
    merged): a benchmark's figures are scored over all its runs (their repeats numbered on, so
    that no two collide), its ``session_rates`` keep each session's rates apart. ``names`` name
    the inputs in errors. The provenance is the latest session's."""
    names = list(names) if names is not None else [f"session {i + 1}"
                                                   for i in range(len(summaries))]
    if len(summaries) < 2:
        raise SessionsError("a baseline of several sessions needs two summaries or more")
    _check_machines(summaries, names)
    runs: list[RunResult] = []
    sessions: dict[str, list[tuple[float, ...]]] = {}
    entries: dict[str, ManifestEntry] = {}
    offset = 0
    for summary in summaries:
        top = 0
        for bench in summary.benchmarks:
            entries.setdefault(bench.name, bench.manifest_entry)
            sessions.setdefault(bench.name, []).extend(_sessions_of(bench))
            for run in bench.runs:
                repeat = run.repeat or 0
                top = max(top, repeat + 1)
                runs.append(dataclasses.replace(run, repeat=offset + repeat))
        offset += top
    merged = summarize_runs(runs, Manifest(suite=summaries[-1].suite, benchmarks=entries))
    benches = tuple(dataclasses.replace(b, session_rates=tuple(sessions.get(b.name, ())))
                    for b in merged.benchmarks)
    latest = next((s.provenance for s in reversed(summaries) if s.provenance is not None), None)
    return dataclasses.replace(merged, benchmarks=benches, provenance=latest)
