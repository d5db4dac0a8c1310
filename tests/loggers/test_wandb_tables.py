"""W&B tables of profile reports: one type to a column, so ``wandb.Table`` takes every table of a
real profiled run (issue 24 item 12: system.csv without NVML; issue 25 item 13: the speed
report), during the run (``--bench-wandb``) and after it (``dlbench log --wandb``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import child_env

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.loggers.tables import Table, read_table, tabulate

TOY = "pytest_dlbench.workloads.toy:main"


def _kinds(table: Table) -> list[set[str]]:
    """The types of each column's cells, None left out."""
    return [{type(row[i]).__name__ for row in table.rows if row[i] is not None}
            for i in range(len(table.columns))]


def test_a_column_of_text_and_numbers_is_text() -> None:
    # The speed report's shape: an object of scalars, its 'report' and 'units' text.
    table = tabulate({"report": "speed", "throughput": 7.5e4, "steps": 5, "ok": True,
                      "profiler_device_s": None})
    assert table is not None
    assert table.rows == (("report", "speed"), ("throughput", "75000.0"), ("steps", "5"),
                          ("ok", "true"), ("profiler_device_s", None))
    assert _kinds(table) == [{"str"}, {"str"}]


def test_a_column_of_one_type_keeps_it() -> None:
    table = Table(("n", "x", "flag"), ((1, 2.5, True), (None, 3, False)))
    assert table.rows == ((1, 2.5, True), (None, 3, False))  # int and float are both numbers


def test_an_empty_csv_cell_is_missing(tmp_path: Path) -> None:
    # system.csv on a machine without NVML: the machine-wide rows have no device, energy no value.
    path = tmp_path / "system.csv"
    path.write_text("metric,device,value,unit\nwall_time,,1.5,s\nrss_peak,,5169,B\n"
                    "energy,,,J\ngpu_util,0,81.0,%\n")
    table = read_table(path)
    assert table is not None
    assert table.rows == (("wall_time", None, 1.5, "s"), ("rss_peak", None, 5169, "B"),
                          ("energy", None, None, "J"), ("gpu_util", 0, 81.0, "%"))


def test_wandb_takes_the_tables() -> None:
    wandb = pytest.importorskip("wandb")
    for table in (tabulate({"report": "speed", "throughput": 7.5e4, "steps": 5, "ok": True}),
                  Table(("device", "value"), (("", 1.0), (0, "n/a"), (None, None)))):
        assert table is not None
        wandb.Table(columns=list(table.columns), data=[list(r) for r in table.rows])


# -- real profiled runs -----------------------------------------------------------------------


def _tables(wandb_dir: Path) -> set[str]:
    """The profile tables the offline W&B runs under ``wandb_dir`` hold."""
    return {p.relative_to(p.parents[1]).as_posix().split("_")[0]
            for p in wandb_dir.rglob("media/table/profile/*.table.json")}


@pytest.mark.slow
def test_profiled_runs_tables_reach_wandb(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_DIR", "WANDB_API_KEY", "WANDB_ENTITY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "s.yaml").write_text(
        f"a: {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 3}}}}}}\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-suite=s.yaml",
         "--bench-base=out", "--bench-profile=speed,system", "--bench-wandb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in child_env().items() if not k.startswith("WANDB_")},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "wandb logging disabled" not in output and "not logged as a table" not in output
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    profile = run_dir / "a.D0.profile"
    # The reports as the profiler wrote them: text and numbers in one column, empty cells.
    speed = json.loads((profile / "speed.json").read_text())
    assert isinstance(speed["report"], str) and isinstance(speed["throughput"], float)
    assert ",," in (profile / "system.csv").read_text()
    assert _tables(tmp_path / "out" / "wandb") == {"profile/speed", "profile/system"}
    # After the run: the same run directory in another results directory, logged again.
    other = tmp_path / "other" / "runs" / run_dir.name
    shutil.copytree(run_dir, other)
    assert dlbench(["log", str(other), "--wandb"]) == 0
    assert _tables(tmp_path / "other" / "wandb") == {"profile/speed", "profile/system"}
