"""The terminal table fits the terminal (issue 25, items 1 and 5) and shows text from files
escaped (issue 24, item 11): golden files at 80 and 120 columns, long and wide names,
``--bench-columns`` and ``--bench-sort``, and the score at the table's precision.

Regenerate after an intended change with ``DLBENCH_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.cli import main
from pytest_dlbench.core.numbers import printable, printable_lines
from pytest_dlbench.report.columns import parse_columns, parse_sort, sort_items
from pytest_dlbench.report.terminal import render_comparison, render_summary, score_line
from pytest_dlbench.report.terminal_tables import display_width, shorten, table
from pytest_dlbench.results.figures import run_from_records, summarize_runs
from pytest_dlbench.results.judge import compare
from pytest_dlbench.results.model import SuiteSummary
from pytest_dlbench.suite.presets import run_dimensions

GOLDEN = TESTS_DIR / "golden"
TOY = "pytest_dlbench.workloads.toy:main"
LONG = "clip-vit-b32-matrix-nodes4-batch256-bf16-compiled-max-autotune"
EVIL = "evil\x1b]0;pwned\x07\x1b[2J"
COMPILED = {"mode": "default", "backend": "inductor", "seconds": 12.34, "start": 50.0,
            "end": 62.34, "steps": 2, "graphs": 3, "graph_breaks": 2, "cache_hits": 0,
            "cache_misses": 6}


def _records(name: str, rate: float, *, args: tuple[str, ...] = (), units: str = "items/s",
             status: str = "ok", reason: str = "", compiled: bool = False,
             weight: float = 1.0) -> list[dict[str, Any]]:
    spec = {"name": name, "definition": TOY, "args": list(args), "weight": weight,
            "units": units, "plan": {"method": "per_gpu"}}
    out: list[dict[str, Any]] = [{"event": "config", "spec": spec, "device": 0,
                                  "repeat": None, **run_dimensions(TOY, list(args))}]
    if compiled:
        out.append({"event": "compile", "phase": "warmup", **COMPILED})
    for i in range(10):
        value = rate * (1 + 0.01 * (i % 3))
        out.append({"event": "rate", "value": value, "units": units, "step": i,
                    "warmup": False, "time": 100.0 + i, "items": value, "seconds": 1.0})
    out.append({"event": "end", "status": status, "reason": reason})
    return out


def _suite(scale: float = 1.0) -> SuiteSummary:
    runs = [
        _records("resnet50", 196.0 * scale, args=("--batch-size", "8")),
        _records(LONG, 1234.5 * scale, args=("--batch-size", "8", "--compile"), compiled=True),
        _records("日本語モデル", 45203.0 * scale, units="tokens/s"),
        _records("🚀rocket", 0.1655 * scale, units="TFLOP/s"),
        _records(EVIL, 12.5 * scale, units="it\x1b[31ms/s"),
        _records(EVIL, 12.5 * scale, units="it\x1b[31ms/s", status="fail",
                 reason="boom\x1b[2J\nsecond line"),
    ]
    return summarize_runs([run_from_records(r) for r in runs])


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DLBENCH_UPDATE_GOLDEN"):
        path.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == path.read_text(encoding="utf-8")


def _tables(text: str) -> list[list[str]]:
    """The text's tables: blocks of lines whose first line starts with ``bench``."""
    blocks = [b.splitlines() for b in text.split("\n\n")]
    return [b for b in blocks if b and b[0].startswith("bench ")]


def _field_ends(line: str) -> list[int]:
    """The display column where each field ends (fields: two spaces or more apart)."""
    return [display_width(line[: m.end()]) for m in re.finditer(r"\S+(?: \S+)*", line)]


