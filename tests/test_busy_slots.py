"""Load is seen in every mode: with several slots at once (``pytest -n 2``), a neighbour that
runs all along is busy (issue 46, item 3).

Each run's tree is one slot's; the other slots' benchmarks are outside it, so the per-run rule
could count only load that came and went, and a steady neighbour hid among the other slots.
The monitor now samples the whole session's CPU (``session_cpu_percent``) and records the slots'
cores (``session_cpus``); outside is the machine less the session. Synthetic streams for the rule,
a fake psutil for the sampling, and one real ``pytest -n 2`` beside a busy loop (slow).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.monitor import Monitor
from pytest_dlbench.measure.monitor.process import (
    ProcessTree,
    Session,
    SessionCpu,
    session_from_env,
)
from pytest_dlbench.measure.stream import NullStream

# -- the session's CPU, with a fake psutil --------------------------------------------------------

class FakeError(Exception):
    pass


class FakeProc:
    """A process: its parent and its CPU time so far (seconds)."""

    def __init__(self, machine: FakeMachine, pid: int, parent: FakeProc | None) -> None:
        self.machine, self.pid, self._parent = machine, pid, parent
        self.seconds = 0.0
        self.cpu = 0.0  # psutil's cpu_percent, for the run's tree

    def parent(self) -> FakeProc | None:
        return self._parent

    def environ(self) -> dict[str, str]:
        return {}

    def children(self, recursive: bool = False) -> list[FakeProc]:
        direct = [p for p in self.machine.procs if p._parent is self]
        if not recursive:
            return direct
        return [q for p in direct for q in [p, *p.children(recursive=True)]]

    def cpu_times(self) -> SimpleNamespace:
        if self not in self.machine.procs:
            raise FakeError("exited")
        return SimpleNamespace(user=self.seconds * 0.75, system=self.seconds * 0.25)

    @contextlib.contextmanager
    def oneshot(self) -> Iterator[None]:
        yield

    def cpu_percent(self, interval: float | None) -> float:
        return self.cpu

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=1 << 20)

    def io_counters(self) -> SimpleNamespace:
        return SimpleNamespace(read_bytes=0, write_bytes=0)


class FakeMachine:
    """The controller, two workers with a child each, and a neighbour outside the session."""

    Error = FakeError
    AccessDenied = FakeError

    def __init__(self) -> None:
        self.procs: list[FakeProc] = []
        self.controller = self.add(None)
        self.child0 = self.add(self.add(self.controller))
        self.child1 = self.add(self.add(self.controller))
        self.neighbour = self.add(None)
        self.late: FakeProc | None = None
        self.system = 0.0

    def add(self, parent: FakeProc | None) -> FakeProc:
        proc = FakeProc(self, 100 + len(self.procs), parent)
        self.procs.append(proc)
        return proc

    def Process(self, pid: int) -> FakeProc:  # noqa: N802 - psutil's name
        found = [p for p in self.procs if p.pid == pid]
        if not found:
            raise FakeError(f"no process {pid}")
        return found[0]

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
        time.sleep(0.06)
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
