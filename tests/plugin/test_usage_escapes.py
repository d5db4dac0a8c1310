"""pytest's usage errors show the user's text as ``dlbench`` does (issue 40 item 11): an escape
sequence or a newline in ``--bench-against``, ``--bench-suite`` or ``--bench-compare`` is shown
escaped (``numbers.printable``), on one line, never obeyed by the terminal."""

from __future__ import annotations

import subprocess

import pytest

SUITE = "toy:\n  definition: pytest_dlbench.workloads.toy:main\n"
#: An escape sequence (red text) and a newline: what a terminal would obey.
HOSTILE = "x\x1b[31my\nz"
SHOWN = "x\\x1b[31my\\x0az"


def _errors(result: pytest.RunResult) -> list[str]:
    return [line for line in result.errlines if line.startswith("ERROR")]


def _one_escaped_line(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.errlines
    text = result.stderr.str() + result.stdout.str()
    assert "\x1b" not in text and "Traceback" not in text
    (line,) = _errors(result)
    assert SHOWN in line, line
    # The line the user's text was on is the whole error: nothing of it on a second line.
    assert not any(line.startswith("z") for line in result.errlines), result.errlines
    return line


@pytest.mark.parametrize("suite", [HOSTILE, HOSTILE + ".yaml"])
def test_a_suite_name_or_path_is_shown_escaped(pytester: pytest.Pytester, suite: str) -> None:
    result = pytester.runpytest(f"--bench-suite={suite}", "--collect-only")
    line = _one_escaped_line(result)
    assert "unknown suite" in line or "not found" in line


@pytest.mark.parametrize("suite", [True, False], ids=["suite", "bench fixture"])
def test_a_baseline_path_is_shown_escaped(pytester: pytest.Pytester, suite: bool) -> None:
    pytester.makefile(".yaml", s=SUITE)
    pytester.makepyfile(test_a="def test_a(): pass")
    args = ["--bench-suite=s.yaml"] if suite else ["test_a.py"]
    result = pytester.runpytest(*args, f"--bench-compare={HOSTILE}.json", "--collect-only")
    assert "--bench-compare" in _one_escaped_line(result)


def test_a_revision_is_shown_escaped(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE)

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(pytester.path), "-c", "user.email=a@b",
                        "-c", "user.name=a", *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", "s.yaml")
    git("commit", "-qm", "s")
    result = pytester.runpytest("--bench-suite=s.yaml", f"--bench-against={HOSTILE}",
                                "--collect-only")
    assert "--bench-against" in _one_escaped_line(result)
