"""Weights & Biases: one W&B run per benchmark run, grouped by session, plus a session run.

Offline by default (``mode="offline"``: no account, no network; ``wandb sync <dir>/wandb``
uploads later), ``WANDB_MODE`` is respected, files go under ``<bench-base>/wandb`` (or
``$WANDB_DIR/wandb``).

The runs are written when the session finishes: a W&B run's summary is final once the run is
finished, and the benchmark's ``perf``/``perf_adj`` (over all its runs) are known only then.
``log_bench_run`` only notes the stream.

Idempotence: each run has a deterministic id (from ``<run dir>/<stream file>``; the session run
from the run directory's name) and is started with ``resume="allow"``. Offline, a run whose
offline folder with that id already holds a finished run is skipped (W&B would otherwise write
a second folder that ``wandb sync`` merges into the same run). Online, an existing run is
resumed: its history is left as it is and only its config and summary are written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import one_line
from pytest_dlbench.layout import json_safe, profile_dir
from pytest_dlbench.loggers.base import Echo, require, stderr_line
from pytest_dlbench.loggers.source import (
    SessionFacts,
    bench_labels,
    bench_metrics,
    bench_table,
    profile_files,
    read_run,
    run_spec,
    run_stats,
    samples,
    session_metrics,
    step_series,
)
from pytest_dlbench.loggers.source import stream_key as _stream_key
from pytest_dlbench.loggers.tables import Table, read_table
from pytest_dlbench.loggers.wandb_offline import find_offline_runs, read_offline_run
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.results.evaluation import Evaluation
from pytest_dlbench.results.model import RunResult

__all__ = ["DEFAULT_PROJECT", "WandbSink", "history_rows", "run_id_for"]

DEFAULT_PROJECT = "pytest-dlbench"
_MAX_TAG = 64


def run_id_for(key: str) -> str:
    """A W&B run id (letters and digits) that depends only on ``key``."""
    return "dlb" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:21]


def history_rows(records: RunRecords) -> list[dict[str, Any]]:
    """The W&B history of a run, one row per stream record, in time order.

    ``rate`` (with ``warmup`` 0/1), ``loss`` and ``region/<name>`` rows carry ``bench_step``
    (the benchmark's step index: their x-axis); telemetry rows carry ``system/...`` and
    ``elapsed`` (seconds since the monitor started: theirs). Every row has ``time`` (UNIX s).
    """
    rows: list[tuple[float, int, dict[str, Any]]] = []
    for p in step_series(records):
        warmup = {"warmup": int(p.warmup)} if p.key == "rate" else {}
        rows.append((p.time, len(rows), {p.key: p.value, **warmup, "bench_step": p.step,
                                         "time": p.time}))
    for s in samples(records):
        row: dict[str, Any] = dict(s.values)
        row["time"] = s.time
        if s.elapsed is not None:
            row["elapsed"] = s.elapsed
        rows.append((s.time, len(rows), row))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


class WandbSink:
    """Logs a session to W&B (see the module docstring). Use it through
    :class:`~pytest_dlbench.loggers.sink.GuardedSink` so that a failure is one warning line."""

    name = "wandb"

    def __init__(
        self,
        project: str | None = None,
        *,
        mode: str | None = None,
        entity: str | None = None,
        bench_base: str | os.PathLike[str] | None = None,
        replace: bool = False,
        echo: Echo = stderr_line,
    ) -> None:
        self.project_arg = project or None
        self.mode_arg = mode
        self.entity = entity
        self.bench_base = Path(bench_base) if bench_base is not None else None
        self.replace = replace
        self.echo = echo
        self.wandb: Any = None
        self.facts: SessionFacts | None = None
        self.pending: list[Path] = []
        self.seen: set[str] = set()
        self.active: Any = None  # the run being written, closed by close() on a failure
        self.logged: list[str] = []  # ids written
        self.skipped: list[str] = []  # ids already there (offline)
        #: The closing line (where the runs went, how to see them), once it is all logged: said
        #: as MLflow's is (a pytest run wrote nothing about W&B).
        self.done: str | None = None

    @property
    def mode(self) -> str:
        return self.mode_arg or os.environ.get("WANDB_MODE") or "offline"

    @property
    def project(self) -> str:
        return self.project_arg or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT

    # -- the session ------------------------------------------------------------------------
    def start_session(self, run_dir: Path, facts: SessionFacts) -> None:
        from pytest_dlbench.layout import run_base

        self.wandb = require("wandb")
        self.facts = facts
        base = os.environ.get("WANDB_DIR") or self.bench_base or run_base(run_dir)
        self.dir = Path(base).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)

    def log_bench_run(self, stream_path: Path) -> None:
        key = _stream_key(stream_path)
        if self.wandb is not None and key not in self.seen and Path(stream_path).is_file():
            self.seen.add(key)
            self.pending.append(Path(stream_path))

    def finish_session(self, evaluation: Evaluation, artifacts: Sequence[Path]) -> None:
        if self.wandb is None:
            return
        per_bench = bench_metrics(evaluation.summary)
        labels = bench_labels(evaluation.summary)
        for path in self.pending:
            records, result = read_run(path)
            self._log_bench(path, records, result, {**labels.get(result.bench, {}),
                                                    **per_bench.get(result.bench, {})})
        self._log_session(evaluation, artifacts)
        if self.skipped:
            self.echo(f"dlbench: wandb: {len(self.skipped)} run(s) of "
                      f"{self.facts.run_name if self.facts else '?'} already logged "
                      f"offline under {self.dir / 'wandb'}; skipped")
        if self.logged:
            self.done = self.where()
            self.echo(self.done)

    def where(self) -> str:
        """The line said at the end: what was logged, where, and how to see it."""
        assert self.facts is not None
        runs = len(self.pending)
        what = (f"dlbench: wandb: logged {self.facts.run_name} ({runs} benchmark "
                f"run{'s' if runs != 1 else ''})")
        if self.mode == "offline":
            folder = self.dir / "wandb"
            return (f"{what} offline to {folder}, project {self.project}; upload them with: "
                    f"wandb sync {_shell(str(folder))}/offline-run-*")
        if self.mode == "disabled":
            return f"{what}: W&B is disabled (WANDB_MODE=disabled), nothing was kept"
        entity = f"{self.entity}/" if self.entity else ""
        return f"{what} to project {entity}{self.project}, group {self.facts.run_name}"

    def logged_where(self) -> str:
        """``6 W&B run(s) (offline) in <dir>``, and how many were already there."""
        where = self.dir / "wandb" if self.mode == "offline" else f"project {self.project}"
        text = f"{len(self.logged)} W&B run(s) ({self.mode}) in {where}"
        return text + (f", {len(self.skipped)} already there" if self.skipped else "")

    def close(self) -> None:
        run, self.active = self.active, None
        if run is not None:
            run.finish(exit_code=1)

    # -- helpers ----------------------------------------------------------------------------
    def _settings(self) -> Any:
        return self.wandb.Settings(
            silent=True, console="off", save_code=False, disable_git=True,
            disable_job_creation=True, x_disable_stats=True, x_disable_meta=True,
            init_timeout=60,
        )

    def _already_logged(self, run_id: str) -> bool:
        """Offline: a finished offline run with this id exists (with ``replace``, removed)."""
        if self.mode != "offline":
            return False
        found = [p for p in find_offline_runs(self.dir, run_id) if _finished(p)]
        if found and self.replace:
            for path in find_offline_runs(self.dir, run_id):
                shutil.rmtree(path.parent, ignore_errors=True)
            return False
        return bool(found)

    def _init(self, run_id: str, **kwargs: Any) -> Any:
        assert self.facts is not None
        run = self.wandb.init(
            project=self.project, entity=self.entity, dir=str(self.dir), mode=self.mode,
            id=run_id, group=self.facts.run_name, resume="allow", reinit="create_new",
            settings=self._settings(), **kwargs,
        )
        self.active = run
        return run

    def _table(self, table: Table) -> Any:
        """A ``wandb.Table`` of a table whose columns each hold one type (loggers.tables)."""
        return self.wandb.Table(columns=list(table.columns), data=[list(r) for r in table.rows])

    def _finish(self, run: Any, exit_code: int) -> None:
        run.finish(exit_code=exit_code)
        self.active = None

    def _log_bench(self, stream: Path, records: RunRecords, result: RunResult,
                   bench: Mapping[str, Any]) -> None:
        key = _stream_key(stream)
        run_id = run_id_for(key)
        if self._already_logged(run_id):
            self.skipped.append(run_id)
            return
        spec = run_spec(records)
        status = str(result.status)  # plain text: wandb writes a str enum by its name
        tags = [t[:_MAX_TAG] for t in (result.bench, status, *(spec.get("tags") or []))]
        config = {**spec, "device": result.device, "repeat": result.repeat,
                  "meta": {k: v for k, v in (records.meta or {}).items() if k != "event"},
                  "stream": stream.name, "dlbench_key": key}
        wb = self._init(run_id, name=result.label, job_type="bench", tags=tags,
                        config=json_safe(config))
        if not (wb.resumed and wb.starting_step > 0):  # online and already there: keep it
            for axis in ("bench_step", "elapsed", "time"):
                wb.define_metric(axis, summary="none")
            wb.define_metric("warmup", step_metric="bench_step", summary="none")
            for metric in ("rate", "loss", "region/*"):
                wb.define_metric(metric, step_metric="bench_step")
            wb.define_metric("system/*", step_metric="elapsed")
            rows = history_rows(records)
            for step, row in enumerate(rows):
                wb.log(row, step=step)
            tables = self._profile(wb, stream, result.label)
            if tables:
                wb.log(tables, step=len(rows))
        wb.summary.update({
            **run_stats(result), **bench, "status": status, "reason": result.reason,
            "units": result.units,
        })
        self._finish(wb, 0 if result.ok else 1)
        self.logged.append(run_id)

    def _profile(self, wb: Any, stream: Path, label: str) -> dict[str, Any]:
        """The run's profile reports into its files, and those that are tables as
        ``wandb.Table`` s (``profile/<name>``) to log."""
        tables = {}
        folder = profile_dir(stream).name
        for name, path in profile_files(stream):
            table = read_table(path)
            if table is not None and table.columns:
                try:
                    tables[f"profile/{name.rsplit('.', 1)[0]}"] = self._table(table)
                except (TypeError, ValueError) as exc:  # the file is still uploaded
                    self.echo(f"dlbench: wandb: {label}: {name} not logged as a table: "
                              f"{one_line(exc)}")
            if self.mode != "disabled":
                _copy_into(wb, path, Path(folder) / name)
        return tables

    def _log_session(self, evaluation: Evaluation, artifacts: Sequence[Path]) -> None:
        summary = evaluation.saved_summary
        facts = self.facts
        assert facts is not None
        run_id = run_id_for(facts.run_name)
        if self._already_logged(run_id):
            self.skipped.append(run_id)
            return
        config = {"suite": facts.suite, "run_dir": facts.run_name, "commit": facts.commit,
                  "machine": dict(facts.machine), "versions": dict(facts.versions)}
        wb = self._init(run_id, name=facts.run_name, job_type="session",
                        tags=[facts.suite[:_MAX_TAG], "session"], config=json_safe(config))
        # Every declared figure by its key (results/model/figures.py), as frame() has them.
        columns, rows = bench_table(evaluation.summary)
        rows = [tuple(json_safe(v) for v in row) for row in rows]
        if not (wb.resumed and wb.starting_step > 0):
            wb.log({"benchmarks": self._table(Table(columns, tuple(rows)))}, step=0)
        wb.summary.update({**session_metrics(summary),
                           "incomplete": list(summary.get("incomplete") or [])})
        if self.mode != "disabled":  # a disabled run's dir is a made-up temporary path
            text = json.dumps(json_safe(dict(summary)), indent=2, default=str)
            (Path(wb.dir) / "dlbench-summary.json").write_text(text, encoding="utf-8")
            for path in artifacts:
                path = Path(path)
                if path.is_file():
                    _copy_into(wb, path, Path(path.name))
        self._finish(wb, 1 if evaluation.failed else 0)
        self.logged.append(run_id)


def _copy_into(wb: Any, path: Path, name: Path) -> None:
    """A file into the run's files folder, uploaded with the run (``wandb.save`` would
    symlink it and print a warning on the terminal, even with ``silent``)."""
    target = Path(wb.dir) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)


def _shell(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _finished(path: Path) -> bool:
    try:
        return read_offline_run(path).finished
    except (OSError, ValueError, StopIteration):
        return False
