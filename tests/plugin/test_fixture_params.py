"""The ``bench`` fixture names each test's benchmark by its test id (issue 51, items 7 and 8):
a parametrized test is measured, each parameter in its own stream, its rows ``test_x[8]``; two
tests of one name (in two classes, or two modules) are two streams and two rows, each qualified
so that a reader can tell them apart; a test whose name is unique keeps it (docs/
writing-benchmarks.md, "Parametrized tests")."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench import layout
from pytest_dlbench.plugin.fixture_names import qualified_names, row_names

DOCS = REPO_ROOT / "docs"

PARAMS = textwrap.dedent(
    """
    import time

    import pytest


    @pytest.mark.parametrize("batch", [8, 16])
    def test_step(bench, batch):
        for _ in bench.iterate(range(24), batch_size=batch):
            time.sleep(0.002)


    @pytest.mark.parametrize("path", ["a/b", "c:d"])
    def test_odd(bench, path):
        for _ in bench.iterate(range(24), batch_size=4):
            time.sleep(0.002)
    """
)

CLASSES = textwrap.dedent(
    """
    import time


    def _measure(bench):
        for _ in bench.iterate(range(24), batch_size=4):
            time.sleep(0.002)


    class TestSmall:
        def test_speed(self, bench):
            _measure(bench)


    class TestLarge:
        def test_speed(self, bench):
            _measure(bench)


    def test_alone(bench):
        _measure(bench)
    """
)
MODULE = "import time\n\ndef test_speed(bench):\n    for _ in bench.iterate(range(24), " \
         "batch_size=4):\n        time.sleep(0.002)\n"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out", *args)


def streams(pytester: pytest.Pytester) -> dict[str, str]:
    """Each stream's file name and the benchmark name its config record says."""
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    names = {}
    for path in layout.stream_paths(run_dir):
        config = json.loads(path.read_text().splitlines()[0])
        names[path.name] = config["spec"]["name"]
    return names


