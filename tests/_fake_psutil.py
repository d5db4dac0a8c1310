"""A fake psutil over fake processes, for the tests of whose CPU a run counts (a session's
slots, a distributed run's ranks) and of the machine's load outside it.

:class:`FakePsutil` is the module: ``Process(pid)``, ``Error``/``AccessDenied`` and a system
``cpu_percent`` that each test's machine defines. :class:`FakeProc` is a process: its parent,
its environment, its CPU time so far (``seconds``) and its ``cpu_percent`` for the next sample
(``cpu``). A process removed from ``procs`` has exited: asking it for its children or its CPU
times raises, as psutil's NoSuchProcess does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace


class FakeError(Exception):
    """psutil's Error (NoSuchProcess, AccessDenied)."""


class FakeProc:
    def __init__(self, machine: FakePsutil, pid: int, parent: FakeProc | None,
                 env: dict[str, str]) -> None:
        self.machine, self.pid, self._parent, self.env = machine, pid, parent, env
        self.seconds = 0.0  # CPU time so far
        self.cpu = 0.0  # percent of one core, for the next sample

    def parent(self) -> FakeProc | None:
        return self._parent

    def environ(self) -> dict[str, str]:
        return dict(self.env)

    def _alive(self) -> None:
        if self not in self.machine.procs:
            raise FakeError("exited")

    def children(self, recursive: bool = False) -> list[FakeProc]:
        self._alive()
        direct = [p for p in self.machine.procs if p._parent is self]
        if not recursive:
            return direct
        return [q for p in direct for q in [p, *p.children(recursive=True)]]

    def cpu_times(self) -> SimpleNamespace:
        self._alive()
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


class FakePsutil:
    """The psutil module over ``procs``; a subclass adds its processes and the system's CPU."""

    Error = FakeError
    AccessDenied = FakeError

    def __init__(self) -> None:
        self.procs: list[FakeProc] = []

    def add(self, parent: FakeProc | None, env: dict[str, str] | None = None) -> FakeProc:
        proc = FakeProc(self, 100 + len(self.procs), parent, env or {})
        self.procs.append(proc)
        return proc

    def Process(self, pid: int) -> FakeProc:  # noqa: N802 - psutil's name
        found = [p for p in self.procs if p.pid == pid]
        if not found:
            raise FakeError(f"no process {pid}")
        return found[0]

    def cpu_percent(self, interval: float | None) -> float:
        raise NotImplementedError
