"""Messages at a run's end that misled (issue 41 item 4): a failed run's failure section shows
the benchmark's own error lines, not an inner pytest report; the lines after pytest's dots start
on a line of their own; W&B says where it logged."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

DEFS = textwrap.dedent(
    """
    def broken(bench):
        for step in bench.iterate(range(1000), batch_size=4):
            if step == 5:
                raise RuntimeError("boom at step 5")
    """
)


@pytest.mark.slow
def test_the_failure_section_has_the_error_not_an_inner_pytest_summary(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s="broken: {definition: defs.py:broken, voir: {options: "
                                  "{skip: 2, stop: 6}}}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    section = out.split("last lines of the benchmark's output:", 1)[1].split("full output:")[0]
    assert 'raise RuntimeError("boom at step 5")' in section  # the benchmark's own lines
    assert "E               RuntimeError: boom at step 5" in section
    assert "short test summary info" not in section and "1 failed in" not in section
    assert "FAILED " not in section
