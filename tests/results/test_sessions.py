"""The drift between sessions (issue 26): a baseline merged from several sessions
(results/history/sessions.py, ``dlbench baseline``) carries it, the noise model estimates it
(results/judge/noise.session_drift) and adds it to each side; synthetic sessions with known
drift."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from _history_files import drifting, session

from pytest_dlbench.cli import main
from pytest_dlbench.results import gate
from pytest_dlbench.results.history import SessionsError, merge_sessions, session_count
from pytest_dlbench.results.judge import ALPHA, REGRESSED, compare, noise
from pytest_dlbench.results.model import load_summary, save_summary


# -- the estimate ---------------------------------------------------------------------------
def test_the_drift_of_many_sessions_is_estimated_near_its_true_value() -> None:
    rng = random.Random(3)
    merged = merge_sessions([session(drifting(rng, drift=0.03, within=0.02))
                             for _ in range(60)])
    bench = merged.get("x")
    assert bench is not None and session_count(bench) == 60 and len(bench.rates) == 300
    found = noise.session_drift(bench)
    # The runs' own 2 % is taken out: what is left is the sessions' 3 %.
    assert found.cv == pytest.approx(0.03, abs=0.007)
    assert found.df == 59 and found.source == "60 sessions of the baseline"


def test_sessions_that_agree_drift_by_the_floor_and_one_session_by_the_default() -> None:
    same = merge_sessions([session([100.0, 101.0, 99.0])] * 3).get("x")
    assert same is not None
    assert noise.session_drift(same).cv == noise.MIN_SESSION_DRIFT_CV
    one = session([100.0, 101.0, 99.0]).get("x")
    assert one is not None
    assert noise.session_drift(one).cv == noise.DEFAULT_SESSION_DRIFT_CV
    assert noise.session_drift(one).df == math.inf


# -- the verdicts it gives -------------------------------------------------------------------
def _regressed_share(*, merged_sessions: int, drift: float, trials: int = 150,
                     seed: int = 11) -> float:
    """A/A: a session of 5 runs judged against a baseline, on a machine whose sessions drift
    by ``drift``: the share of trials called regressed. ``merged_sessions`` 1: a baseline of
    one session (the default drift assumed)."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        parts = [session(drifting(rng, drift=drift, within=0.01))
                 for _ in range(merged_sessions)]
        base = parts[0] if merged_sessions == 1 else merge_sessions(parts)
        current = session(drifting(rng, drift=drift, within=0.01))
        hits += compare(current, base).get("x").verdict == REGRESSED  # type: ignore[union-attr]
    return hits / trials


def test_a_machine_whose_sessions_drift_gives_no_false_alarms() -> None:
    """Sessions drifting by 4 % with 1 % between runs: the runs' spread alone would call a
    third of A/A comparisons regressed beyond ±3 %; with the drift (default, or measured by a
    merged baseline of 6 sessions) the false alarms stay at the test's alpha or below."""
    assert _regressed_share(merged_sessions=1, drift=0.04) <= ALPHA
    assert _regressed_share(merged_sessions=6, drift=0.04) <= ALPHA + 0.02


def test_the_runs_spread_alone_would_cry_wolf(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same A/A trials judged without any drift (the model before it): many false
    alarms. This is what the drift term is for; if it stopped mattering, this test says so."""
    monkeypatch.setattr(noise, "session_drift",
                        lambda bench, known=None: noise.Drift(0.0, math.inf, "none"))
    assert _regressed_share(merged_sessions=1, drift=0.04) > 0.15


def test_a_merged_quiet_baseline_still_catches_a_real_drop() -> None:
    """Sessions within 0.5 % of each other, measured: a 7 % drop of one session is caught."""
    rng = random.Random(5)
    base = merge_sessions([session(drifting(rng, drift=0.005, within=0.005))
                           for _ in range(6)])
    caught = sum(
        compare(session(drifting(rng, drift=0.005, within=0.005, level=93.0)), base)
        .get("x").verdict == REGRESSED  # type: ignore[union-attr]
        for _ in range(40))
    assert caught >= 36


# -- the merged file -------------------------------------------------------------------------
def test_a_merged_baseline_is_saved_and_read_back_with_its_sessions(tmp_path: Path) -> None:
    merged = merge_sessions([session([100.0, 102.0]), session([97.0, 98.0, 96.0])])
    bench = merged.get("x")
    assert bench is not None and bench.session_rates == ((100.0, 102.0), (97.0, 98.0, 96.0))
    assert bench.perf == pytest.approx(sum([100, 102, 97, 98, 96]) / 5)
    assert sorted(r.repeat or 0 for r in bench.runs) == [0, 1, 2, 3, 4]  # none collide
    back = load_summary(save_summary(merged, tmp_path / "base.json")).get("x")
    assert back is not None and back.session_rates == bench.session_rates
    # Merging a merged baseline with another session keeps every session apart.
    again = merge_sessions([merged, session([101.0])]).get("x")
    assert again is not None and session_count(again) == 3


def test_sessions_of_two_machines_are_not_merged(tmp_path: Path) -> None:
    a = session([100.0], machine={"hostname": "gpu1", "cpu": "Xeon", "cores": 8})
    b = session([100.0], machine={"hostname": "gpu2", "cpu": "Xeon", "cores": 8})
    with pytest.raises(SessionsError, match="b.json: measured on machine gpu2"):
        merge_sessions([a, b], names=["a.json", "b.json"])
    with pytest.raises(SessionsError, match="two summaries or more"):
        merge_sessions([a])


def test_dlbench_baseline_errors_are_one_line_and_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = save_summary(session([100.0], machine={"hostname": "gpu1"}), tmp_path / "a.json")
    b = save_summary(session([100.0], machine={"hostname": "gpu2"}), tmp_path / "b.json")
    out = tmp_path / "base.json"
    assert main(["baseline", str(out), str(a), str(b)]) == gate.USAGE_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlbench: error: ") and "b.json" in err and "\n" not in err
    assert main(["baseline", str(out), str(a), str(tmp_path / "none.json")]) == gate.USAGE_ERROR
    assert "none.json" in capsys.readouterr().err
    assert main(["baseline", str(tmp_path), str(a), str(a)]) == gate.USAGE_ERROR  # a folder
    assert not out.exists()  # nothing half written
    assert main(["baseline", str(out), str(a), str(a)]) == gate.OK
    assert len(json.loads(out.read_text())["benchmarks"]["x"]["sessions"]) == 2
