"""Item ids of a suite outside the root directory (a shipped one) a user can paste back: the
suite's file name as the file part, ``smoke.yaml::toy[D0]``, not ``::toy[D0]`` (issue 25,
item 7)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_dlbench.plugin.items import suite_nodeid

DEFS = textwrap.dedent(
    """
    import time

    def sleeper(bench):
        for _ in bench.iterate(range(10_000), batch_size=8):
            time.sleep(0.002)
    """
)
SUITE = """
_base: {voir: {options: {skip: 1, stop: 4}}}
fast: {inherits: _base, definition: defs.py:sleeper}
other: {inherits: _base, definition: defs.py:sleeper}
"""


@pytest.fixture
def shipped(pytester: pytest.Pytester) -> Path:
    """A suite in a folder beside the root directory, as a shipped one is."""
    folder = pytester.path.parent / f"{pytester.path.name}-shipped"
    folder.mkdir()
    (folder / "defs.py").write_text(DEFS)
    (folder / "mine.yaml").write_text(SUITE)
    return folder / "mine.yaml"


def test_suite_nodeid(tmp_path: Path) -> None:
    assert suite_nodeid(tmp_path / "a" / "s.yaml", tmp_path) is None  # pytest's own
    assert suite_nodeid(tmp_path / "s.yaml", tmp_path / "root") == "s.yaml"


def test_a_suite_outside_the_root_has_ids_that_can_be_pasted_back(
        pytester: pytest.Pytester, shipped: Path) -> None:
    listed = pytester.runpytest(f"--bench-suite={shipped}", "--collect-only", "-q")
    assert listed.ret == 0
    ids = [line for line in listed.outlines if "::" in line]
    assert ids == ["mine.yaml::fast[D0]", "mine.yaml::other[D0]"]
    # Pasted back: that item alone (by the file's name, or by the suite's).
    for arg in ("mine.yaml::other[D0]", "mine::other[D0]"):
        again = pytester.runpytest(f"--bench-suite={shipped}", "--collect-only", "-q", arg)
        assert again.ret == 0, again.stdout.str()
        assert [line for line in again.outlines if "::" in line] == ["mine.yaml::other[D0]"]


def test_the_dot_line_starts_with_the_suites_name(pytester: pytest.Pytester,
                                                  shipped: Path) -> None:
    result = pytester.runpytest(f"--bench-suite={shipped}", "--bench-isolation=inline",
                                "--bench-base=out", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    dots = [line for line in result.outlines if line.rstrip().endswith("[100%]")]
    assert dots and all(line.startswith("mine.yaml .") for line in dots), dots
    assert not any(line.startswith(".") for line in result.outlines)
