"""Load is seen in every mode: with several slots at once (``pytest -n 2``), a neighbour that
runs all along is busy (issue 46, item 3).

Each run's tree is one slot's; the other slots' benchmarks are outside it, so the per-run rule
could count only load that came and went, and a steady neighbour hid among the other slots.
The monitor now samples the whole session's CPU (``session_cpu_percent``) and records the slots'
cores (``session_cpus``); outside is the machine less the session. Synthetic streams for the rule,
a fake psutil for the sampling, and one real ``pytest -n 2`` beside a busy loop (slow).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _fake_psutil import FakeProc, FakePsutil

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.monitor import Monitor
from pytest_dlbench.measure.monitor.process import (
    ProcessTree,
    Session,
    SessionCpu,
    session_from_env,
)
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.results.figures import BUSY_CORES, busy_stats, machine_busy

# -- the rule, on synthetic streams ---------------------------------------------------------------

Sample = tuple[float, float, float]  # (run's tree, session, machine) in cores


def stream(samples: Sequence[Sample], *, cores: int = 2, cpus: Sequence[int] = (0,),
           session_cpus: Sequence[int] | None = (0, 1)) -> list[dict[str, Any]]:
    """One slot's run: meta (its own cores), the monitor record (the session's slots' cores, or
    none: one slot, an older version), a 1-s rate record and a sample per second."""
    monitor: dict[str, Any] = {"event": "monitor", "gpu": False, "interval": 1.0}
    if session_cpus is not None:
        monitor.update(session_pid=1234, session_cpus=list(session_cpus))
    out = [{"event": "meta", "cpus": list(cpus), "state": {"cores": cores}}, monitor]
    for k, (tree, session, machine) in enumerate(samples):
        t = 100.0 + k
        out.append({"event": "rate", "value": 10.0, "items": 10, "seconds": 1.0, "time": t + 1,
                    "warmup": False, "step": k})
        sample = {"event": "telemetry", "time": t + 0.5, "cpu_percent": 100.0 * tree,
                  "system_cpu_percent": 100.0 * machine / cores}
        if session_cpus is not None:
            sample["session_cpu_percent"] = 100.0 * session
        out.append(sample)
    return out


def older(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same run as a version before the session's fields wrote it."""
    drop = {"session_pid", "session_cpus", "session_cpu_percent"}
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


#: Two one-thread benchmarks on two one-core slots, the session's own processes (controller,
#: workers, guards) a few percent of a core. A neighbour spinning a core takes a third of the
#: machine: each slot gets two thirds of its core.
ALONE = [(1.0, 2.0, 2.0)] * 20
NEIGHBOUR = [(0.66, 1.35, 2.0)] * 20


@pytest.mark.parametrize("slot", [0, 1])
def test_two_slots_beside_a_steady_neighbour_are_both_busy(slot: int) -> None:
    stats = busy_stats(stream(NEIGHBOUR, cpus=(slot,)))
    assert stats["busy"] is True and stats["busy_share"] == 1.0
    assert stats["outside_cpu_cores"] == pytest.approx(0.65)
    assert "ran all along" in stats["busy_reason"]
    # What the run's own tree said: the neighbour and the other slot, steady, its quiet level.
    assert busy_stats(older(stream(NEIGHBOUR, cpus=(slot,))))["busy"] is False


def test_two_slots_on_a_quiet_machine_are_not_busy() -> None:
    for slot in (0, 1):
        stats = busy_stats(stream(ALONE, cpus=(slot,)))
        assert stats["busy"] is False and stats["outside_cpu_cores"] == 0.0


def test_the_other_slot_ending_first_is_not_a_neighbour() -> None:
    """The other slot's benchmark ends half way through this one's window: its core goes quiet.
    Outside this run's tree that "came and went" (busy by the per-run rule); outside the
    session nothing did."""
    samples = [(1.0, 2.0, 2.0)] * 10 + [(1.0, 1.0, 1.0)] * 10
    assert busy_stats(stream(samples))["busy"] is False
    was = busy_stats(older(stream(samples)))
    assert was["busy"] is True and "came and went" in was["busy_reason"]


