"""What the loggers read from a run directory, and the guard around them (no mlflow/wandb)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import pytest
from _logger_runs import RUN_NAME, stream_rates, write_run_dir, write_stream

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.layout import check_run_dir, run_base
from pytest_dlbench.loggers import base as base_mod
from pytest_dlbench.loggers.base import (
    LoggerError,
    LoggerUnavailable,
    missing_logger,
    require,
)
from pytest_dlbench.loggers.mlflow_logger import run_params, run_tags
from pytest_dlbench.loggers.sink import GuardedSink, log_run_dir
from pytest_dlbench.loggers.source import (
    bench_metrics,
    flatten,
    manifest_facts,
    profile_files,
    read_run,
    run_stats,
    samples,
    session_facts,
    session_metrics,
    step_series,
    telemetry_values,
)
from pytest_dlbench.loggers.tables import read_table, tabulate
from pytest_dlbench.results.evaluation import evaluate


def test_a_runs_series_keep_every_observation(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    path = run_dir / "alpha.D0.data"
    records, result = read_run(path)  # the product's readers of the stream
    series = step_series(records)
    observations = [p for p in series if p.key == "rate"]
    assert [(o.step, o.value) for o in observations] == stream_rates(path)
    assert [o.warmup for o in observations][:4] == [True, True, True, False]
    assert result.label == "alpha[D0]" and result.status == "ok" and result.ok
    losses = [p for p in series if p.key == "loss"]
    assert len(losses) == 15 and losses[3].step == 3
    # A loss has no time of its own: it takes its step's observation's.
    assert losses[3].time == observations[3].time
    regions = [p for p in series if p.key.startswith("region/")]
    assert [p.key for p in regions] == ["region/forward"] * 3
    assert regions[0].value == pytest.approx(0.05 * 1.04 / 5)
    assert [p.key for p in series] == ["rate"] * 15 + ["loss"] * 15 + ["region/forward"] * 3
    telemetry = samples(records)
    assert len(telemetry) == 3 and [s.index for s in telemetry] == [0, 1, 2]
    assert telemetry[1].values["system/process_memory_usage_megabytes"] == 510.0
    assert set(run_stats(result)) >= {"run_rate", "peak_rss_bytes"}
    assert records.span is not None and records.span[0] <= observations[0].time
    assert [name for name, _ in profile_files(path)] == [
        "nested/system.json", "speed.json", "time.csv"]


def test_params_and_tags_of_a_run(tmp_path: Path) -> None:
    path = write_run_dir(tmp_path) / "beta.D0.R1.data"
    records, result = read_run(path)
    params = run_params(records, result)
    assert params["argv.--batch-size"] == "32"
    assert params["plan.method"] == "per_gpu"
    assert params["tags"] == "vision,small"
    assert params["weight"] == "1.0" and params["device"] == "0" and params["repeat"] == "1"
    assert "env" not in params and "voir.options.skip" not in params  # empty, and a copy
    tags = run_tags(path, records, result)
    assert tags["status"] == "oom" and tags["reason"].startswith("out of memory")
    assert tags["host"] == "testhost" and tags["repeat"] == "1"
    assert result.label == "beta[D0-R1]" and not result.ok


def test_a_torn_stream_is_a_failed_run_with_what_it_measured(tmp_path: Path) -> None:
    path = write_stream(tmp_path / "runs" / "x.20260101-000000", "torn", status=None)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"event": "rate", "val')  # killed mid-record
    records, result = read_run(path)
    assert result.status == "fail" and "no end record" in result.reason
    assert len([p for p in step_series(records) if p.key == "rate"]) == 15


def test_a_stream_corrupt_before_its_end_is_a_failed_run_with_nothing_to_send(
    tmp_path: Path,
) -> None:
    path = write_stream(tmp_path / "runs" / "x.20260101-000000", "bad")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    records, result = read_run(path)
    assert not result.ok and "corrupt stream" in result.reason
    assert step_series(records) == [] and records.span is None


def test_telemetry_names_follow_mlflow_system_metrics() -> None:
    values = telemetry_values({
        "cpu_percent": 150.0, "system_cpu_percent": 75.0, "rss_bytes": 2**30, "procs": 3,
        "disk_read_bytes": None,
        "gpus": [{"index": 1, "util": 99.0, "mem_used": 2**30, "mem_total": 2**32,
                  "power_w": 300.0, "temp_c": None, "energy_j": 12.5}],
    })
    assert values == {
        "system/cpu_utilization_percentage": 75.0,
        "system/process_cpu_utilization_percentage": 150.0,
        "system/process_memory_usage_megabytes": 1024.0,
        "system/process_count": 3.0,
        "system/gpu_1_utilization_percentage": 99.0,
        "system/gpu_1_memory_usage_megabytes": 1024.0,
        "system/gpu_1_memory_usage_percentage": 25.0,
        "system/gpu_1_power_usage_watts": 300.0,
        "system/gpu_1_energy_joules": 12.5,
    }


def test_flatten() -> None:
    assert flatten({"argv": {"--m": 256, "--x": None}, "tags": ["a", "b"], "env": {},
                    "plan": {"method": "njobs", "n": 2}, "l": [{"a": 1}]}) == {
        "argv.--m": "256", "argv.--x": "", "tags": "a,b", "env": "",
        "plan.method": "njobs", "plan.n": "2", "l": '[{"a": 1}]'}


def test_session_facts_after_the_fact_come_from_the_run_dir(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    facts = session_facts(run_dir)
    assert facts.suite == "lt" and facts.run_name == RUN_NAME
    assert facts.machine["hostname"] == "testhost" and facts.versions["torch"] == "2.14.1"
    assert facts.commit is None
    tags = facts.tags()
    assert tags["suite"] == "lt" and tags["machine.hostname"] == "testhost"
    # The manifest wins when the run recorded its facts.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(commit="abc123", machine={"hostname": "node7"}, versions={"torch": "9"})
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    facts = session_facts(run_dir)
    assert (facts.commit, facts.machine, facts.versions) == (
        "abc123", {"hostname": "node7"}, {"torch": "9"})
    assert session_facts(run_dir, live=True).commit == "abc123"


def test_manifest_facts_round_trip(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    facts = manifest_facts()
    assert set(facts) == {"commit", "machine", "versions"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, **facts}))
    live, after = session_facts(run_dir, live=True), session_facts(run_dir)
    assert live == after and after.machine == facts["machine"]


def test_summary_metrics(tmp_path: Path) -> None:
    summary = evaluate(write_run_dir(tmp_path)).saved_summary
    per_bench = bench_metrics(summary)
    assert set(per_bench) == {"alpha", "beta", "gamma"}
    assert set(per_bench["alpha"]) >= {"perf", "total", "std_pct", "perf_adj",
                                       "bench_peak_rss_bytes"}
    assert "bench_peak_gpu_mem_bytes" in per_bench["gamma"]
    metrics = session_metrics(summary)
    assert metrics["score"] == pytest.approx(summary["score"])
    assert metrics["failure_rate"] == pytest.approx(0.2)
    assert metrics["runs"] == 5 and metrics["failed_runs"] == 1
    assert metrics["perf_adj/beta"] == pytest.approx(summary["benchmarks"]["beta"]["perf_adj"])
    # std% in percent for every logger, as the terminal and the HTML report show it.
    std = summary["benchmarks"]["beta"]["std_pct"]
    assert std and metrics["std_pct/beta"] == pytest.approx(100 * std)
    assert per_bench["beta"]["std_pct"] == pytest.approx(100 * std)


def test_tables() -> None:
    assert tabulate([{"a": 1}, {"a": 2, "b": [1]}]).rows == ((1, None), (2, "[1]"))
    assert tabulate({"a": [1, 2], "b": [3, 4]}).as_columns() == {"a": [1, 2], "b": [3, 4]}
    assert tabulate({"x": {"v": 1}, "y": {"v": 2}}).columns == ("name", "v")
    assert tabulate({"k": 1.5}).rows == (("k", 1.5),)
    assert tabulate({"columns": ["a"], "data": [[1], [2]]}).rows == ((1,), (2,))
    assert tabulate(3) is None and tabulate({"a": [1], "b": 2}) is None


def test_read_table_csv_and_broken(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a,b\n1,x\n2.5,y\n")
    assert read_table(tmp_path / "t.csv").rows == ((1, "x"), (2.5, "y"))
    (tmp_path / "bad.json").write_text("{not json")
    assert read_table(tmp_path / "bad.json") is None


def test_check_run_dir_and_bench_base(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    assert check_run_dir(run_dir) == run_dir
    with pytest.raises(DlbenchError, match="no run streams"):
        check_run_dir(tmp_path)
    with pytest.raises(DlbenchError, match="x: not a run directory$"):
        check_run_dir(tmp_path / "x")
    assert run_base(run_dir) == tmp_path.resolve()


# -- the guard --------------------------------------------------------------------------------
class Recorder:
    name = "fake"

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail_on = fail_on
        self.closed = 0

    def _record(self, method: str, arg: object) -> None:
        self.calls.append((method, arg))
        if method == self.fail_on:
            raise ConnectionError("boom\nsecond line")

    def start_session(self, run_dir, facts):  # noqa: ANN001
        self._record("start_session", facts.run_name)

    def log_bench_run(self, stream_path):  # noqa: ANN001
        self._record("log_bench_run", Path(stream_path).name)

    def finish_session(self, evaluation, artifacts):  # noqa: ANN001
        self._record("finish_session", evaluation.summary.score)

    def close(self) -> None:
        self.closed += 1


def test_log_run_dir_makes_the_session_calls(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    fake = Recorder()
    warned: list[str] = []
    (guarded,) = log_run_dir(run_dir, fake, warn=warned.append)
    assert guarded.failure is None and not warned
    assert [c[0] for c in fake.calls] == (
        ["start_session"] + ["log_bench_run"] * 5 + ["finish_session"])
    assert fake.calls[1][1] == "alpha.D0.data"
    assert fake.calls[-1][1] == pytest.approx(evaluate(run_dir).summary.score)


def test_a_failing_logger_is_one_warning_line_then_silent(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    fake, other = Recorder(fail_on="log_bench_run"), Recorder()
    warned: list[str] = []
    first, second = log_run_dir(run_dir, [fake, other], warn=warned.append)
    assert warned == ["dlbench: fake logging disabled: ConnectionError: boom"]
    assert first.failure == "ConnectionError: boom" and not first.active
    assert [c[0] for c in fake.calls] == ["start_session", "log_bench_run"]
    assert fake.closed == 1
    assert second.active and len(other.calls) == 7  # the other logger is not affected


def test_keyboard_interrupt_is_not_swallowed(tmp_path: Path) -> None:
    class Interrupted(Recorder):
        def log_bench_run(self, stream_path):  # noqa: ANN001
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        GuardedSink(Interrupted()).log_bench_run(tmp_path / "x.D0.data")


@pytest.mark.parametrize(("error", "why"), [
    (ValueError(""), "ValueError"),
    (LoggerUnavailable("mlflow is not installed"), "mlflow is not installed"),
    (LoggerError("cannot reach\n  http://x"), "cannot reach http://x"),  # its own words
    (RuntimeError("x" * 1000), "RuntimeError: " + "x" * 283 + "..."),
])
def test_the_warning_line_says_why_in_one_line(error: Exception, why: str) -> None:
    class Failing(Recorder):
        def log_bench_run(self, stream_path):  # noqa: ANN001
            raise error

    warned: list[str] = []
    sink = GuardedSink(Failing(), warn=warned.append)
    sink.log_bench_run("x.D0.data")
    assert sink.failure == why and warned == [f"dlbench: fake logging disabled: {why}"]


def test_missing_logger_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    assert missing_logger("wandb") == "wandb is not installed: pip install wandb"


def block_import(monkeypatch: pytest.MonkeyPatch, blocked: str) -> None:
    """Make importing ``blocked`` fail as if the package were not installed."""
    real = importlib.import_module

    def fake(name: str, *args: object, **kwargs: object) -> object:
        if name.split(".")[0] == blocked:
            raise ModuleNotFoundError(f"No module named '{blocked}'")
        return real(name, *args, **kwargs)  # type: ignore[arg-type]  # package= as well

    monkeypatch.setattr(base_mod.importlib, "import_module", fake)


@pytest.mark.parametrize("name", ["mlflow", "wandb"])
def test_an_uninstalled_logger_is_one_warning_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    block_import(monkeypatch, name)
    with pytest.raises(LoggerUnavailable, match=rf"pip install {name}$"):
        require(name)
    from pytest_dlbench.loggers.mlflow_logger import MlflowSink
    from pytest_dlbench.loggers.wandb_logger import WandbSink

    sink = MlflowSink(bench_base=tmp_path) if name == "mlflow" else WandbSink(bench_base=tmp_path)
    warned: list[str] = []
    (guarded,) = log_run_dir(write_run_dir(tmp_path), sink, warn=warned.append)
    assert warned == [f"dlbench: {name} logging disabled: {name} is not installed "
                      f"(ModuleNotFoundError: No module named '{name}'): "
                      f"pip install {name}"]
    assert not guarded.active
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "wandb").exists()
