"""Readers of files someone else wrote (issue 24, items 4-9): a regular file of bounded size,
JSON of bounded depth (core/untrusted.py), read by every reader of a baseline, a manifest, a stream
line or a profile index; a bad one costs one line. Comparisons refuse a pair that cannot be
compared (rates beyond what the statistics take, other units) with a note; ``dlbench log``
uploads only regular files inside the run directory.

``READER_CASES`` (tests/_hostile_cases.py) are rows of docs/running.md's "Bad input" table.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from _hostile_cases import READER_CASES
from _runs import write_run

from pytest_dlbench import layout
from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.core import untrusted
from pytest_dlbench.loggers.source import profile_files
from pytest_dlbench.measure.stream import RecordScan, StreamError, read_last, read_stream
from pytest_dlbench.profile import NoteReport, load_reports, profile_sections, write_reports
from pytest_dlbench.profile.timereport import StepSample, build_time_report
from pytest_dlbench.profile.writer import ProfileWriteError, load_meta, read_index
from pytest_dlbench.results.figures import load_run
from pytest_dlbench.results.gate import EXIT_INCONCLUSIVE, USAGE_ERROR
from pytest_dlbench.results.gate import EXIT_REGRESSED as REGRESSED
from pytest_dlbench.results.judge import INCOMPARABLE, compare
from pytest_dlbench.results.model import BaselineError, load_summary

TOY = "pytest_dlbench.workloads.toy:main"
DEEP = "[" * 100_000 + "]" * 100_000
SUITE = f"a: {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 5}}}}}}"

BASELINE: dict[str, Any] = {
    "schema": "pytest-dlbench/summary", "version": 1, "score": 10.0, "incomplete": [],
    "failure_rate": 0.0,
    "benchmarks": {"a": {"perf_adj": 10.0, "weight": 1.0, "n": 1, "fail": 0, "perf": 10.0,
                         "rates": [10.0], "samples": [9.0, 10.0, 11.0, 10.0, 10.0],
                         "units": "items/s", "runs": []}},
}
HUGE = {"perf": 1e308, "perf_adj": 1e308, "rates": [1e308],
        "samples": [1e308, 1.5e308, 1e308, 1.2e308, 1e308]}

MESSAGES = {case[0]: case[2] for case in READER_CASES}


def _baseline(path: Path, **change: Any) -> Path:
    data = json.loads(json.dumps(BASELINE))
    data["benchmarks"]["a"].update(change)
    path.write_text(json.dumps(data))
    return path


def _run_dir(tmp_path: Path, **kwargs: Any) -> Path:
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True, exist_ok=True)
    write_run(run_dir, "a", **kwargs)
    return run_dir


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


# -- core/untrusted.py --------------------------------------------------------------------------


def test_read_bytes_takes_regular_files_only_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: list[BaseException] = []

    def read() -> None:
        try:
            untrusted.read_bytes(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert [str(e) for e in done] == ["not a regular file (a FIFO)"]
    for special, kind in (("/dev/zero", "a character device"), (tmp_path, "a directory")):
        with pytest.raises(untrusted.FileRefused, match=rf"^not a regular file \({kind}\)$"):
            untrusted.read_bytes(special)
    with pytest.raises(FileNotFoundError):
        untrusted.read_bytes(tmp_path / "missing")
    small = tmp_path / "small"
    small.write_bytes(b"x" * 11)
    assert untrusted.read_bytes(small, limit=11) == b"x" * 11
    with pytest.raises(untrusted.FileRefused, match=r"^larger than 10 bytes \(11 bytes\)$"):
        untrusted.read_bytes(small, limit=10)
    link = tmp_path / "link"
    link.symlink_to(small)  # a link to a regular file is read: a baseline may be one
    assert untrusted.read_bytes(link) == b"x" * 11


def test_a_file_that_says_it_is_empty_is_still_bounded(tmp_path: Path) -> None:
    # /proc files report a size of 0 and hold more: the limit is on what is read.
    assert Path("/proc/self/status").stat().st_size == 0
    with pytest.raises(untrusted.FileRefused, match="^larger than 16 bytes$"):
        untrusted.read_bytes("/proc/self/status", limit=16)


def test_depth_is_bounded_before_parsing() -> None:
    assert untrusted.loads("[" * 128 + "]" * 128) == untrusted.loads("[" * 128 + "]" * 128)
    with pytest.raises(untrusted.FileRefused, match="^nested deeper than 128 levels$"):
        untrusted.loads("[" * 129 + "]" * 129)
    with pytest.raises(untrusted.FileRefused):
        untrusted.loads(DEEP)
    with pytest.raises(untrusted.FileRefused):
        untrusted.loads(DEEP.encode())
    # Brackets inside strings, escaped quotes included, are text, not nesting.
    text = json.dumps({"a": "[" * 1000, "b": ['\\"[[[' * 300, {"c": "{" * 500}]})
    assert not untrusted.too_deep(text)
    assert untrusted.loads(text)["a"] == "[" * 1000
    assert untrusted.too_deep('{"a": "x\\"", "b": ' + "[" * 200 + "]" * 200 + "}")


def test_long_lines_are_skipped_without_being_kept(tmp_path: Path) -> None:
    path = tmp_path / "lines"
    path.write_bytes(b"one\n" + b"x" * 100 + b"\r\nthree\n" + b"y" * 10 + b"\n" + b"last")
    assert list(untrusted.lines(path, limit=10)) == [
        (1, b"one"), (2, None), (3, b"three"), (4, b"y" * 10), (5, b"last")]


# -- baselines: item 5 (depth), item 7 (regular files of bounded size) ----------------------------


def _bad_baseline(tmp_path: Path, what: str) -> str:
    """The path of the baseline of one READER_CASES input."""
    path = tmp_path / "base.json"
    if what == "a baseline nested 100,000 levels deep":
        data = json.dumps(BASELINE)
        path.write_text(data[:-1] + ', "extra": ' + DEEP + "}")
    elif what == "a baseline larger than 64 MiB":
        _baseline(path)
        os.truncate(path, untrusted.MAX_JSON_BYTES + 1)  # sparse: nothing is written
    elif what == "`--bench-compare=/dev/zero`":
        return "/dev/zero"
    else:
        os.mkfifo(path)
    return str(path)


BAD_BASELINES = [case[0] for case in READER_CASES[:4]]


@pytest.mark.parametrize("what", BAD_BASELINES)
def test_a_baseline_that_cannot_be_read_is_one_line(tmp_path: Path, what: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _bad_baseline(tmp_path, what)
    message = MESSAGES[what].replace("FILE", path)
    with pytest.raises(BaselineError) as info:
        load_summary(path)
    assert str(info.value) == message
    run_dir = _run_dir(tmp_path)
    good = str(_baseline(tmp_path / "ok.json"))
    for argv in (["report", str(run_dir), "--compare", path], ["compare", path, good],
                 ["compare", good, path]):
        assert dlbench(argv) == USAGE_ERROR
        assert _err(capsys) == f"dlbench: error: {message}\n"


@pytest.mark.parametrize("what", [BAD_BASELINES[0], BAD_BASELINES[2]])
def test_a_baseline_that_cannot_be_read_stops_pytest(pytester: pytest.Pytester,
                                                     what: str) -> None:
    pytester.makefile(".yaml", s=f"a: {{definition: {TOY}}}")
    path = _bad_baseline(pytester.path, what)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                f"--bench-compare={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [
        f"ERROR: {MESSAGES[what].replace('FILE', path)}"]
    assert not (pytester.path / "out").exists()


# -- manifests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("what", [case[0] for case in READER_CASES[4:6]])
def test_a_manifest_that_cannot_be_read_is_one_line(tmp_path: Path, what: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run_dir(tmp_path)
    manifest = run_dir / "manifest.json"
    if "FIFO" in what:
        os.mkfifo(manifest)  # it used to hang `dlbench report` forever
    else:
        manifest.write_text('{"version": 1, "benchmarks": ' + DEEP + "}")
    assert dlbench(["report", str(run_dir)]) == USAGE_ERROR
    assert _err(capsys) == f"dlbench: error: {MESSAGES[what].replace('FILE', str(manifest))}\n"


def test_specs_and_against_files_are_bounded_too(tmp_path: Path) -> None:
    (tmp_path / "against.json").write_text(DEEP)
    with pytest.raises(layout.DlbenchError, match="unreadable: nested deeper than 128 levels$"):
        layout.read_against(tmp_path)
    spec = tmp_path / "spec.json"
    os.mkfifo(spec)
    with pytest.raises(layout.DlbenchError,
                       match=r"unreadable benchmark spec: not a regular file \(a FIFO\)$"):
        layout.read_spec(spec)


# -- stream lines -------------------------------------------------------------------------------


@pytest.mark.parametrize("what", [case[0] for case in READER_CASES[6:8]])
def test_a_bad_stream_line_is_a_skipped_record(tmp_path: Path, what: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run_dir(tmp_path)
    path = run_dir / "a.D0.data"
    lines = path.read_bytes().split(b"\n")
    lines[6] = DEEP.encode() if "nested" in what else b'{"x": "' + b"z" * (1 << 20) + b'"}'
    path.write_bytes(b"\n".join(lines))
    note = MESSAGES[what].replace("FILE", str(path))
    scan = RecordScan(path)
    records = list(scan)
    assert scan.notes == [note] and scan.damaged == note
    assert len(records) == 14  # every other record kept
    run = load_run(path)
    assert not run.ok and run.reason == f"corrupt stream: {note}"
    with pytest.raises(StreamError, match="nested deeper|longer than"):
        read_stream(path)
    assert dlbench(["report", str(run_dir), "-v"]) == 1
    out, err = capsys.readouterr()
    assert note in out and "Traceback" not in out + err
    # As the last line (a writer killed mid-record could not write it) it is dropped.
    path.write_bytes(b"\n".join([*lines[:6], lines[6]]))
    scan = RecordScan(path)
    list(scan)
    assert scan.notes == []


def test_a_stream_that_is_no_regular_file_is_an_unreadable_run(tmp_path: Path) -> None:
    path = tmp_path / "a.D0.data"
    os.mkfifo(path)
    run = load_run(path)
    assert not run.ok and run.reason == "unreadable stream: not a regular file (a FIFO)"


# -- item 6: finite huge rates; item 9: other units ---------------------------------------------


def test_a_baseline_of_huge_rates_is_incomparable(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    huge = _baseline(tmp_path / "huge.json", **HUGE)
    ok = _baseline(tmp_path / "ok.json")
    comparison = compare(load_summary(ok), load_summary(huge))
    (row,) = comparison.benchmarks
    assert (row.verdict, row.ratio, row.p_value) == (INCOMPARABLE, None, None)
    assert comparison.warnings == (MESSAGES["a baseline with rates of `1e308`"],)
    assert comparison.score_verdict == INCOMPARABLE and not comparison.regressed
    # The same figures on this run's side, and the tests themselves, never overflow either.
    assert "this run has a rate of 1e+308" in compare(load_summary(huge),
                                                      load_summary(ok)).benchmarks[0].note
    # Its one benchmark not compared: the gate compared nothing, which is no pass (exit 9).
    assert dlbench(["compare", str(huge), str(ok)]) == EXIT_INCONCLUSIVE
    out, err = capsys.readouterr()
    assert f"warning: {MESSAGES['a baseline with rates of `1e308`']}" in out, out + err
    run_dir = _run_dir(tmp_path)
    assert dlbench(["report", str(run_dir), "--compare", str(huge)]) == EXIT_INCONCLUSIVE
    out, err = capsys.readouterr()
    assert "incomparable" in out and "Traceback" not in out + err


def test_a_baseline_in_other_units_is_incomparable(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # 30 % slower in items/s: compared in the same units, it regresses (one run a side: beyond
    # what the default noise between runs explains, results/judge/noise.py).
    slower = [(7.0 + 0.01 * (i % 3), 1.0) for i in range(10)]
    run_dir = _run_dir(tmp_path, steady=slower)
    same = _baseline(tmp_path / "same.json", samples=[10.0, 10.1, 9.9, 10.0, 10.05])
    assert dlbench(["report", str(run_dir), "--compare", str(same)]) == REGRESSED
    capsys.readouterr()
    flops = _baseline(tmp_path / "flops.json", units="TFLOP/s",
                      samples=[10.0, 10.1, 9.9, 10.0, 10.05])
    assert dlbench(["report", str(run_dir), "--compare", str(flops)]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    message = MESSAGES["a baseline in TFLOP/s for a benchmark in items/s"]
    assert f"warning: {message}" in out
    assert compare(load_summary(flops), load_summary(flops)).warnings == ()


def test_pytest_bench_compare_with_huge_rates_keeps_table_and_html(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", s=SUITE)
    huge = _baseline(pytester.path / "huge.json", **HUGE)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                f"--bench-compare={huge}", "--bench-html=r.html")
    assert result.ret == EXIT_INCONCLUSIVE, result.stdout.str()[-3000:]  # nothing compared
    message = MESSAGES["a baseline with rates of `1e308`"]
    result.stdout.fnmatch_lines(["*score:*", f"*warning: {message}*"])
    assert "OverflowError" not in result.stdout.str() + result.stderr.str()
    assert "not compared: the baseline has a rate of 1e+308" in (
        pytester.path / "r.html").read_text()


# -- item 4: profile index.json -----------------------------------------------------------------


def _profiled_run(tmp_path: Path) -> tuple[Path, Path]:
    run_dir = _run_dir(tmp_path)
    folder = layout.profile_dir(run_dir / "a.D0.data")
    reports = {"time": build_time_report([StepSample(i, 1.0) for i in range(3)], []),
               "summary": NoteReport("summary", "summary: a never called bench.watch")}
    write_reports(reports, folder, meta={"bench": "a", "rank": 0})
    return run_dir, folder


def _spoil_index(index: Path, what: str) -> None:
    if what.startswith("an empty"):
        index.write_text("")
    elif what.endswith("a list"):
        index.write_text("[]")
    else:
        index.write_text(json.dumps({"bench": "a", "reports": {"time": {"report": 3}}}))


PROFILE_CASES = [case[0] for case in READER_CASES[10:]]


@pytest.mark.parametrize("what", PROFILE_CASES)
def test_a_bad_profile_index_is_one_note(tmp_path: Path, what: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, folder = _profiled_run(tmp_path)
    index = folder / "index.json"
    _spoil_index(index, what)
    note = MESSAGES[what].replace("FILE", str(index))
    assert read_index(folder).note == note
    assert load_reports(folder) == {"index": NoteReport("index", note)}
    assert load_meta(folder) == {}
    assert profile_sections(run_dir) == [("profile of a.D0", note)]
    assert dlbench(["profile", str(run_dir)]) == 0
    assert capsys.readouterr().out == f"== profile of a.D0\n{note}\n"
    html = tmp_path / "r.html"
    assert dlbench(["report", str(run_dir), "--html", str(html)]) == 0
    out, err = capsys.readouterr()
    assert "score:" in out and "Traceback" not in out + err
    assert html.is_file()


def test_more_bad_profile_indexes(tmp_path: Path) -> None:
    run_dir, folder = _profiled_run(tmp_path)
    index = folder / "index.json"
    good = json.loads(index.read_text())
    # One report of the wrong shape costs its own section; the others stand.
    good["reports"]["time"]["steps"] = "many"
    index.write_text(json.dumps(good))
    reports = load_reports(folder)
    assert list(reports) == ["time", "summary"]
    assert isinstance(reports["time"], NoteReport)
    assert reports["time"].note.startswith(f"{index}: report 'time' left out: ")
    assert reports["summary"].note == "summary: a never called bench.watch"
    # Settings of the wrong type: the reports are shown concise.
    good = json.loads(json.dumps(good))
    good["reports"]["time"]["steps"] = 3
    good["profile"] = {"time": {"verbose": "loud"}}
    index.write_text(json.dumps(good))
    (title, text), = profile_sections(run_dir)
    assert "time" in text
    for content in (DEEP, '{"reports": ' + "[" * 200 + "]" * 200 + "}"):
        index.write_text(content)
        assert read_index(folder).note == (f"{index}: unreadable profile index: nested deeper "
                                           "than 128 levels")
    index.unlink()
    os.mkfifo(index)
    assert read_index(folder).note == (f"{index}: unreadable profile index: not a regular "
                                       "file (a FIFO)")
    assert profile_sections(run_dir)[0][1] == read_index(folder).note


def test_a_full_disk_leaves_the_old_index_and_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, folder = _profiled_run(tmp_path)
    before = (folder / "index.json").read_text()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ProfileWriteError) as info:
        write_reports({"summary": NoteReport("summary", "x")}, folder, meta={"bench": "a"})
    assert str(info.value) == f"cannot write {folder / 'summary.json'}: No space left on device"
    assert isinstance(info.value, OSError)
    assert (folder / "index.json").read_text() == before
    assert sorted(p.name for p in folder.iterdir()) == [
        "index.json", "summary.csv", "summary.json", "time.csv", "time.json"]


def test_a_snapshot_that_a_full_disk_stops_says_where(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from pytest_dlbench.profile import ProfileConfig, build_reports
    from pytest_dlbench.profile.capture import Capture

    config = ProfileConfig.from_mapping({"snapshot": True})
    capture = Capture(config, device="cpu")
    capture.cuda, capture.started, capture.snapshot = True, True, {"segments": []}

    def full(obj: Any, handle: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pickle, "dump", full)
    records = [{"event": "profile", "status": "start", "step": 3}]
    reports = build_reports(config, records, bench="a", capture=capture, out_dir=tmp_path)
    assert reports["snapshot"] == NoteReport(
        "snapshot", f"snapshot: could not be written in {tmp_path}: No space left on device")


CORRUPT_AFTER_EACH_ITEM = """
import pathlib

