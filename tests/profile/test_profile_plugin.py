"""--bench-profile and the suite's ``profile:`` key, through pytest: bad settings are usage
errors, a profiled run writes and shows its reports, and the score is computed as without."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _procs import child_env

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.results.figures import run_from_records

DEFS = textwrap.dedent(
    """
    import torch

    def mlp(bench):
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        bench.watch(model, x)
        for _ in bench.iterate(range(10_000), batch_size=8):
            with bench.region("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with bench.region("backward"):
                loss.backward()
            opt.step()
            opt.zero_grad()

    def unwatched(bench):
        for _ in bench.iterate(range(10_000), batch_size=8):
            sum(range(1000))
    """
)

SUITE = textwrap.dedent(
    """
    _base:
      voir: {options: {skip: 2, stop: 10}}
    mlp: {inherits: _base, definition: defs.py:mlp, weight: 1}
    plain: {inherits: _base, definition: defs.py:unwatched, weight: 1}
    """
)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s=SUITE)
    return pytester


def test_an_unknown_report_name_is_a_usage_error(suite: pytest.Pytester):
    result = suite.runpytest("--bench-suite=s.yaml", "--bench-profile=sped", "--bench-base=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-profile: unknown report 'sped'*speed, time*"])
    assert not (suite.path / "out" / "runs").exists()  # refused before anything ran


def test_a_bad_profile_key_in_the_suite_names_the_benchmark(suite: pytest.Pytester):
    suite.makefile(".yaml", bad=SUITE + "tiny: {inherits: _base, definition: defs.py:mlp,"
                   " profile: {time: {enabled: true, steps: 0}}}\n")
    result = suite.runpytest("--bench-suite=bad.yaml", "--bench-base=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bad.yaml: tiny: profile*steps*"])


class ProfiledRun:
    """The suite's run with every report, in a fresh pytest: what it printed and its folders."""

    def __init__(self, folder: Path) -> None:
        (folder / "defs.py").write_text(DEFS)
        (folder / "s.yaml").write_text(SUITE)
        # As pytester's runpytest_subprocess runs it: no caller's options, a home of its own.
        env = child_env(COLUMNS="120", HOME=str(folder), PY_COLORS="0")
        env.pop("PYTEST_ADDOPTS", None)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-suite=s.yaml",
             "--bench-base=out", "--bench-html=report.html",
             "--bench-profile=speed,time,memory,summary,snapshot"],
            cwd=folder, env=env, capture_output=True, text=True,
            timeout=600)
        self.folder, self.ret, self.stdout = folder, done.returncode, done.stdout + done.stderr
        runs = folder / "out" / "runs"
        self.run_dir = next(runs.iterdir()) if runs.is_dir() else folder / "no run"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> ProfiledRun:
    """One profiled run for the tests that read it (a run of the suite takes seconds)."""
    return ProfiledRun(tmp_path_factory.mktemp("profiled"))


@pytest.mark.slow
def test_a_profiled_run_writes_shows_and_keeps_its_reports(profiled: ProfiledRun):
    assert profiled.ret == 0, profiled.stdout
    pytest.LineMatcher(profiled.stdout.splitlines()).fnmatch_lines([
        "*profile of mlp.D0*",
        "speed: * items/s scored*",
        "time: *",
        "memory: top operators*(CPU only)*",
        "*aten::*",
        "summary: Sequential, 676 parameters*",
        "snapshot needs CUDA; skipped",
        "*profile of plain.D0*",
        "*summary: plain never called bench.watch*",
    ])
    out = profiled.stdout
    assert "  forward " in out and "  backward " in out  # the time report's regions
    (run_dir,) = (profiled.folder / "out" / "runs").iterdir()
    reports = run_dir / "mlp.D0.profile"
    assert {p.name for p in reports.iterdir()} >= {"speed.json", "speed.csv", "time.json",
                                                   "memory.json", "summary.json", "index.json"}
    assert json.loads((reports / "summary.json").read_text())["total_params"] == 676
    # Profiled steps are never observations: the scored window is exactly skip + stop.
    records = [json.loads(line) for line in (run_dir / "mlp.D0.data").read_text().splitlines()]
    assert sum(r["event"] == "rate" for r in records) == 12
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"
    # The speed report's throughput is the run's score, handed to the profile by the plugin.
    speed = json.loads((reports / "speed.json").read_text())
    assert speed["throughput"] == pytest.approx(run_from_records(records).rate)
    html = (profiled.folder / "report.html").read_text()
    assert 'id="profiles"' in html and "profile of mlp.D0" in html


@pytest.mark.slow
def test_dlbench_profile_prints_a_finished_runs_reports(profiled: ProfiledRun,
                                                        capsys: pytest.CaptureFixture[str]):
    assert profiled.ret == 0, profiled.stdout
    run_dir = profiled.run_dir
    capsys.readouterr()
    assert dlbench(["profile", str(run_dir), "mlp"]) == 0
    out = capsys.readouterr().out
    assert "== profile of mlp.D0" in out and "time: " in out and "forward" in out
    assert dlbench(["profile", str(run_dir), "nothing-here"]) == 4
    assert dlbench(["profile", str(Path(run_dir) / "missing")]) == 4
