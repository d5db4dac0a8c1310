"""The drift between sessions read from the machine's history (results/judge/history_drift.py),
with known answers: synthetic sessions grouped by commit, and a saved-baseline comparison
whose verdict the history decides."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _history_files import drifting, session
from _paths import REPO_ROOT
from _runs import steady_at, write_run

from pytest_dlbench.cli import main
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.history import GitInfo, autosave, drifts_from_history
from pytest_dlbench.results.judge import INCONCLUSIVE, REGRESSED, compare, history_drifts, noise
from pytest_dlbench.results.model import save_summary, summary_dict


def entry(rates: list[float], commit: str | None, *, dirty: bool = False,
          autosaved: bool = True, run_dir: str | None = None) -> Any:
    """A history entry (results/history/records.Entry's fields that are read) of one session."""
    summary = session(rates)
    if run_dir is not None:
        summary = SimpleNamespace(benchmarks=summary.benchmarks, run_dir=run_dir)
    return SimpleNamespace(summary=summary, commit=commit, dirty=dirty, autosaved=autosaved)


# -- the estimate ---------------------------------------------------------------------------
def test_sessions_of_one_commit_give_the_merged_baselines_estimate() -> None:
    rng = random.Random(5)
    sessions = [drifting(rng, drift=0.03, within=0.02) for _ in range(40)]
    found = history_drifts([entry(s, "a" * 40) for s in sessions])["x"]
    own = noise.estimate_drift([sessions], "same")
    assert own is not None and (found.cv, found.df) == (own.cv, own.df)
    assert found.cv == pytest.approx(0.03, abs=0.008) and found.df == 39
    assert found.source == "40 sessions of 1 commit in the history"


def test_a_change_of_code_between_commits_is_not_drift() -> None:
    # Three commits, each 20 % away from the last (the code changed), their sessions 2 % apart:
    # pooled within each commit, the drift is 2 %, not the 20 % steps.
    rng = random.Random(11)
    entries = [entry(drifting(rng, drift=0.02, within=0.005, level=level), commit)
               for level, commit in ((100.0, "a"), (120.0, "b"), (144.0, "c"))
               for _ in range(8)]
    found = history_drifts(entries)["x"]
    assert found.cv == pytest.approx(0.02, abs=0.007)
    assert found.df == 21 and found.source == "24 sessions of 3 commits in the history"
    merged_by_mistake = noise.estimate_drift([[e.summary.get("x").rates for e in entries]], "")
    assert merged_by_mistake is not None and merged_by_mistake.cv > 0.1


def test_what_the_history_cannot_vouch_for_is_left_out() -> None:
    rng = random.Random(2)
    one = [entry(drifting(rng, drift=0.02, within=0.01), "a") for _ in range(2)]
    assert history_drifts(one)["x"].df == 1
    # A session of another commit alone, a dirty tree, a plain saved summary, no commit, and
    # the run being judged: none of them adds a session.
    noisy = [100.0, 60.0, 140.0]
    extra = [entry(noisy, "b"), entry(noisy, "a", dirty=True), entry(noisy, "a", autosaved=False),
             entry(noisy, None), entry(noisy, "a", run_dir="/runs/now")]
    found = history_drifts(one + extra, leave_out=Path("/runs/now"))["x"]
    assert found.df == 1 and found.cv == history_drifts(one)["x"].cv
    assert history_drifts(one[:1] + extra[:1]) == {}  # no commit with two sessions


def test_no_history_folder_is_no_estimate(tmp_path: Path) -> None:
    assert drifts_from_history(None).drifts == {}
    assert drifts_from_history(tmp_path / "none").drifts == {}


# -- a comparison the history decides -------------------------------------------------------
JITTER = (0.001, -0.001, 0.0005, -0.0005, 0.0, 0.0)


def run_of(base: Path, name: str, rate: float, runs: int = 3) -> Path:
    """A run directory of ``runs`` repeats of benchmark ``x`` at ``rate`` (1 % apart)."""
    run_dir = base / "runs" / name
    run_dir.mkdir(parents=True)
    for r in range(runs):
        write_run(run_dir, "x", steady_at(rate * (1 + 0.01 * (r - 1)), 6, JITTER), repeat=r)
    return run_dir


def quiet_history(base: Path) -> Path:
    """A quiet machine's history: two commits, four and three sessions each, 0.5 % apart."""
    folder = base / "history"
    rng = random.Random(4)
    for i, (commit, level) in enumerate([("a" * 40, 100.0)] * 4 + [("b" * 40, 90.0)] * 3):
        run_dir = run_of(base, f"h{i}", level * math.exp(rng.gauss(0.0, 0.005)))
        autosave(summary_dict(summarize_dir(run_dir), suite="s"), folder,
                 git=GitInfo(commit=commit, date="2026-11-01T00:00:00+00:00"),
                 now=dt.datetime(2026, 11, 2, 0, 0, i, tzinfo=dt.timezone.utc))
    return folder


def test_a_quiet_machines_history_makes_an_8_percent_drop_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    base = tmp_path / "base"
    saved = tmp_path / "baseline.json"
    save_summary(summarize_dir(run_of(base, "then", 100.0)), saved)
    now = run_of(base, "now", 92.0)
    # Without a history: the default 5 % drift a session, and 8 % cannot be told from it.
    assert main(["report", str(now), "--compare", str(saved)]) == gate.EXIT_INCONCLUSIVE
    plain = compare(summarize_dir(now), summary_dict(summarize_dir(base / "runs" / "then")))
    assert plain.get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    # With the machine's history beside the runs (<base>/history): its sessions of one
    # commit agree within ~1 %, so the drop is a regression, and the noise column says why.
    quiet_history(base)
    drifts = drifts_from_history(base / "history", now).drifts
    assert drifts["x"].df == 5 and drifts["x"].cv < 0.02
    assert drifts["x"].source == "7 sessions of 2 commits in the history"
    out_json = tmp_path / "now.json"
    assert main(["report", str(now), "--compare", str(saved), "--save",
                 str(out_json)]) == gate.EXIT_REGRESSED
    row = json.loads(out_json.read_text())["gate"]["comparison"]["benchmarks"]["x"]
    assert row["verdict"] == REGRESSED
    assert "each session ±1.0% (7 sessions of 2 commits in the history)" in row["noise"]
    assert row["drift"]["source"] == "7 sessions of 2 commits in the history"
    assert row["drift"]["df"] == 5 and row["drift"]["cv"] == pytest.approx(0.01)
    judged = compare(summarize_dir(now), summary_dict(summarize_dir(base / "runs" / "then")),
                     drifts=drifts)
    assert judged.get("x").verdict == REGRESSED  # type: ignore[union-attr]
    # Another machine's history says nothing of this one.
    monkeypatch.setenv("DLBENCH_MACHINE", "elsewhere")
    assert drifts_from_history(base / "history", now).drifts == {}


def test_the_terminal_says_which_drift_the_verdict_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    monkeypatch.setenv("COLUMNS", "200")
    base = tmp_path / "base"
    saved = tmp_path / "baseline.json"
    save_summary(summarize_dir(run_of(base, "then", 100.0)), saved)
    now = run_of(base, "now", 100.0)
    # One session at the default drift: a regression beyond 3 % is not excluded (exit 9).
    assert main(["report", str(now), "--compare", str(saved)]) == gate.EXIT_INCONCLUSIVE
    default = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("between sessions")]
    assert default == ["between sessions: ±5.0% a session (the default 5%); measure this "
                       "machine's with --bench-autosave or dlbench baseline"]
    quiet_history(base)
    # This machine's drift measured (±1 % a session): the same ratio is now unchanged.
    assert main(["report", str(now), "--compare", str(saved)]) == gate.OK
    measured = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("between sessions")]
    assert measured == ["between sessions: ±1.0% a session (7 sessions of 2 commits in the "
                        "history)"]
    page = (REPO_ROOT / "docs" / "reports.md").read_text()
    assert default[0] in page and measured[0] in page  # the page shows what the terminal says


