"""Figures too large for the statistics (finite rates near 1e308, JSON integers of hundreds of
digits, absurd sizes handed to the Bench): each costs its own figure or run with one line, never
a traceback, an INTERNALERROR or the rest of the session's reports."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _hostile_cases import FIGURE_CASES, TOO_LARGE
from _runs import write_manifest, write_run

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.core.protocol import Status
from pytest_dlbench.results.figures import load_run, summarize_dir

#: A JSON integer no float holds (float() raises OverflowError on it).
HUGE = "9" * 401


def test_an_integer_too_large_for_a_float_reads_as_infinity() -> None:
    from pytest_dlbench.core import untrusted

    assert untrusted.loads(f'{{"a": {HUGE}, "b": -{HUGE}, "c": 5}}') == {
        "a": math.inf, "b": -math.inf, "c": 5}
    fits = "9" + "1" * 307  # 308 digits: a float holds it, still the exact integer
    assert untrusted.loads(f"[{fits}]".encode()) == [int(fits)]
    assert untrusted.loads(f'["{HUGE}"]') == [HUGE]  # digits in a string are text


def test_a_baseline_integer_too_large_for_a_float_is_not_compared(tmp_path: Path,
                                                                     capsys: Any) -> None:
    from _history_files import BASELINE

    run = tmp_path / "run"
    run.mkdir()
    write_run(run, "a", [(10, 1.0)] * 10)
    write_manifest(run, {"a": {}})
    for field in ("perf", "perf_adj", "samples", "score"):
        data = json.loads(json.dumps(BASELINE))
        if field == "score":
            data["score"] = "@@"
        elif field == "samples":
            data["benchmarks"]["a"][field] = ["@@", 10.0]
        else:
            data["benchmarks"]["a"][field] = "@@"
        base = tmp_path / f"{field}.json"
        base.write_text(json.dumps(data).replace('"@@"', HUGE))
        status = dlbench(["report", str(run), "--compare", str(base)])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err and status in (0, 9), (field, out + err)
        if field != "score":
            assert f"warning: {FIGURE_CASES[2][2]}" in out, (field, out)


def test_a_history_integer_too_large_for_a_float_is_left_out(tmp_path: Path) -> None:
    from _history_files import RATES, history_of, spoil

    from pytest_dlbench.results.history import load_history

    folder = history_of(tmp_path, [float(r) for r in RATES])
    bad = spoil(folder, 2, HUGE, rate=HUGE)
    entries, problems = load_history(folder)
    assert len(entries) == len(RATES)
    assert problems == [FIGURE_CASES[3][2].replace("FILE", str(bad))]


def _stream_with(tmp: Path, record: str) -> Path:
    run = tmp / "run"
    run.mkdir(parents=True)
    path = write_run(run, "a", [(10, 1.0)] * 10)
    lines = path.read_text().splitlines()
    lines.insert(3, record)
    path.write_text("\n".join(lines) + "\n")
    write_manifest(run, {"a": {}})
    return run


@pytest.mark.parametrize("text", [HUGE, "1e999"], ids=["401 digits", "1e999"])
def test_a_stream_figure_too_large_for_a_float_is_left_out(tmp_path: Path, text: str,
                                                           capsys: Any) -> None:
    flops = _stream_with(tmp_path / "flops",
                         f'{{"event": "flops", "flops": {text}, "items": 4}}')
    (run,) = summarize_dir(flops).benchmarks[0].runs
    assert run.ok and run.flops_per_item is None and run.flops_reason == FIGURE_CASES[4][2]
    telemetry = _stream_with(tmp_path / "telemetry", (
        '{"event": "telemetry", "time": 5.0, "elapsed": 1.0, "cpu_percent": 5, "rss_bytes": @@, '
        '"gpus": [{"index": 0, "util": 50, "mem_used": @@, "mem_total": @@, "power_w": 1, '
        '"energy_j": 1}]}').replace("@@", text))
    for run_dir in (flops, telemetry):
        assert dlbench(["report", str(run_dir), "--html", str(run_dir / "r.html")]) == 0
        assert dlbench(["table", str(run_dir)]) == 0
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err and (run_dir / "r.html").is_file()


def _huge_run(tmp: Path, case: str) -> Path:
    run = tmp / "run"
    run.mkdir()
    if case.startswith("`bench.log_rate"):
        write_run(run, "big", [1e308] * 10, log_rate=True)
    else:
        write_run(run, "big", [(64, 1e-306)] + [(64, 1.0)] * 9)
    write_run(run, "ok", [(10, 1.0)] * 10)
    write_manifest(run, {"big": {}, "ok": {}})
    return run


@pytest.mark.parametrize("case", FIGURE_CASES[:2], ids=lambda c: c[0])
def test_a_rate_too_large_for_the_statistics_fails_its_run_only(
        case: tuple[str, str, str], tmp_path: Path, capsys: Any) -> None:
    """math.fsum overflowed on such rates: INTERNALERROR, no table. The run fails with its
    figure named; the other benchmark, the score, the reports and the sweep table go on."""
    run = _huge_run(tmp_path, case[0])
    big = load_run(next(run.glob("big.*.data")))
    assert big.status is Status.FAIL and big.reason == case[2]
    summary = summarize_dir(run)
    assert summary.score == pytest.approx(10.0)
    assert dlbench(["report", str(run), "--html", str(tmp_path / "r.html")]) == 1
    out, err = capsys.readouterr()
    assert f"failed big[D0]: fail: {case[2]}" in out and "ok " in out
    assert "Traceback" not in out + err
    assert (tmp_path / "r.html").is_file()
    assert dlbench(["table", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "failed 1/1" in out and "Traceback" not in out + err


def test_a_warm_up_step_too_large_fails_the_run_too(tmp_path: Path) -> None:
    """A warm-up step counts in the steps' mean (throughput_avg), which the sweep table shows."""
    run = tmp_path / "run"
    run.mkdir()
    path = write_run(run, "big", [(10, 1.0)] * 10, warmup=[(64, 1e-306)] * 2)
    big = load_run(path)
    assert big.status is Status.FAIL and big.reason.startswith("step 0's rate 6.4e+307")


