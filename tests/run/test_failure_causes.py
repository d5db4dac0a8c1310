"""A failure names its cause, fails its benchmark alone, and pytest and ``dlbench report`` give
the same verdict on the same run (issue 16.8)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from _procs import processes_of

from pytest_dlbench.cli import main as dlbench

pytestmark = pytest.mark.slow

GOOD = textwrap.dedent(
    """
    import pytest


    def good(bench):
        for _ in bench.iterate(range(1000), batch_size=4):
            pass


    def skipper(bench):
        pytest.skip("needs a GPU")


    def idle(bench):
        pass  # ends well, but measured nothing
    """
)
BROKEN = "import nosuchdep_dlbench  # not installed\n\n\ndef main(bench):\n    pass\n"
SUITE = textwrap.dedent(
    """
    _b: {voir: {options: {skip: 1, stop: 3}}}
    good: {inherits: _b, definition: good.py:good}
    broken: {inherits: _b, definition: broken.py:main}
    """
)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_definition_that_fails_to_import_fails_alone_with_its_error(
    pytester: pytest.Pytester, isolation: str
) -> None:
    pytester.makepyfile(good=GOOD, broken=BROKEN)
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out", "-rf",
                                f"--bench-isolation={isolation}")
    result.assert_outcomes(passed=1, failed=1)
    broken = pytester.path / "broken.py"
    reason = f"broken: cannot import {broken}: ModuleNotFoundError: No module named " \
             "'nosuchdep_dlbench'"
    # The failure's first line is the reason (the short summary line is cut to the width).
    result.stdout.fnmatch_lines([reason, "FAILED s.yaml::broken[[]D0[]] - broken: cannot import*"])
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    records = _records(run_dir / "broken.D0.data")
    assert [r["event"] for r in records].count("end") == 1
    assert records[-1]["event"] == "end" and records[-1]["reason"] == reason
    assert _records(run_dir / "good.D0.data")[-1]["status"] == "ok"
    assert not processes_of(pytester.path)


@pytest.mark.parametrize(
    ("suite", "status"),
    [
        # Passes as an item, fails in the score (no steady observation): weighted, incomplete.
        ("w: {definition: good.py:idle, weight: 1}\n"
         "ok: {definition: good.py:good, weight: 1, voir: {options: {skip: 1, stop: 3}}}\n", 1),
        # A skip is not a failure, unless the score misses a weighted benchmark.
        ("s: {definition: good.py:skipper}\n"
         "ok: {definition: good.py:good, weight: 1, voir: {options: {skip: 1, stop: 3}}}\n", 0),
        ("s: {definition: good.py:skipper, weight: 1}\n"
         "ok: {definition: good.py:good, weight: 1, voir: {options: {skip: 1, stop: 3}}}\n", 1),
    ],
    ids=["incomplete", "skipped", "weighted-skipped"],
)
def test_pytest_and_dlbench_report_agree(pytester: pytest.Pytester, suite: str,
                                         status: int) -> None:
    pytester.makepyfile(good=GOOD)
    pytester.makefile(".yaml", s=suite)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                "--bench-save=summary.json")
    assert (pytester.path / "summary.json").is_file()
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    assert result.ret == dlbench(["report", str(run_dir), "-q"]) == status
