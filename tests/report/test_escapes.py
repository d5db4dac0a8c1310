"""Text from a stream, a manifest, a baseline or a profile reaches the terminal escaped, never
obeyed: no clear screen, no window title (issue 24, item 11), in pytest's table and in
``dlbench report/compare/table/profile`` alike (numbers.printable, one helper)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _hostile_cases import TERMINAL_CASES
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench.cli import main

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"


def _raw(text: str) -> bool:
    return "\x1b" in text or "\x07" in text or "\x9b" in text


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_run(run, "a", steady_at(100.0), units=f"it{CLEAR}/s")
    write_run(run, "b", status="fail", reason=f"boom{TITLE} at the end")
    write_manifest(run, {"a": {}, "b": {}, f"gone{TITLE}": {}})
    return run


def test_dlbench_report_compare_and_table_escape(run_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    saved = tmp_path / "base.json"
    main(["report", str(run_dir), "--bench-save", str(saved)])
    out = capsys.readouterr().out
    assert not _raw(out)
    assert "it\\x1b[2J/s" in out and "boom\\x1b]0;pwned\\x07 at the end" in out
    assert "gone\\x1b]0;pwned\\x07" in out
    main(["compare", str(saved), str(saved)])
    out = capsys.readouterr().out
    assert not _raw(out) and "it\\x1b[2J/s" in out
    main(["report", str(run_dir), "-q"])
    assert not _raw(capsys.readouterr().out)
    main(["table", str(run_dir)])
    assert not _raw(capsys.readouterr().out)


def test_dlbench_profile_escapes_the_notes(run_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    import pytest_dlbench.profile as profile

    monkeypatch.setattr(profile, "profile_sections",
                        lambda *a, **k: [(f"a{TITLE}", f"note: {CLEAR}\n\ttabbed")])
    assert main(["profile", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert not _raw(out) and "note: \\x1b[2J" in out and "\\x09tabbed" in out


def test_pytests_table_escapes_units_and_reasons(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=textwrap.dedent(
        """
        import time

        def fine(bench):
            for _ in bench.iterate(range(10_000), batch_size=8):
                time.sleep(0.001)

        def broken(bench):
            raise RuntimeError("broken \\x1b]0;pwned\\x07 on purpose")
        """))
    pytester.makefile(".yaml", s=textwrap.dedent(
        """
        _base: {voir: {options: {skip: 1, stop: 4}}}
        fine: {inherits: _base, definition: defs.py:fine, units: "it\\e[2J/s"}
        broken: {inherits: _base, definition: defs.py:broken}
        """))
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                "-p", "no:cacheprovider")
    text = result.stdout.str()
    # The failure's section (the child's reason and its last lines), the progress lines, ours.
    assert not _raw(text), text
    summary = text[text.index("= dlbench ="):]
    assert "it\\x1b[2J/s" in summary and "broken \\x1b]0;pwned\\x07 on purpose" in summary


# The rows of docs/running.md's "Bad input" table these tests check (tests/_hostile_cases.py).
@pytest.mark.parametrize("case", TERMINAL_CASES[:2], ids=lambda c: c[0])
def test_a_bad_column_or_sort_is_refused_by_pytest_and_dlbench(
        case: tuple[str, str, str], pytester: pytest.Pytester, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    option = case[0].split("`")[1]
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any(line.endswith(f": error: {case[2]}") for line in result.errlines)
    assert main(["report", str(tmp_path), option]) == 4
    # argparse names the option by both its spellings there: --bench-sort/--sort
    reason = case[2].split(": ", 1)[1]
    assert any(line.startswith("dlbench report: error: argument --bench-") and
               line.endswith(reason) for line in capsys.readouterr().err.splitlines())


def test_an_escape_sequence_is_shown_as_the_table_says() -> None:
    from pytest_dlbench.core.numbers import printable

    assert printable(CLEAR) == TERMINAL_CASES[2][2]


def test_dlbench_resolve_escapes_the_suites_text(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text('a: {definition: "pytest_dlbench.workloads.toy:main", '
                     'argv: {--note: "x\\e[2Jy"}}\n')
    assert main(["resolve", str(suite)]) == 0
    out = capsys.readouterr().out
    assert not _raw(out) and "x\\x1b[2Jy" in out
