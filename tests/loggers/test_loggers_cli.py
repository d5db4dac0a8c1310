"""``dlbench log RUN_DIR --mlflow [URI] --wandb [PROJECT]`` (the command's own parser here; the
main ``dlbench`` parser registers the same sub-command: cli/log.add_parser)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _logger_runs import RUN_NAME, copy_db, empty_mlflow_db, write_run_dir
from _paths import REPO_ROOT

from pytest_dlbench.cli.log import add_parser as add_log_command
from pytest_dlbench.report.terminal import score_text

REPO = REPO_ROOT
ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT")


@pytest.fixture(autouse=True)
def _no_logger_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return empty_mlflow_db(tmp_path_factory)


def dlbench_log(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="dlbench")
    add_log_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["log", *argv])
    return args.handler(args)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_the_loggers_options_are_the_pytest_runs(pytester: pytest.Pytester) -> None:
    """``dlbench log --mlflow/--wandb/--experiment`` are pytest's ``--bench-mlflow``... of the
    registry of loggers (loggers/registry.py): the same values, the same help."""
    parser = argparse.ArgumentParser(prog="dlbench")
    log = add_log_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["log", "RUN", "--mlflow", "--wandb=p", "--experiment=e"])
    config = pytester.parseconfig("--bench-mlflow", "--bench-wandb=p", "--bench-experiment=e")
    assert (args.mlflow, args.wandb, args.experiment) == ("", "p", "e") == tuple(
        config.getoption(f"bench_{name}") for name in ("mlflow", "wandb", "experiment"))
    pytest_help = _one_line(pytester.runpytest("--help").stdout.str())
    for action in log._actions:
        if action.dest in ("mlflow", "wandb", "experiment"):
            assert _one_line(action.help or "") in pytest_help, action.dest


def test_not_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dlbench_log(str(tmp_path / "nope"), "--mlflow") == 4
    err = capsys.readouterr().err
    # The message of every command that reads a run directory (layout.check_run_dir).
    assert err == f"dlbench: error: {tmp_path / 'nope'}: not a run directory\n"


def test_nothing_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dlbench_log(str(write_run_dir(tmp_path))) == 4
    assert "give --mlflow [URI] and/or --wandb [PROJECT]" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["mlflow", "wandb"])
def test_a_logger_that_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *a: None if mod == name else real(mod, *a))
    assert dlbench_log(str(write_run_dir(tmp_path)), f"--{name}") == 4
    assert capsys.readouterr().err == (
        f"dlbench: error: {name} is not installed: pip install {name}\n")


def test_a_missing_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = write_run_dir(tmp_path)
    assert dlbench_log(str(run_dir), "--mlflow", "--artifact", str(tmp_path / "r.html")) == 4
    assert "r.html: no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_unreachable_server_exits_1_with_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mlflow")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    assert dlbench_log(str(write_run_dir(tmp_path)), "--mlflow", f"http://127.0.0.1:{port}") == 1
    assert time.monotonic() - start < 30
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"dlbench: mlflow logging disabled: cannot reach http://127.0.0.1:{port} "
        "(ConnectionRefusedError: [Errno 111] Connection refused)"]


@pytest.mark.slow
def test_log_to_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], empty_db: Path
) -> None:
    pytest.importorskip("wandb")
    run_dir = write_run_dir(tmp_path)
    copy_db(empty_db, tmp_path)  # where --mlflow without a URI logs: <bench-base>/mlflow.db
    assert dlbench_log(str(run_dir), "--mlflow", "--wandb", "--experiment", "x") == 0
    out = capsys.readouterr().out.splitlines()
    db = tmp_path.resolve() / "mlflow.db"
    # One line a logger, its closing line, said once (it was said twice, in two shapes).
    assert len(out) == 2 and all(line.count("logged") == 1 for line in out), out
    assert out[0].startswith(f"dlbench: mlflow: logged {RUN_NAME} (5 benchmark runs) to "
                             f"sqlite:///{db}, experiment x; open them with: mlflow ui ")
    assert out[1].startswith(f"dlbench: wandb: logged {RUN_NAME} (5 benchmark runs) offline "
                             f"to {tmp_path.resolve() / 'wandb'}")
    # Again: nothing new, exit 0, each logger says it skipped.
    assert dlbench_log(str(run_dir), "--mlflow", "--wandb", "--experiment", "x") == 0
    captured = capsys.readouterr()
    assert "already logged" in captured.out and "skipped" in captured.out


@pytest.mark.slow
def test_a_real_smoke_run_logged_after_the_fact(tmp_path: Path, empty_db: Path) -> None:
    """A real ``pytest --bench-suite=smoke`` run directory, then ``dlbench log`` to a fresh
    sqlite store and an offline W&B directory: the parent run has the terminal's score and
    every stream's observations are the nested runs' `rate` history."""
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from mlflow import MlflowClient

    from pytest_dlbench.loggers.wandb_offline import find_offline_runs, read_offline_run

    base = tmp_path / "base"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    for name in ENV:
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=smoke", "-k", "toy or matmul",
         "-p", "no:cacheprovider", f"--bench-base={base}",
         f"--bench-save={tmp_path / 'summary.json'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A -k subset's score is labelled as one ("score of 2 of the suite's 9 ...: 0.1475").
    match = re.search(r"^score(?: of [^:]+)?: (.+)$", done.stdout, re.M)
    assert match, done.stdout[-3000:]
    terminal_score = match[1]
    (run_dir,) = (base / "runs").iterdir()
    saved = json.loads((tmp_path / "summary.json").read_text())
    uri = copy_db(empty_db, tmp_path / "store")
    assert dlbench_log(str(run_dir), "--mlflow", uri, "--wandb",
                       "--artifact", str(tmp_path / "summary.json")) == 0

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    parent = runs.pop(run_dir.name)
    if saved["score"] is None:  # matmul failed: no score, on the terminal or in MLflow
        assert terminal_score.startswith("-") and "score" not in parent.data.metrics
    else:
        assert score_text(parent.data.metrics["score"]) == terminal_score
        assert parent.data.metrics["score"] == pytest.approx(saved["score"])
    assert sorted(runs) == ["matmul[D0]", "toy[D0]"]
    wandb_runs = {r.name: r for r in map(read_offline_run, find_offline_runs(base))}
    assert wandb_runs[run_dir.name].summary.get("score") == pytest.approx(saved["score"])
    for name, run in runs.items():
        stream = run_dir / run.data.tags["dlbench.stream"]
        records = [json.loads(line) for line in stream.read_text().splitlines()]
        rates = [(r["step"], r["value"]) for r in records if r["event"] == "rate"]
        history = client.get_metric_history(run.info.run_id, "rate")
        assert sorted((m.step, m.value) for m in history) == sorted(rates)
        spec = next(r for r in records if r["event"] == "config")["spec"]
        assert len(rates) == spec["skip"] + spec["stop"]  # every observation, warm-up included
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        # The same values (their order there is W&B's, not the stream's: seen swapped in CI).
        assert sorted(r["rate"] for r in wandb_runs[name].history if "rate" in r) == sorted(
            v for _, v in rates)
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {
        "dlbench", "summary.json"}
