"""benchmarks/gate_power.py's saved-measured and fixture modes: their arguments, the command
lines they build, the user's test file they write, the order a repetition runs them in, and
gate_pool's cells of them. No pytest runs here."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from _bench_scripts import load_script
from _gate_power_runs import JITTER
from _runs import quiet_sessions, steady_at, write_run

from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.model import save_summary

gate_power = load_script("gate_power")
gate_pool = load_script("gate_pool")


# -- arguments -----------------------------------------------------------------------------------
def test_the_new_modes_are_taken_with_their_defaults() -> None:
    args = gate_power.parse_args(["--modes", "saved-measured,fixture"])
    assert args.modes == ["saved-measured", "fixture"]
    assert (args.baseline_sessions, args.session_repeats) == (5, 3)
    assert (args.skip, args.stop, args.rounds) == (5, 50, None)


@pytest.mark.parametrize("argv", [
    ["--modes", "saved,measured"],
    ["--modes", "fixtures"],
    ["--modes", "saved-measured", "--baseline-sessions", "1"],  # dlbench baseline needs two
    ["--modes", "saved-measured", "--session-repeats", "0"],
])
def test_bad_mode_arguments_are_usage_errors(argv: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        gate_power.parse_args(argv)
    assert stopped.value.code == 2
    assert ": error: --" in capsys.readouterr().err


# -- the command lines ---------------------------------------------------------------------------
def test_a_suite_trial_names_the_suite_and_a_fixture_trial_does_not(tmp_path: Path) -> None:
    suite = gate_power.pytest_command(tmp_path, "--bench-against=HEAD")
    fixture = gate_power.pytest_command(tmp_path, "test_gp.py", suite=False)
    assert suite[:3] == [sys.executable, "-m", "pytest"] and "--bench-suite=gp.yaml" in suite
    assert not any(a.startswith("--bench-suite") for a in fixture)
    assert f"--bench-base={tmp_path}" in fixture and fixture[-1] == "test_gp.py"


def test_a_fixture_trial_is_the_users_command_with_its_steps() -> None:
    args = gate_power.parse_args(["--modes", "fixture"])
    assert gate_power.fixture_args(args) == [
        "test_gp.py", "--bench-against=main", "--bench-fixture-steps=5,50"]
    args = gate_power.parse_args(["--modes", "fixture", "--rounds", "6", "--skip", "3",
                                  "--stop", "40", "--paired-args=--bench-fixed-rounds"])
    assert gate_power.fixture_args(args) == [
        "test_gp.py", "--bench-against=main", "--bench-fixture-steps=3,40",
        "--bench-rounds=6", "--bench-fixed-rounds"]


def test_a_measured_baseline_is_sessions_merged_as_a_user_merges_them(tmp_path: Path) -> None:
    session = tmp_path / "session-0-1.json"
    assert gate_power.session_args(session, 3, ["-x"]) == [
        "--bench-repeat=3", f"--bench-save={session}", "-x"]
    merged = tmp_path / "measured-0.json"
    sessions = [tmp_path / f"session-0-{k}.json" for k in range(3)]
    assert gate_power.merge_command(merged, sessions) == [
        sys.executable, "-m", "pytest_dlbench.cli", "baseline", str(merged),
        *map(str, sessions)]


def test_a_measured_compare_sets_only_the_slowdown_and_the_baseline(tmp_path: Path) -> None:
    """The product's defaults: no --bench-repeat, no --bench-confirm of its own."""
    merged = tmp_path / "measured-0.json"
    assert gate_power.measured_compare_args(merged, 20.0) == [
        "--bench-override=gp.argv.--extra-pct=20", f"--bench-compare={merged}"]
    assert gate_power.measured_compare_args(merged, 5.0, ["--bench-repeat=2"])[-1] == \
        "--bench-repeat=2"


# -- the user's test file ------------------------------------------------------------------------
class FakeBench:
    """The ``bench`` fixture as far as the test file uses it: ``iterate`` stops after
    ``steps`` steps, and the batch size is kept."""

    def __init__(self, steps: int) -> None:
        self.steps, self.batch_size = steps, None

    def iterate(self, items: Any, batch_size: int) -> Any:
        self.batch_size = batch_size
        for i, item in enumerate(items):
            if i == self.steps:
                return
            yield item


def test_the_test_file_runs_the_workloads_step_with_its_extra_work() -> None:
    text = gate_power.fixture_text("spin", 1000, 20)
    assert "EXTRA_PCT = 20\n" in text and "WORK = 1000\n" in text
    namespace: dict[str, Any] = {}
    exec(compile(text, "test_gp.py", "exec"), namespace)
    made = []
    real = namespace["make_step"]
    namespace["make_step"] = lambda extra, work: made.append((extra, work)) or real(extra, work)
    bench = FakeBench(steps=3)
    namespace["test_gp"](bench)
    assert made == [(20, 1000)] and bench.batch_size == 1


