"""Saved summaries and histories written for the tests (results/history, results/model): a
run's summary, a history folder of autosaved commits, a baseline session's summary."""

from __future__ import annotations

import datetime as dt
import math
import random
from pathlib import Path
from typing import Any

from _runs import steady_at, write_run

from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.history import GitInfo, autosave
from pytest_dlbench.results.model import SCHEMA, SuiteSummary, summary_dict

MACHINE = {"hostname": "box", "cpu": "Xeon", "cores": 8,
           "gpus": [{"index": 0, "name": "H100", "memory": 80}]}


#: A good saved baseline of one benchmark, ``a``, that a test spoils one field of.
BASELINE = {
    "schema": "pytest-dlbench/summary", "version": 1, "score": 10.0, "incomplete": [],
    "failure_rate": 0.0,
    "benchmarks": {"a": {"perf_adj": 10.0, "weight": 1.0, "n": 1, "fail": 0, "perf": 10.0,
                         "rates": [10.0], "samples": [9.0, 10.0, 11.0, 10.0, 10.0],
                         "units": "items/s", "runs": []}},
}


def run_summary(tmp_path: Path, name: str, rates: dict[str, float]) -> Any:
    run_dir = tmp_path / "base" / "runs" / name
    run_dir.mkdir(parents=True)
    for bench, rate in rates.items():
        write_run(run_dir, bench, steady_at(rate, 6))
    return summarize_dir(run_dir)


def saved(summary: Any) -> dict[str, Any]:
    return {**summary_dict(summary, suite="s"), "machine": MACHINE}


def commit(i: int) -> GitInfo:
    return GitInfo(commit=f"{i:02d}" + "ab" * 19, date=f"2026-01-{i + 1:02d}T00:00:00+00:00",
                   branch="main")


def history_of(tmp_path: Path, rates: list[float], bench: str = "b") -> Path:
    folder = tmp_path / "history"
    for i, rate in enumerate(rates):
        summary = run_summary(tmp_path, f"r{i}", {bench: rate, "other": 50.0})
        autosave(saved(summary), folder, git=commit(i),
                 now=dt.datetime(2026, 2, 1, 0, 0, i, tzinfo=dt.timezone.utc))
    return folder


#: Benchmark b's rates, one a commit: a step down of 15 % at commit 5.
RATES = [100, 101, 99, 100.5, 99.5, 85, 86, 84.5, 85.5, 85]


def spoil(folder: Path, index: int, perf: str, rate: str | None = None) -> Path:
    """Replace benchmark b's perf (and its run's rate) in the history file of commit
    ``index`` with the JSON text ``perf``."""
    path = sorted(next(folder.iterdir()).glob("*.json"))[index]
    text = path.read_text()
    value = f"{RATES[index]:.1f}"
    assert text.count(f'"perf": {value},') == 1
    text = text.replace(f'"perf": {value},', f'"perf": {perf},')
    if rate is not None:
        text = text.replace(f'"rate": {value},', f'"rate": {rate},', 1)
    path.write_text(text)
    return path


def session(rates: list[float], *, machine: dict[str, Any] | None = None,
            name: str = "x") -> SuiteSummary:
    """One session's saved summary: its runs' rates, one benchmark."""
    runs = [{"rate": r, "status": "ok", "block_rates": [], "repeat": i, "device": 0}
            for i, r in enumerate(rates)]
    perf = sum(rates) / len(rates)
    data: dict[str, Any] = {"schema": SCHEMA, "version": 1, "benchmarks": {name: {
        "n": len(runs), "fail": 0, "perf": perf, "perf_adj": perf, "weight": 1.0,
        "runs": runs}}}
    if machine is not None:
        data["machine"] = machine
    return SuiteSummary.from_dict(data)


def drifting(rng: random.Random, *, drift: float, within: float, runs: int = 5,
             level: float = 100.0) -> list[float]:
    """A session's run rates: the session's own offset (log-normal, ``drift``), then each
    run's (``within``)."""
    offset = level * math.exp(rng.gauss(0.0, drift))
    return [offset * math.exp(rng.gauss(0.0, within)) for _ in range(runs)]