def test_a_history_file_that_cannot_be_read_is_named_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    base = tmp_path / "base"
    saved = tmp_path / "baseline.json"
    save_summary(summarize_dir(run_of(base, "then", 100.0)), saved)
    now = run_of(base, "now", 92.0)
    folder = quiet_history(base)
    broken = folder / "here" / "20261103T000000Z_cccccccccc.json"
    broken.write_text("{ not json")
    found = drifts_from_history(folder, now)
    assert found.drifts["x"].df == 5  # the other files still count
    assert len(found.left_out) == 1 and str(broken) in found.left_out[0]
    out_json = tmp_path / "now.json"
    assert main(["report", str(now), "--compare", str(saved), "--save",
                 str(out_json)]) == gate.EXIT_REGRESSED
    warnings = json.loads(out_json.read_text())["gate"]["comparison"]["warnings"]
    assert [w for w in warnings if str(broken) in w and "left out" in w]
    assert f"warning: history {folder}: left out" in capsys.readouterr().out
    # Many broken files: three named, the rest counted.
    for k in range(5):
        (folder / "here" / f"20261104T00000{k}Z_dddddddddd.json").write_text("[]")
    lines = drifts_from_history(folder, now).warnings
    assert len(lines) == 4 and lines[-1] == f"history {folder}: 3 more files left out"


