"""MLflow: one parent run per session, one nested run per benchmark run (docs/logging.md).

Everything goes through ``MlflowClient`` with explicit run ids (no ``mlflow.start_run``, no
global active run), in ``log_batch`` calls of at most 1000 metrics, so it neither touches a
user's own active run nor costs more than a few requests per benchmark run.

Idempotence: every run carries ``dlbench.session`` (the run directory's name) and
``dlbench.key`` (``<run dir>/<stream file>``, or the run directory's name for the parent). A
session whose parent run is marked complete (``dlbench.complete = true``, set last) is skipped
when it is logged again; a session logged only in part (a run interrupted, a failed upload) is
deleted and logged afresh. ``replace=True`` deletes and re-logs even a complete one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.layout import json_safe
from pytest_dlbench.loggers.base import Echo, LoggerError, require, stderr_line
from pytest_dlbench.loggers.source import (
    SessionFacts,
    bench_labels,
    bench_metrics,
    flatten,
    profile_files,
    read_run,
    run_spec,
    run_stats,
    samples,
    session_metrics,
    step_series,
    stream_key,
)
from pytest_dlbench.loggers.tables import read_table
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.results.evaluation import Evaluation
from pytest_dlbench.results.model import RunResult

__all__ = ["TAG", "MlflowSink", "resolve_tracking_uri", "run_params", "run_tags"]

#: Our tags: ``dlbench.<name>``.
TAG = "dlbench."
KIND, KEY, SESSION, COMPLETE = (TAG + k for k in ("kind", "key", "session", "complete"))
MAX_METRICS = 1000  # MlflowClient.log_batch: at most 1000 metrics per call
MAX_PARAMS_TAGS = 100  # ... and 100 params and tags
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250
PROBE_TIMEOUT_S = 5.0
#: MLflow's HTTP retry settings while we call it, unless the user set them: the default (7
#: retries, backoff factor 2, 120 s timeout) can wait for many minutes on a dead server.
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    # No tqdm "Downloading artifacts"/"Uploading artifacts" bars inside pytest's dot line.
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
#: Where a benchmark run ran, kept on each nested run (they can differ between the runs of
#: one session: nodes, GPU models); every other machine fact is a tag of the session run, once.
RUN_META_TAGS = ("host", "device_name")
_QUIET_LOGGERS = ("mlflow", "alembic", "urllib3")


def resolve_tracking_uri(uri: str | None, bench_base: str | os.PathLike[str]) -> str:
    """The argument, else ``MLFLOW_TRACKING_URI``, else ``sqlite:///<bench-base>/mlflow.db``."""
    if uri:
        return uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(Path(bench_base).resolve() / 'mlflow.db').as_posix()}"


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def probe(uri: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`LoggerError` when an ``http(s)`` tracking server cannot be reached.

    Any HTTP answer (even 401 or 404) means it is there; only a connection that fails or times
    out is "cannot reach". Other URIs (sqlite, databricks) are not probed.
    """
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout):  # noqa: S310 - the user's server
            pass
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        why = f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else reason
        raise LoggerError(f"cannot reach {uri} ({why})") from exc


@contextlib.contextmanager
def _calling_mlflow() -> Iterator[None]:
    """Bounded HTTP retries, no artifact progress bars, and MLflow's own INFO/WARNING chatter
    (database migrations, retries) and Python warnings kept off the user's terminal."""
    saved_env = {k: os.environ.get(k) for k in HTTP_LIMITS}
    for key, value in HTTP_LIMITS.items():
        os.environ.setdefault(key, value)
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        for key, saved in saved_env.items():
            if saved is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = saved


_BAD_KEY = re.compile(r"[^\w\-./: ]")


def _key(text: str) -> str:
    return _BAD_KEY.sub("_", text)[:MAX_KEY]


def _ms(seconds: float | None) -> int:
    return int(round((seconds if seconds is not None else time.time()) * 1000))


class MlflowSink:
    """Logs a session to MLflow (see the module docstring). Use it through
    :class:`~pytest_dlbench.loggers.sink.GuardedSink` so that a failure is one warning line."""

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment: str | None = None,
        bench_base: str | os.PathLike[str] | None = None,
        replace: bool = False,
        echo: Echo = stderr_line,
    ) -> None:
        self.tracking_uri = tracking_uri or None
        self.experiment = experiment
        self.bench_base = Path(bench_base) if bench_base is not None else None
        self.replace = replace
        self.echo = echo
        self.client: Any = None
        self.uri: str | None = None
        self.experiment_id: str | None = None
        self.experiment_name: str | None = None
        self.parent_id: str | None = None
        self.skipped = False
        self.facts: SessionFacts | None = None
        self.run_ids: dict[str, str] = {}  # stream key -> nested run id
        self.bench_runs: dict[str, list[tuple[str, float | None]]] = {}  # bench -> (id, end)
        self.end_time: float | None = None
        #: The closing line (where the session went, how to open it), once it is all logged.
        self.done: str | None = None

    # -- the session ------------------------------------------------------------------------
    def start_session(self, run_dir: Path, facts: SessionFacts) -> None:
        require("mlflow")
        from mlflow import MlflowClient

        from pytest_dlbench.layout import run_base

        self.facts = facts
        base = self.bench_base or run_base(run_dir)
        self.uri = resolve_tracking_uri(self.tracking_uri, base)
        probe(self.uri)
        db = _sqlite_path(self.uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        with _calling_mlflow():
            self.client = MlflowClient(tracking_uri=self.uri)
            name = self.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or facts.suite
            self.experiment_name = name
            self.experiment_id = self._experiment(name, db)
            existing = self._search(f"tags.`{KIND}` = 'session' and tags.`{KEY}` = "
                                    f"{_quote(facts.run_name)}")
            complete = [r for r in existing if r.data.tags.get(COMPLETE) == "true"]
            if complete and not self.replace:
                self.skipped = True
                self.echo(f"dlbench: mlflow: {facts.run_name} is already logged (run "
                          f"{complete[0].info.run_id} in {self.uri}); skipped")
                return
            if existing:
                self._delete_session(facts.run_name)
            tags = {f"{TAG}{k}": v for k, v in facts.tags().items()}
            tags.update({KIND: "session", KEY: facts.run_name, SESSION: facts.run_name})
            if facts.commit:
                tags["mlflow.source.git.commit"] = facts.commit
            run = self.client.create_run(
                self.experiment_id, start_time=_ms(facts.start_time),
                tags=_tags(tags), run_name=facts.run_name,
            )
            self.parent_id = run.info.run_id

    def log_bench_run(self, stream_path: Path) -> None:
        if self.skipped or self.client is None:
            return
        key = stream_key(stream_path)
        if key in self.run_ids:  # each run once, however often the caller reports it
            return
        if not Path(stream_path).is_file():  # an item that never started its benchmark
            return
        records, result = read_run(stream_path)
        span = records.span
        with _calling_mlflow():
            run_id = self._log_bench(Path(stream_path), records, result)
        self.run_ids[key] = run_id
        run_end = span[1] if span else None
        self.bench_runs.setdefault(result.bench, []).append((run_id, run_end))
        if run_end is not None:
            self.end_time = max(self.end_time or run_end, run_end)

    def finish_session(self, evaluation: Evaluation, artifacts: Sequence[Path]) -> None:
        if self.skipped or self.client is None or self.parent_id is None:
            return
        from mlflow.entities import Metric

        assert self.facts is not None
        summary = evaluation.saved_summary
        end = self.end_time or self.facts.start_time
        with _calling_mlflow():
            # The benchmark's figures (results/model/figures.py: perf, std%, TFLOP/s, MFU,
            # peak memory...) on each of its runs; its texts (precision) as tags.
            labels = bench_labels(evaluation.summary)
            for bench, values in bench_metrics(evaluation.summary).items():
                for run_id, run_end in self.bench_runs.get(bench, []):
                    metrics = [Metric(_key(k), v, _ms(run_end or end), 0)
                               for k, v in sorted(values.items())]
                    self._metrics(run_id, metrics)
                    self._tags(run_id, {TAG + k: v for k, v in labels.get(bench, {}).items()})
            metrics = [Metric(_key(k), v, _ms(end), 0)
                       for k, v in sorted(session_metrics(summary).items())]
            self._metrics(self.parent_id, metrics)
            score = evaluation.summary.score
            self._tags(self.parent_id, {
                TAG + "score": "" if score is None else f"{score:.6g}",
                TAG + "incomplete": ",".join(evaluation.summary.incomplete),
                TAG + "failed": str(evaluation.failed).lower(),
            })
            self.client.log_dict(self.parent_id, json_safe(dict(summary)),
                                 "dlbench/summary.json")
            for path in artifacts:
                path = Path(path)
                if path.is_dir():
                    self.client.log_artifacts(self.parent_id, str(path), path.name)
                elif path.is_file():
                    self.client.log_artifact(self.parent_id, str(path))
            self._tags(self.parent_id, {COMPLETE: "true"})  # last: everything is there
            self.client.set_terminated(self.parent_id,
                                       "FAILED" if evaluation.failed else "FINISHED",
                                       end_time=_ms(end))
        self.done = self.where()
        self.echo(self.done)

    def where(self) -> str:
        """The line said at the end: where the runs are and the command that shows them."""
        assert self.facts is not None and self.uri is not None
        runs = len(self.run_ids)
        what = (f"dlbench: mlflow: logged {self.facts.run_name} ({runs} benchmark "
                f"run{'s' if runs != 1 else ''}) to {self.uri}, experiment {self.experiment_name}")
        if self.uri.startswith(("http://", "https://")):
            return (f"{what}; open {self.uri.rstrip('/')}/#/experiments/{self.experiment_id}"
                    f"/runs/{self.parent_id}")
        return f"{what}; open them with: mlflow ui --backend-store-uri {_shell(self.uri)}"

    def logged_where(self) -> str | None:
        """``5 benchmark run(s) under parent run <id> in <uri>``; None when skipped."""
        if self.skipped:
            return None
        runs = len(self.run_ids)
        return f"{runs} benchmark run(s) under parent run {self.parent_id} in {self.uri}"

    def close(self) -> None:
        """Nothing is held open between calls (the client is stateless); a session that
        failed half way stays unmarked and is replaced the next time it is logged."""
        self.client = None

    # -- helpers ----------------------------------------------------------------------------
    def _experiment(self, name: str, db: Path | None) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            return str(found.experiment_id)
        location = None
        if db is not None:  # not ./mlruns of whatever the working directory is
            folder = db.parent.resolve() / "mlartifacts" / _key(name).replace("/", "_")
            location = folder.as_uri()
        try:
            return str(self.client.create_experiment(name, artifact_location=location))
        except Exception:
            found = self.client.get_experiment_by_name(name)  # created meanwhile
            if found is None:
                raise
            return str(found.experiment_id)

    def _search(self, filter_string: str) -> list[Any]:
        runs: list[Any] = []
        token = None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=filter_string,
                                           max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def _delete_session(self, run_name: str) -> None:
        for run in self._search(f"tags.`{SESSION}` = {_quote(run_name)}"):
            self.client.delete_run(run.info.run_id)

    def _metrics(self, run_id: str, metrics: Sequence[Any]) -> None:
        for i in range(0, len(metrics), MAX_METRICS):
            self.client.log_batch(run_id, metrics=list(metrics[i:i + MAX_METRICS]),
                                  synchronous=True)

    def _tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, v) for k, v in _tags(tags).items()]
        for i in range(0, len(items), MAX_PARAMS_TAGS):
            self.client.log_batch(run_id, tags=items[i:i + MAX_PARAMS_TAGS], synchronous=True)

    def _log_bench(self, stream: Path, records: RunRecords, result: RunResult) -> str:
        from mlflow.entities import Metric, Param

        assert self.facts is not None and self.parent_id is not None
        span = records.span
        start, end_time = (span if span else (None, None))
        tags = {f"{TAG}{k}": v for k, v in run_tags(stream, records, result).items()}
        tags.update({
            KIND: "bench", KEY: stream_key(stream), SESSION: self.facts.run_name,
            "mlflow.parentRunId": self.parent_id,
        })
        if result.reason:
            tags["mlflow.note.content"] = f"{result.status}: {result.reason}"
        created = self.client.create_run(
            self.experiment_id, start_time=_ms(start or self.facts.start_time),
            tags=_tags(tags), run_name=result.label,
        )
        run_id = created.info.run_id
        params = [Param(_key(k), v[:MAX_PARAM_VALUE])
                  for k, v in run_params(records, result).items()]
        for i in range(0, len(params), MAX_PARAMS_TAGS):
            self.client.log_batch(run_id, params=params[i:i + MAX_PARAMS_TAGS], synchronous=True)
        metrics = [Metric(_key(p.key), p.value, _ms(p.time), p.step)
                   for p in step_series(records)]
        for sample in samples(records):
            metrics += [Metric(_key(k), v, _ms(sample.time), sample.index)
                        for k, v in sample.values.items()]
        end = _ms(end_time or start or self.facts.start_time)
        metrics += [Metric(_key(k), v, end, 0) for k, v in sorted(run_stats(result).items())]
        self._metrics(run_id, metrics)
        self._log_profile(run_id, stream)
        self.client.set_terminated(run_id, "FINISHED" if result.ok else "FAILED", end_time=end)
        return run_id

    def _log_profile(self, run_id: str, stream: Path) -> None:
        """The run's profile reports as artifacts, and each one that is a table once as a
        table artifact."""
        tabled: set[str] = set()
        # A report is written twice (speed.csv and speed.json): one table of it, its CSV rows
        # (sorted first). A second log_table to one file would download the first to append
        # to it (a tqdm bar in the terminal) and double every row.
        files = sorted(profile_files(stream), key=lambda f: (f[1].suffix.lower() != ".csv", f[1]))
        for name, path in files:
            folder = "/".join(["profile", *name.split("/")[:-1]])
            self.client.log_artifact(run_id, str(path), folder)
            stem = name.rsplit(".", 1)[0]
            if stem in tabled:
                continue
            table = read_table(path)
            if table is not None and table.columns:
                tabled.add(stem)
                self.client.log_table(run_id, data=table.as_columns(),
                                      artifact_file=f"profile_tables/{stem}.json")