def test_the_mlp_test_counts_items_as_the_suite_does() -> None:
    text = gate_power.fixture_text("mlp", 200, 0)
    compile(text, "test_gp.py", "exec")  # torch is imported only when the step is made
    assert "batch_size=WORK * BATCH" in text and "def test_gp(bench):" in text


# -- a repetition --------------------------------------------------------------------------------
class FakeScratch:
    """gate_power.Scratch's modes, recording what ran: a trial per call, a baseline per rep."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def trial(self, mode: str, rep: int, slowdown: float, level: float,
              minutes: float = 1.0) -> Any:
        return gate_power.Trial(mode, rep, slowdown, 0, minutes, "/gone", neighbour=level,
                                load_before=1.0, load_after=1.0)

    def measured_baseline(self, rep: int) -> tuple[Path, float]:
        self.calls.append(("measured_baseline", rep))
        return Path(f"/m{rep}.json"), 4.0

    def saved_measured(self, rep: int, s: float, level: float, baseline: Path,
                       share: float) -> Any:
        self.calls.append(("saved_measured", rep, s, str(baseline), share))
        return self.trial("saved-measured", rep, s, level, 1.0 + share)

    def fixture(self, rep: int, s: float, level: float) -> Any:
        self.calls.append(("fixture", rep, s))
        return self.trial("fixture", rep, s, level)


def test_a_repetition_builds_one_measured_baseline_and_shares_its_cost(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = gate_power.parse_args(["--modes", "saved-measured,fixture", "--reps", "2",
                                  "--slowdowns", "0,20"])
    scratch = FakeScratch()
    trials = gate_power.measure(scratch, args, {})
    assert [c for c in scratch.calls if c[0] == "measured_baseline"] == [
        ("measured_baseline", 0), ("measured_baseline", 1)]
    measured = [c for c in scratch.calls if c[0] == "saved_measured"]
    # Each repetition's trials compare with its own baseline, each charged half its 4 minutes.
    assert sorted((c[1], c[2], c[3], c[4]) for c in measured) == [
        (0, 0, "/m0.json", 2.0), (0, 20, "/m0.json", 2.0),
        (1, 0, "/m1.json", 2.0), (1, 20, "/m1.json", 2.0)]
    assert sorted((t.mode, t.rep, t.slowdown) for t in trials) == sorted(
        (m, r, s) for m in ("saved-measured", "fixture") for r in (0, 1) for s in (0, 20))
    assert "fixture rep 0 neighbour  0 % slowdown" in capsys.readouterr().out


def test_a_trial_line_gives_the_verdict_its_interval_and_the_drift() -> None:
    t = gate_power.Trial("saved-measured", 3, 20.0, 9, 1.5, "/gone", verdict="inconclusive",
                         ratio=1.012, ci=(0.782, 1.52), drift=0.013, rounds=1,
                         load_before=1.0, load_after=2.0)
    line = gate_power.trial_line(t)
    assert "exit 9 (inconclusive), inconclusive 1.012 [0.782, 1.520], drift 1.3 %" in line
    assert line.startswith("saved-measured rep 3 neighbour  0 % slowdown 20 %")


def baseline_file(folder: Path, sessions: int) -> Path:
    base = folder / "base"
    base.mkdir(parents=True)
    for r, rate in enumerate((99.6, 100.4, 100.0)):
        write_run(base, "gp", steady_at(rate, jitter=JITTER[:2] * 5), repeat=r)
    summary = summarize_dir(base)
    if sessions > 1:
        summary = quiet_sessions(summary, sessions)
    return save_summary(summary, folder / "baseline.json")


def test_the_drift_recorded_is_the_one_the_gate_takes(tmp_path: Path) -> None:
    """A merged baseline of sessions that agree: the 1 % floor; one session: the default."""
    assert gate_power.measured_drift(baseline_file(tmp_path / "five", 5)) == \
        pytest.approx(0.01)
    assert gate_power.measured_drift(baseline_file(tmp_path / "one", 1)) == \
        pytest.approx(0.05)


# -- pooled ----------------------------------------------------------------------------------------
def out_trial(mode: str, status: int, slowdown: float, ratio: float, **more: Any
              ) -> dict[str, Any]:
    return {"mode": mode, "rep": 0, "slowdown": slowdown, "status": status, "minutes": 2.0,
            "run_dir": "/gone", "ratio": ratio, "ci": [ratio - 0.02, ratio + 0.04],
            "neighbour": 0.0, **more}


def out_file(path: Path, trials: list[dict[str, Any]], args: dict[str, Any] | None = None
             ) -> Path:
    path.write_text(json.dumps({"facts": {"date": "2026-11-28 19:30", "load_before": "1.0",
                                          "load_after": "1.1"}, "args": args or {},
                                "trials": trials}))
    return path


def test_the_new_modes_pool_as_cells_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    measured = out_file(tmp_path / "measured.json", [
        out_trial("saved-measured", 0, 0, 1.0, drift=0.012, rounds=1),
        out_trial("saved-measured", 9, 0, 0.99, drift=0.02, rounds=1),
        out_trial("saved", 9, 0, 1.0, rounds=10)])
    fixture = out_file(tmp_path / "fixture.json", [
        out_trial("fixture", 6, 20, 0.83, rounds=6), out_trial("fixture", 6, 20, 0.8, rounds=7),
        out_trial("paired", 0, 0, 1.0, rounds=4)])
    assert gate_pool.main([str(measured), str(fixture)]) == 0
    out = capsys.readouterr().out
    assert "saved-measured / neighbour 0 % / slowdown 0 %: regressed 0/2" in out
    assert "saved / neighbour 0 % / slowdown 0 %: regressed 0/1" in out
    assert "fixture / neighbour 0 % / slowdown 20 %: regressed 2/2" in out
    assert "paired / neighbour 0 % / slowdown 0 %: regressed 0/1" in out
    assert "drift between sessions measured: median 1.6 %, 1.2-2.0 % over 2 trials" in out
    assert "inconclusive intervals: narrowest 0.990 [0.970, 1.030]" in out
    assert re.search(r"fixture / neighbour 0 % / slowdown 20 %.*\n  rounds used: 6 x1, 7 x1",
                     out)
    rows = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()]
    assert {r[0] for r in rows if len(r) == 10} >= {"saved-measured", "fixture", "paired",
                                                   "saved"}


def test_fixed_fixture_trials_count_by_the_sequential_rule_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixed = out_file(tmp_path / "fixed.json", [
        out_trial("fixture", 6, 5, 0.95, rounds=20, sequential_status=9, sequential_rounds=20),
        out_trial("fixture", 0, 0, 1.0, rounds=20, sequential_status=0, sequential_rounds=4)],
        {"paired_args": ["--bench-fixed-rounds"]})
    assert gate_pool.main([str(fixed), "--sequential"]) == 0
    out = capsys.readouterr().out
    assert "2 run with every round" in out
    assert "fixture / neighbour 0 % / slowdown 5 %: regressed 0/1" in out
    assert gate_pool.main([str(fixed), "--designs"]) == 0
    out = capsys.readouterr().out
    (row,) = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()
              if line.startswith("fixture  ") and "at round 20" in line]
    assert row[:5] == ["fixture", "0 %", "5 %", "1", "1 / 0 / 0"]


def test_report_args_keep_the_new_options(tmp_path: Path) -> None:
    """--out keeps the options; a kept file read back has them (rejudging with --from)."""
    args = gate_power.parse_args(["--modes", "saved-measured", "--baseline-sessions", "4",
                                  "--out", str(tmp_path / "o.json")])
    gate_power.save(args.out, {}, args, [], None)
    kept = json.loads((tmp_path / "o.json").read_text())["args"]
    assert (kept["baseline_sessions"], kept["session_repeats"], kept["modes"]) == (
        4, 3, ["saved-measured"])
    assert isinstance(argparse.Namespace(**kept), argparse.Namespace)


def test_the_report_of_the_new_modes_is_their_cells_with_no_empty_rejudging() -> None:
    """The offline re-judging reads suite runs only: a fixture or saved-measured measurement
    reports its cells, not an empty re-judging table."""
    args = gate_power.parse_args(["--modes", "fixture,saved-measured", "--slowdowns", "0,20"])
    facts = {"date": "2026-11-28 19:30", "load_before": "1.0", "load_after": "1.1", "cpus": 2,
             "python": "3.11", "work": 1000}
    trials = [gate_power.Trial("fixture", 0, 20.0, 6, 3.0, "/gone", rounds=20),
              gate_power.Trial("saved-measured", 0, 0.0, 9, 1.0, "/gone", rounds=1)]
    text = gate_power.report(trials, args, facts)
    rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    assert ["fixture", "0 %", "20 %", "1", "100 %", "0 %", "0 %", "0 %", "20.0", "3.00"] in rows
    assert ["saved-measured", "0 %", "0 %", "1", "0 %", "100 %", "0 %", "0 %", "1.0",
            "1.00"] in rows
    assert "neighbour 0 %:" not in text and "runs/side" not in text
