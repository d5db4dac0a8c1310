"""The saved JSON summary: contents, provenance, errors, and migration of older versions.

How the provenance is gathered (machine, versions, commit) is tested in test_machine.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runs import steady_at, write_run

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.results import baseline as bl
from pytest_dlbench.results.baseline import (
    SCHEMA,
    VERSION,
    BaselineError,
    BaselineMissing,
    load_summary,
    migrate,
    save_summary,
)
from pytest_dlbench.results.scoring import summarize_dir


@pytest.fixture
def summary(tmp_path: Path):
    runs = tmp_path / "runs"
    write_run(runs, "a", steady_at(100.0), repeat=0, weight=2.0)
    write_run(runs, "a", steady_at(110.0), repeat=1, weight=2.0)
    write_run(runs, "b", [(r, 1.0) for r in (8, 8, 9, 9, 10, 10, 11, 11, 12, 12)])
    write_run(runs, "c", status="crash", reason="crash: killed by SIGSEGV")
    return summarize_dir(runs)


def test_saved_summary_holds_numbers_and_provenance(summary, tmp_path: Path) -> None:
    path = save_summary(summary, tmp_path / "out" / "base.json", suite="smoke")
    data = json.loads(path.read_text())
    assert (data["schema"], data["version"], data["suite"]) == (SCHEMA, VERSION, "smoke")
    assert data["score"] == pytest.approx(summary.score)
    assert data["incomplete"] == ["c"]
    assert data["failure_rate"] == pytest.approx(0.25)
    assert set(data["machine"]) >= {"hostname", "cpu", "cores", "gpus", "driver"}
    assert data["versions"]["python"] and data["versions"]["pytest-dlbench"]
    assert "torch" in data["versions"] and "commit" in data
    a = data["benchmarks"]["a"]
    for key in ("perf", "std", "std_pct", "n", "fail", "perf_adj", "weight", "total", "units"):
        assert key in a, key
    assert a["rates"] == [100.0, 110.0]
    assert data["benchmarks"]["b"]["samples"] == [8.0, 9.0, 10.0, 11.0, 12.0]
    assert data["benchmarks"]["b"]["runs"][0]["block_rates"] == [8.0, 9.0, 10.0, 11.0, 12.0]
    assert data["benchmarks"]["c"]["runs"][0]["reason"] == "crash: killed by SIGSEGV"


def test_round_trip(summary, tmp_path: Path) -> None:
    loaded = load_summary(save_summary(summary, tmp_path / "base.json"))
    assert loaded["benchmarks"]["a"]["perf_adj"] == pytest.approx(summary.get("a").perf_adj)
    assert loaded["suite"] is None


def test_non_finite_numbers_are_saved_as_null(summary, tmp_path: Path) -> None:
    from dataclasses import replace

    odd = replace(summary, failure_rate=float("inf"))
    data = json.loads(save_summary(odd, tmp_path / "x.json").read_text())
    assert data["failure_rate"] is None


# -- errors -----------------------------------------------------------------------------------
def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineMissing) as info:
        load_summary(tmp_path / "nope.json")
    assert isinstance(info.value, DlbenchError)
    assert str(tmp_path / "nope.json") in str(info.value)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json\n\n", "not valid JSON"),
        ('{"benchmarks": {}, "score": 1}', "not a pytest-dlbench summary"),  # foreign: no schema
        ('[1, 2, 3]', "not a pytest-dlbench summary"),
        ('{"schema": "pytest-benchmark", "version": 1}', "not a pytest-dlbench summary"),
        (json.dumps({"schema": SCHEMA, "version": 99}), "newer"),
        (json.dumps({"schema": SCHEMA, "version": 1, "benchmarks": []}), "invalid summary"),
        (json.dumps({"schema": SCHEMA, "version": 1, "benchmarks": {"a": {"perf": 1}}}),
         "lacks perf_adj"),
        (json.dumps({"schema": SCHEMA, "version": "one", "benchmarks": {}}), "invalid"),
    ],
)
def test_unusable_files_raise_one_line_naming_the_file(
    tmp_path: Path, content: str, match: str
) -> None:
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=match) as info:
        load_summary(path)
    message = str(info.value)
    assert not isinstance(info.value, BaselineMissing)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message


def test_binary_file_is_a_baseline_error(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BaselineError, match=str(path)):
        load_summary(path)


# -- migration --------------------------------------------------------------------------------
V0 = {
    "schema": SCHEMA,
    "version": 0,
    "score": 42.0,
    "benchmarks": [
        {"name": "a", "perf": 100.0, "std": 1.0, "std%": 0.01, "n": 2, "fail": 0,
         "perf_adj": 99.0, "weight": 1.0, "rates": [99.0, 101.0]},
    ],
}


def test_v0_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(V0))
    data = load_summary(path)
    assert data["version"] == VERSION
    a = data["benchmarks"]["a"]
    assert a["std_pct"] == 0.01 and "std%" not in a
    assert a["rates"] == [99.0, 101.0] and a["runs"] == []
    assert data["incomplete"] == [] and data["score"] == 42.0


def test_migration_chain_uses_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake(data):
        calls.append(data["version"])
        return {**data, "version": 0}

    monkeypatch.setitem(bl.MIGRATIONS, -1, fake)
    out = migrate({"schema": SCHEMA, "version": -1, "benchmarks": []})
    assert calls == [-1] and out["version"] == VERSION


def test_migration_refuses_unknown_versions() -> None:
    with pytest.raises(ValueError, match="unknown summary version"):
        migrate({"version": -5})
