"""W&B logging in offline mode, read back from the offline run folders' ``.wandb`` files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _logger_runs import RUN_NAME, record_facts, stream_rates, write_run_dir

from pytest_dlbench.loggers.sink import GuardedSink, log_run_dir
from pytest_dlbench.loggers.source import session_facts, streams
from pytest_dlbench.results.evaluation import evaluate

pytest.importorskip("wandb")
from pytest_dlbench.loggers.wandb_logger import WandbSink, run_id_for  # noqa: E402
from pytest_dlbench.loggers.wandb_offline import (  # noqa: E402
    OfflineRun,
    find_offline_runs,
    read_offline_run,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_wandb_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_DIR", "WANDB_API_KEY",
                 "WANDB_ENTITY"):
        monkeypatch.delenv(name, raising=False)


def offline_runs(base: Path) -> dict[str, OfflineRun]:
    return {r.name: r for r in map(read_offline_run, find_offline_runs(base))}


def content(run: OfflineRun) -> dict[str, Any]:
    """What was logged, without W&B's own clocks."""
    history = [{k: v for k, v in row.items()  # W&B's clocks and random upload handles
                if k not in ("_timestamp", "_runtime") and not k.endswith("artifact_path")}
               for row in run.history]
    summary = {k: v for k, v in run.summary.items()
               if not k.startswith(("_", "benchmarks/", "profile/"))}
    return {"id": run.run_id, "group": run.group, "job_type": run.job_type, "tags": run.tags,
            "config": run.config, "history": history, "summary": summary,
            "exit": run.exit_code}


