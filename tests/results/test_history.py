"""The results history (results/history/records.py): --bench-autosave's files, reading them back,
the series and steps per benchmark, -k and --since, and `dlbench history`."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _git import git
from _history_files import MACHINE, commit, history_of, run_summary, saved
from _hostile_cases import HISTORY_CASES

from pytest_dlbench.cli import main
from pytest_dlbench.results.history import (
    GitInfo,
    HistoryError,
    autosave,
    bench_series,
    default_history,
    git_info,
    keyword_matcher,
    load_history,
    machine_id,
    report_series,
    since,
)


def test_autosave_writes_the_saved_summary_under_machine_and_commit(tmp_path: Path) -> None:
    summary = run_summary(tmp_path, "r0", {"b": 100.0})
    now = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)
    git = GitInfo(commit="c" * 40, date="2026-03-01T00:00:00+01:00", branch="dev", dirty=True)
    path = autosave(saved(summary), tmp_path / "h", git=git, now=now)
    assert path == tmp_path / "h" / machine_id(MACHINE) / f"20260304T050607Z_{'c' * 12}-dirty.json"
    data = json.loads(path.read_text())
    assert data["history"] == {"commit": "c" * 40, "commit_date": "2026-03-01T00:00:00+01:00",
                               "branch": "dev", "dirty": True, "machine_id": machine_id(MACHINE),
                               "saved": "2026-03-04T05:06:07+00:00"}
    assert data["benchmarks"]["b"]["perf"] == pytest.approx(100.0)  # --bench-save's summary
    # Two runs in the same second are both kept; nothing temporary is left behind.
    again = autosave(saved(summary), tmp_path / "h", git=git, now=now)
    assert again != path and again.name.endswith("-dirty-2.json")
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, again.name])


def _autosave_together(folder: Path, data: dict[str, Any], barrier: Any, rounds: int) -> None:
    """One writer of test_concurrent_autosaves_of_one_commit_and_second_are_all_kept."""
    for k in range(rounds):
        barrier.wait()  # the writers of a round start together, with the same commit and time
        autosave(data, folder, git=commit(0),
                 now=dt.datetime(2026, 2, 1, 0, 0, k, tzinfo=dt.timezone.utc))


def test_concurrent_autosaves_of_one_commit_and_second_are_all_kept(tmp_path: Path) -> None:
    """Four processes save the same commit in the same second, five times over: twenty files
    (a check that the name was free then a rename onto it kept about one a round)."""
    import multiprocessing

    data = saved(run_summary(tmp_path, "r0", {"b": 100.0}))
    folder, writers, rounds = tmp_path / "h", 4, 5
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(writers)
    procs = [context.Process(target=_autosave_together, args=(folder, data, barrier, rounds))
             for _ in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * writers
    (machine_dir,) = folder.iterdir()
    files = sorted(p.name for p in machine_dir.iterdir())
    stems = [f"20260201T00000{k}Z_{commit(0).short}" for k in range(rounds)]
    assert files == sorted(f"{stem}{tail}.json" for stem in stems
                           for tail in ("", "-2", "-3", "-4"))  # nothing temporary left
    entries, problems = load_history(folder)
    assert len(entries) == writers * rounds and problems == []


def test_autosave_without_hard_links_still_keeps_both(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without hard links: the name is created exclusively, then written."""
    import errno

    def no_link(src: str, dst: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    data = saved(run_summary(tmp_path, "r0", {"b": 100.0}))
    now = dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc)
    first, second = (autosave(data, tmp_path / "h", git=commit(0), now=now) for _ in range(2))
    assert second.name == first.name.replace(".json", "-2.json")
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, second.name])
    assert json.loads(second.read_text())["history"]["commit"] == commit(0).commit
    # A rename that fails (a full disk) leaves neither its empty name nor its temporary.
    monkeypatch.setattr(os, "replace", no_link)
    with pytest.raises(OSError):
        autosave(data, tmp_path / "h", git=commit(0), now=now)
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, second.name])


def test_machine_id_from_the_recorded_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DLBENCH_MACHINE", raising=False)
    assert machine_id(MACHINE) == machine_id(dict(MACHINE, state={"load": [3.0]}))
    assert machine_id(MACHINE).startswith("box-")
    assert machine_id(dict(MACHINE, cpu="EPYC")) != machine_id(MACHINE)
    assert machine_id(dict(MACHINE, gpus=[])) != machine_id(MACHINE)
    assert machine_id({"hostname": "a/../b c"}).startswith("a-..-b-c-")  # one folder name
    monkeypatch.setenv("DLBENCH_MACHINE", "ci runner/1")
    assert machine_id(MACHINE) == "ci-runner-1"