def rows(result: pytest.RunResult) -> list[str]:
    """The first column of the results table (between its header and the blank line)."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("bench ")) + 1
    end = lines.index("", start)
    return sorted(line.split()[0] for line in lines[start:end])


# -- names, without pytest ------------------------------------------------------------------


def test_a_unique_name_is_the_test_name() -> None:
    assert row_names([("t.py::test_a", "test_a"), ("t.py::test_b[1]", "test_b[1]")]) == {
        "t.py::test_a": "test_a", "t.py::test_b[1]": "test_b[1]"}


def test_one_name_twice_is_qualified_by_what_tells_them_apart() -> None:
    names = row_names([
        ("tests/t.py::TestSmall::test_speed", "test_speed"),
        ("tests/t.py::TestLarge::test_speed", "test_speed"),
        ("a/test_m.py::test_go", "test_go"),
        ("b/test_m.py::test_go", "test_go"),
        ("a/test_n.py::test_run[1]", "test_run[1]"),
        ("a/test_o.py::test_run[1]", "test_run[1]"),
    ])
    assert names == {
        "tests/t.py::TestSmall::test_speed": "TestSmall::test_speed",
        "tests/t.py::TestLarge::test_speed": "TestLarge::test_speed",
        "a/test_m.py::test_go": "a/test_m.py::test_go",
        "b/test_m.py::test_go": "b/test_m.py::test_go",
        "a/test_n.py::test_run[1]": "test_n.py::test_run[1]",
        "a/test_o.py::test_run[1]": "test_o.py::test_run[1]",
    }
    assert qualified_names("d/t.py::A::B::test_x[p::q]", "test_x[p::q]") == [
        "test_x[p::q]", "B::test_x[p::q]", "A::B::test_x[p::q]", "t.py::A::B::test_x[p::q]",
        "d/t.py::A::B::test_x[p::q]"]


def test_a_test_id_streams_under_an_escaped_name_read_back_as_it_is(tmp_path: Path) -> None:
    for name in ("test_x[8]", "TestSmall::test_speed", "tests/a.py::t[a/b\\c%2F]", "t[.x]"):
        path = layout.stream_path(tmp_path, name, 0, 3)
        assert path.parent == tmp_path and "/" not in path.name and "[" not in path.name
        assert layout.parse_stream_name(path) == layout.StreamName(name, 0, 3)
    assert layout.stream_path(tmp_path, "test_x[8]", 0).name == "test_x%5B8%5D.D0.data"
    # A benchmark's name keeps its file name; an unsafe one is still refused.
    assert layout.stream_path(tmp_path, "ddp.scaling.2", 1).name == "ddp.scaling.2.D1.data"
    with pytest.raises(layout.UnsafeName):
        layout.stream_path(tmp_path, "../x", 0)


def test_a_test_id_too_long_for_a_file_name_is_shortened_and_stays_unique(
        tmp_path: Path) -> None:
    first, second = (f"test_x[{'a' * 300}{end}]" for end in "12")
    short = {layout.fit_test_id(first), layout.fit_test_id(second)}
    assert len(short) == 2
    for name in short:
        assert name.startswith("test_x[aaa") and layout.is_test_id(name)
        path = layout.stream_path(tmp_path, name, 0, 12)  # fits, with the longest suffixes
        assert layout.parse_stream_name(path).bench == name
    assert layout.fit_test_id("test_x[8]") == "test_x[8]"


# -- runs ------------------------------------------------------------------------------------


def test_a_parametrized_test_is_measured_once_per_parameter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_params=PARAMS)
    result = run(pytester, "--bench-save=base.json")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    assert "UnsafeName" not in result.stdout.str()
    assert streams(pytester) == {
        "test_odd%5Ba%2Fb%5D.D0.data": "test_odd[a/b]",
        "test_odd%5Bc%3Ad%5D.D0.data": "test_odd[c:d]",
        "test_step%5B16%5D.D0.data": "test_step[16]",
        "test_step%5B8%5D.D0.data": "test_step[8]",
    }
    assert rows(result) == ["test_odd[a/b]", "test_odd[c:d]", "test_step[16]", "test_step[8]"]
    saved = json.loads((pytester.path / "base.json").read_text())
    assert sorted(saved["benchmarks"]) == ["test_odd[a/b]", "test_odd[c:d]", "test_step[16]",
                                           "test_step[8]"]
    again = run(pytester, "--bench-compare=base.json", "--bench-tolerance=90%",
                "--bench-confirm=0")
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["bench *ratio*", "test_odd[[]a/b[]] *"])
    assert {"test_step[8]", "test_step[16]"} <= set(again.stdout.str().split())


def test_two_tests_of_one_name_are_two_rows(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_classes=CLASSES)
    pytester.mkdir("other")
    (pytester.path / "other" / "test_more.py").write_text(MODULE)
    result = run(pytester)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    assert sorted(streams(pytester).values()) == [
        "TestLarge::test_speed", "TestSmall::test_speed", "test_alone",
        "test_more.py::test_speed"]
    assert rows(result) == ["TestLarge::test_speed", "TestSmall::test_speed", "test_alone",
                            "test_more.py::test_speed"]
    assert "test_alone.D0.data" in streams(pytester)  # a unique name: today's file name


def test_a_deselected_namesake_keeps_the_qualified_name(pytester: pytest.Pytester) -> None:
    """The names are the collected tests', before -k: a subset's rows are the whole run's."""
    pytester.makepyfile(test_classes=CLASSES)
    result = run(pytester, "-k", "TestSmall")
    assert result.ret == 0, result.stdout.str()
    assert rows(result) == ["TestSmall::test_speed"]


@pytest.mark.slow
def test_the_docs_parametrized_example_runs(pytester: pytest.Pytester) -> None:
    """docs/writing-benchmarks.md's parametrized example: one row per batch size."""
    shutil.copy(DOCS / "examples" / "writing" / "test_batch_sizes.py", pytester.path)
    # In a subprocess: torch's parts cannot be imported twice by pytester's in-process runs.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out",
                                           "--bench-fixture-steps=1,3")
    assert result.ret == 0, result.stdout.str()
    assert rows(result) == ["test_mlp_batch[16]", "test_mlp_batch[64]"]


@pytest.mark.slow
def test_a_paired_run_of_a_parametrized_test(pytester: pytest.Pytester) -> None:
    """--bench-against: the rounds' children stream under the parent's names, read back."""
    import subprocess

    one = "\n\n\n@".join(PARAMS.replace("[8, 16]", "[8]").split("\n\n\n@")[:2])
    pytester.makepyfile(test_params=one)
    pytester.makeini("[pytest]\naddopts = --bench-against=main --bench-rounds=2\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": "/"}
    for args in (["init", "-q", "-b", "main"], ["add", "test_params.py", "tox.ini"],
                 ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=pytester.path, check=True, capture_output=True,
                       env=env)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out")
    assert result.ret in (0, 6, 9), result.stdout.str()  # 2 rounds prove nothing either way
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    names = ["test_step%5B8%5D.D0.R0.data", "test_step%5B8%5D.D0.R1.data"]
    assert sorted(p.name for p in run_dir.glob("*.data")) == names
    assert sorted(p.name for p in (run_dir / "base").glob("*.data")) == names
    for path in run_dir.glob("*.data"):
        assert json.loads(path.read_text().splitlines()[0])["spec"]["name"] == "test_step[8]"
    result.stdout.fnmatch_lines(["*test_step[[]8[]]*"])