def test_offline_runs_hold_the_streams(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run_dir = write_run_dir(tmp_path)
    report = tmp_path / "report.html"
    report.write_text("<html></html>")
    warned: list[str] = []
    (guarded,) = log_run_dir(run_dir, WandbSink(), artifacts=[report], warn=warned.append)
    assert guarded.failure is None and warned == []
    out, err = capfd.readouterr()
    # W&B kept quiet: the one line is ours, where it logged (issue 41 item 4).
    assert out == "" and err.count("\n") == 1
    assert err.startswith("dlbench: wandb: logged ") and "upload them with: wandb sync " in err
    runs = offline_runs(tmp_path)  # <bench-base>/wandb/offline-run-*
    assert sorted(runs) == sorted(["alpha[D0]", "alpha[D1]", "beta[D0-R0]", "beta[D0-R1]",
                                   "gamma[D0]", RUN_NAME])
    summary = evaluate(run_dir).saved_summary
    paths = {p.name: p for p in streams(run_dir)}
    total_rows = 0
    for name, run in runs.items():
        assert run.group == RUN_NAME and run.project == "pytest-dlbench"
        assert run.finished
        if name == RUN_NAME:
            continue
        stream = paths[run.config["stream"]]
        assert run.run_id == run_id_for(f"{RUN_NAME}/{stream.name}")
        expected = stream_rates(stream)
        rates = [(row["bench_step"], row["rate"]) for row in run.history if "rate" in row]
        assert sorted(rates) == sorted(expected) and len(rates) == len(expected)
        assert [row["_step"] for row in run.history] == list(range(len(run.history)))
        assert len(run.series("loss")) == len(expected)
        assert len(run.series("system/process_memory_usage_megabytes")) == 3
        assert run.config["argv"] == {"--batch-size": 32, "--model": "resnet18"}
        assert run.config["weight"] == 1.0 or name == "gamma[D0]"
        bench = summary["benchmarks"][name.split("[")[0]]
        assert run.summary["perf"] == pytest.approx(bench["perf"])
        assert run.summary["perf_adj"] == pytest.approx(bench["perf_adj"])
        if bench["std_pct"] is not None:  # in percent, as the terminal and MLflow show it
            assert run.summary["std_pct"] == pytest.approx(100 * bench["std_pct"])
        total_rows += len(run.history)
    assert total_rows > 150
    failed = runs["beta[D0-R1]"]
    assert failed.exit_code == 1 and failed.summary["status"] == "oom"
    assert failed.tags == ["beta", "oom", "vision", "small"]
    assert runs["alpha[D0]"].exit_code == 0
    # GPU telemetry, against the telemetry's own axis.
    assert len(runs["gamma[D0]"].series("system/gpu_0_power_usage_watts")) == 3
    # Profile reports: tables in the history, the files in the run's files.
    alpha = runs["alpha[D0]"]
    tables = {k.split("/_type")[0] for row in alpha.history for k in row
              if k.endswith("/_type")}
    assert tables == {"profile/speed", "profile/time", "profile/nested/system"}
    files = alpha.path.parent / "files"
    table_files = sorted(p.name.split("_")[0] for p in files.rglob("*.table.json"))
    assert table_files == ["speed", "system", "time"]
    speed = json.loads(next(files.rglob("speed_*.table.json")).read_text())
    assert speed["columns"] == ["metric", "value"] and len(speed["data"]) == 2
    assert (files / "alpha.D0.profile" / "time.csv").is_file()
    # The session run: the score and the benchmarks table.
    session = runs[RUN_NAME]
    assert session.summary["score"] == pytest.approx(summary["score"])
    assert session.summary["failure_rate"] == pytest.approx(0.2)
    beta_std = summary["benchmarks"]["beta"]["std_pct"]
    assert beta_std and session.summary["std_pct/beta"] == pytest.approx(100 * beta_std)
    assert session.config["suite"] == "lt" and session.job_type == "session"
    session_files = session.path.parent / "files"
    assert (session_files / "report.html").is_file()
    assert json.loads((session_files / "dlbench-summary.json").read_text())["score"] == (
        pytest.approx(summary["score"]))


def test_logging_twice_offline_does_not_duplicate(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    log_run_dir(run_dir, WandbSink())
    first = find_offline_runs(tmp_path)
    echoed: list[str] = []
    sink = WandbSink(echo=echoed.append)
    (guarded,) = log_run_dir(run_dir, sink)
    assert guarded.failure is None
    assert find_offline_runs(tmp_path) == first and len(first) == 6
    assert sink.logged == [] and len(sink.skipped) == 6
    assert echoed == [f"dlbench: wandb: 6 run(s) of {RUN_NAME} already logged offline under "
                      f"{tmp_path.resolve() / 'wandb'}; skipped"]
    # A run whose offline folder is missing is logged, the others are left alone.
    shutil.rmtree(first[0].parent)
    sink = WandbSink()
    log_run_dir(run_dir, sink)
    assert len(sink.logged) == 1 and len(find_offline_runs(tmp_path)) == 6
    # replace: every run written again, the old folders removed.
    before = set(find_offline_runs(tmp_path))
    sink = WandbSink(replace=True)
    log_run_dir(run_dir, sink)
    after = set(find_offline_runs(tmp_path))
    assert len(sink.logged) == 6 and len(after) == 6
    assert {p.name for p in after} == {p.name for p in before}  # same run ids


def test_during_the_run_and_after_it_give_the_same_runs(tmp_path: Path) -> None:
    done = write_run_dir(tmp_path / "a")
    record_facts(done)
    log_run_dir(done, WandbSink())
    live_dir = tmp_path / "b" / "runs" / RUN_NAME
    live_dir.mkdir(parents=True)
    shutil.copy(done / "manifest.json", live_dir)
    sink = GuardedSink(WandbSink())
    sink.start_session(live_dir, session_facts(live_dir, live=True))
    for path in streams(done):
        shutil.copy(path, live_dir)
        profile = path.with_name(path.stem + ".profile")
        if profile.is_dir():
            shutil.copytree(profile, live_dir / profile.name)
        sink.log_bench_run(live_dir / path.name)
        sink.log_bench_run(live_dir / path.name)  # reported twice: logged once
    sink.log_bench_run(live_dir / "never-started.D0.data")  # an item without a stream
    sink.finish_session(evaluate(live_dir), [])
    assert sink.failure is None
    a = {n: content(r) for n, r in offline_runs(tmp_path / "a").items()}
    b = {n: content(r) for n, r in offline_runs(tmp_path / "b").items()}
    assert a.keys() == b.keys() and len(a) == 6
    for name in a:
        assert a[name] == b[name], name


def test_wandb_mode_is_respected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run_dir = write_run_dir(tmp_path)
    sink = WandbSink(project="p")
    (guarded,) = log_run_dir(run_dir, sink)
    assert guarded.failure is None and sink.mode == "disabled"
    assert len(sink.logged) == 6 and find_offline_runs(tmp_path) == []