def pytest_runtest_logfinish(nodeid, location):
    for index in pathlib.Path("out").glob("runs/*/*.profile/index.json"):
        index.write_text("")
"""


def test_a_bad_profile_index_at_the_end_of_a_live_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE)
    pytester.makeconftest(CORRUPT_AFTER_EACH_ITEM)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                "--bench-profile=time", "--bench-html=r.html")
    assert result.ret == 0, result.stdout.str()[-3000:]
    (index,) = (pytester.path / "out").glob("runs/*/a.D0.profile/index.json")
    note = f"{index}: unreadable profile index: Expecting value: line 1 column 1 (char 0)"
    result.stdout.fnmatch_lines(["*score:*", "*profile of a.D0*", note])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "unreadable profile index" in (pytester.path / "r.html").read_text()


# -- item 8: dlbench log uploads regular files inside the run directory only ----------------------


def test_log_uploads_no_symlink_targets(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.json").write_text('{"token": "s3cr3t"}')
    run_dir, folder = _profiled_run(tmp_path)
    (folder / "stolen.json").symlink_to(secret / "key.json")
    (folder / "sub").symlink_to(secret, target_is_directory=True)
    (folder / "rank1").mkdir()
    (folder / "rank1" / "time.json").write_text("{}")
    os.mkfifo(folder / "pipe.json")
    files = profile_files(run_dir / "a.D0.data")
    assert sorted(name for name, _ in files) == [
        "index.json", "rank1/time.json", "summary.csv", "summary.json", "time.csv", "time.json"]
    assert all(secret not in p.resolve().parents for _, p in files)
    # A profile folder that is itself a link out of the run directory: nothing from it.
    moved = tmp_path / "elsewhere.profile"
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)
    assert profile_files(run_dir / "a.D0.data") == []


def test_profile_tables_for_the_loggers_are_read_bounded(tmp_path: Path) -> None:
    from pytest_dlbench.loggers.tables import read_table

    (tmp_path / "deep.json").write_text(DEEP)
    assert read_table(tmp_path / "deep.json") is None  # not a RecursionError in dlbench log
    os.mkfifo(tmp_path / "pipe.csv")
    assert read_table(tmp_path / "pipe.csv") is None  # not a hang
    (tmp_path / "ok.csv").write_text("a,b\n1,x\n")
    assert read_table(tmp_path / "ok.csv").rows == ((1, "x"),)


def test_the_live_progress_skips_a_line_nested_too_deep(tmp_path: Path) -> None:
    from pytest_dlbench.plugin.progress import LiveRun

    stream = tmp_path / "toy.D0.data"
    rate = {"event": "rate", "value": 16.0, "items": 8, "seconds": 0.5}
    stream.write_text(json.dumps(rate) + "\n" + DEEP + "\n" + json.dumps(rate) + "\n")
    run = LiveRun(stream, "toy[D0]", seen_at=0.0)
    run.read()  # was a RecursionError out of the progress line
    assert run.observations == 2


# -- item 14: one verdict -----------------------------------------------------------------------


CORRUPTING = """
def corrupting(bench):
    for i, _ in enumerate(bench.iterate(range(10_000), batch_size=1)):
        if i == 2:
            with open(bench.stream.path, "a") as f:
                f.write("{not json\\n")
        sum(range(100))
