"""The end of a run, decided once (results/evaluation.py) and the one "did the run fail?" rule
(results/gate.run_failed) behind every verdict: pytest's exit status, ``dlbench report`` and
``dlbench compare``, and what the loggers record."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from _logger_runs import write_stream

from pytest_dlbench.cli import main
from pytest_dlbench.results import gate
from pytest_dlbench.results.model import load_baseline

TF32 = "precision tf32: TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer)"


def skipped_weighted_run(base: Path) -> Path:
    """A run where ``ok`` ran and ``tf32``, weighted, skipped itself (it cannot run here):
    nothing failed, but the score the gate judges lacks a weighted benchmark."""
    run_dir = base / "runs" / "skips.20261124-100000"
    write_stream(run_dir, "ok")
    write_stream(run_dir, "tf32", rates=[], status="skipped", reason=TF32,
                 t0=1_790_000_100.0)
    manifest = {"version": 1, "suite": "skips", "benchmarks": {
        name: {"weight": 1.0, "enabled": True, "units": None, "plan": {"method": "per_gpu"}}
        for name in ("ok", "tf32")}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run_dir


def clean_run(base: Path) -> Path:
    run_dir = base / "runs" / "clean.20261124-100000"
    write_stream(run_dir, "ok")
    return run_dir


def cli_verdicts(run_dir: Path, tmp_path: Path) -> tuple[int, int]:
    """(``dlbench report``, ``dlbench compare`` of the run's saved summary with itself)."""
    saved = tmp_path / f"{run_dir.name}.json"
    report = main(["report", str(run_dir), "-q", "--save", str(saved)])
    # A file against itself: a ratio of exactly 1, whose interval under the default drift
    # between sessions (±5 % a session) excludes only a regression beyond 30 %.
    return report, main(["compare", str(saved), str(saved), "-q", "--tolerance", "30%"])


# -- the rule --------------------------------------------------------------------------------
def test_a_weighted_benchmark_that_skipped_itself_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_dlbench.results.evaluation import evaluate

    run_dir = skipped_weighted_run(tmp_path)
    evaluation = evaluate(run_dir)
    assert evaluation.summary.incomplete == ("tf32",)
    assert evaluation.failed and evaluation.status == gate.BENCH_FAILED
    assert cli_verdicts(run_dir, tmp_path) == (gate.BENCH_FAILED, gate.BENCH_FAILED)
    assert "incomplete: tf32" in capsys.readouterr().out


@pytest.mark.parametrize("answer", [False, True])
def test_every_cli_verdict_is_gate_run_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: bool
) -> None:
    """One home: whatever gate.run_failed says is what ``dlbench report`` and ``dlbench
    compare`` exit with (no copy of the rule elsewhere decides instead)."""
    run_dir = (clean_run if answer else skipped_weighted_run)(tmp_path)
    monkeypatch.setattr(gate, "run_failed", lambda summary: answer)
    expected = gate.BENCH_FAILED if answer else gate.OK
    assert cli_verdicts(run_dir, tmp_path) == (expected, expected)


@pytest.mark.slow
@pytest.mark.parametrize("answer", [None, False])
def test_what_the_loggers_record_is_gate_run_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: bool | None
) -> None:
    """The MLflow session run's ``dlbench.failed`` tag and status and the W&B session run's
    exit code follow gate.run_failed: a skipped weighted benchmark fails the session (None:
    the rule as it ships), and the loggers have no copy of their own (False: the rule
    answering otherwise is obeyed)."""
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from mlflow import MlflowClient

    from pytest_dlbench.loggers.mlflow_logger import MlflowSink
    from pytest_dlbench.loggers.sink import log_run_dir
    from pytest_dlbench.loggers.wandb_logger import WandbSink
    from pytest_dlbench.loggers.wandb_offline import find_offline_runs, read_offline_run

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE", "WANDB_DIR",
                 "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    if answer is not None:
        monkeypatch.setattr(gate, "run_failed", lambda summary: answer)
    failed = answer is None
    run_dir = skipped_weighted_run(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    guarded = log_run_dir(run_dir, [MlflowSink(uri), WandbSink()], warn=pytest.fail)
    assert all(sink.failure is None for sink in guarded)

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("skips")
    (parent,) = client.search_runs([experiment.experiment_id],
                                   filter_string="tags.`dlbench.kind` = 'session'")
    assert parent.data.tags["dlbench.failed"] == str(failed).lower()
    assert parent.data.tags["dlbench.incomplete"] == "tf32"
    assert parent.info.status == ("FAILED" if failed else "FINISHED")
    runs = {r.name: r for r in map(read_offline_run, find_offline_runs(tmp_path))}
    assert runs[run_dir.name].exit_code == (1 if failed else 0)


# -- evaluate ----------------------------------------------------------------------------------
def test_a_baseline_is_compared_and_named(tmp_path: Path) -> None:
    from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate
    from pytest_dlbench.results.model import save_summary

    run_dir = clean_run(tmp_path)
    saved = save_summary(evaluate(run_dir).summary, tmp_path / "baseline.json")
    options = EvaluateOptions(baseline=load_baseline(str(saved)), baseline_path=str(saved))
    evaluation = evaluate(run_dir, options)
    assert evaluation.comparison is not None and not evaluation.paired
    assert evaluation.comparison.baseline_path == str(saved)
    # The run against its own figures, one session each side at the default drift: not
    # regressed, and not unchanged either (its interval reaches below 0.97): exit 9.
    assert not evaluation.regressed and evaluation.status == gate.EXIT_INCONCLUSIVE
    wide = evaluate(run_dir, dataclasses.replace(options, tolerance=0.3))
    assert not wide.regressed and wide.status == gate.OK


@pytest.mark.parametrize(("required", "status"), [(True, gate.BASELINE_MISSING),
                                                   (False, gate.OK)])
def test_a_missing_baseline_is_7_only_when_required(
    tmp_path: Path, required: bool, status: int
) -> None:
    from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate

    missing = str(tmp_path / "nope.json")
    options = EvaluateOptions(baseline=load_baseline(missing), baseline_path=missing,
                              require_baseline=required)
    evaluation = evaluate(clean_run(tmp_path), options)
    assert evaluation.comparison is None and evaluation.status == status


def test_a_corrupt_baseline_is_bad_input_and_a_failure_still_wins_over_7(tmp_path: Path) -> None:
    from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate

    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    options = EvaluateOptions(baseline=load_baseline(str(corrupt)))
    assert evaluate(skipped_weighted_run(tmp_path), options).status == gate.USAGE_ERROR
    missing = EvaluateOptions(baseline=load_baseline(str(tmp_path / "nope.json")))
    assert evaluate(skipped_weighted_run(tmp_path), missing).status == gate.BENCH_FAILED


def test_the_files_written_and_what_the_loggers_attach(tmp_path: Path) -> None:
    from pytest_dlbench.report.evaluation import write_evaluation
    from pytest_dlbench.results.evaluation import EvaluateOptions, Outputs, evaluate

    outputs = Outputs(save=str(tmp_path / "s.json"), html=str(tmp_path / "r.html"))
    assert outputs.artifacts() == []  # nothing written yet: nothing to attach
    evaluation = evaluate(clean_run(tmp_path), EvaluateOptions(suite="mine", outputs=outputs))
    written = write_evaluation(evaluation)
    assert written.written == (f"summary saved: {outputs.save}", f"HTML report: {outputs.html}")
    assert outputs.artifacts() == [Path(outputs.html), Path(outputs.save)]
    assert json.loads(Path(outputs.save).read_text())["suite"] == "mine"
    assert written.saved_summary["suite"] == "mine"
