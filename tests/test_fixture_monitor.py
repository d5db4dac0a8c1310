"""The ``bench`` fixture's run carries the suite child's telemetry (issue 38): the monitor's
records in its stream, so that results/busy.py judges it and the saved-baseline gate puts a
busy run in doubt as it does a suite's."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.measure import monitor as monitor_package
from pytest_dlbench.measure.monitor import Monitor
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.results import gate
from pytest_dlbench.results.busy import busy_stats

# About 1.5 s of timed steps: the monitor's thread samples once a second, inside the window.
LONG = textwrap.dedent(
    """
    import time

    def test_long(bench):
        for _ in bench.iterate(range(120), batch_size=4):
            time.sleep(0.05)
    """
)

# Slow when $SLOW is set; with $BUSY, the test writes samples of a machine whose every core
# was busy (the monitor's own record: cpu of the run's tree and of the machine, in percent).
GATED = textwrap.dedent(
    """
    import os
    import time

    def test_gated(bench):
        step = 0.02 if os.environ.get("SLOW") else 0.002
        for _ in bench.iterate(range(64), batch_size=4):
            time.sleep(step)
            if os.environ.get("BUSY"):
                bench.stream.write("telemetry", time=time.time(), elapsed=0.0,
                                   cpu_percent=100.0, system_cpu_percent=100.0, gpus=[])
    """
)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out", *args)


def _stream(pytester: pytest.Pytester, name: str) -> Path:
    paths = sorted((pytester.path / "out" / "runs").glob(f"*/{name}.D0.data"))
    assert paths, "no stream written"
    return paths[-1]


def test_a_fixture_run_has_the_records_busy_needs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_long=LONG)
    result = _run(pytester, "--bench-confirm=0")
    assert result.ret == 0
    records = read_stream(_stream(pytester, "test_long"))
    kinds = [r["event"] for r in records]
    assert kinds[-1] == "end" and records[-1]["status"] == "ok"
    assert kinds.index("monitor") < kinds.index("rate")  # started before the timed window
    assert kinds.index("monitor_summary") > max(i for i, k in enumerate(kinds) if k == "rate")
    meta = RunRecords.of(records).meta
    assert meta is not None and meta["state"]["cores"] >= 1
    samples = [r for r in records if r["event"] == "telemetry"]
    assert len(samples) >= 2
    assert any(s.get("system_cpu_percent") is not None and s.get("cpu_percent") is not None
               for s in samples)
    stats = busy_stats(records)  # a sample inside the window with both readings
    assert isinstance(stats.get("busy"), bool)


class _NoProcessMonitor(Monitor):
    """The real monitor without the process tree: its samples say nothing of the CPU, so only
    the samples the test writes decide whether the run was busy."""

    def _open_tree(self) -> Any:
        return None


@pytest.fixture
def gated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(monitor_package, "Monitor", _NoProcessMonitor)
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(test_gated=GATED)
    saved = _run(pytester, "--bench-save=base.json")
    assert saved.ret == 0
    monkeypatch.setenv("SLOW", "1")  # ten times slower from now on
    return pytester


def test_a_slower_fixture_run_regresses(gated: pytest.Pytester) -> None:
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=0")
    assert result.ret == gate.REGRESSED, result.stdout.str()


def test_a_busy_fixture_run_is_inconclusive_not_regressed(
        gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUSY", "1")
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=0")
    assert result.ret == gate.INCONCLUSIVE, result.stdout.str()
    result.stdout.fnmatch_lines(["test_gated * 0.1* inconclusive",
                                 "inconclusive: test_gated: ratio 0.1* beyond *, but the machine "
                                 "was busy during this run (1 of 1 runs: *"])
