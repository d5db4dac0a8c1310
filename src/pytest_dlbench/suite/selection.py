"""What a ``--bench-select`` that selects nothing says: the words that match no benchmark, group
or tag, and the names close to them (difflib), so that ``--bench-select=resnt`` is one line
naming ``resnet18, resnet50`` instead of an empty run."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.suite.spec import BenchSpec

__all__ = ["select_words", "unknown_selection"]

#: At most this many close names per unknown word.
CLOSE_NAMES = 5


def select_words(values: Iterable[str]) -> list[str]:
    """The words of ``--bench-select`` values (each a comma-separated list), in order, once."""
    words: list[str] = []
    for value in values:
        for word in value.split(","):
            word = word.strip()
            if word and word not in words:
                words.append(word)
    return words


def _known(specs: Iterable[BenchSpec]) -> list[str]:
    """Every benchmark name, then every group and tag, once each."""
    names: list[str] = []
    specs = list(specs)
    for candidate in [*(s.name for s in specs), *(s.group for s in specs if s.group),
                      *(t for s in specs for t in s.tags)]:
        if candidate not in names:
            names.append(candidate)
    return names


def unknown_selection(specs: Iterable[BenchSpec], select: Iterable[str], *,
                      option: str = "--bench-select") -> str | None:
    """One line for the words of ``select`` that match no benchmark name, group or tag of
    ``specs`` (with the close names of each), or None when every word matches something."""
    known = _known(specs)
    parts = []
    for word in select_words(select):
        if word in known:
            continue
        close = difflib.get_close_matches(word, known, n=CLOSE_NAMES, cutoff=0.6)
        parts.append(f"{quoted(word)} (did you mean {', '.join(close)}?)" if close else repr(word))
    if not parts:
        return None
    return f"{option}: no benchmark, group or tag is named {', '.join(parts)}"
