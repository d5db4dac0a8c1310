"""RunRecords: a run's stream records parsed once, by kind, the one reader the telemetry, the
usage validation and the profile read a run through."""

from __future__ import annotations

import ast
from pathlib import Path

from _paths import REPO_ROOT

from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event, NullStream, StreamWriter

RECORDS = [
    {"event": "config", "spec": {"name": "toy"}, "device": 0},
    {"event": "meta", "host": "h"},
    {"event": "monitor", "gpu": False, "reason": "no NVML", "interval": 1.0},
    {"event": "telemetry", "time": 1.0, "rss_bytes": 10},
    {"event": "rate", "value": 1.0, "step": 0, "warmup": True, "time": 2.0},
    {"event": "rate", "value": 2.0, "step": 1, "warmup": False, "time": 3.0},
    {"event": "region", "key": "io", "count": 2, "seconds": 0.1, "step": 1},
    {"event": "loss", "value": 0.5, "step": 1},
    {"event": "profile", "status": "start", "step": 2, "profiled": True},
    {"event": "profile_step", "step": 2, "k": 0, "phase": "timed", "profiled": True},
    {"event": "profile_region", "key": "io", "step": 2, "seconds": 0.05, "profiled": True},
    {"event": "profile", "status": "end", "step": 2, "profiled": True},
    {"event": "monitor", "gpu": True},  # a second one: the first says how sampling started
    {"event": "monitor_summary", "errors": 1},
    {"event": "monitor_summary", "errors": 2, "last_error": "x"},
    {"event": "novel_kind", "x": 1},
    {"event": "end", "status": "fail", "reason": "killed"},
    {"event": "end", "status": "timeout", "reason": "appended by the parent"},
]


def test_records_by_kind() -> None:
    run = RunRecords.of(RECORDS)
    assert run.config["device"] == 0 and run.meta["host"] == "h"
    assert [r["step"] for r in run.rates] == [0, 1]
    assert [r["step"] for r in run.steady] == [1] and [r["step"] for r in run.warmup] == [0]
    assert len(run.regions) == len(run.losses) == len(run.telemetry) == 1
    assert run.profile_start["status"] == "start"
    assert len(run.profile_steps) == len(run.profile_regions) == 1
    assert run.kind("novel_kind") == ({"event": "novel_kind", "x": 1},)  # unknown kinds kept
    assert run.kind(Event.COMPILE) == () and run.flops is None


def test_which_record_of_a_repeated_kind_counts() -> None:
    run = RunRecords.of(RECORDS)
    assert run.end["status"] == "timeout"  # the last: the parent's, after a torn child
    assert run.monitor["gpu"] is False  # the first: how sampling started
    assert run.monitor_summary["errors"] == 2  # the last


def test_records_in_memory_and_read_back_are_the_same(tmp_path: Path) -> None:
    # A NullStream keeps the Event members it was given; the file holds their values.
    memory = NullStream()
    path = tmp_path / "toy.D0.data"
    with StreamWriter(path) as stream:
        for target in (memory, stream):
            target.write(Event.CONFIG, device=0)
            target.write(Event.RATE, value=1.0, step=0)
            target.write_many([{"event": Event.LOSS.value, "value": 0.1, "step": 0}])
            target.write(Event.END, status="ok")
    for run in (RunRecords.of(memory.records), RunRecords.read(path)):
        assert run.config["device"] == 0 and len(run.rates) == len(run.losses) == 1
        assert run.end["status"] == "ok" and len(run) == 4
        assert list(run) == list(run.records)  # iterable as plain records


def test_parsing_is_once() -> None:
    run = RunRecords.of(RECORDS)
    assert RunRecords.of(run) is run


# -- no literal record kind in src/ ------------------------------------------------------------
# Every record kind is an Event member (measure/stream.py): a kind written or compared as a
# string literal ("rate") is one that a rename of the kind misses. Read with ``ast``.
PACKAGE = REPO_ROOT / "src" / "pytest_dlbench"
KINDS = {str(e) for e in Event}
#: Where a record's ``event`` field may be compared directly: the stream's own reader and
#: writer, RunRecords (the one reader of a run's records) and the progress line, which takes a
#: running stream's records one at a time while they are written.
DISPATCHERS = {"measure/stream.py", "measure/records.py", "plugin/progress.py"}


def _kind_literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and node.value in KINDS:
        return str(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((k for k in map(_kind_literal, node.elts) if k is not None), None)
    return None


def _reads_event(node: ast.AST) -> bool:
    """``x.get("event")``, ``x["event"]`` or a name ``event`` (what one was read into)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and bool(node.args) and _is_event_key(node.args[0])
    if isinstance(node, ast.Subscript):
        return _is_event_key(node.slice)
    return isinstance(node, ast.Name) and node.id == "event"


def _is_event_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "event"


def literal_kinds(source: str, name: str = "<src>") -> list[str]:
    """Where ``source`` names a record kind by a string literal: ``write("rate", ...)``,
    ``kind("rate")``/``first``/``last``, ``{"event": "rate"}``, ``... .get("event") == "rate"``
    (or ``in (...)``); and, outside :data:`DISPATCHERS`, any comparison of a record's
    ``event``: a dispatcher of its own instead of RunRecords."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            kind = _kind_literal(node.args[0]) if not isinstance(node.args[0], ast.Tuple) else None
            if node.func.attr in ("write", "_write", "kind", "first", "last") and kind:
                found.append(f"{where}: .{node.func.attr}({kind!r})")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is not None and _is_event_key(key) and _kind_literal(value):
                    found.append(f"{where}: {{'event': {_kind_literal(value)!r}}}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_reads_event, operands)):
                kind = next((k for k in map(_kind_literal, operands) if k), None)
                if kind is not None:
                    found.append(f"{where}: the event compared with {kind!r}")
                elif name not in DISPATCHERS:
                    found.append(f"{where}: a record's event compared (use RunRecords)")
    return found


def test_no_literal_record_kind_in_src() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py"))
             for hit in literal_kinds(path.read_text(encoding="utf-8"),
                                      path.relative_to(PACKAGE).as_posix())]
    assert not found, "record kinds as literals (use measure.stream.Event):\n" + "\n".join(found)


def test_the_literal_kind_scan_finds_each_form() -> None:
    source = '''
stream.write("rate", value=1.0)
self._write("monitor_summary", {})
records.append({"event": "loss", "value": 1.0})
if record.get("event") == "profile_step": pass
if r["event"] in ("config", "meta"): pass
run.kind("compile")
if record.get("event") == Event.END: pass
'''
    lines = sorted(int(hit.split(":")[1]) for hit in literal_kinds(source))
    assert lines == [2, 3, 4, 5, 6, 7, 8]  # each form, once
    # RunRecords may compare a record's event with an Event member; never with a literal.
    assert sorted(int(h.split(":")[1]) for h in literal_kinds(source, "measure/records.py")) \
        == [2, 3, 4, 5, 6, 7]
    clean = 'stream.write(Event.RATE, value=1.0)\ntw.write("\\n")\nif kind == "config": pass\n'
    assert literal_kinds(clean) == []
