"""What an MLflow user sees of a logged session (issue 25, item 14): no progress bars in the
terminal, one line saying where the runs are and how to open them, std% in percent as the
terminal shows it, params without empty values or copies, machine facts once on the session
run, and ``perf`` a metric of its own beside the observations' ``rate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _logger_runs import (
    RUN_NAME,
    SLEEPER_DEFS,
    SLEEPER_SUITE,
    copy_db,
    dump,
    empty_mlflow_db,
    write_run_dir,
)

from pytest_dlbench.loggers.sink import log_run_dir
from pytest_dlbench.results.evaluation import evaluate

mlflow = pytest.importorskip("mlflow")

from pytest_dlbench.loggers.mlflow_logger import MlflowSink  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_mlflow_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME",
                 "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[str], str]:
    """(tracking URI, run dir, lines echoed, stderr) of one session logged after the fact."""
    tmp = tmp_path_factory.mktemp("tidy")
    run_dir = write_run_dir(tmp / "base")
    # A report as the profiler writes it: twice, as CSV rows and as JSON.
    folder = run_dir / "alpha.D1.profile"
    folder.mkdir()
    (folder / "speed.csv").write_text("metric,value,unit\nthroughput,101.5,items/s\n")
    (folder / "speed.json").write_text(json.dumps({"report": "speed", "throughput": 101.5}))
    report = tmp / "report.html"
    report.write_text("<html>" + "x" * 4_000_000 + "</html>")  # big enough for a bar
    uri = copy_db(empty_mlflow_db(tmp_path_factory), tmp / "store")
    echoed: list[str] = []
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        (guarded,) = log_run_dir(run_dir, MlflowSink(uri, echo=echoed.append),
                                 artifacts=[report])
    assert guarded.failure is None
    return uri, run_dir, echoed, err.getvalue()


def test_no_progress_bars_and_one_line_saying_where(
    logged: tuple[str, Path, list[str], str],
) -> None:
    uri, _, echoed, err = logged
    assert "artifacts" not in err and "it/s" not in err and "%|" not in err, err
    (line,) = echoed
    assert line == (f"dlbench: mlflow: logged {RUN_NAME} (5 benchmark runs) to {uri}, "
                    f"experiment lt; open them with: mlflow ui --backend-store-uri {uri}")


def test_a_report_written_twice_is_one_table(logged: tuple[str, Path, list[str], str],
                                            tmp_path: Path) -> None:
    from mlflow import MlflowClient

    uri, _, _, _ = logged
    run = dump(uri)["alpha[D1]"]
    assert run["artifacts"] == ["profile/speed.csv", "profile/speed.json",
                                "profile_tables/speed.json"]
    table = json.loads(Path(MlflowClient(tracking_uri=uri).download_artifacts(
        run["id"], "profile_tables/speed.json", str(tmp_path))).read_text())
    assert table["columns"] == ["metric", "value", "unit"]
    assert table["data"] == [["throughput", 101.5, "items/s"]]  # once, not appended to


def test_the_progress_bar_setting_is_given_back(logged: tuple[str, Path, list[str], str]) -> None:
    import os

    assert "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR" not in os.environ


def test_a_tracking_server_is_a_link_to_the_session_run() -> None:
    from pytest_dlbench.loggers.source import SessionFacts

    sink = MlflowSink("http://mlflow.example:5000/")
    sink.uri, sink.experiment_id, sink.parent_id = "http://mlflow.example:5000/", "7", "abc"
    sink.experiment_name = "smoke"
    sink.facts = SessionFacts(run_dir=Path("runs/smoke.1"), run_name="smoke.1", suite="smoke",
                              start_time=0.0)
    assert sink.where().endswith("open http://mlflow.example:5000/#/experiments/7/runs/abc")


def test_std_pct_is_a_percent_as_in_the_terminal(logged: tuple[str, Path, list[str], str]) -> None:
    uri, run_dir, _, _ = logged
    runs = dump(uri)
    summary = evaluate(run_dir).saved_summary
    beta = summary["benchmarks"]["beta"]["std_pct"]
    assert 0 < beta < 1  # the summary's fraction
    assert runs[RUN_NAME]["metrics"]["std_pct/beta"][0][1] == pytest.approx(100 * beta)
    assert runs["beta[D0-R0]"]["metrics"]["std_pct"][0][1] == pytest.approx(100 * beta)


def test_params_are_neither_empty_nor_twice(logged: tuple[str, Path, list[str], str]) -> None:
    uri, _, _, _ = logged
    for name, run in dump(uri).items():
        if name == RUN_NAME:
            continue
        params = run["params"]
        assert "" not in params.values(), name
        assert {"env", "group", "voir.options.skip"}.isdisjoint(params), name
        assert params["skip"] == "3" and params["voir.options.interval"] == "1s"
        assert ("repeat" in params) == ("-R" in name)


def test_machine_facts_once_on_the_session_run(logged: tuple[str, Path, list[str], str]) -> None:
    uri, _, _, _ = logged
    runs = dump(uri)
    session = runs.pop(RUN_NAME)["tags"]
    assert session["dlbench.machine.hostname"] == "testhost"
    for name, run in runs.items():
        ours = {k for k in run["tags"] if k.startswith("dlbench.")}
        assert not any(k.startswith("dlbench.meta.") for k in ours), name
        assert run["tags"]["dlbench.host"] == "testhost"
        assert len(ours) <= 12, sorted(ours)


def test_perf_is_a_metric_of_its_own(logged: tuple[str, Path, list[str], str]) -> None:
    uri, run_dir, _, _ = logged
    runs = dump(uri)
    summary = evaluate(run_dir).saved_summary
    for name, run in runs.items():
        if name == RUN_NAME:
            continue
        bench = summary["benchmarks"][name.split("[")[0]]
        if bench["perf"] is None:
            continue
        (perf,) = run["metrics"]["perf"]
        assert perf[1] == pytest.approx(bench["perf"])
        assert run["metrics"]["rate"][-1][1] != pytest.approx(bench["perf"])


def test_a_pytest_run_ends_with_where_its_runs_are(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(defs=SLEEPER_DEFS)
    pytester.makefile(".yaml", s=SLEEPER_SUITE)
    result = pytester.runpytest_subprocess("--bench-suite=s.yaml", "--bench-base=out",
                                           "--bench-mlflow", "--bench-profile=time")
    assert result.ret == 0, result.stdout.str()
    uri = f"sqlite:///{(pytester.path / 'out' / 'mlflow.db').as_posix()}"
    (line,) = [li for li in result.outlines if li.startswith("dlbench: mlflow: logged ")]
    assert line.endswith(f"(2 benchmark runs) to {uri}, experiment s; open them with: "
                         f"mlflow ui --backend-store-uri {uri}")
    assert "Downloading artifacts" not in result.stdout.str() + result.stderr.str()
