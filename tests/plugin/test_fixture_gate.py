"""The ``bench`` fixture's saved-baseline gate has the suite path's protections (issue 38): the
monitor's records in its stream, so that results/figures/busy.py judges it and a busy run is in
doubt as a suite's is, and ``--bench-confirm``'s reruns of a suspected test in fresh processes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import busy_stats

# Each test runs the bench fixture through pytest (in a subprocess or pytester), the confirmation
# reruns in fresh pytest processes: slow, as the project marks every test that starts processes.
pytestmark = pytest.mark.slow

# About 1.5 s of timed steps: the monitor's thread samples once a second, inside the window.
LONG = textwrap.dedent(
    """
    import time

    def test_long(bench):
        for _ in bench.iterate(range(120), batch_size=4):
            time.sleep(0.05)
    """
)

# Slow when $SLOW is set (in a confirmation's fresh ``pytest NODEID`` too, unless $FIRST_ONLY);
# with $BUSY, the test writes samples of a machine whose every core was busy (the monitor's
# own record: the CPU of the run's tree and of the machine, in percent). 24 steps, the first 5
# skipped: 19 observations a side tell a tenfold slowdown apart (a slow run takes 2.4 s).
GATED = textwrap.dedent(
    """
    import os
    import time

    def test_gated(bench):
        rerun = os.environ.get("DLBENCH_FIXTURE_ROUND")
        slow = os.environ.get("SLOW") and not (rerun and os.environ.get("FIRST_ONLY"))
        step = 0.1 if slow else 0.01
        for _ in bench.iterate(range(24), batch_size=4):
            time.sleep(step)
            if os.environ.get("BUSY"):
                bench.stream.write("telemetry", time=time.time(), elapsed=0.0,
                                   cpu_percent=100.0, system_cpu_percent=100.0, gpus=[])
    """
)
# The real monitor without the process tree, in this process and in a confirmation's: its
# samples say nothing of the CPU, so only the samples the test writes make a run busy.
CONFTEST = textwrap.dedent(
    """
    import pytest
    from pytest_dlbench.measure import monitor


    class NoProcessMonitor(monitor.Monitor):
        def _open_tree(self):
            return None


    @pytest.fixture(autouse=True)
    def _no_process_monitor(monkeypatch):
        monkeypatch.setattr(monitor, "Monitor", NoProcessMonitor)
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


@pytest.fixture
def gated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_gated=GATED)
    saved = _run(pytester, "--bench-save=base.json")
    assert saved.ret == 0
    monkeypatch.setenv("SLOW", "1")  # ten times slower from now on
    return pytester


def test_a_slower_fixture_run_regresses(gated: pytest.Pytester) -> None:
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=0")
    assert result.ret == gate.EXIT_REGRESSED, result.stdout.str()


def test_a_busy_fixture_run_is_inconclusive_not_regressed(
        gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUSY", "1")
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=0")
    assert result.ret == gate.EXIT_INCONCLUSIVE, result.stdout.str()
    result.stdout.fnmatch_lines(["test_gated * 0.1* inconclusive",
                                 "inconclusive: test_gated: ratio 0.1* beyond *, but the machine "
                                 "was busy during this run (1 of 1 runs: *"])


def test_a_regression_that_repeats_is_confirmed(gated: pytest.Pytester) -> None:
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=2")
    assert result.ret == gate.EXIT_REGRESSED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dlbench: confirming test_gated (first pass regressed, ratio 0.1*): run 1 of 2: ratio 0.1*",
        "dlbench: confirming test_gated (first pass regressed, ratio 0.1*): run 2 of 2: ratio 0.1*",
    ])
    assert "not used" not in result.stdout.str()
    rounds = sorted(p.parent.name for p in gated.path.glob("out/runs/*/confirm/*/*.D0.data"))
    assert rounds == ["1", "2"]


def test_a_regression_that_does_not_repeat_is_withdrawn(
        gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRST_ONLY", "1")  # the fresh process runs at the baseline's speed
    # A wide tolerance: a fresh process's first steps must not read as a repeat of 0.1.
    result = _run(gated, "--bench-compare=base.json", "--bench-confirm=2",
                  "--bench-tolerance=30%")
    assert result.ret in (0, gate.EXIT_INCONCLUSIVE), result.stdout.str()
    result.stdout.fnmatch_lines([
        "dlbench: confirming test_gated (first pass regressed, ratio 0.1*): run 1 of 2: ratio *",
        "*test_gated: confirmation 1 run, ratio *(not held)"])
    assert "run 2 of 2" not in result.stdout.str()  # not repeated: the rest would not count