@pytest.mark.parametrize("width", [80, 120])
def test_the_default_table_fits_and_stays_aligned(width: int) -> None:
    current = _suite()
    text = render_summary(current, width=width)
    _golden(f"fit_{width}.txt", text)
    tables = _tables(text)
    assert len(tables) == 2  # the compact one, then precision/compile for those that have it
    main_table, details = tables
    assert main_table[0].split() == ["bench", "perf", "units", "std%", "perf_adj", "weight"]
    assert {"precision", "compile", "speedup"} <= set(details[0].split())
    for block in tables:
        assert all(display_width(line) <= width for line in block), block
        assert len(block) == 1 + len(current.benchmarks)  # no row wrapped
    # Wide characters keep the columns aligned: perf ends at one display column in every row.
    assert len({_field_ends(line)[1] for line in main_table}) == 1
    assert "\x1b" not in text and "\\x1b]0;pwned\\x07" in text


def test_long_names_are_shortened_in_the_middle_only_when_needed() -> None:
    narrow = render_summary(_suite(), width=80)
    wide = render_summary(_suite(), width=200)
    assert LONG not in narrow and LONG in wide
    shortened = next(line.split()[0] for line in narrow.splitlines() if line.startswith("clip"))
    assert shortened.startswith("clip-vit") and shortened.endswith("autotune")
    assert "…" in shortened
    # The second table shortens it alike: one name, one spelling.
    assert [line.split()[0] for b in _tables(narrow) for line in b].count(shortened) == 2
    assert shorten("日本語モデル", 7) == "日本…ル" and display_width("日本…ル") == 7


@pytest.mark.parametrize("width", [80, 120])
def test_the_compare_table_fits(width: int) -> None:
    comparison = compare(_suite(), _suite(1.1))
    report = render_summary(_suite(), comparison, width=width)
    main_table = _tables(report)[0]
    assert main_table[0].split()[-2:] == ["ratio", "verdict"]
    text = render_comparison(comparison, width=width)
    _golden(f"fit_compare_{width}.txt", text)
    for block in _tables(text) + _tables(report):
        assert all(display_width(line) <= width for line in block)


def test_columns_and_sort() -> None:
    current = _suite()
    columns = parse_columns("perf_adj, STD ,mfu")
    assert columns == ("perf_adj", "std%", "MFU")
    text = render_summary(current, width=80, columns=columns, sort=parse_sort("name"))
    tables = _tables(text)
    assert len(tables) == 1 and tables[0][0].split() == ["bench", "perf_adj", "std%", "MFU"]
    names = [line.split()[0] for line in tables[0][1:]]
    assert names == sorted(names)
    by_perf = render_summary(current, width=200, sort="perf")
    rows = _tables(by_perf)[0][1:]
    assert rows[0].startswith("日本語モデル") and rows[-1].startswith("🚀rocket")
    comparison = compare(_suite(), _suite(1.1))
    by_current = render_comparison(comparison, width=200, sort=parse_sort("ops"))
    assert _tables(by_current)[0][1].startswith("日本語モデル")
    # ratio: smallest first (the regressions at the top), no ratio last
    ratios = {"a": 1.2, "b": None, "c": 0.8, "d": 1.0}
    assert sort_items(ratios, "ratio", lambda name, _: ratios[name]) == ["c", "d", "a", "b"]
    assert parse_sort("fullname") == "name" and parse_sort("stddev") == "std%"
    with pytest.raises(argparse.ArgumentTypeError, match="unknown column 'bogus'"):
        parse_columns("perf,bogus")
    with pytest.raises(argparse.ArgumentTypeError, match="cannot sort by 'min'"):
        parse_sort("min")


def test_dlbench_report_rejects_an_unknown_column_as_bad_input(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture):
    assert main(["report", str(tmp_path), "--bench-columns=perf,bogus"]) == 4
    assert "unknown column 'bogus'" in capsys.readouterr().err


def test_the_score_has_the_html_pages_significant_figures() -> None:
    from pytest_dlbench.report.html import render_html

    tflops = summarize_runs([run_from_records(_records("mm", 0.0612, units="TFLOP/s"))])
    assert re.fullmatch(r"score: 0\.06\d\d\d", score_line(tflops))  # not "0.06"
    big = summarize_runs([run_from_records(_records("lm", 102151.82))])
    assert re.fullmatch(r"score: \d{3},\d{3}", score_line(big))  # 102,152-style, as the table
    for summary in (tflops, big):
        figure = score_line(summary).removeprefix("score: ")
        assert f'id="score-value">{figure}<' in render_html(summary)  # one figure everywhere