def test_dlbench_compare_reads_the_drift_from_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    base = tmp_path / "base"
    then, now = tmp_path / "then.json", tmp_path / "now.json"
    save_summary(summarize_dir(run_of(base, "then", 100.0)), then)
    save_summary(summarize_dir(run_of(base, "now", 92.0)), now)
    assert main(["compare", str(then), str(now)]) == gate.EXIT_INCONCLUSIVE
    folder = quiet_history(base)
    assert main(["compare", str(then), str(now), "--history", str(folder)]) == gate.EXIT_REGRESSED
    assert "(7 sessions of 2 commits in the history)" in capsys.readouterr().out
    # Another machine's sessions say nothing of the one CURRENT was measured on.
    monkeypatch.setenv("DLBENCH_MACHINE", "elsewhere")
    assert main(["compare", str(then), str(now), "--history", str(folder)]) == \
        gate.EXIT_INCONCLUSIVE
    assert main(["compare", str(then), str(now), "--history",
                 str(tmp_path / "nowhere")]) == gate.USAGE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dlbench: error: --history {tmp_path / 'nowhere'}: no such folder "
                   "(write one with --bench-autosave)"]


# -- a session is what it measured, not its file's name (issue 40 item 7) --------------------
def test_copies_of_one_session_count_once() -> None:
    rng = random.Random(8)
    sessions = [entry(drifting(rng, drift=0.03, within=0.01), "a") for _ in range(3)]
    alone = history_drifts(sessions)["x"]
    # Each session's file copied under other names: the same summaries, read again.
    copies = [SimpleNamespace(**vars(e)) for e in sessions for _ in range(3)]
    assert history_drifts(sessions + copies)["x"] == alone
    assert alone.df == 2 and alone.source == "3 sessions of 1 commit in the history"
    # Two sessions with the same figures but their own run directories are two sessions.
    twins = [entry([100.0, 101.0], "b", run_dir=f"/runs/r{k}") for k in range(2)]
    assert history_drifts(twins)["x"].df == 1


def spread_history(base: Path, copies: int) -> Path:
    """Three sessions of one commit, 3 % apart, each file saved ``copies`` more times under
    other names (a CI cache restored beside an artifact of the same jobs)."""
    folder = base / "history"
    for i, level in enumerate([100.0, 97.0, 103.0]):
        run_dir = run_of(base, f"s{i}", level)
        path = autosave(summary_dict(summarize_dir(run_dir), suite="s"), folder,
                        git=GitInfo(commit="a" * 40, date="2026-11-01T00:00:00+00:00"),
                        now=dt.datetime(2026, 11, 2, 0, 0, i, tzinfo=dt.timezone.utc))
        for k in range(copies):
            (path.parent / f"copy{k}-{path.name}").write_bytes(path.read_bytes())
    return folder


def test_copied_history_files_do_not_narrow_the_drift_or_change_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    verdicts, drifts = {}, {}
    for copies in (0, 4):
        base = tmp_path / f"c{copies}"
        saved = tmp_path / f"baseline{copies}.json"
        save_summary(summarize_dir(run_of(base, "then", 100.0)), saved)
        now = run_of(base, "now", 93.0)
        spread_history(base, copies)
        found = drifts_from_history(base / "history", now)
        assert found.left_out == ()
        drifts[copies] = found.drifts["x"]
        verdicts[copies] = main(["report", str(now), "--compare", str(saved)])
    assert drifts[4] == drifts[0] and drifts[0].df == 2
    assert drifts[0].source == "3 sessions of 1 commit in the history"
    assert verdicts[4] == verdicts[0] == gate.EXIT_INCONCLUSIVE


def test_copied_history_files_count_once_in_a_commits_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dlbench history``'s point of a commit is the median of its sessions: a file copied under
    a second name is the same session, not a second run of it."""
    from pytest_dlbench.results.history import bench_series, load_history

    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    points = {}
    for copies in (0, 2):
        folder = spread_history(tmp_path / f"c{copies}", copies)
        entries, problems = load_history(folder)
        assert problems == [] and len(entries) == 3 * (1 + copies)
        (series,) = bench_series(entries)
        points[copies] = series.points
    assert [(p.runs, p.rate) for p in points[2]] == [(p.runs, p.rate) for p in points[0]]
    assert points[0][0].runs == 3
