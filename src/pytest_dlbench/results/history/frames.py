"""Results as tidy pandas DataFrames (docs/history.md, "Analysing results with pandas").

:func:`frame` reads a run directory, a saved summary (``--bench-save``), a history file or a
whole history folder (``--bench-autosave``) and returns one row per benchmark run (benchmark x
device x repeat) with its spec columns, or with ``observations=True`` one row per observation
(step) of a run directory's streams. :func:`sweep_frame` is the sweep table
(``dlbench table``) as a frame, which ``dlbench table --csv`` writes.

The columns:

- where: ``suite``, ``run_dir``, and for a history ``machine``, ``commit``, ``commit_date``,
  ``branch``, ``dirty``, ``file``;
- the benchmark (its spec): ``bench``, ``units``, ``metric``, ``weight``, ``method``,
  ``enabled``, ``precision``, ``compile`` (mode, or None when eager), ``world_size``, and each
  matrix parameter as ``matrix.<name>``;
- the benchmark's figures, as the terminal table shows them (the same on each of its runs):
  ``perf``, ``std``, ``std_pct`` (in percent: 3.2 is the table's "3.2%", as the loggers send
  it; core/numbers.FIGURE_UNITS), ``perf_adj``, ``n``, ``fail``, and every other figure
  declared in results/model/figures.py by its key: ``total``, ``tflops``, ``mfu`` (in
  percent), ``peak_gpu_mem_bytes``, ``peak_rss_bytes``, ``torch_max_allocated_bytes``,
  ``torch_max_reserved_bytes``, ``energy_j`` (joules), ``busy`` and ``unreliable`` (flags;
  None where not known);
- the run: ``device``, ``repeat``, ``status``, ``ok``, ``reason``, ``rate`` (its steady
  window's rate), ``steps``, ``total_time_secs``, ``throughput_avg``,
  ``time_per_iteration_secs``, ``done_percent``;
- per observation: ``step``, ``time``, ``value`` (``warmup`` True for the warm-up steps).

pandas is imported when a frame is made, never at import time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.numbers import as_named
from pytest_dlbench.layout import MANIFEST, check_run_dir, stream_paths
from pytest_dlbench.results.figures.scoring import summarize_dir
from pytest_dlbench.results.figures.sweep import csv_text, sweep_header
from pytest_dlbench.results.history.records import _entry, load_history
from pytest_dlbench.results.model.figures import FIGURES

if TYPE_CHECKING:
    import pandas as pd

    from pytest_dlbench.results.figures.sweep import SweepRow
    from pytest_dlbench.results.history.records import Entry
    from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = ["frame", "frame_csv", "runs_frame", "sweep_frame"]


#: The figures written above from the spec or the summary's own fields (std_pct through
#: core/numbers.as_named); a run's ``total_time_secs`` is its own, set per run.
_SPEC_KEYS = {"bench", "units", "weight", "precision", "perf", "std_pct", "perf_adj", "n",
              "fail"}


def _bench_columns(b: BenchSummary) -> dict[str, Any]:
    compile_ = b.compile
    return {
        "bench": b.name,
        "units": b.units,
        "metric": b.metric,
        "weight": b.weight,
        "method": b.method,
        "enabled": b.enabled,
        "precision": b.precision,
        "compile": (compile_.get("mode") or "default") if compile_ else None,
        "world_size": b.world_size,
        **{f"matrix.{k}": v for k, v in b.matrix.items()},
        "perf": b.perf,
        "std": b.std,
        "std_pct": as_named("std_pct", b.std_pct),  # the name's unit: percent
        "perf_adj": b.perf_adj,
        "n": b.n,
        "fail": b.fail,
        # Every other declared figure (results/model/figures.py), by its key, in its unit:
        # TFLOP/s, MFU in percent, the peaks in bytes, energy in joules, the busy and
        # unreliable flags (None: not known).
        **{f.key: f.value(b) for f in FIGURES if f.key not in _SPEC_KEYS},
    }


def _run_rows(summary: SuiteSummary, where: Mapping[str, Any],
              observations: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for b in summary.benchmarks:
        spec = _bench_columns(b)
        for r in b.runs:
            run = {
                **where, **spec,
                "device": r.device,
                "repeat": r.repeat,
                "status": str(r.status),
                "ok": r.ok,
                "reason": r.reason or None,
                "rate": r.rate,
                "steps": r.timing.steps,
                "total_time_secs": r.timing.total_time_secs,
                "throughput_avg": r.timing.throughput_avg,
                "time_per_iteration_secs": r.timing.time_per_iteration,
                "done_percent": as_named("done_percent", r.timing.done_percent),
            }
            if not observations:
                rows.append(run)
                continue
            points = [(True, p) for p in r.warmup] + [(False, p) for p in r.steady]
            for step, (warmup, (time, value)) in enumerate(points):
                rows.append({**run, "step": step, "warmup": warmup, "time": time,
                             "value": value})
    return rows


def _typed(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
           ) -> pd.DataFrame:
    """A frame of ``rows``, each column typed by what it holds: integers (and missing values)
    as pandas' nullable Int64, floats as float64, booleans as bool, text as str; a column
    that mixes kinds (a matrix parameter 1024 on one benchmark, 0.5 on another) keeps each
    value as it is (object), so that nothing is rounded or widened."""
    import pandas as pd

    df = pd.DataFrame.from_records(list(rows), columns=list(columns) if columns else None)
    raw = {name: [row.get(name) for row in rows] for name in df.columns}
    for name, values in raw.items():
        present = [v for v in values if v is not None and not _nan(v)]
        kinds = {type(v) for v in present}
        if not present or len(kinds) == 1 and kinds <= {str, bool, float}:
            continue  # pandas' own inference is right
        if kinds == {int}:
            df[name] = pd.array(values, dtype="Int64")
        else:
            df[name] = pd.Series(values, index=df.index, dtype=object)
    return df


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def runs_frame(summary: SuiteSummary, *, observations: bool = False,
               where: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per run of ``summary`` (or per observation: only a summary scored from a run
    directory has them; a saved summary keeps each run's rate, not its steps)."""
    base = {"suite": summary.suite, "run_dir": summary.run_dir, **(where or {})}
    return _typed(_run_rows(summary, base, observations))