def test_the_cores_no_slot_has_are_left_to_others() -> None:
    """Two one-core slots on four cores: a neighbour that fits in the two idle cores does not
    compete; CPU beyond them can only have run on the slots' cores."""
    fits = [(1.0, 2.0, 3.5)] * 20  # 1.5 cores outside, 2 idle
    stats = busy_stats(stream(fits, cores=4))
    assert stats["busy"] is False and stats["outside_cpu_cores"] == pytest.approx(1.5)
    beyond = [(0.8, 1.6, 4.0)] * 20  # 2.4 cores outside: 0.4 of them on the slots' cores
    assert busy_stats(stream(beyond, cores=4))["busy"] is False
    over = [(0.7, 1.4, 4.0)] * 20  # 2.6 outside: past the idle cores by more than half a core
    stats = busy_stats(stream(over, cores=4))
    assert stats["busy"] is True and "2.5 or more" in stats["busy_reason"]


def test_one_slot_is_judged_as_before() -> None:
    """No session's fields (one slot, or an older stream): the run's own tree, as before."""
    whole = [(1.0, 0.0, 1.6)] * 20  # a run with every core, a steady 0.6 core beside it
    one = busy_stats(stream(whole, cpus=(0, 1), session_cpus=None))
    assert one["busy"] is True and one == busy_stats(older(stream(whole, cpus=(0, 1))))
    assert one["outside_cpu_cores"] == pytest.approx(0.6)
    verdict = machine_busy([0.6] * 20, whole_machine=True)
    assert verdict is not None and verdict.to_dict() == one
    # A session recorded, but no sample with its reading in the window: the run's own rule.
    records = stream(NEIGHBOUR)
    for record in records:
        record.pop("session_cpu_percent", None)
    assert busy_stats(records) == busy_stats(older(records))


def test_the_idle_cores_only_raise_the_all_along_level() -> None:
    assert not machine_busy([1.4] * 20, whole_machine=True, idle=1.0).busy  # type: ignore[union-attr]
    assert machine_busy([1.5] * 20, whole_machine=True, idle=1.0).busy  # type: ignore[union-attr]
    bursts = [0.0, 0.0, 0.0, 1.0] * 5  # load that came and went, within the idle cores
    assert machine_busy(bursts, whole_machine=True, idle=2.0).busy  # type: ignore[union-attr]
    assert BUSY_CORES == 0.5


# -- the session's CPU, with a fake psutil --------------------------------------------------------

class FakeMachine(FakePsutil):
    """The controller, two workers with a child each, and a neighbour outside the session."""

    def __init__(self) -> None:
        super().__init__()
        self.controller = self.add(None)
        self.child0 = self.add(self.add(self.controller))
        self.child1 = self.add(self.add(self.controller))
        self.neighbour = self.add(None)
        self.late: FakeProc | None = None
        self.system = 0.0

    def cpu_percent(self, interval: float | None) -> float:
        return self.system


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [time.monotonic()]
    monkeypatch.setattr("pytest_dlbench.measure.monitor.process.time.monotonic", lambda: now[0])
    return now


def run_second(machine: FakeMachine, clock: list[float], **cores: float) -> None:
    """One second: each named process uses that many cores of CPU time."""
    for name, used in cores.items():
        proc = getattr(machine, name)
        proc.seconds += used
        proc.cpu = 100.0 * used
    clock[0] += 1.0


def test_the_session_is_every_slots_processes(clock: list[float]) -> None:
    machine = FakeMachine()
    session = SessionCpu(machine, machine.controller.pid, machine.child0.pid)
    run_second(machine, clock, child0=0.7, child1=0.6, neighbour=0.7)
    assert session.percent() == pytest.approx(130.0)  # not the neighbour's 70
    # The other slot's next child, born within the period: all of its CPU time is this period's.
    machine.late = machine.add(machine.child1.parent())
    machine.procs.remove(machine.child1)  # and the one before it has ended
    run_second(machine, clock, child0=1.0, late=0.4)
    assert session.percent() == pytest.approx(140.0)
    assert session.percent() is None  # no time since: no reading
    machine.procs.remove(machine.controller)  # the root gone: no reading, the references kept
    run_second(machine, clock, child0=1.0)
    assert session.percent() is None


def test_a_session_that_is_not_an_ancestor_is_refused() -> None:
    machine = FakeMachine()
    with pytest.raises(ValueError, match="not an ancestor"):
        SessionCpu(machine, machine.controller.pid, machine.neighbour.pid)
    with pytest.raises(ValueError, match="not an ancestor"):  # another machine's pid
        SessionCpu(machine, 99999, machine.child0.pid)


