"""The saved JSON summary: contents, provenance, errors, and migration of older versions. The
format is the type's (SuiteSummary.to_dict/from_dict); results/model/baseline.py reads and writes
files.

How the provenance is gathered (machine, versions, commit) is tested in test_machine.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runs import steady_at, write_run

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.model import (
    SCHEMA,
    VERSION,
    BaselineError,
    BaselineMissing,
    SuiteSummary,
    SummaryFormatError,
    load_summary,
    migrate,
    save_summary,
    summary_json,
)


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
    assert isinstance(loaded, SuiteSummary)  # typed, not a dict
    assert loaded.get("a").perf_adj == pytest.approx(summary.get("a").perf_adj)
    assert loaded.suite is None
    # Read back, a summary says what it said when saved: from_dict is to_dict's inverse.
    saved = json.loads((tmp_path / "base.json").read_text())
    assert loaded.to_dict() == saved
    assert loaded.provenance is not None and loaded.provenance["machine"] == saved["machine"]
    assert summary.provenance is None  # scored here: the machine is this one


def test_a_summary_read_back_keeps_its_runs_and_noise(summary, tmp_path: Path) -> None:
    loaded = load_summary(save_summary(summary, tmp_path / "base.json"))
    for before in summary.benchmarks:
        after = loaded.get(before.name)
        assert after is not None
        assert after.noise_samples == before.noise_samples
        assert after.noise_from == before.noise_from
        assert [(r.label, r.status, r.rate, r.block_rates) for r in after.runs] == [
            (r.label, r.status, r.rate, r.block_rates) for r in before.runs]
        assert after.per_device == before.per_device
    assert [r.label for r in loaded.failed_runs] == ["c[D0]"]
    assert loaded.incomplete == summary.incomplete == ("c",)


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
         "invalid summary: benchmarks.a.perf_adj: missing"),
        (json.dumps({"schema": SCHEMA, "version": 1, "benchmarks": {"a": {
            "perf_adj": 1, "weight": 1, "n": 1, "fail": 0, "per_device": {"gpu": 1.0}}}}),
         "invalid summary: benchmarks.a.per_device.gpu.\\[key\\]: must be a device number"),
        (json.dumps({"schema": SCHEMA, "version": 1, "benchmarks": {"a": {
            "perf_adj": 1, "weight": 1, "n": 1, "fail": 0, "runs": [{"timing": {"steps": "x"}}]
        }}}), "invalid summary: benchmarks.a.runs.0.timing.steps: must be an integer"),
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
V1 = {
    "schema": SCHEMA,
    "version": 1,
    "score": 42.0,
    "incomplete": [],
    "failure_rate": 0.0,
    "benchmarks": {
        "a": {"perf": 100.0, "std": 1.0, "std_pct": 0.01, "n": 2, "fail": 0,
              "perf_adj": 99.0, "weight": 1.0, "runs": []},
    },
}


def test_a_saved_dict_reads_back_with_from_dict_alone() -> None:
    """compare() and the loggers hold dicts, not files: the same reader, the same errors."""
    loaded = SuiteSummary.from_dict(V1)
    assert loaded.get("a").perf == 100.0  # type: ignore[union-attr]
    with pytest.raises(SummaryFormatError, match="not a pytest-dlbench summary"):
        SuiteSummary.from_dict({"benchmarks": {}})
    with pytest.raises(SummaryFormatError, match=r"^invalid summary: benchmarks.a.n: must be"):
        SuiteSummary.from_dict({**V1, "benchmarks": {"a": {
            "perf_adj": 1, "weight": 1, "n": "one", "fail": 0}}})


def test_migration_chain_uses_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake(version: int):
        def step(data):
            calls.append(data["version"])
            return {**data, "version": version + 1}
        return step

    monkeypatch.setitem(summary_json.MIGRATIONS, -1, fake(-1))
    monkeypatch.setitem(summary_json.MIGRATIONS, 0, fake(0))
    out = migrate({"schema": SCHEMA, "version": -1, "benchmarks": {}})
    assert calls == [-1, 0] and out["version"] == VERSION


def test_the_pre_release_version_0_is_not_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown summary version 0"):
        migrate({"schema": SCHEMA, "version": 0, "benchmarks": []})


def test_migration_refuses_unknown_versions() -> None:
    with pytest.raises(ValueError, match="unknown summary version"):
        migrate({"version": -5})
    with pytest.raises(ValueError, match="unknown summary version False"):
        migrate({"version": False})  # JSON false is no version 0
