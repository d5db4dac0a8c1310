"""The help a person reads: ``pytest --help`` shows the ``--bench-*`` options by task, ``dlbench
--help`` is plain words, and every ``dlbench`` command takes the pytest spelling of its options
(issue 25, item 6)."""

from __future__ import annotations

import argparse
import re

import pytest

from pytest_dlbench.loggers.registry import logger_options, logging_title
from pytest_dlbench.options import OPTION_GROUPS

#: The titles and flags ``pytest --help`` groups by: options.py's and the loggers' registry's.
TITLES = [logging_title(title) if name == "logging" else title for name, title, _ in OPTION_GROUPS]
FLAGS = {flag for _, _, flags in OPTION_GROUPS for flag in flags} | {
    option.pytest_flag for option in logger_options()}


def _sections(text: str) -> dict[str, list[str]]:
    """``pytest --help``'s sections (a title line ending in ':') and the options under each."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
        for flag in re.findall(r"^  (--bench-[a-z-]+)", line):
            sections.setdefault(current, []).append(flag)
    return sections


def test_pytest_help_groups_the_bench_options_by_task(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    sections = _sections(result.stdout.str())
    grouped = {title: flags for title, flags in sections.items() if title.startswith("dlbench")}
    assert list(grouped) == TITLES
    shown = [flag for flags in grouped.values() for flag in flags]
    assert len(shown) == len(set(shown)) >= 25
    # Every option is named in the group of its task, none left to the default one.
    assert set(shown) <= FLAGS, set(shown) - FLAGS
    assert all(1 <= len(flags) <= 8 for flags in grouped.values()), grouped
    # Nothing of ours is left in pytest's other sections, nor the child's hidden options.
    others = [f for title, flags in sections.items() if title not in grouped for f in flags]
    assert others == []


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from pytest_dlbench.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_dlbench_command_takes_the_pytest_spelling_of_its_options() -> None:
    pytest_flags = FLAGS
    missing = []
    for name, sub in _subparsers().items():
        for action in sub._actions:
            for flag in action.option_strings:
                twin = "--bench-" + flag[2:]
                if flag.startswith("--") and not flag.startswith("--bench-") and \
                        twin in pytest_flags and twin not in action.option_strings:
                    missing.append(f"dlbench {name} {flag}")
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [(["report", "r", "--bench-compare", "b.json"], "compare", "b.json"),
     (["report", "r", "--compare", "b.json"], "compare", "b.json"),
     (["report", "r", "--bench-sort=perf"], "sort", "perf"),
     (["resolve", "s", "--bench-select", "a"], "bench_select", ["a"]),
     (["resolve", "s", "--select", "a"], "bench_select", ["a"]),
     (["log", "r", "--bench-mlflow", "sqlite:///x"], "mlflow", "sqlite:///x"),
     (["log", "r", "--experiment", "e"], "experiment", "e"),
     (["log", "r", "--bench-experiment", "e"], "experiment", "e"),
     (["log", "r", "--base", "d"], "bench_base", "d"),
     (["compare", "a", "b", "--bench-tolerance=5%"], "tolerance", 0.05),
     (["machine", "--bench-require-ready"], "require_ready", True)],
)
def test_both_spellings_parse_alike(argv: list[str], dest: str, value: object) -> None:
    from pytest_dlbench.cli import build_parser

    assert getattr(build_parser().parse_args(argv), dest) == value


def test_dlbench_help_is_plain_words(capsys: pytest.CaptureFixture) -> None:
    from pytest_dlbench.cli import main

    texts = []
    for argv in ([], *([name] for name in _subparsers())):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        texts.append(capsys.readouterr().out)
    for text in texts:
        assert "``" not in text and ":func:" not in text and ":mod:" not in text, text
        assert not re.search(r"seed \d{3}", text), text
    assert "--bench-compare" in texts[0]  # the naming rule, said once
