"""What the loggers send, read from a run directory: session facts, the series of one run (from
the product's readers of a stream: :class:`~pytest_dlbench.measure.records.RunRecords` and
:class:`~pytest_dlbench.results.model.run_result.RunResult`), and the metrics of the saved summary
(the run's :class:`~pytest_dlbench.results.evaluation.Evaluation`).

Everything here is plain data (no mlflow, no wandb, no torch, no pytest), shared by the loggers
so that MLflow and W&B get the same names and numbers.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core.numbers import as_named, as_number
from pytest_dlbench.layout import Manifest, profile_dir, read_manifest, stream_paths
from pytest_dlbench.measure.machine import git_commit, machine_info, package_versions
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import StreamError
from pytest_dlbench.results.figures import load_run, run_from_records
from pytest_dlbench.results.model import FIGURES, BenchSummary, Figure, RunResult, SuiteSummary

__all__ = [
    "PROFILE_SUFFIXES",
    "Sample",
    "SessionFacts",
    "Step",
    "as_shown",
    "bench_labels",
    "bench_metrics",
    "bench_table",
    "figure_metric",
    "flatten",
    "manifest_facts",
    "profile_files",
    "read_run",
    "run_spec",
    "run_stats",
    "samples",
    "session_facts",
    "session_metrics",
    "step_series",
    "stream_key",
    "streams",
    "telemetry_values",
]

#: Files of a ``<stream-stem>.profile/`` folder that are uploaded.
PROFILE_SUFFIXES = (".json", ".csv")
_MIB = float(2**20)
# ``<run-name>.<YYYYmmdd-HHMMSS>``: the run directory's name carries its start time.
_RUN_DIR_TIME = re.compile(r"\.(\d{8}-\d{6})$")


# -- the session ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionFacts:
    """What one pytest session (one run directory) was: the parent run's tags."""

    run_dir: Path
    run_name: str  # the run directory's name: the stable key of the session
    suite: str
    start_time: float  # UNIX seconds
    commit: str | None = None
    machine: Mapping[str, Any] = field(default_factory=dict)
    versions: Mapping[str, Any] = field(default_factory=dict)

    def tags(self) -> dict[str, str]:
        """Flat string tags: ``suite``, ``commit``, ``machine.*``, ``versions.*``."""
        tags = {"suite": self.suite, "run_dir": self.run_name}
        if self.commit:
            tags["commit"] = self.commit
        tags.update(flatten(self.machine, prefix="machine."))
        tags.update(flatten(self.versions, prefix="versions."))
        return tags


def streams(run_dir: str | PathLike[str]) -> list[Path]:
    """Every stream of a run directory, in a stable order: one stream is one benchmark run."""
    return stream_paths(run_dir)


def _start_time(run_dir: Path) -> float:
    match = _RUN_DIR_TIME.search(run_dir.name)
    if match:
        try:
            stamp = _dt.datetime.strptime(match[1], "%Y%m%d-%H%M%S")
            return stamp.timestamp()  # local time, as the run directory was named
        except ValueError:
            pass
    try:
        return run_dir.stat().st_mtime
    except OSError:
        return 0.0


