"""--bench-mlflow and --bench-wandb through a real pytest run: what the tracking store holds
equals what the streams and the terminal say, `dlbench log` gives the same runs later, and a
logger that cannot work costs one warning line and nothing else."""

from __future__ import annotations

import json
import re
import socket
import textwrap
from pathlib import Path

import pytest
from _logger_runs import SLEEPER_DEFS, SLEEPER_SUITE

pytest.importorskip("mlflow")
pytest.importorskip("wandb")

from mlflow import MlflowClient  # noqa: E402

from pytest_dlbench.cli import main as dlbench  # noqa: E402
from pytest_dlbench.loggers.wandb_offline import (  # noqa: E402
    find_offline_runs,
    read_offline_run,
)
from pytest_dlbench.report.terminal import score_text  # noqa: E402

pytestmark = pytest.mark.slow  # each test runs a suite in a pytest subprocess


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(defs=SLEEPER_DEFS)
    pytester.makefile(".yaml", s=SLEEPER_SUITE)
    return pytester


def rates(stream: Path) -> list[tuple[int, float]]:
    records = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    return [(r["step"], r["value"]) for r in records if r["event"] == "rate"]


def terminal_score(result: pytest.RunResult) -> str:
    (line,) = [li for li in result.outlines if li.startswith("score: ")]
    return line.split()[1]


def mlflow_runs(uri: str, experiment: str = "s") -> dict[str, object]:
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_mlflow_holds_the_session_and_every_observation(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("--bench-suite=s.yaml", "--bench-base=out",
                                        "--bench-mlflow", "--bench-profile=time",
                                        "--bench-save=summary.json")
    assert result.ret == 0, result.stdout.str()
    uri = f"sqlite:///{suite.path / 'out' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    runs = mlflow_runs(uri)
    (run_dir,) = (suite.path / "out" / "runs").iterdir()
    parent = runs[run_dir.name]
    saved = json.loads((suite.path / "summary.json").read_text())
    assert parent.data.metrics["score"] == pytest.approx(saved["score"])
    assert score_text(parent.data.metrics["score"]) == terminal_score(result)
    streams = sorted(run_dir.glob("*.data"))
    assert {f"{s.stem.split('.')[0]}[D0]" for s in streams} == set(runs) - {run_dir.name}
    for stream in streams:
        run = runs[f"{stream.stem.split('.')[0]}[D0]"]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                                "rate"))
        assert history == sorted(rates(stream)) and len(history) == 12
        files = [a.path for a in client.list_artifacts(run.info.run_id, "profile")]
        assert any(f.endswith("time.json") for f in files), files

    # After the fact, into a fresh store: the same runs, params and metric histories.
    fresh = f"sqlite:///{suite.path / 'fresh.db'}"
    assert dlbench(["log", str(run_dir), "--mlflow", fresh]) == 0
    again = mlflow_runs(fresh)
    assert set(again) == set(runs)
    for name, run in runs.items():
        other = again[name]
        assert other.data.params == run.data.params
        assert other.data.metrics == pytest.approx(run.data.metrics)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_one_warning_line(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("--bench-suite=s.yaml", "--bench-base=out",
                                        f"--bench-mlflow=http://127.0.0.1:{closed_port()}")
    assert result.ret == 0, result.stdout.str()
    warnings = [li for li in result.outlines + result.errlines if "mlflow" in li]
    assert len(warnings) == 1 and "mlflow logging disabled: cannot reach" in warnings[0]
    assert re.fullmatch(r"[0-9.,]+", terminal_score(result))
    assert not (suite.path / "out" / "mlflow.db").exists()


def test_wandb_offline_run_holds_the_same_history(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("--bench-suite=s.yaml", "--bench-base=out",
                                        "--bench-wandb")
    assert result.ret == 0, result.stdout.str()
    (run_dir,) = (suite.path / "out" / "runs").iterdir()
    offline = [read_offline_run(p) for p in find_offline_runs(suite.path / "out")]
    by_name = {run.name: run for run in offline}
    assert set(by_name) == {"fast[D0]", "other[D0]", run_dir.name}
    for stream in run_dir.glob("*.data"):
        run = by_name[f"{stream.stem.split('.')[0]}[D0]"]
        got = [(row["bench_step"], row["rate"]) for row in run.history if "rate" in row]
        assert sorted(got) == sorted(rates(stream))


def test_a_logger_that_is_not_installed_is_a_usage_error(suite: pytest.Pytester):
    # The child interpreter cannot find wandb, as if it were not installed (a sitecustomize on
    # its PYTHONPATH: pytester puts the test directory there).
    suite.makepyfile(sitecustomize=textwrap.dedent(
        """
        import sys

        class NoWandb:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name.split(".")[0] == "wandb":
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, NoWandb)
        """
    ))
    result = suite.runpytest_subprocess("--bench-suite=s.yaml", "--bench-base=out",
                                        "--bench-wandb")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--bench-wandb: wandb is not installed: pip install wandb"
            in result.stderr.str())
    assert not (suite.path / "out" / "runs").exists()