@pytest.mark.slow
def test_a_session_with_a_huge_rate_reports_everything_else(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=textwrap.dedent("""
        def huge(bench):
            for _ in range(8):
                bench.log_rate(1e308)

        def good(bench):
            for _ in range(8):
                bench.log_rate(10.0)

        def watch_inf(bench):
            bench.watch(None, None, items_per_example=float("inf"))
    """))
    pytester.makefile(".yaml", suite=textwrap.dedent("""
        _base: {voir: {options: {skip: 2, stop: 6}}, max_duration: 60}
        huge: {inherits: _base, definition: defs.py:huge}
        good: {inherits: _base, definition: defs.py:good}
        watch_inf: {inherits: _base, definition: defs.py:watch_inf}
    """))
    result = pytester.runpytest("--bench-suite=suite.yaml", "--bench-base=out", "-rf")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    result.assert_outcomes(passed=1, failed=2)
    assert FIGURE_CASES[5][2] in text
    assert f"step 0's rate 1e+308 items/s {TOO_LARGE}" in text
    assert "score:" in text


@pytest.mark.parametrize("value", [math.inf, math.nan, 0, -1.0, 1e-300, 1e13, True, "8"])
def test_watch_refuses_items_per_example_of_no_sane_size(value: object) -> None:
    """inf reached the flops record as ``Infinity``, no JSON; 1e-300 a count per item beyond
    any figure. Refused at the call, one line; a sane value is kept."""
    from pytest_dlbench.core.errors import one_line
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.stream import NullStream

    bench = Bench(stream=NullStream())
    with pytest.raises(ValueError) as info:
        bench.watch(object(), None, items_per_example=value)  # type: ignore[arg-type]
    assert one_line(info.value) == (
        "ValueError: items_per_example must be a finite number from 1e-06 to 1e+12 (the rate "
        f"items one example holds), not {value!r}")
    assert bench.watched is None and bench.items_per_example == 1
    if value == math.inf:
        assert one_line(info.value) == FIGURE_CASES[5][2]
    bench.watch(object(), None, items_per_example=512)
    assert bench.items_per_example == 512