def _meta_facts(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Machine and versions from the first ``meta`` record of the streams (where it ran)."""
    for path in stream_paths(run_dir):
        try:
            meta = RunRecords.read(path).meta
        except (OSError, StreamError):
            continue
        if meta is None:
            continue
        machine = {
            "hostname": meta.get("host"),
            "platform": meta.get("platform"),
            "cpu": meta.get("cpu"),
            "device_name": meta.get("device_name"),
        }
        versions = {"python": meta.get("python"), "torch": meta.get("torch"),
                    "cuda": meta.get("cuda")}
        return ({k: v for k, v in machine.items() if v is not None},
                {k: v for k, v in versions.items() if v is not None})
    return {}, {}


def manifest_facts() -> dict[str, Any]:
    """``commit``, ``machine``, ``versions`` of this process, for the controller to add to
    ``manifest.json`` when the run starts: then logging during the run and ``dlbench log``
    later tag the session identically (and ``dlbench log`` knows the commit)."""
    return {"commit": git_commit(), "machine": machine_info(), "versions": package_versions()}


def session_facts(run_dir: str | PathLike[str], *, live: bool = False) -> SessionFacts:
    """The session's facts, from the run directory.

    ``manifest.json`` keys ``commit``, ``machine``, ``versions`` win when the run wrote them (then
    logging during the run and ``dlbench log`` later tag identically). Otherwise: with ``live``
    (this process is the session's controller) the git commit of the working directory, this
    machine and the installed package versions; after the fact, the machine and versions of the
    streams' ``meta`` records and no commit (it is not known any more).
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir) or Manifest()
    suite = str(manifest.suite or _RUN_DIR_TIME.sub("", run_dir.name) or run_dir.name)
    facts = manifest.facts  # a commit said as null is known: none
    commit = facts.get("commit")
    machine = facts.get("machine")
    versions = facts.get("versions")
    if live:
        commit = commit if "commit" in facts else git_commit()
        machine = machine if machine is not None else machine_info()
        versions = versions if versions is not None else package_versions()
    elif machine is None or versions is None:
        meta_machine, meta_versions = _meta_facts(run_dir)
        machine = machine if machine is not None else meta_machine
        versions = versions if versions is not None else meta_versions
    return SessionFacts(
        run_dir=run_dir,
        run_name=run_dir.name,
        suite=suite,
        start_time=_start_time(run_dir),
        commit=str(commit) if commit else None,
        machine=dict(machine or {}),
        versions=dict(versions or {}),
    )


def _metric_name(text: str) -> str:
    """MLflow keys allow alphanumerics, ``_ - . / : space``; anything else becomes ``_``."""
    return re.sub(r"[^0-9A-Za-z_\-./: ]", "_", text)


def as_shown(key: str, value: Any) -> Any:
    """A summary value in the unit its name says, as every output sends it (std_pct 2.5, not
    the saved 0.025: core/numbers.FIGURE_UNITS, the one table of units)."""
    return as_named(key, value)


#: The run's telemetry figures sent beside the declared ones (the GPU's mean load: a figure of
#: the system tab, not of the benchmark table).
_TELEMETRY_KEYS = ("peak_gpu_mem_bytes", "peak_rss_bytes", "torch_max_allocated_bytes",
                   "torch_max_reserved_bytes", "energy_j", "mean_gpu_util")


#: A run's summary (an evaluation's), or its saved form (``--bench-save``'s dict).
Summary = SuiteSummary | Mapping[str, Any]


def _benches(summary: Summary) -> list[BenchSummary]:
    """The benchmarks, as the figures read them: a saved summary's read back by the data model
    (a saved run keeps no step times: a time-to-train is only in an evaluation's summary)."""
    if isinstance(summary, SuiteSummary):
        return list(summary.benchmarks)
    return [BenchSummary.from_dict(str(name), bench)
            for name, bench in (summary.get("benchmarks") or {}).items()]


def figure_metric(f: Figure, bench: BenchSummary) -> float | None:
    """A declared figure's value as a metric (a flag as 1 or 0); None: a text, or not known."""
    if f.is_text:
        return None
    value = f.value(bench)
    if isinstance(value, bool):
        return float(value)
    return as_number(value)


def bench_metrics(summary: Summary) -> dict[str, dict[str, float]]:
    """Per benchmark: every declared figure that is a number or a flag (results/model/
    figures.py, by its metric name: ``perf``, ``std_pct`` in percent, ``tflops``, ``mfu`` in
    percent, ``bench_peak_rss_bytes``... and ``busy``/``unreliable`` as 1 or 0), and the GPU's
    mean load, from a run's summary or its saved dict (unknown values are left out)."""
    out: dict[str, dict[str, float]] = {}
    for b in _benches(summary):
        metrics: dict[str, float] = {}
        for f in FIGURES:
            value = figure_metric(f, b)
            if value is not None:
                metrics[f.metric] = value
        gpu_util = as_number(b.telemetry.get("mean_gpu_util"))
        if gpu_util is not None:
            metrics["bench_mean_gpu_util"] = gpu_util
        out[b.name] = metrics
    return out


def bench_labels(summary: Summary) -> dict[str, dict[str, str]]:
    """Per benchmark: the declared figures that are texts (``units``, ``precision``), known
    ones only: tags in MLflow, the run's summary in W&B."""
    return {b.name: {f.key: str(value) for f in FIGURES
                     if f.is_text and (value := f.value(b)) not in (None, "")}
            for b in _benches(summary)}


def bench_table(summary: Summary) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """The benchmark table as the loggers send it (W&B's ``benchmarks`` table): ``bench``, then
    every declared figure by its key, in its unit."""
    columns = ("bench", *(f.key for f in FIGURES))
    rows = [(b.name, *(f.value(b) for f in FIGURES)) for b in _benches(summary)]
    return columns, rows


def session_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The parent run's metrics: ``score``, ``failure_rate``, run counts, and per benchmark
    ``perf/<name>``, ``perf_adj/<name>``, ``std_pct/<name>``."""
    metrics: dict[str, float] = {}
    score = as_number(summary.get("score"))
    if score is not None:
        metrics["score"] = score
    rate = as_number(summary.get("failure_rate"))
    if rate is not None:
        metrics["failure_rate"] = as_shown("failure_rate", rate)
    benches = summary.get("benchmarks") or {}
    metrics["runs"] = float(sum(int(b.get("n") or 0) for b in benches.values()))
    metrics["failed_runs"] = float(sum(int(b.get("fail") or 0) for b in benches.values()))
    for name, values in bench_metrics(summary).items():
        for key in ("perf", "perf_adj", "std_pct"):
            if key in values:
                metrics[f"{key}/{_metric_name(name)}"] = values[key]
    return metrics


def stream_key(path: str | PathLike[str]) -> str:
    """``<run dir name>/<stream file name>``: what identifies a run in a tracking server."""
    path = Path(path)
    return f"{path.parent.name}/{path.name}"


def telemetry_values(record: Mapping[str, Any]) -> dict[str, float]:
    """A ``telemetry`` record as ``system/...`` metrics, named like MLflow's system metrics
    (``system/cpu_utilization_percentage``, ``system/gpu_0_utilization_percentage``...).
    Fields the monitor could not read (None) are left out."""
    out: dict[str, float] = {}

    def put(name: str, value: Any, scale: float = 1.0) -> None:
        number = as_number(value)
        if number is not None:
            out[f"system/{name}"] = number / scale

    put("cpu_utilization_percentage", record.get("system_cpu_percent"))
    put("process_cpu_utilization_percentage", record.get("cpu_percent"))
    put("process_memory_usage_megabytes", record.get("rss_bytes"), _MIB)
    put("process_count", record.get("procs"))
    put("disk_read_megabytes", record.get("disk_read_bytes"), _MIB)
    put("disk_write_megabytes", record.get("disk_write_bytes"), _MIB)
    for gpu in record.get("gpus") or []:
        if not isinstance(gpu, Mapping):
            continue
        i = gpu.get("index")
        p = f"gpu_{i}_"
        put(p + "utilization_percentage", gpu.get("util"))
        put(p + "memory_usage_megabytes", gpu.get("mem_used"), _MIB)
        used, total = as_number(gpu.get("mem_used")), as_number(gpu.get("mem_total"))
        if used is not None and total:
            out[f"system/{p}memory_usage_percentage"] = 100.0 * used / total
        put(p + "power_usage_watts", gpu.get("power_w"))
        put(p + "temperature_celsius", gpu.get("temp_c"))
        put(p + "sm_clock_mhz", gpu.get("sm_clock_mhz"))
        put(p + "energy_joules", gpu.get("energy_j"))
    return out


# -- one benchmark run: the product's readers, and the series the loggers send ---------------
def read_run(path: str | PathLike[str]) -> tuple[RunRecords, RunResult]:
    """One stream (complete, or torn by a crash): its records and its scored run, read by the
    product's readers (a stream corrupt before its last line: no records, a failed run)."""
    try:
        records = RunRecords.read(path)
    except StreamError:
        return RunRecords(), load_run(path)  # the failed run with the corrupt-stream reason
    return records, run_from_records(records, path=path)


@dataclass(frozen=True)
class Step:
    """One value sent against the benchmark's step: an observation (key ``rate``), a ``loss``
    or a region's mean seconds per call (``region/<name>``)."""

    key: str
    step: int
    value: float
    time: float  # UNIX seconds: the record's own, else the time of the observation of its step
    warmup: bool = False  # a warm-up observation (rates only)


@dataclass(frozen=True)
class Sample:
    """One ``telemetry`` record, as ``system/...`` values (:func:`telemetry_values`)."""

    index: int
    time: float
    elapsed: float | None
    values: Mapping[str, float]


def step_series(records: RunRecords) -> list[Step]:
    """Every observation (warm-up included), then the losses and the regions, in stream order.
    A loss or region without a time of its own takes its step's observation's, else the run's
    last time."""
    rates = [Step("rate", int(r.get("step") or 0), value, as_number(r.get("time")) or 0.0,
                  bool(r.get("warmup")))
             for r in records.rates if (value := as_number(r.get("value"))) is not None]
    step_time = {o.step: o.time for o in rates}
    span = records.span
    last = span[1] if span else 0.0

    def when(step: int, own: float | None = None) -> float:
        return own if own is not None else step_time.get(step, last)

    losses = [Step("loss", step, value, when(step))
              for r in records.losses
              if (value := as_number(r.get("value"))) is not None
              for step in (int(r.get("step") or 0),)]
    regions = []
    for r in records.regions:
        count, seconds = as_number(r.get("count")), as_number(r.get("seconds"))
        if count and seconds is not None:
            step = int(r.get("step") or 0)
            regions.append(Step(f"region/{r.get('key')}", step, seconds / count,
                                when(step, as_number(r.get("time")))))
    return rates + losses + regions


def samples(records: RunRecords) -> list[Sample]:
    """The monitor's samples that have a time, numbered in order."""
    out: list[Sample] = []
    for record in records.telemetry:
        t = as_number(record.get("time"))
        if t is not None:
            out.append(Sample(len(out), t, as_number(record.get("elapsed")),
                              telemetry_values(record)))
    return out


def run_stats(result: RunResult) -> dict[str, float]:
    """The run's own numbers: ``run_rate`` and its peak memory (the device's, the process's,
    torch's allocated and reserved), energy and GPU load."""
    stats: dict[str, float] = {}
    if result.rate is not None:
        stats["run_rate"] = float(result.rate)
    for key in _TELEMETRY_KEYS:
        value = as_number(result.telemetry.get(key))
        if value is not None:
            stats[key] = value
    return stats


def run_spec(records: RunRecords) -> dict[str, Any]:
    """The resolved spec the run's ``config`` record holds."""
    return dict((records.config or {}).get("spec") or {})


def _real_dir(folder: Path) -> bool:
    """``folder`` is a directory itself, not a symbolic link to one."""
    try:
        return stat.S_ISDIR(folder.lstat().st_mode)
    except OSError:
        return False


def profile_files(stream: str | PathLike[str]) -> list[tuple[str, Path]]:
    """The files of a run's profile folder that are uploaded, as (their path in the folder,
    posix; the file): regular files inside the run directory only. No symbolic link is followed
    (to a file or to a folder, the profile folder itself included): a link planted in a run
    directory cannot send what it points at (a key in the home directory) to a tracking
    server."""
    folder = profile_dir(stream)
    if not _real_dir(folder):
        return []
    run_dir = os.path.realpath(folder.parent)
    if not os.path.realpath(folder).startswith(run_dir + os.sep):
        return []
    found = []
    for where, _dirs, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(where) / name
            try:
                regular = stat.S_ISREG(path.lstat().st_mode)
            except OSError:
                continue
            if regular and path.suffix.lower() in PROFILE_SUFFIXES:
                found.append(path)
    return [(path.relative_to(folder).as_posix(), path) for path in sorted(found)]


# -- helpers ----------------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    return "" if value is None else str(value)


def flatten(data: Mapping[str, Any], *, prefix: str = "") -> dict[str, str]:
    """``{"argv": {"--m": 256}, "tags": ["a", "b"]}`` -> ``{"argv.--m": "256", "tags": "a,b"}``.

    Nested mappings are joined with ``.``; a list of scalars is comma-joined, any other list is
    its JSON text; None is the empty string.
    """
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if value:
                out.update(flatten(value, prefix=name + "."))
            else:
                out[name] = ""
        elif isinstance(value, list | tuple):
            if all(not isinstance(v, Mapping | list | tuple) for v in value):
                out[name] = ",".join(_scalar(v) for v in value)
            else:
                out[name] = json.dumps(value, default=str)
        else:
            out[name] = _scalar(value)
    return out

