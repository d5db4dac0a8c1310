"""milabench's benchmark folders through voir, in the results and in real runs (issue 23):
milabench's figure beside ours, too few observations in the table and the saved summary, and
pytest on a milabench checkout (milabench's config/ unchanged, our tiny voir folder as its
benchmarks/torchvision), with and without the docs' CPU overlay (slow: child processes)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO_ROOT, TESTS_DIR

from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.report.voir_lines import observation_lines
from pytest_dlbench.results.figures import milabench_figure, run_from_records, summarize_runs
from pytest_dlbench.results.model import SuiteSummary

DATA = TESTS_DIR / "data"
DOCS = REPO_ROOT / "docs"


def records(values: list[float], *, skip: int = 2, voir: bool = True,
            warning: str | None = None) -> list[dict[str, Any]]:
    spec = {"name": "tv", "skip": skip, "stop": len(values) - skip, "weight": 1.0}
    out: list[dict[str, Any]] = [{"event": "config", "spec": spec, "device": 0}]
    parser = {"name": "voir"} if voir else {"name": "regex", "regex": "x(?P<seconds>1)"}
    out.append({"event": "command", "status": "start", "argv": ["voir"], "parser": parser})
    out += [{"event": "rate", "value": v, "units": "items/s", "step": i, "warmup": i < skip,
             "time": float(i)} for i, v in enumerate(values)]
    if warning:
        out.append({"event": "warning", "source": "observations", "message": warning})
    out.append({"event": "end", "status": "ok"})
    return out


def test_milabench_figure_drops_min_and_max() -> None:
    assert milabench_figure([1.0, 100.0, 10.0, 12.0, 14.0]) == 12.0
    assert milabench_figure([5.0, 7.0]) == 6.0  # too few to drop anything
    # milabench/summary.py `_metrics` (milabench faf3923, lines 216-217): from 5 values on.
    assert milabench_figure([1.0, 10.0, 12.0, 101.0]) == 31.0
    assert milabench_figure([]) is None
    assert milabench_figure([float("nan"), 3.0]) == 3.0


def test_a_voir_benchmark_has_milabench_figure_beside_ours() -> None:
    values = [2.0, 50.0, 100.0, 101.0, 99.0, 100.0, 300.0]  # warm-up 2, 50; a spike 300
    run = run_from_records(records(values))
    assert run.voir and run.ok
    (bench,) = summarize_runs([run]).benchmarks
    expected = statistics.fmean(sorted(values)[1:-1])  # 2 and 300 dropped, 50 kept
    assert bench.milabench_perf == pytest.approx(expected)
    assert bench.perf == pytest.approx(statistics.fmean(values[2:]))  # the steady window
    saved = bench.to_dict()
    assert saved["milabench_perf"] == pytest.approx(expected)
    assert saved["runs"][0]["voir"] is True
    # Another benchmark keeps its shape: no figure, no key.
    (other,) = summarize_runs([run_from_records(records(values, voir=False))]).benchmarks
    assert other.milabench_perf is None and "milabench_perf" not in other.to_dict()


def test_too_few_observations_are_in_the_table_and_the_saved_summary() -> None:
    message = ("too few observations: the command ended after 9 of the 10 wanted (skip 2 + "
               "stop 8), 7 steady")
    run = run_from_records(records([10.0] * 9, warning=message))
    assert run.ok and run.warnings == (message,)
    summary = summarize_runs([run])
    assert summary.benchmarks[0].warnings == (message,)
    lines = observation_lines(summary)
    assert lines[0] == f"warning: tv: {message}"
    assert lines[1].startswith("milabench: tv 10.0 items/s (milabench's perf: every rate")
    text = render_summary(summary)
    assert f"warning: tv: {message}" in text and "milabench: tv 10.0 items/s" in text
    data = json.loads(json.dumps({**summary.to_dict(), "schema": "pytest-dlbench/summary"}))
    back = SuiteSummary.from_dict(data)
    assert back.benchmarks[0].warnings == (message,)
    assert back.benchmarks[0].milabench_perf == summary.benchmarks[0].milabench_perf


# -- pytest on a milabench checkout ------------------------------------------------------------
def checkout(root: Path) -> Path:
    shutil.copytree(DATA / "milabench_config", root / "config")
    shutil.copytree(DATA / "voirbench", root / "benchmarks" / "torchvision")
    return root


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_milabenchs_standard_yaml_runs_its_torchvision_folder_unchanged(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # one slot of every core
    checkout(pytester.path)
    result = pytester.runpytest("--bench-suite=config/standard.yaml", "--bench-select=resnet50",
                                "--bench-base=out", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["milabench: resnet50 * items/s (milabench's perf: *"])
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    stream = read(run_dir / "resnet50.D0.data")
    rates = [r for r in stream if r["event"] == "rate"]
    assert len(rates) == 65  # milabench's skip 5 + stop 60, from voir's data channel
    assert all(r["seconds"] > 0 for r in rates)  # benchmate's elapsed: each step's own time
    config = json.loads((run_dir / "resnet50.D0.work" / "voirconf.json").read_text())
    assert config == {"options": {"stop": 60, "interval": "1s", "gpu_poll": 0.1, "skip": 5}}
    log = (run_dir / "resnet50.D0.log").read_text()
    data = pytester.path / "out" / "data"
    assert f"prepared 640 samples in {data}/FakeImageNet" in log  # prepare.py, in the log
    assert "step 3 loss" in log
    kept = (run_dir / "resnet50.D0.work" / "voir.data.jsonl").read_text()
    assert '"$event": "phase"' in kept


@pytest.mark.slow
def test_the_docs_cpu_overlay_runs(pytester: pytest.Pytester,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/suites.md "milabench's folders through voir": the overlay, beside config/."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    checkout(pytester.path)
    shutil.copy(DOCS / "examples" / "milabench-checkout" / "cpu.yaml", pytester.path / "cpu.yaml")
    result = pytester.runpytest("--bench-suite=cpu.yaml", "--bench-select=resnet50",
                                "--bench-base=out", "-p", "no:randomly", "--bench-save=s.json")
    result.assert_outcomes(passed=1)
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    rates = [r for r in read(run_dir / "resnet50.D0.data") if r["event"] == "rate"]
    assert len(rates) == 2 + 10  # the overlay's skip and stop
    assert "--batch-size 8" in (run_dir / "resnet50.D0.log").read_text()
    saved = json.loads((pytester.path / "s.json").read_text())["benchmarks"]["resnet50"]
    assert saved["milabench_perf"] > 0 and saved["perf"] > 0


@pytest.mark.slow
def test_a_command_that_ends_early_warns_and_one_far_too_short_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    shutil.copytree(DATA / "voirbench", pytester.path / "bench")
    data = pytester.path / "d"
    data.mkdir()
    (data / "train.json").write_text(json.dumps([[i / 64, 3 * i / 64 + 1] for i in range(64)]))
    pytester.makefile(".yaml", s=f"""
        _v:
          definition: ./bench
          voir: {{options: {{skip: 2, stop: 8}}}}
        short: {{inherits: _v, argv: {{--mode: short}}}}
        shorter: {{inherits: _v, argv: {{--mode: short}}, voir: {{options: {{skip: 6, stop: 20}}}}}}
        command:
          definition: {{command: [voir, main.py], parser: voir, cwd: '{{suite_dir}}/bench'}}
          voir: {{options: {{skip: 2, stop: 5}}}}
          argv: {{--data: '{data}', --batch-size: 4}}
        """.replace("\n        ", "\n"))
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    # parser: voir on a command line of one's own: the same data channel (no --config: voir's
    # defaults, skip 5 + stop 20, so the run's own skip + stop ends it).
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    rates = [r for r in read(run_dir / "command.D0.data") if r["event"] == "rate"]
    assert len(rates) == 7 and all(r["seconds"] > 0 for r in rates)
    result.stdout.fnmatch_lines_random([
        "warning: short: too few observations: the command ended after 9 of the 10 wanted "
        "(skip 2 + stop 8), 7 steady",
        "*failed shorter[[]D0]: fail: ExternalCommandError: too few observations: the command "
        "ended after 9 of the 26 wanted (skip 6 + stop 20), 3 steady; a figure needs 5 steady "
        "at least*",
    ])


def test_the_docs_explicit_voir_form_resolves(tmp_path: Path) -> None:
    from pytest_dlbench.suite import resolve_suite
    from pytest_dlbench.suite.definitions import VOIR_RUNNER

    text = (DOCS / "examples" / "milabench-checkout" / "explicit.yaml").read_text()
    shutil.copytree(DATA / "voirbench", tmp_path / "path" / "to" / "folder")
    (tmp_path / "s.yaml").write_text(text)
    (spec,) = resolve_suite(tmp_path / "s.yaml").specs
    assert spec.definition == VOIR_RUNNER
    assert spec.args == ("voir", "main.py", "--batch-size", "64")


def test_the_html_report_shows_both() -> None:
    from pytest_dlbench.report.html import render_html

    message = ("too few observations: the command ended after 9 of the 10 wanted (skip 2 + "
               "stop 8), 7 steady")
    page = render_html(summarize_runs([run_from_records(records([10.0] * 9, warning=message))]))
    assert f'<span class="badge bad" title="{message}">too few observations</span>' in page
    assert '<span class="muted">milabench 10' in page
    # Each warning is named by what it says: a voir line left out is no "too few observations".
    dropped = ("voir data line 3 left out: not JSON (later lines left out for this reason are "
               "only counted: the command record's data_dropped)")
    page = render_html(summarize_runs([run_from_records(records([10.0] * 9, warning=dropped))]))
    assert '">voir data line 3 left out</span>' in page
    assert ">too few observations<" not in page
    plain = render_html(summarize_runs([run_from_records(records([10.0] * 9, voir=False))]))
    assert "too few observations" not in plain and "milabench 10" not in plain
