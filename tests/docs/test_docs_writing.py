"""The examples of docs/writing-benchmarks.md run, and the page shows them verbatim."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from _paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def test_code_blocks_are_the_example_files():
    page = (DOCS / "writing-benchmarks.md").read_text()
    for block in re.findall(r"```(?:python|yaml)\n(# docs/examples/\S+)\n(.*?)```", page, re.S):
        header, body = block
        example = DOCS / header.removeprefix("# docs/")
        text = example.read_text()
        # The page drops the file's docstring/comment header; the code itself is identical.
        assert body.strip() in text, example


@pytest.mark.slow
def test_example_suite_runs(pytester: pytest.Pytester):
    for name in ("my_benchmarks.py", "my-suite.yaml", "test_my_model.py"):
        shutil.copy(DOCS / "examples" / "writing" / name, pytester.path / name)
    # In a subprocess: a test function that trains imports parts of torch that cannot be
    # imported twice, and pytester's in-process runs would re-import them.
    result = pytester.runpytest_subprocess("--bench-suite=my-suite.yaml", "--bench-base=out",
                                "test_my_model.py")
    result.assert_outcomes(passed=2)
    (stream,) = (pytester.path / "out" / "runs").glob("*/mlp-small.D0.data")
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    rates = [r for r in records if r["event"] == "rate"]
    assert len(rates) == 12 and sum(r["warmup"] for r in rates) == 2
    assert records[-1]["status"] == "ok"