"""


def test_a_stream_corrupted_by_its_benchmark_fails_item_and_table(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(defs=CORRUPTING)
    pytester.makefile(".yaml", s="c: {definition: defs.py:corrupting, "
                                 "voir: {options: {skip: 1, stop: 5}}}")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out", "-rf")
    out = result.stdout.str()
    (stream,) = (pytester.path / "out").glob("runs/*/c.D0.data")
    reason = f"corrupt stream: {stream}:"
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    result.assert_outcomes(failed=1)
    assert "FAILED s.yaml::c[D0] - corrupt stream: " in out
    assert f"failed c[D0]: fail: {reason}" in out  # the table: the same verdict, same reason
    assert load_run(stream).reason.startswith(reason)


# -- item 14: a summary streamed, a few tens of bytes per observation ------------------------------


def _big_stream(path: Path, n: int) -> Path:
    with open(path, "w") as out:
        out.write(json.dumps({"event": "config", "spec": {"name": "m", "weight": 1.0},
                              "device": 0, "repeat": None}) + "\n")
        t = 1000.0
        for i in range(n):
            t += 0.002
            out.write(json.dumps({
                "event": "rate", "value": 32_000.0 * (1 + (i % 7) * 1e-3), "units": "items/s",
                "step": i, "warmup": i < 10, "time": t, "items": 64.0, "seconds": 0.002,
            }) + "\n")
        out.write(json.dumps({"event": "end", "status": "ok", "reason": "", "time": t}) + "\n")
    return path


@pytest.mark.slow  # tracemalloc over 60,000 records: seconds on a busy machine
def test_a_summary_takes_a_few_tens_of_bytes_per_observation(tmp_path: Path) -> None:
    """The cost of one more observation: the slope between two stream lengths, so that a fixed
    cost (a cache or an import some other test left to this one, in an xdist worker) is not
    counted as the observations'."""
    import tracemalloc

    load_run(_big_stream(tmp_path / "warm.D0.data", 50))  # imports and caches first

    def measure(n: int) -> tuple[int, int, Any, Any]:
        path = _big_stream(tmp_path / f"m{n}.D0.data", n)
        tracemalloc.start()
        try:
            run = load_run(path)
            kept, peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            end = read_last(path, "end")  # how the parent finds a child's end record
            end_peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert end is not None and end["status"] == "ok"
        assert end_peak < 1 << 20, end_peak  # one line at a time, whatever the stream's length
        assert run.ok and len(run.steady) == n - 10 and len(run.warmup) == 10
        return kept, peak, run, end

    small, large = 20_000, 40_000
    kept_small, peak_small, *_ = measure(small)
    kept_large, peak_large, *_ = measure(large)
    # A list of dicts took 1,294 bytes an observation at its peak; the columns take ~64 (44
    # for the rates' columns, 16 for the steady points the plots use), ~17 once scored.
    per_peak = (peak_large - peak_small) / (large - small)
    per_kept = (kept_large - kept_small) / (large - small)
    assert per_peak < 100, per_peak
    assert per_kept < 24, per_kept


