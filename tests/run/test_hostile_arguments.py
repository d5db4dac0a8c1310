"""A benchmark argument the suite wrote that cannot be filled at launch (issue 40 item 9:
``auto_batch`` of 5,000 digits) fails that benchmark with its one line, recorded in the stream's
``end`` record, and pytest does not crash in teardown after it ('BenchFunction' object has no
attribute 'run'). The rows of docs/running.md's "Bad input" table for such arguments
(tests/_hostile_cases.py, ARGUMENT_CASES) are checked line by line here."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _hostile_cases import ARGUMENT_CASES

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.run.harness import start_run
from pytest_dlbench.suite import resolve_suite
from pytest_dlbench.suite.auto import check_options
from pytest_dlbench.suite.capability import RunFacts, skip_reason
from pytest_dlbench.suite.spec import BenchSpec

HUGE = "9" * 5000


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(textwrap.dedent(f"""\
        toy:
          definition: pytest_dlbench.workloads.toy:main
          weight: 1
          argv:
            --batch-size: auto_batch({HUGE})
        """))
    return path


def test_an_argument_that_cannot_be_filled_ends_the_stream_with_its_line(tmp_path: Path) -> None:
    (spec,) = resolve_suite(_suite(tmp_path)).specs
    stream = tmp_path / "toy.D0.data"
    with pytest.raises(SuiteError, match="more than 18 digits"):
        start_run(spec, device=0, repeat=None, path=stream, data_dir=tmp_path,
                  run_name="r", system=None)
    end = [r for r in read_stream(stream) if r["event"] == "end"]
    assert len(end) == 1 and end[0]["status"] == "fail"
    assert "more than 18 digits" in end[0]["reason"] and "\n" not in end[0]["reason"]


@pytest.mark.slow  # a real pytest run: the controller and the benchmark's child
def test_pytest_reports_the_line_and_no_teardown_crash(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--bench-suite={suite}",
         "-q", f"--bench-base={tmp_path / 'base'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "SuiteError: auto_batch(" in out and "AttributeError" not in out, out
    assert "crash: exited with status" not in out, out


def _matches(line: str, documented: str) -> bool:
    """The documented line, where its ``…`` stands for the part of a hostile input a line
    leaves out."""
    head, _, tail = documented.partition("…")
    return line == documented if not tail else \
        line.startswith(head) and line.endswith(tail) and len(line) < 200


# The rows of docs/running.md's "Bad input" table these tests check (tests/_hostile_cases.py).
def test_the_documented_argument_rows_are_the_lines_given(tmp_path: Path) -> None:
    auto_row, sizer_row, condition_row = (case[2] for case in ARGUMENT_CASES)
    (spec,) = resolve_suite(_suite(tmp_path)).specs
    stream = tmp_path / "toy.D0.data"
    with pytest.raises(SuiteError):
        start_run(spec, device=0, repeat=None, path=stream, data_dir=tmp_path,
                  run_name="r", system=None)
    (end,) = [r for r in read_stream(stream) if r["event"] == "end"]
    assert end["reason"] == auto_row
    system = tmp_path / "system.yaml"
    with pytest.raises(SuiteError) as refused:
        check_options({"sizer": {"mult": float("inf")}}, file=system)
    assert str(refused.value) == sizer_row.replace("FILE", str(system))
    for condition in ("(" * 100_000 + "1" + ")" * 100_000, "9" * 5_000 + " > 1"):
        bench = BenchSpec(name="x", definition="m:f", origin="s.yaml",
                          config={"requires_capabilities": condition})
        reason = skip_reason(bench, RunFacts(slots=1))
        assert reason is not None and len(reason) < 200, reason[:300] if reason else reason
    deep = BenchSpec(name="x", definition="m:f", origin="s.yaml",
                     config={"requires_capabilities": "(" * 100_000 + "1" + ")" * 100_000})
    assert _matches(skip_reason(deep, RunFacts(slots=1)) or "", condition_row)