def run_params(records: RunRecords, result: RunResult) -> dict[str, str]:
    """The run's resolved spec flattened (``argv.--batch-size``, ``plan.method``, ``tags``,
    ``weight``...) with ``device`` and ``repeat``, as params: without empty values (``env:
    {}``, a ``repeat`` of none) and without the copies the spec keeps for the runner
    (``voir.options.skip`` is ``skip``)."""
    params = flatten(run_spec(records))
    params["device"] = str(result.device)
    params["repeat"] = "" if result.repeat is None else str(result.repeat)
    out = {}
    for key, value in params.items():
        if value == "":
            continue
        head, _, last = key.rpartition(".")
        if head == "voir.options" and params.get(last) == value:
            continue
        out[key] = value
    return out


def run_tags(stream: Path, records: RunRecords, result: RunResult) -> dict[str, str]:
    """A nested run's own tags: its status and stream, and where it ran (host, device); the
    session run holds the machine's other facts once (``dlbench.machine.*``,
    ``dlbench.versions.*``)."""
    tags = {
        "bench": result.bench,
        "device": str(result.device),
        "status": str(result.status),
        "reason": result.reason,
        "stream": stream.name,
        "units": result.units,
    }
    if result.repeat is not None:
        tags["repeat"] = str(result.repeat)
    tags = {k: v for k, v in tags.items() if v != ""}
    meta = records.meta or {}
    for key in RUN_META_TAGS:
        value = meta.get(key)
        if value not in (None, ""):
            tags[key] = str(value)
    return tags


def _shell(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _quote(value: str) -> str:
    """A string literal for MLflow's search filter."""
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', '\\"') + '"'


def _tags(tags: Mapping[str, Any]) -> dict[str, str]:
    return {_key(str(k)): str(v)[:MAX_TAG_VALUE] for k, v in tags.items()}
