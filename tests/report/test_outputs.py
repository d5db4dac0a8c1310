"""The files a report is written to (--bench-save, --bench-html, --bench-export, and dlbench
report's --save/--html/--export), issue 24: checked before the run, written atomically through
unique temporaries, and a write that fails at the end costs one line after the table and score.
(The refusals at start-up are rows of docs/running.md's table: tests/core/test_hostile_input.py.)"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from _runs import write_run

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.core import output_files
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import evaluate
from pytest_dlbench.results.model import save_summary

SUITE = ("a: {definition: 'pytest_dlbench.workloads.toy:main', weight: 1,"
         " voir: {options: {stop: 10}}}")


def _summary(tmp_path: Path):
    return evaluate(write_run(tmp_path / "run", "a").parent).summary


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".probe"))]


# -- atomic writes ------------------------------------------------------------------------------


def test_a_symlink_at_the_old_temporary_name_cannot_redirect_the_write(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("keep me\n")
    out = tmp_path / "out.json"
    (tmp_path / "out.json.tmp").symlink_to(secret)
    save_summary(_summary(tmp_path), out)
    assert secret.read_text() == "keep me\n"
    assert not out.is_symlink() and json.loads(out.read_text())["benchmarks"]


def test_two_sessions_saving_to_one_path_never_share_a_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second save runs while the first is renaming its temporary into place: with one
    fixed ``<path>.tmp`` the first finds its temporary gone (FileNotFoundError)."""
    summary, out = _summary(tmp_path), tmp_path / "out.json"
    replace, inner = os.replace, []

    def racing_replace(src, dst):
        if not inner:
            inner.append(src)
            inner.append(save_summary(summary, out))  # the other session, just now
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", racing_replace)
    assert save_summary(summary, out) == out and inner[1:] == [out]
    assert json.loads(out.read_text())["benchmarks"]
    _no_temporaries(tmp_path)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.json"
    out.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        output_files.write_atomic(out, "new\n")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a file whatever its mode says")
def test_an_unwritable_existing_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("")
    out.chmod(0o444)
    with pytest.raises(DlbenchError, match=f"^--bench-save: {out} is not writable$"):
        output_files.check_outputs({"--bench-save": str(out)})


def test_a_missing_parent_is_made_at_the_check(tmp_path: Path) -> None:
    output_files.check_outputs({"--bench-html": str(tmp_path / "a" / "b" / "r.html"),
                          "--bench-save": None, "--bench-export": ""})
    assert (tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())


def test_the_same_file_through_a_symlinked_folder_is_one_file(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(DlbenchError, match="^--save and --export are the same file"):
        output_files.check_outputs({"--save": str(tmp_path / "real" / "o.json"),
                              "--export": str(tmp_path / "link" / "o.json")})


# -- at the end of a run: the table and the score first, then one line --------------------------


def _disk_full_for(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    replace = os.replace

    def full(src, dst):
        if Path(dst).name in names:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", full)


def test_pytest_a_full_disk_at_the_end_keeps_the_table_and_score(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makefile(".yaml", s=SUITE)
    (pytester.path / "r.html").write_text("the previous report")
    _disk_full_for(monkeypatch, "base.json", "r.html")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-isolation=inline",
                                "--bench-base=out", "--bench-save=base.json",
                                "--bench-html=r.html", "--bench-export=bench.json")
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines([
        "*= dlbench =*", "a *", "score: *", "*",
        "benchmark-action JSON: bench.json",
        "error: cannot write the summary base.json: No space left on device",
        "error: cannot write the HTML report r.html: No space left on device",
        "results: *",
    ])
    assert result.ret == gate.OUTPUT_FAILED
    assert (pytester.path / "r.html").read_text() == "the previous report"
    assert not (pytester.path / "base.json").exists()
    _no_temporaries(pytester.path)


def test_dlbench_report_a_full_disk_at_the_end_keeps_the_table_and_score(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "run", "a").parent
    out = tmp_path / "o"
    out.mkdir()
    _disk_full_for(monkeypatch, "base.json")
    status = dlbench(["report", str(run), "--save", str(out / "base.json"),
                      "--export", str(out / "bench.json")])
    captured = capsys.readouterr()
    assert "score: " in captured.out
    assert captured.err == (f"dlbench: error: cannot write the summary {out / 'base.json'}: "
                            "No space left on device\n")
    assert status == gate.OUTPUT_FAILED
    assert sorted(p.name for p in out.iterdir()) == ["bench.json"]


def test_a_failed_output_does_not_hide_a_failed_run() -> None:
    assert gate.output_status(gate.BENCH_FAILED, unwritten=True) == gate.BENCH_FAILED
    assert gate.output_status(gate.EXIT_REGRESSED, unwritten=True) == gate.EXIT_REGRESSED
    assert gate.output_status(gate.OK, unwritten=True) == gate.OUTPUT_FAILED
    assert gate.output_status(gate.OK, unwritten=False) == gate.OK


# -- dlbench report: the same start-up check -----------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (("--save", "DIR"), "--save: DIR is a directory"),
    (("--html", "FILE/r.html"), "--html: FILE/r.html: FILE is not a directory"),
    (("--save", "DIR/o.json", "--export", "DIR/o.json"),
     "--save and --export are the same file DIR/o.json: each output needs its own"),
])
def test_dlbench_report_refuses_a_bad_output_before_scoring(
        tmp_path: Path, capsys: pytest.CaptureFixture, args: tuple[str, ...],
        message: str) -> None:
    run = write_run(tmp_path / "run", "a").parent
    afile, adir = tmp_path / "afile", tmp_path / "adir"
    afile.write_text("")
    adir.mkdir()

    def fill(text: str) -> str:
        return text.replace("FILE", str(afile)).replace("DIR", str(adir))

    assert dlbench(["report", str(run), *map(fill, args)]) == gate.USAGE_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the table
    assert captured.err == f"dlbench: error: {fill(message)}\n"
    assert not list(adir.iterdir())
