"""Run directories for the logger tests, written as JSON lines (the stream format of
docs/running.md) so they do not depend on where the stream writer module lives."""

from __future__ import annotations

import json
import math
import shutil
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

RUN_NAME = "lt.20261121-220108"


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


def write_stream(
    run_dir: Path,
    bench: str,
    *,
    device: int = 0,
    repeat: int | None = None,
    rates: list[float] | None = None,
    skip: int = 3,
    status: str | None = "ok",
    reason: str = "",
    weight: float = 1.0,
    t0: float = 1_790_000_000.0,
    gpus: int = 0,
    profile: dict[str, Any] | None = None,
) -> Path:
    """One stream with config, meta, monitor, telemetry, rate (``skip`` warm-up), region,
    loss, monitor_summary and end (no end when ``status`` is None); ``profile`` maps file
    names to JSON data (or CSV text) for a ``<stem>.profile/`` folder."""
    rates = rates if rates is not None else [100.0 + 3 * math.sin(i) for i in range(15)]
    stem = f"{bench}.D{device}" + (f".R{repeat}" if repeat is not None else "")
    path = run_dir / f"{stem}.data"
    spec = {
        "name": bench, "weight": weight, "enabled": True, "plan": {"method": "per_gpu"},
        "tags": ["vision", "small"], "argv": {"--batch-size": 32, "--model": "resnet18"},
        "args": ["--batch-size", "32", "--model", "resnet18"], "skip": skip,
        "stop": len(rates) - skip, "voir": {"options": {"skip": skip, "interval": "1s"}},
        "env": {}, "group": None, "definition": "pkg.mod:main", "max_duration": 60.0,
    }
    lines = [
        _line({"event": "config", "spec": spec, "device": device, "repeat": repeat}),
        _line({"event": "meta", "host": "testhost", "platform": "Linux", "python": "3.11.7",
               "cpu": "x86_64", "pid": 1, "time": t0, "torch": "2.14.1", "cuda": None,
               "device": "cpu", "device_name": "x86_64"}),
        _line({"event": "monitor", "gpu": bool(gpus), "interval": 1.0, "time": t0}),
    ]
    t = t0 + 0.5
    for k in range(3):
        lines.append(_line({
            "event": "telemetry", "time": t0 + k, "elapsed": float(k),
            "cpu_percent": 90.0 + k, "system_cpu_percent": 50.0 + k,
            "rss_bytes": (500 + 10 * k) * 2**20, "procs": 1, "disk_read_bytes": 0,
            "disk_write_bytes": 4096 * k,
            "gpus": [{"index": g, "util": 80.0 + k, "mem_used": (1000 + k) * 2**20,
                      "mem_total": 16000 * 2**20, "power_w": 200.0 + k, "temp_c": 60.0,
                      "sm_clock_mhz": 1400.0, "energy_j": 200.0 * k} for g in range(gpus)],
        }))
    for step, value in enumerate(rates):
        seconds = 32 / value
        t += seconds
        lines.append(_line({"event": "rate", "value": value, "units": "items/s", "step": step,
                            "warmup": step < skip, "time": t, "items": 32,
                            "seconds": seconds}))
        if step % 5 == 4:
            lines.append(_line({"event": "region", "key": "forward", "count": 5,
                                "seconds": 0.05 * (1 + step / 100), "step": step}))
    for step in range(len(rates)):
        lines.append(_line({"event": "loss", "value": 2.0 / (1 + step), "step": step}))
    lines.append(_line({"event": "monitor_summary", "gpu": bool(gpus), "samples": 3,
                        "errors": 0}))
    if status is not None:
        lines.append(_line({"event": "end", "status": status, "reason": reason,
                            "time": t + 0.01}))
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    if profile:
        folder = run_dir / f"{stem}.profile"
        folder.mkdir(exist_ok=True)
        for name, data in profile.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            text = data if isinstance(data, str) else json.dumps(data)
            target.write_text(text, encoding="utf-8")
    return path


SPEED_REPORT = [
    {"metric": "training_avg_throughput", "value": 101.5},
    {"metric": "dataloader_throughput", "value": 880.0},
]
TIME_CSV = "action,mean_s,calls\nforward,0.010,15\nbackward,0.021,15\n"