def test_a_writer_opens_a_stream_whose_last_line_is_nested_too_deep(tmp_path: Path) -> None:
    from pytest_dlbench.measure.stream import StreamWriter

    path = tmp_path / "s.data"
    path.write_text('{"event": "config"}\n' + "[" * 30_000 + "]" * 30_000 + "\n")
    with StreamWriter(path) as writer:  # the parent appending an end after its child
        assert not writer.ended
        writer.write("end", status="fail")
    assert read_last(path, "end") == {"event": "end", "status": "fail"}


def test_read_last_finds_the_last_valid_record(tmp_path: Path) -> None:
    path = tmp_path / "s.data"
    path.write_text('{"event": "end", "status": "fail"}\n{not json\n'
                    '{"event": "end", "status": "ok"}\n{"event": "end", "sta')
    assert read_last(path, "end") == {"event": "end", "status": "ok"}
    assert read_last(path, "config") is None


def test_rates_read_back_what_was_written() -> None:
    from pytest_dlbench.measure.rates import Rates
    from pytest_dlbench.results.model import Points

    records: list[dict[str, Any]] = [
        {"event": "rate", "value": 2.0, "units": "u", "step": 0, "warmup": True, "time": 1.0,
         "items": 4.0, "seconds": 2.0},
        {"event": "rate", "value": 3, "units": "v", "step": 1, "time": 2.5},  # an int, no items
        {"event": "rate", "value": 1.5, "extra": [1, 2]},  # a key the columns do not take
        {"event": "rate", "value": 2**60, "warmup": False},  # an int no double holds
        {"event": "rate", "value": float("inf"), "units": "u", "step": 3, "warmup": False,
         "time": 3.0, "items": 1.0, "seconds": 0.5},
        {"value": 1.0, "units": "u", "step": 4, "warmup": False, "time": 4.0, "items": 1.0,
         "seconds": 1.0, "extra": 1},  # no event, one key more: kept whole, as it was
    ]
    rates = Rates(records)
    assert list(rates) == records and rates == records and len(rates) == 6
    assert type(rates[1]["value"]) is int and rates[2] is records[2]
    assert rates[1:3] == records[1:3]
    assert rates.select(warmup=True) == records[:1]
    assert rates.select(warmup=False) == records[1:]
    assert rates.select(warmup=False)[::2] == records[1::2]
    assert list(rates.numbers("items")) == [4.0, None, None, None, 1.0, 1.0]
    assert list(rates.select(warmup=False).numbers("time", 0.0)) == [2.5, 0.0, 0.0, 3.0, 4.0]
    with pytest.raises(TypeError):
        rates.select(warmup=True).append(records[0])
    points = Points([(1.0, 2.0), (3.0, 4.0)])
    assert points == ((1.0, 2.0), (3.0, 4.0)) and points[1] == (3.0, 4.0)
    assert points[1:] == [(3.0, 4.0)] and list(points.values()) == [2.0, 4.0]
