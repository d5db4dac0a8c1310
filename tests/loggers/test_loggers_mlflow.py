"""MLflow logging against a real sqlite tracking store (MLflow 3 refuses the file store)."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from _logger_runs import (
    RUN_NAME,
    copy_db,
    dump,
    empty_mlflow_db,
    record_facts,
    stream_rates,
    write_run_dir,
)

from pytest_dlbench.loggers.sink import GuardedSink, log_run_dir, open_sinks
from pytest_dlbench.loggers.source import session_facts, streams
from pytest_dlbench.results.evaluation import evaluate

mlflow = pytest.importorskip("mlflow")
from mlflow import MlflowClient  # noqa: E402

from pytest_dlbench.loggers.mlflow_logger import MlflowSink, resolve_tracking_uri  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_mlflow_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return empty_mlflow_db(tmp_path_factory)


def without_ids(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: {k: v for k, v in run.items() if k != "id"} for name, run in runs.items()}


def test_session_and_benchmark_runs_in_sqlite(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # artifacts must not land in ./mlruns
    run_dir = write_run_dir(tmp_path / "base")
    report = tmp_path / "report.html"
    report.write_text("<html>report</html>")
    saved = tmp_path / "baseline.json"
    saved.write_text("{}")
    uri = copy_db(empty_db, tmp_path / "store")
    warned: list[str] = []
    (guarded,) = log_run_dir(run_dir, MlflowSink(uri), artifacts=[report, saved],
                             warn=warned.append)
    assert guarded.failure is None and warned == []
    runs = dump(uri)
    summary = evaluate(run_dir).saved_summary

    # One parent run for the session, with the score and the failure rate.
    parent = runs.pop(RUN_NAME)
    assert parent["metrics"]["score"] == [(0, pytest.approx(summary["score"]), parent["end"])]
    assert parent["metrics"]["failure_rate"][0][1] == pytest.approx(0.2)
    assert parent["tags"]["dlbench.suite"] == "lt"
    assert parent["tags"]["dlbench.machine.hostname"] == "testhost"
    assert parent["tags"]["dlbench.versions.torch"] == "2.14.1"
    assert parent["tags"]["dlbench.complete"] == "true"
    assert parent["status"] == "FAILED"  # beta[D0-R1] ran out of memory
    assert parent["artifacts"] == ["baseline.json", "dlbench/summary.json", "report.html"]
    assert {"perf/alpha", "perf_adj/gamma", "std_pct/beta"} <= set(parent["metrics"])

    # One nested run per stream, each with every observation of its stream as `rate`.
    paths = {p.name: p for p in streams(run_dir)}
    assert sorted(runs) == ["alpha[D0]", "alpha[D1]", "beta[D0-R0]", "beta[D0-R1]", "gamma[D0]"]
    total_metrics = 0
    for name, run in runs.items():
        stream = paths[run["tags"]["dlbench.stream"]]
        assert run["tags"]["mlflow.parentRunId"] == RUN_NAME
        assert run["tags"]["dlbench.key"] == f"{RUN_NAME}/{stream.name}"
        expected = stream_rates(stream)
        assert [(s, v) for s, v, _ in run["metrics"]["rate"]] == sorted(expected)
        assert len(run["metrics"]["rate"]) == len(expected)
        assert len(run["metrics"]["loss"]) == len(expected)
        assert len(run["metrics"]["system/process_memory_usage_megabytes"]) == 3
        assert run["params"]["argv.--batch-size"] == "32"
        assert run["params"]["tags"] == "vision,small"
        total_metrics += sum(len(h) for h in run["metrics"].values())
        bench = summary["benchmarks"][name.split("[")[0]]
        assert run["metrics"]["perf_adj"][0][1] == pytest.approx(bench["perf_adj"])
        assert "peak_rss_bytes" in run["metrics"]
    assert total_metrics > 300
    failed = runs["beta[D0-R1]"]
    assert failed["status"] == "FAILED"
    assert failed["tags"]["dlbench.status"] == "oom"
    assert failed["tags"]["dlbench.reason"] == "out of memory: CUDA out of memory"
    assert runs["alpha[D0]"]["status"] == "FINISHED"
    # Timestamps are the observations' own.
    first = json.loads(paths["alpha.D0.data"].read_text().splitlines()[6])
    assert first["event"] == "rate"
    assert runs["alpha[D0]"]["metrics"]["rate"][0][2] == round(first["time"] * 1000)
    # GPU telemetry as MLflow-style system metrics.
    assert len(runs["gamma[D0]"]["metrics"]["system/gpu_1_utilization_percentage"]) == 3
    # Profile reports: every file, and the tabular ones as MLflow tables.
    assert runs["alpha[D0]"]["artifacts"] == [
        "profile/nested/system.json", "profile/speed.json", "profile/time.csv",
        "profile_tables/nested/system.json", "profile_tables/speed.json",
        "profile_tables/time.json",
    ]
    assert runs["alpha[D1]"]["artifacts"] == []
    client = MlflowClient(tracking_uri=uri)
    run_id = runs["alpha[D0]"]["id"]
    logged = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert {"path": "profile_tables/speed.json", "type": "table"} in logged
    table = json.loads(Path(client.download_artifacts(
        run_id, "profile_tables/speed.json", str(tmp_path))).read_text())
    assert table["columns"] == ["metric", "value"]
    assert table["data"] == [["training_avg_throughput", 101.5], ["dataloader_throughput", 880.0]]
    assert not (tmp_path / "mlruns").exists()
    assert (tmp_path / "store" / "mlartifacts" / "lt").is_dir()


def test_logging_twice_does_not_duplicate(empty_db: Path, tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "base")
    uri = copy_db(empty_db, tmp_path / "store")
    log_run_dir(run_dir, MlflowSink(uri))
    first = dump(uri)
    echoed: list[str] = []
    (guarded,) = log_run_dir(run_dir, MlflowSink(uri, echo=echoed.append))
    assert guarded.failure is None
    assert dump(uri) == first  # the same runs, untouched (same ids)
    assert len(echoed) == 1 and "already logged" in echoed[0] and "skipped" in echoed[0]
    # --replace: the same runs again, new ids, nothing left over.
    log_run_dir(run_dir, MlflowSink(uri, replace=True))
    again = dump(uri)
    assert without_ids(again).keys() == without_ids(first).keys()
    assert {r["id"] for r in again.values()}.isdisjoint(r["id"] for r in first.values())
    assert len(again) == 6


def test_a_session_logged_in_part_is_replaced(empty_db: Path, tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "base")
    uri = copy_db(empty_db, tmp_path / "store")
    partial = MlflowSink(uri)
    partial.start_session(run_dir, session_facts(run_dir))
    partial.log_bench_run(run_dir / "alpha.D0.data")  # ... and the session died here
    assert len(dump(uri)) == 2
    log_run_dir(run_dir, MlflowSink(uri))
    runs = dump(uri)
    assert len(runs) == 6 and runs[RUN_NAME]["tags"]["dlbench.complete"] == "true"
    assert partial.parent_id not in {r["id"] for r in runs.values()}


def test_during_the_run_and_after_it_give_the_same_runs(empty_db: Path, tmp_path: Path) -> None:
    # The finished run directory, logged after the fact.
    done = write_run_dir(tmp_path / "a")
    record_facts(done)
    after = copy_db(empty_db, tmp_path / "after")
    log_run_dir(done, MlflowSink(after))

    # The same session, logged while it runs: streams appear one by one.
    live_dir = tmp_path / "b" / "runs" / RUN_NAME
    live_dir.mkdir(parents=True)
    shutil.copy(done / "manifest.json", live_dir / "manifest.json")
    live = copy_db(empty_db, tmp_path / "live")
    sink = GuardedSink(MlflowSink(live))
    sink.start_session(live_dir, session_facts(live_dir, live=True))
    for path in streams(done):
        shutil.copy(path, live_dir / path.name)
        profile = path.with_name(path.stem + ".profile")
        if profile.is_dir():
            shutil.copytree(profile, live_dir / profile.name)
        sink.log_bench_run(live_dir / path.name)
        sink.log_bench_run(live_dir / path.name)  # reported twice (xdist): logged once
    sink.log_bench_run(live_dir / "never-started.D0.data")  # an item without a stream
    sink.finish_session(evaluate(live_dir), [])
    assert sink.failure is None

    a, b = without_ids(dump(after)), without_ids(dump(live))
    assert a.keys() == b.keys() and len(a) == 6
    for name in a:
        assert a[name] == b[name], name
    assert a[RUN_NAME]["tags"]["mlflow.source.git.commit"] == "0123abcd"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_is_one_warning_line_quickly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run_dir = write_run_dir(tmp_path / "base")
    uri = f"http://127.0.0.1:{closed_port()}"
    warned: list[str] = []
    start = time.monotonic()
    sinks = open_sinks(mlflow=uri, warn=warned.append)
    log_run_dir(run_dir, sinks, warn=warned.append)
    elapsed = time.monotonic() - start
    assert elapsed < 30
    assert len(warned) == 1
    assert warned[0].startswith(f"dlbench: mlflow logging disabled: cannot reach {uri} (")
    assert "Connection refused" in warned[0] or "ConnectionRefused" in warned[0]
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # nothing else on the terminal


def test_tracking_uri_resolution(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team:5000")
    assert resolve_tracking_uri("sqlite:///x.db", tmp_path) == "sqlite:///x.db"
    assert resolve_tracking_uri(None, tmp_path) == "http://team:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    # Without a URI: <bench-base>/mlflow.db, the base being the run directory's; the
    # experiment can be renamed.
    run_dir = write_run_dir(tmp_path)
    copy_db(empty_db, tmp_path)
    (guarded,) = log_run_dir(run_dir, MlflowSink(experiment="my-exp"))
    assert guarded.failure is None
    assert len(dump(f"sqlite:///{tmp_path}/mlflow.db", "my-exp")) == 6
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-env")
    log_run_dir(run_dir, MlflowSink())
    assert len(dump(f"sqlite:///{tmp_path}/mlflow.db", "from-env")) == 6
