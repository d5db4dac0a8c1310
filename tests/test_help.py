"""The help a person reads: ``pytest --help`` shows the ``--bench-*`` options by task, ``dlbench
--help`` is plain words, and every ``dlbench`` command takes the pytest spelling of its options
(issue 25, item 6)."""

from __future__ import annotations

import re

import pytest

from pytest_dlbench.options import OPTION_GROUPS


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
    assert list(grouped) == [title for _, title, _ in OPTION_GROUPS]
    shown = [flag for flags in grouped.values() for flag in flags]
    assert len(shown) == len(set(shown)) >= 25
    # Every option is named in the group of its task, none left to the default one.
    listed = {flag for _, _, flags in OPTION_GROUPS for flag in flags}
    assert set(shown) <= listed, set(shown) - listed
    assert all(1 <= len(flags) <= 8 for flags in grouped.values()), grouped
    # Nothing of ours is left in pytest's other sections, nor the child's hidden options.
    others = [f for title, flags in sections.items() if title not in grouped for f in flags]
    assert others == []
