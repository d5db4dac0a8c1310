"""The name of a ``bench`` fixture test's benchmark: its row in the table and its stream's name.

A test's benchmark is named by its test id: its name (``test_speed``, as ever), the name of a
parametrized one with its parameters (``test_x[8]``), and, when two tests the session collected
share that name (``TestSmall::test_speed`` and ``TestLarge::test_speed``, or the same name in two
modules), each is qualified by the fewest classes, module and folders that tell it from the
others: one stream and one row per test. Its stream's file name is a safe encoding of that name
(layout.stream_path: ``test_x%5B8%5D.D0.data``).

The names are given at collection, before ``-k`` and ``-m`` leave tests out, so that a subset's
rows keep the names of the whole session's (and of a baseline saved from it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

__all__ = ["ROW_NAME", "name_items", "qualified_names", "row_name", "row_names"]

#: The benchmark name of a test that uses the fixture, given at collection.
ROW_NAME = pytest.StashKey[str]()


def qualified_names(nodeid: str, name: str) -> list[str]:
    """The names ``name`` may take, fewest qualifiers first: itself, then with each enclosing
    class, the module's file and each folder above it, and last the whole node id."""
    names = [name]
    head = nodeid[: -len(name)] if name and nodeid.endswith(name) else ""
    if not head.endswith("::"):
        return names if nodeid in names else [*names, nodeid]
    path, _, classes = head[:-2].partition("::")
    tail = name
    for scope in reversed(classes.split("::") if classes else []):
        tail = f"{scope}::{tail}"
        names.append(tail)
    folders = path.split("/") if path else []
    for start in range(len(folders) - 1, -1, -1):
        names.append("/".join(folders[start:]) + f"::{tail}")
    return names if nodeid in names else [*names, nodeid]


def row_names(tests: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each test's benchmark name by node id, from ``(node id, name)`` pairs: its name when no
    other test has it, else its shortest qualified name that no other test of that name can
    take (:func:`qualified_names`); a name too long for a file is shortened
    (layout.fit_test_id)."""
    from pytest_dlbench.layout import fit_test_id

    by_name: dict[str, list[str]] = {}
    for nodeid, name in tests:
        if nodeid not in by_name.setdefault(name, []):
            by_name[name].append(nodeid)
    rows: dict[str, str] = {}
    for name, nodeids in by_name.items():
        if len(nodeids) == 1:
            rows[nodeids[0]] = fit_test_id(name)
            continue
        options = {nodeid: qualified_names(nodeid, name) for nodeid in nodeids}
        for nodeid, own in options.items():
            others = {n for other, names in options.items() if other != nodeid for n in names}
            rows[nodeid] = fit_test_id(next((n for n in own if n not in others), nodeid))
    return rows


def _uses_bench(item: Any) -> bool:
    return "bench" in getattr(item, "fixturenames", ())


def name_items(items: Sequence[pytest.Item]) -> None:
    """Give each collected test that uses the fixture its benchmark name (:data:`ROW_NAME`)."""
    tests = [item for item in items if _uses_bench(item)]
    if not tests:
        return  # an ordinary test run loads no more (layout stands on the suites' modules)
    names = row_names((item.nodeid, item.name) for item in tests)
    for item in tests:
        item.stash[ROW_NAME] = names[item.nodeid]


def row_name(item: pytest.Item) -> str:
    """The benchmark name of ``item``: the one given at collection, else (a session that did
    not name them: a ``--bench-suite`` run beside your tests) among the tests it runs."""
    name = item.stash.get(ROW_NAME, None)
    if name is None:
        name_items(item.session.items)
        name = item.stash.get(ROW_NAME, None)
    if name is None:  # not among the session's items (a test run by hand)
        from pytest_dlbench.layout import fit_test_id

        name = fit_test_id(item.name)
    return name