def test_the_sweep_table_says_its_throughput_is_not_perf() -> None:
    from pytest_dlbench.report.terminal_tables import SWEEP_NOTE

    assert "not perf" in SWEEP_NOTE and len(SWEEP_NOTE) <= 80


# -- escape sequences (issue 24, item 11) ------------------------------------------------------
def test_printable_escapes_what_a_terminal_would_obey() -> None:
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("title\x1b]0;x\x07") == "title\\x1b]0;x\\x07"
    assert printable("\u202eevil") == "\\u202eevil"
    assert printable("a\tb\r\nc\x9b") == "a\\x09b\\x0d\\x0ac\\x9b"
    assert printable("日本語 🚀 é") == "日本語 🚀 é"  # printable text is left alone
    assert printable(printable("\x1b")) == "\\x1b"
    assert printable_lines("one\x1b\ntwo") == "one\\x1b\ntwo"


def test_table_cells_are_escaped_before_they_are_measured() -> None:
    text = table([{"bench": "a\x1b[2J", "perf": "1"}, {"bench": "bb", "perf": "22"}], 80,
                 left=["bench"])
    lines = text.splitlines()
    assert "\x1b" not in text and len({len(line) for line in lines}) == 1


def test_failure_reasons_and_units_are_escaped() -> None:
    text = render_summary(_suite(), width=120)
    assert "\x1b" not in text and "\x07" not in text
    assert "boom\\x1b[2J\\x0asecond line" in text
    assert "it\\x1b[31ms/s" in text


def test_pytest_refuses_an_unknown_column_or_sort_before_the_run(pytester: pytest.Pytester):
    for option, message in (("--bench-columns=perf,bogus", "unknown column 'bogus'"),
                            ("--bench-sort=min", "cannot sort by 'min'")):
        result = pytester.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert message in result.stderr.str()


@pytest.mark.parametrize("width", [80, 120])
def test_the_sweep_table_fits_in_blocks(width: int) -> None:
    from pytest_dlbench.report.terminal_tables import render_sweep
    from pytest_dlbench.results.figures import SweepRow

    rows = [SweepRow(f"mmoclip-n{n}-ViT-L-14-bs512", {"nodes": n, "model": "ViT-L-14",
                                                      "batch_size": 512},
                     status="ok", gpus=8 * n, global_batch=4096 * n, done_percent_last=100.0,
                     throughput_avg=1234.5 * n, throughput_per_gpu_avg=154.3,
                     time_per_iteration_secs_avg=0.41, total_time_secs=123.4)
            for n in (1, 2, 4)]
    text = render_sweep(rows, width)
    _golden(f"fit_sweep_{width}.txt", text)
    blocks = _tables(text)
    assert all(display_width(line) <= width for block in blocks for line in block)
    headers = [word for block in blocks for word in block[0].split()]
    assert "throughput_avg" in headers and "status" in headers
    assert all(len(block) == 1 + len(rows) for block in blocks)
    names = [line.split()[0] for line in blocks[0][1:]]
    assert len(set(names)) == len(rows)  # shortened or not, three names


def test_shortened_names_never_read_alike() -> None:
    rows = [{"bench": f"a-very-long-common-prefix-{i}-and-a-long-common-suffix", "perf": "1"}
            for i in range(3)]
    names = [line.split()[0] for line in table(rows, 20).splitlines()[1:]]
    assert len(set(names)) == 3  # they differ in the middle: kept whole
    rows = [{"bench": f"a-very-long-common-prefix-and-a-long-common-suffix-{i}", "perf": "1"}
            for i in range(3)]
    names = [line.split()[0] for line in table(rows, 20).splitlines()[1:]]
    assert len(set(names)) == 3 and all("…" in n for n in names)