def test_history_read_back_in_commit_order_with_a_corrupt_file_left_out(tmp_path: Path) -> None:
    folder = history_of(tmp_path, [100.0, 101.0, 99.0])
    machine_dir = next(folder.iterdir())
    (machine_dir / "junk.json").write_text("{not json")
    # Saved out of order: read back by commit date.
    first = sorted(machine_dir.glob("2026*"))[0]
    first.rename(machine_dir / "29990101T000000Z_late.json")
    entries, problems = load_history(folder)
    assert [e.commit[:2] for e in entries] == ["00", "01", "02"]
    assert entries[0].branch == "main" and entries[0].machine == machine_dir.name
    assert len(problems) == 1 and "junk.json" in problems[0] and "not valid JSON" in problems[0]
    assert load_history(folder, machine="elsewhere") == ([], [])
    with pytest.raises(HistoryError, match="no such folder"):
        load_history(tmp_path / "none")


def test_series_and_step_with_its_commit_range(tmp_path: Path) -> None:
    rates = [100, 101, 99, 100.5, 99.5, 85, 86, 84.5, 85.5, 85]
    folder = history_of(tmp_path, [float(r) for r in rates])
    entries, _ = load_history(folder)
    (series,) = bench_series(entries, select=keyword_matcher("b and not other"))
    assert [p.rate for p in series.points] == pytest.approx(rates)
    (step,) = series.steps
    assert step.index == 5 and step.ratio == pytest.approx(0.85, rel=0.02)
    assert series.step_range(step) == f"{commit(4).commit[:10]}..{commit(5).commit[:10]}"
    flat = bench_series(entries, select=keyword_matcher("other"))
    assert [s.bench for s in flat] == ["other"] and flat[0].steps == ()