def write_run_dir(base: Path, name: str = RUN_NAME) -> Path:
    """A run directory of a small suite: ``alpha`` on two devices (D0 with profile reports),
    ``beta`` with two repeats (one failed with a reason), ``gamma`` on GPU telemetry."""
    run_dir = base / "runs" / name
    write_stream(run_dir, "alpha", device=0,
                 profile={"speed.json": SPEED_REPORT, "time.csv": TIME_CSV,
                          "nested/system.json": {"gpu_util": 81.0, "cpu_util": 45.5}})
    write_stream(run_dir, "alpha", device=1, rates=[90.0 + (i % 3) for i in range(15)],
                 t0=1_790_000_001.0)
    write_stream(run_dir, "beta", repeat=0, rates=[50.0 + (i % 4) for i in range(12)],
                 t0=1_790_000_010.0)
    write_stream(run_dir, "beta", repeat=1, rates=[51.0, 52.0, 49.0, 50.0, 48.0],
                 status="oom", reason="out of memory: CUDA out of memory", t0=1_790_000_020.0)
    write_stream(run_dir, "gamma", rates=[10.0 + i / 10 for i in range(20)], weight=2.0,
                 gpus=2, t0=1_790_000_030.0)
    manifest = {
        "version": 1, "suite": "lt",
        "benchmarks": {b: {"weight": w, "enabled": True, "units": None,
                           "plan": {"method": "per_gpu"}}
                       for b, w in (("alpha", 1.0), ("beta", 1.0), ("gamma", 2.0))},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run_dir


def stream_rates(path: Path) -> list[tuple[int, float]]:
    """(step, value) of every ``rate`` record of a stream, in order."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "rate":
            out.append((record["step"], record["value"]))
    return out


def record_facts(run_dir: Path) -> None:
    """Add what the controller records for the loggers to the manifest (docs/logging.md):
    then logging during the run and after it tag the session the same way."""
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(commit="0123abcd", machine={"hostname": "node1", "cpu": "x"},
                    versions={"torch": "2.14.1"})
    path.write_text(json.dumps(manifest), encoding="utf-8")


_TEMPLATE: list[Path] = []


def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised, empty MLflow sqlite database, made once per test session: creating one
    runs its migrations, which takes seconds, so tests copy this file (:func:`copy_db`)."""
    if not _TEMPLATE:
        mlflow = pytest.importorskip("mlflow")
        path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SQLAlchemy deprecations inside MLflow
            mlflow.MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def copy_db(empty_db: Path, folder: Path) -> str:
    """A fresh store in ``folder`` (its ``mlflow.db``); returns its tracking URI."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty_db, folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


#: A suite of two sleeping benchmarks (``defs.py``; weights 1 and 2) for a logged pytest run.
SLEEPER_DEFS = textwrap.dedent(
    """
    import time

    def sleeper(bench):
        for _ in bench.iterate(range(10_000), batch_size=8):
            with bench.region("forward"):
                time.sleep(0.002)
    """
)
SLEEPER_SUITE = textwrap.dedent(
    """
    _base:
      voir: {options: {skip: 2, stop: 10}}
    fast: {inherits: _base, definition: defs.py:sleeper, weight: 1}
    other: {inherits: _base, definition: defs.py:sleeper, weight: 2}
    """
)


def _artifacts(client: Any, run_id: str, path: str | None = None) -> list[str]:
    out = []
    for item in client.list_artifacts(run_id, path):
        out += _artifacts(client, run_id, item.path) if item.is_dir else [item.path]
    return sorted(out)


def dump(uri: str, experiment: str = "lt") -> dict[str, dict[str, Any]]:
    """Every active run of the experiment by name: status, params, tags (run ids left out),
    every metric's full history, artifacts."""
    from mlflow import MlflowClient  # here: the importers skip their tests without mlflow

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    ids = {r.info.run_id: r.info.run_name for r in runs}
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        tags = {k: v for k, v in run.data.tags.items() if k != "mlflow.loggedArtifacts"}
        tags["mlflow.parentRunId"] = ids.get(tags.get("mlflow.parentRunId", ""), "")
        out[run.info.run_name] = {
            "id": run.info.run_id,
            "status": run.info.status,
            "start": run.info.start_time,
            "end": run.info.end_time,
            "params": dict(run.data.params),
            "tags": tags,
            "metrics": {
                key: sorted((m.step, m.value, m.timestamp)
                            for m in client.get_metric_history(run.info.run_id, key))
                for key in run.data.metrics
            },
            "artifacts": _artifacts(client, run.info.run_id),
        }
    return out