def _history_frame(entries: Iterable[Entry]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for e in entries:
        rows += _run_rows(e.summary, {
            "machine": e.machine, "commit": e.commit, "commit_date": e.commit_date,
            "branch": e.branch, "dirty": e.dirty, "file": str(e.path),
            "suite": e.summary.suite, "run_dir": e.summary.run_dir}, False)
    return _typed(rows)


def frame(path: str | PathLike[str], *, observations: bool = False) -> pd.DataFrame:
    """The runs (or observations) of ``path`` as a tidy DataFrame: a run directory, a saved
    summary, a history file or a history folder (see the module's docstring)."""
    path = Path(path)
    if path.is_dir():
        if stream_paths(path) or (path / MANIFEST).is_file():
            return runs_frame(summarize_dir(check_run_dir(path)), observations=observations)
        if observations:
            raise DlbenchError(f"{path}: observations are in a run directory's streams, not in "
                               "a history (give a run directory)")
        entries, problems = load_history(path)
        if problems and not entries:
            raise DlbenchError(problems[0])
        return _history_frame(entries)
    if observations:
        raise DlbenchError(f"{path}: a saved summary keeps each run's rate, not its "
                           "observations (give a run directory)")
    entry = _entry(path)  # one line naming the file when it is not a summary
    if entry.autosaved:
        return _history_frame([entry])
    return runs_frame(entry.summary)


# -- the sweep table ------------------------------------------------------------------------
def sweep_frame(rows: Sequence[SweepRow]) -> pd.DataFrame:
    """``dlbench table``'s rows (results/figures/sweep.py) as a frame, its columns in the table's
    order."""
    header = sweep_header(rows)
    return _typed([{k: row.values().get(k) for k in header} for row in rows], header)


def frame_csv(df: pd.DataFrame) -> str:
    """A frame as CSV through the tables' one CSV writer (results/figures/sweep.csv_text): missing
    values as empty cells, numbers as Python writes them."""
    def plain(value: Any) -> Any:
        if value is None or value is _na() or _nan(value):
            return None
        item = getattr(value, "item", None)  # numpy scalars: Python's own int and float
        return item() if callable(item) else value

    return csv_text([str(c) for c in df.columns],
                    ([plain(v) for v in row] for row in df.itertuples(index=False, name=None)))


def _na() -> Any:
    import pandas as pd

    return pd.NA