def test_runs_of_one_commit_are_one_point(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    for k, rate in enumerate([100.0, 110.0, 90.0]):
        autosave(saved(run_summary(tmp_path, f"r{k}", {"b": rate})), folder, git=commit(0),
                 now=dt.datetime(2026, 2, 1, 0, 0, k, tzinfo=dt.timezone.utc))
    (series,) = bench_series(load_history(folder)[0])
    (point,) = series.points
    assert point.runs == 3 and point.rate == pytest.approx(100.0, rel=1e-6)


@pytest.mark.parametrize(("expr", "name", "match"), [
    ("toy", "toy", True), ("TOY", "mytoy2", True), ("not toy", "toy", False),
    ("a or b", "xb", True), ("a and b", "ab", True), ("a and b", "a", False),
    ("(a or b) and not c", "bd", True), ("(a or b) and not c", "bc", False),
    ("", "anything", True),
])
def test_keyword_expressions(expr: str, name: str, match: bool) -> None:
    assert keyword_matcher(expr)(name) is match


@pytest.mark.parametrize("expr", ["a and", "(a", "a )", "or a", "a b"])
def test_bad_keyword_expressions(expr: str) -> None:
    with pytest.raises(HistoryError, match="-k"):
        keyword_matcher(expr)


def test_git_info_and_since(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    shas = []
    for i in range(3):
        (repo / "f").write_text(str(i))
        git(repo, "add", "f")
        git(repo, "commit", "-qm", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    info = git_info(repo)
    assert info.commit == shas[-1] and info.branch == "trunk" and not info.dirty
    assert info.date and dt.datetime.fromisoformat(info.date)
    (repo / "f").write_text("changed")
    assert git_info(repo).dirty
    assert git_info(tmp_path).commit is None  # not a repository: nothing, no error
    entries = [SimpleNamespace(commit=s) for s in shas]
    assert since(entries, shas[1], cwd=repo) == entries[1:]  # type: ignore[arg-type]
    with pytest.raises(HistoryError, match="no such revision"):
        since(entries, "nope", cwd=repo)  # type: ignore[arg-type]


def test_default_history_is_beside_the_runs(tmp_path: Path) -> None:
    assert default_history(tmp_path / "base" / "runs" / "s.1") == (tmp_path / "base" /
                                                                   "history").resolve()


def test_dlbench_history_text_json_and_bad_input(tmp_path: Path, capsys: Any) -> None:
    folder = history_of(tmp_path, [100, 101, 99, 100.5, 99.5, 85, 86, 84.5, 85.5, 85])
    assert main(["history", "--history", str(folder), "-k", "b"]) == 0
    out = capsys.readouterr().out
    assert "b  [" in out and "other" not in out
    assert f"step at {commit(4).commit[:10]}..{commit(5).commit[:10]}: x0.85" in out
    assert "slower" in out and "confidence" in out
    assert main(["history", "--history", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_bench = {s["bench"]: s for s in data["series"]}
    assert by_bench["other"]["steps"] == [] and len(by_bench["b"]["points"]) == 10
    assert by_bench["b"]["steps"][0]["to"] == commit(5).commit
    assert main(["history", "--history", str(tmp_path / "none")]) == 4
    assert "no such folder" in capsys.readouterr().err
    assert main(["history", "--history", str(folder), "-k", "(b"]) == 4
    assert main(["history", "--history", str(folder), "--tolerance", "lots"]) == 4


def test_dlbench_report_autosave_and_the_html_series(tmp_path: Path, capsys: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    summary = run_summary(tmp_path, "s.1", {"b": 100.0})
    assert main(["report", str(summary.run_dir), "--autosave"]) == 0
    (path,) = (tmp_path / "base" / "history" / "here").glob("*.json")
    assert json.loads(path.read_text())["history"]["machine_id"] == "here"
    folder, series = report_series(summary)
    assert folder == tmp_path / "base" / "history"
    assert [(s.bench, len(s.points), s.current) for s in series] == [("b", 1, 0)]
    # A folder given: the history goes there.
    assert main(["report", str(summary.run_dir), "--autosave", str(tmp_path / "ci")]) == 0
    assert len(list((tmp_path / "ci" / "here").glob("*.json"))) == 1


def test_ini_setting(tmp_path: Path) -> None:
    from pytest_dlbench.plugin import _autosave_from_ini

    def config(option: str | None, ini: str) -> Any:
        return SimpleNamespace(option=SimpleNamespace(bench_autosave=option),
                               getoption=lambda name, o=option: o, getini=lambda name: ini,
                               inipath=tmp_path / "pytest.ini")

    for ini, expected in [("true", ""), ("yes", ""), ("false", None), ("", None),
                          ("hist", str(tmp_path / "hist")), ("/abs", "/abs")]:
        c = config(None, ini)
        _autosave_from_ini(c)
        assert c.option.bench_autosave == expected, ini
    c = config("given", "true")  # the command line wins
    _autosave_from_ini(c)
    assert c.option.bench_autosave == "given"


def test_html_report_shows_the_history_with_steps_and_this_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_dlbench.report.html import render_html

    monkeypatch.setenv("DLBENCH_MACHINE", "here")
    alone = run_summary(tmp_path, "s.0", {"b": 100.0})
    assert 'id="history"' not in render_html(alone)  # no history: no section
    folder = tmp_path / "base" / "history"
    rates = [100, 101, 99, 100.5, 99.5, 85, 86, 84.5, 85.5]
    for i, rate in enumerate(rates):
        autosave(saved(run_summary(tmp_path, f"s.{i + 1}", {"b": float(rate)})), folder,
                 git=commit(i), now=dt.datetime(2026, 2, 1, 0, 0, i, tzinfo=dt.timezone.utc))
    current = run_summary(tmp_path, "s.now", {"b": 85.2, "<i>": 10.0})
    autosave(saved(current), folder, git=commit(9),
             now=dt.datetime(2026, 2, 2, tzinfo=dt.timezone.utc))
    page = render_html(current)
    section = page[page.index('<section id="history">'):]
    section = section[:section.index("</section>")]
    assert section.count("<polyline") == 2  # b and <i>
    assert section.count('class="step"') == 1  # b's step, drawn once
    assert f"step at {commit(4).commit[:10]}..{commit(5).commit[:10]}: x0.85" in section
    assert section.count('stroke="#cc0000" stroke-width="2.5"') == 2  # this run, ringed
    assert "&lt;i&gt;" in section and "<i>" not in section  # names escaped


# The rows of docs/running.md's "Bad input" table these tests check (tests/_hostile_cases.py).
@pytest.mark.parametrize("case", HISTORY_CASES, ids=lambda c: c[0])
def test_history_bad_input(case: tuple[str, str, str], tmp_path: Path, capsys: Any) -> None:
    what, happens, message = case
    folder = history_of(tmp_path, [100.0, 101.0])
    bad = next(folder.iterdir()) / "bad.json"
    if "1e999" in what:  # issue 40 item 6: one figure of a file that is otherwise good
        bad = sorted(next(folder.iterdir()).glob("*.json"))[1]
        bad.write_text(bad.read_text().replace('"perf": 101.0,', '"perf": 1e999,'))
    else:
        bad.write_text("{not json")
    args = {HISTORY_CASES[0][0]: ["--history", str(tmp_path / "none")],
            HISTORY_CASES[1][0]: ["--history", str(folder), "-k", "(a"],
            HISTORY_CASES[2][0]: ["--history", str(folder)],
            HISTORY_CASES[3][0]: ["--history", str(folder)],
            HISTORY_CASES[4][0]: ["--history", str(folder), "-k",
                                  "(" * 10_000 + "a" + ")" * 10_000]}[what]
    status = main(["history", *args])
    out, err = capsys.readouterr()
    line = message.replace("DIR", str(tmp_path / "none")).replace("FILE", str(bad))
    if "exits 4" in happens:
        assert status == 4 and err == f"dlbench: error: {line}\n"
    else:
        assert status == 0 and f"warning: {line}\n" in out and "b  [" in out


def test_an_autosave_that_cannot_be_written_costs_that_file_only(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = run_summary(tmp_path, "s.1", {"b": 100.0})
    (tmp_path / "afile").write_text("")
    # A folder under a file is refused before anything is scored (issue 40 item 12)...
    status = main(["report", str(summary.run_dir), "--autosave", str(tmp_path / "afile" / "h"),
                   "--save", str(tmp_path / "saved.json")])
    out, err = capsys.readouterr()
    assert status == 4 and out == ""
    assert err == (f"dlbench: error: --autosave: {tmp_path}/afile/h: {tmp_path}/afile is not "
                   "a directory\n")
    # ... and a disk that fills during the run costs that file only.
    import errno
    import os

    def full(real: Any) -> Any:  # the entry's name is given by a link (or a rename)
        def call(src: Any, dst: Any) -> None:
            if Path(dst).parent.parent == tmp_path / "h":  # <history>/<machine>/<entry>.json
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real(src, dst)
        return call

    monkeypatch.setattr(os, "replace", full(os.replace))
    monkeypatch.setattr(os, "link", full(os.link))
    status = main(["report", str(summary.run_dir), "--autosave", str(tmp_path / "h"),
                   "--save", str(tmp_path / "saved.json")])
    out, err = capsys.readouterr()
    assert status == 8 and "score: 100" in out  # gate.OUTPUT_FAILED; the table is there
    assert err.startswith(f"dlbench: error: cannot write the history entry {tmp_path}/h:")
    assert (tmp_path / "saved.json").is_file()  # the other outputs are written


def test_names_from_the_files_are_shown_escaped(tmp_path: Path, capsys: Any) -> None:
    folder = history_of(tmp_path, [100.0, 101.0], bench="evil\x1b[2J")
    assert main(["history", "--history", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\x1b[2J" in out


def _repo_with_a_change(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    (repo / "f").write_text("0")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "c0")
    (repo / "f").write_text("changed")
    return repo


def test_a_status_git_could_not_give_is_not_clean(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """git status failed or ran past its timeout: the tree was read as clean, and a dirty
    tree's figures were filed as the commit's."""
    from pytest_dlbench.results.history import records as history

    repo = _repo_with_a_change(tmp_path)
    real = history._git

    def no_status(cwd: Any, *args: str, **kw: Any) -> str | None:
        return None if args[0] == "status" else real(cwd, *args, **kw)

    monkeypatch.setattr(history, "_git", no_status)
    info = git_info(repo)
    assert info.commit is not None and info.dirty


def test_the_repository_s_fsmonitor_is_not_run(tmp_path: Path) -> None:
    """A repository's fsmonitor hook (a daemon, or one that hangs) ran under git status; one
    that outlived the 10 s timeout held its pipes, and the status read nothing: clean."""
    import time

    repo = _repo_with_a_change(tmp_path)
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "fsmonitor"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 20\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(hook))
    start = time.monotonic()
    info = git_info(repo)
    assert info.dirty and not marker.exists()
    assert time.monotonic() - start < 8
