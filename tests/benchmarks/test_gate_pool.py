"""benchmarks/gate_pool.py: gate_power --out files pooled into one cell table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _bench_scripts import load_script

gate_pool = load_script("gate_pool")


def trial(status: int, slowdown: float, ratio: float, rounds: int, neighbour: float = 0.0
          ) -> dict[str, object]:
    return {"mode": "paired", "rep": 0, "slowdown": slowdown, "status": status,
            "minutes": 1.5, "run_dir": "/gone", "ratio": ratio, "ci": [ratio, ratio],
            "pairs": [[100.0, 100.0 * ratio]], "neighbour": neighbour, "rounds": rounds}


def out_file(path: Path, trials: list[dict[str, object]], load: str) -> Path:
    path.write_text(json.dumps({"facts": {"date": "2026-11-25 10:00", "load_before": load,
                                          "load_after": load}, "args": {}, "trials": trials}))
    return path


def test_files_pool_into_one_cell_with_its_bounds(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a = out_file(tmp_path / "a.json", [trial(0, 0, 0.99, 4), trial(6, 10, 0.9, 5)], "1.0")
    b = out_file(tmp_path / "b.json", [trial(6, 0, 0.95, 5), trial(6, 10, 0.91, 5)], "1.2")
    assert gate_pool.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "4 trials from 2 files" in out and "1.0->1.0 1.2->1.2" in out
    # One A/A false alarm in 2: the exact interval is wide, as it must be.
    assert "paired / neighbour 0 % / slowdown 0 %: regressed 1/2 (50.0 %, 95 % interval " \
           "1.3-98.7 %)" in out
    assert "log ratio over 2 trials: mean -0.0307" in out and "2 below 0" in out
    assert "rounds used: 4 x1, 5 x1" in out
    assert "slowdown 10 %: regressed 2/2 (100.0 %, 95 % interval 15.8-100.0 %)" in out


def test_clopper_pearson_is_exact_at_the_edges() -> None:
    assert gate_pool.clopper_pearson(0, 40)[0] == 0.0
    assert gate_pool.clopper_pearson(0, 40)[1] == pytest.approx(0.0881, abs=1e-4)
    assert gate_pool.clopper_pearson(40, 40) == (pytest.approx(0.9119, abs=1e-4), 1.0)


def test_a_file_that_is_not_an_out_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit, match=r"gate_pool: .*bad.json: not a gate_power --out file"):
        gate_pool.main([str(bad)])


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"gate_pool: .*gone.json: cannot read it \(No such file"):
        gate_pool.main([str(tmp_path / "gone.json")])


def test_designs_judges_fixed_trials_by_the_sequential_rule_on_their_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from _gate_power_runs import paired_run

    from pytest_dlbench.results.judge import FIXED

    slower = paired_run(tmp_path / "slower", [100.0, 101.0] * 5, [80.8, 80.0] * 5, design=FIXED)
    same = paired_run(tmp_path / "same", [100.0, 101.0] * 5, [100.5, 100.5] * 5, design=FIXED)
    trials = [{**trial(6, 10, 0.8, 10), "run_dir": str(slower)},
              # Recorded as passed: the two designs disagree on it, and the table says so.
              {**trial(0, 10, 0.8, 10), "rep": 1, "run_dir": str(slower)},
              {**trial(0, 0, 1.0, 10), "run_dir": str(same)},
              trial(0, 0, 1.0, 10)]  # its run directory is gone: counted apart
    out = out_file(tmp_path / "a.json", trials, "1.0")
    assert gate_pool.main([str(out), "--designs"]) == 0
    text = capsys.readouterr().out
    rows = {cols[2]: cols for line in text.splitlines() if line.startswith("paired  ")
            for cols in [re.split(r"\s{2,}", line.strip())]}
    # Identical rates: futility stops the sequential rule at the first look (round 4).
    assert rows["0 %"][3:9] == ["1", "0 / 0 / 1", "0 / 0 / 1", "10.0", "4.0", "40 %"]
    # 20 % slower: regressed at round 6 (p = 1/64), where the fixed design ran 10.
    assert rows["10 %"][3:9] == ["2", "1 / 0 / 1", "2 / 0 / 0", "10.0", "6.0", "60 %"]
    assert "rep 1: 0 vs 6 at round 6" in text
    assert "the sequential rule over every cell: 16 of 30 rounds (53 % of the fixed" in text
    assert "1 paired trials left out" in text


def test_designs_pools_the_judgement_a_trial_recorded_without_its_run_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gate_power records the sequential rule's status and rounds in each fixed trial, so files
    of several sittings pool when their run directories are long gone."""
    recorded = [{**trial(0, 0, 1.0, 10), "sequential_status": 0, "sequential_rounds": 4},
                {**trial(6, 10, 0.9, 10), "sequential_status": 6, "sequential_rounds": 7}]
    a = out_file(tmp_path / "a.json", recorded[:1], "1.0")
    b = out_file(tmp_path / "b.json", recorded[1:], "1.0")
    assert gate_pool.main([str(a), str(b), "--designs"]) == 0
    text = capsys.readouterr().out
    assert "the sequential rule over every cell: 11 of 20 rounds (55 % of the fixed" in text
    assert "left out" not in text


def test_designs_says_so_when_no_trial_can_be_judged_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = out_file(tmp_path / "a.json", [trial(0, 0, 1.0, 10)], "1.0")
    assert gate_pool.main([str(out), "--designs"]) == 0
    assert "--designs: no paired trial ran every round" in capsys.readouterr().out


def test_sequential_pools_fixed_and_default_trials_as_the_default_gate_judges_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fixed trial counts with the sequential rule's recorded verdict and rounds (here a 5 %
    trial the fixed design caught and the sequential rule called inconclusive); a default-design
    trial counts as it ran; a fixed trial without a recorded judgement is left out, said so."""
    fixed = out_file(tmp_path / "fixed.json", [
        {**trial(0, 0, 1.0, 10), "sequential_status": 0, "sequential_rounds": 4},
        {**trial(6, 5, 0.95, 10), "sequential_status": 9, "sequential_rounds": 10},
        trial(6, 5, 0.95, 10)], "1.0")
    data = json.loads(fixed.read_text())
    fixed.write_text(json.dumps({**data, "args": {"paired_args": ["--bench-fixed-rounds"]}}))
    default = out_file(tmp_path / "default.json", [trial(6, 5, 0.94, 6)], "1.0")
    assert gate_pool.main([str(fixed), str(default), "--sequential"]) == 0
    text = capsys.readouterr().out
    assert "2 run with every round, each by the sequential rule on its first rounds; 1 run in " \
           "the default design; 1 fixed trials left out" in text
    assert "slowdown 5 %: regressed 1/2 (50.0 %" in text
    assert re.search(r"slowdown 5 %: regressed 1/2 .*\n  rounds used: 6 x1, 10 x1", text)
    # Without --sequential the same files count the fixed design's verdicts, all three.
    assert gate_pool.main([str(fixed), str(default)]) == 0
    assert "slowdown 5 %: regressed 3/3" in capsys.readouterr().out


def test_sequential_and_designs_do_not_go_together(tmp_path: Path) -> None:
    out = out_file(tmp_path / "a.json", [trial(0, 0, 1.0, 4)], "1.0")
    with pytest.raises(SystemExit):
        gate_pool.main([str(out), "--designs", "--sequential"])
