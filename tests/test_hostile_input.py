"""Hostile and broken inputs: each costs one line naming what is wrong, never a traceback, a
hang or a file written outside the run directory (issue 16).

``SUITE_CASES`` is the table of docs/running.md ("Bad input"): the docs test below checks that
every row there is a case here, with the same message.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.run import layout
from pytest_dlbench.suite import SuiteError, resolve_suite

TOY = "pytest_dlbench.workloads.toy:main"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "running.md"

# (what the docs call the input, suite text, overrides, the one-line message with FILE for the
# suite's path). Run through resolve_suite, and so through pytest --bench-suite (exit 4).
SUITE_CASES: list[tuple[str, str, tuple[str, ...], str]] = [
    (
        "a benchmark named `../../../escape`",
        f'"../../../escape": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '../../../escape' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a benchmark named `sub/dir`",
        f'"sub/dir": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name 'sub/dir' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a benchmark named `.hidden`",
        f'".hidden": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '.hidden' starts with '.': a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        'a benchmark named `"a\\nb"` (a control character)',
        f'"a\\nb": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name 'a\\nb' contains a control character: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        'a benchmark named `""`',
        f'"": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '' is empty: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a matrix job named `j{x}` with `x: ../up`",
        f"m: {{matrix: {{x: [../up]}}, job: {{name: 'j{{x}}', definition: {TOY}}}}}",
        (),
        "FILE: matrix job name 'j../up' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
]


def _suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text) + "\n")
    return path


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [case[1:] for case in SUITE_CASES],
    ids=[case[0] for case in SUITE_CASES],
)
def test_bad_suite_input_is_one_line(tmp_path: Path, text: str, overrides: tuple[str, ...],
                                     message: str) -> None:
    path = _suite(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        resolve_suite(path, overrides)
    got = str(info.value)
    assert "\n" not in got
    assert got.replace(str(path), "FILE") == message


def _docs_rows() -> dict[str, str]:
    """``| input | message |`` rows of the "Bad input" table of docs/running.md."""
    text = DOCS.read_text()
    section = text.split("## Bad input", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) == 2 and not set(cells[0]) <= {"-", " "} and cells[0] != "input":
            rows[cells[0]] = cells[1].strip("`").replace("\\|", "|")
    return rows


def test_docs_table_is_these_cases() -> None:
    rows = _docs_rows()
    for label, _text, _overrides, message in SUITE_CASES:
        assert label in rows, label
        assert rows[label] == message, label


# -- names reaching the file system ----------------------------------------------------------


def test_milabench_names_stay_valid(tmp_path: Path) -> None:
    names = ["resnet50", "ddp.scaling.2", "lm-gpt_small", "vit_b_16", "a.b-c_d"]
    path = _suite(tmp_path, "\n".join(f"{n}: {{definition: {TOY}}}" for n in names))
    assert [s.name for s in resolve_suite(path).specs] == names


def test_layout_refuses_unsafe_names(tmp_path: Path) -> None:
    for bad in ("../x", "a/b", "", ".", "..", "a\0b"):
        with pytest.raises(layout.UnsafeName):
            layout.stream_path(tmp_path, bad, 0)
        with pytest.raises(layout.UnsafeName):
            layout.spec_path(tmp_path, bad)
    with pytest.raises(layout.UnsafeName):
        layout.make_run_dir(tmp_path, "../out")
    assert isinstance(layout.UnsafeName("x"), DlbenchError)
    assert layout.stream_path(tmp_path, "ddp.scaling.2", 1, 0).name == "ddp.scaling.2.D1.R0.data"


def test_a_traversing_name_stops_pytest_before_anything_is_written(
    pytester: pytest.Pytester,
) -> None:
    pytester.mkdir("work")
    (pytester.path / "work" / "s.yaml").write_text(
        f'"../../escape": {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 2}}}}}}\n'
    )
    before = sorted(p.name for p in pytester.path.iterdir())
    result = pytester.runpytest("--bench-suite=work/s.yaml", "--bench-base=work/out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */s.yaml: benchmark name '../../escape' contains a path*"])
    assert sorted(p.name for p in pytester.path.iterdir()) == before
    assert not (pytester.path / "work" / "out").exists()


def test_an_unsafe_run_name_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=f"a: {{definition: {TOY}}}")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-run-name=../up")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-run-name: run name '../up' is not a safe file*"])