def test_the_tree_samples_the_session_beside_the_machine(clock: list[float]) -> None:
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.child0.pid, marker="",
                       session=SessionCpu(machine, machine.controller.pid, machine.child0.pid))
    tree.prime_system()
    run_second(machine, clock, child0=0.66, child1=0.66, neighbour=0.68)
    machine.system = 100.0
    sample = tree.sample()
    assert sample["cpu_percent"] == pytest.approx(66.0)
    assert sample["session_cpu_percent"] == pytest.approx(132.0)
    assert "session_cpu_percent" not in ProcessTree(machine, machine.child0.pid).sample()


def test_the_monitor_records_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real psutil: this test process is its own session's root and only member."""
    pytest.importorskip("psutil")
    out = NullStream()
    with Monitor(out, interval=60.0, gpu_indices=[], session=Session(os.getpid(), (0, 1))) as m:
        time.sleep(0.06)  # a CPU percentage needs a period of 50 ms at least
        m.sample()
    [info] = [r for r in out.records if r["event"] == "monitor"]
    assert info["session_pid"] == os.getpid() and info["session_cpus"] == [0, 1]
    readings = [r["session_cpu_percent"] for r in out.records if r["event"] == "telemetry"]
    assert readings[0] is None and isinstance(readings[1], float)
    # From the environment a launcher sets on a child of several slots; a bad one is none.
    monkeypatch.setenv(Env.SESSION, str(os.getpid()))
    monkeypatch.setenv(Env.SESSION_CPUS, "1,0")
    assert Monitor(NullStream()).session == Session(os.getpid(), (0, 1))
    assert session_from_env({Env.SESSION: "x", Env.SESSION_CPUS: "0"}) is None
    assert session_from_env({Env.SESSION: "12"}) is None


def test_a_monitor_outside_its_session_judges_the_run_alone() -> None:
    pytest.importorskip("psutil")
    out = NullStream()
    # Past Linux's largest pid: another machine's controller (a rank srun started elsewhere).
    with Monitor(out, interval=60.0, gpu_indices=[], session=Session(2**22 + 1, (0,))):
        pass
    [info] = [r for r in out.records if r["event"] == "monitor"]
    assert "session_pid" not in info
    assert all("session_cpu_percent" not in r for r in out.records if r["event"] == "telemetry")
    [summary] = [r for r in out.records if r["event"] == "monitor_summary"]
    assert summary["errors"] == 0


# -- a real pytest -n 2 beside a busy loop --------------------------------------------------------

DEFS = textwrap.dedent(
    """
    import time

    def spin(bench):
        for _ in bench.iterate(range(10_000), batch_size=4):
            end = time.perf_counter() + 0.05
            while time.perf_counter() < end:  # one thread of CPU work
                pass
    """
)
SUITE = "spin: {definition: defs.py:spin, voir: {options: {skip: 2, stop: 42, interval: 0.2s}}}\n"


@pytest.mark.slow
def test_pytest_n_2_beside_a_spinning_neighbour_flags_both_runs_busy(tmp_path: Path) -> None:
    from pytest_dlbench.measure.records import RunRecords
    from pytest_dlbench.measure.stream import read_stream
    from pytest_dlbench.results.figures import summarize_dir

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two CPU slots need two cores")
    (tmp_path / "defs.py").write_text(DEFS)
    (tmp_path / "s.yaml").write_text(SUITE)
    cmd = [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "-n", "2", "--bench-base=out",
           "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        output, _ = proc.communicate(timeout=300)
    finally:
        neighbour.kill()
        neighbour.wait()
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    runs = [RunRecords.of(read_stream(run_dir / f"spin.D{k}.data")) for k in (0, 1)]
    cpus = sorted(c for run in runs for c in (run.meta or {})["cpus"])
    for run in runs:  # the controller's session and its two slots' cores
        assert run.monitor is not None, output[-3000:]
        assert run.monitor["session_pid"] == proc.pid
        assert run.monitor["session_cpus"] == cpus
    bench = summarize_dir(run_dir).get("spin")
    assert bench is not None and len(bench.runs) == 2, output[-3000:]
    for run in bench.runs:
        assert run.telemetry.get("busy") is True, (run.telemetry, output[-2000:])
