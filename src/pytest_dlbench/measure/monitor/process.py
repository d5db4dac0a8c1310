"""The benchmark's process tree, sampled with psutil: CPU, resident memory and disk bytes.

psutil is passed in (imported lazily by the monitor, or a fake in tests); a process that
exits between two samples is simply left out of the next one.

The tree is the *run's*, not only the sampling process's: its root is the furthest ancestor
that carries the same run marker (``DLBENCH_STREAM``, which every process of a run inherits:
core/protocol.py). In an njobs job the monitor runs in the reporting rank, whose siblings (the
other ranks of this node) are children of the torchrun agent, not its own: rooted at the rank,
they counted as "other processes" and every multi-rank run was judged busy
(results/figures/busy.py). Rooted at the agent (or the launcher above it), they are the run's.

With several device slots at once (xdist workers), the other slots' benchmarks are neither this
run's nor a neighbour's: :class:`SessionCpu` sums the CPU of the whole pytest session (its root
process, from ``DLBENCH_SESSION``, and all its descendants), so that what is left of the
machine's CPU is the load from outside the session (results/figures/busy.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.protocol import Env

__all__ = ["NO_PROCESS", "OWN_TREE", "ProcessTree", "Session", "SessionCpu", "run_root",
           "session_from_env"]

#: Ancestors looked at above the sampling process (rank, torchrun, node launcher...).
MAX_RUN_DEPTH = 8
#: The marker of a run whose tree is its own process and its children, whatever marker its
#: environment holds: the ``bench`` fixture's in an ordinary test run, which no dlbench parent
#: started (a marker it inherited is a shell's or an outer run's: rooted there, a neighbour's
#: memory was the test's peak RSS and its CPU the run's own, so the run was never busy).
OWN_TREE = ""


def run_root(psutil: Any, proc: Any, marker: str | None) -> Any:
    """The furthest ancestor of ``proc`` whose environment has ``DLBENCH_STREAM == marker``
    (``proc`` itself when none has, or without a marker). An environment is the one a process
    was started with: the xdist worker or the fork server above a run's child lacks the marker
    and stops the walk; one that cannot be read (another user's) stops it too."""
    root = proc
    if not marker:
        return root
    for _ in range(MAX_RUN_DEPTH):
        try:
            parent = root.parent()
            if parent is None or parent.environ().get(Env.STREAM) != marker:
                break
        except (psutil.Error, OSError):
            break
        root = parent
    return root

# CPU percentages over a shorter period are tick noise (see ProcessTree).
MIN_CPU_PERIOD = 0.05
#: Ancestors looked at above the sampling process for the session's root (child, fork server,
#: xdist worker, torchrun agent, node launcher...).
MAX_SESSION_DEPTH = 16


@dataclass(frozen=True)
class Session:
    """The pytest session whose slots run at once: its root process and the slots' cores."""

    pid: int
    cpus: tuple[int, ...]


def session_from_env(environ: Mapping[str, str]) -> Session | None:
    """The session of ``DLBENCH_SESSION`` and ``DLBENCH_SESSION_CPUS`` (core/protocol.py), None
    when either is unset or not a pid and a comma list of cores."""
    pid, cpus = environ.get(Env.SESSION, ""), environ.get(Env.SESSION_CPUS, "")
    try:
        parsed = Session(int(pid), tuple(sorted({int(c) for c in cpus.split(",")})))
    except ValueError:
        return None
    return parsed if parsed.pid > 0 and parsed.cpus and min(parsed.cpus) >= 0 else None


def _cpu_seconds(proc: Any) -> float:
    """User and system CPU time of the process itself (its reaped children's are left out:
    they were counted while they ran, as members of the tree)."""
    times = proc.cpu_times()
    return float(times.user) + float(times.system)


class SessionCpu:
    """The CPU of a session's processes: its root and all its descendants (the xdist workers,
    every slot's children, their workers and ranks), summed, in percent of one core.

    From each process's CPU time, not psutil's per-process ``cpu_percent``: a process born
    since the last reading (the other slot's next child, a DataLoader worker) counts all its CPU
    time, where ``cpu_percent`` would read 0 for its first period and leave that CPU to
    "outside". What a process used between the last reading and its exit is lost (little: less
    than an interval of one process).
    """

    def __init__(self, psutil: Any, root: int, member: int) -> None:
        """``member``: the sampling process, which must be ``root`` or one of its descendants
        (a pid that is not, another machine's or a reused one, raises ValueError)."""
        self.psutil = psutil
        try:
            self.root = psutil.Process(root)
            proc = psutil.Process(member)
            for _ in range(MAX_SESSION_DEPTH):
                if proc is None or proc == self.root:
                    break
                proc = proc.parent()
        except psutil.Error as exc:  # no such process (another machine's pid), not ours
            raise ValueError(f"process {root} is not an ancestor of process {member}") from exc
        if proc is None or proc != self.root:
            raise ValueError(f"process {root} is not an ancestor of process {member}")
        self._at = time.monotonic()
        self._seconds: dict[int, tuple[Any, float]] = self._read() or {}

    def _read(self) -> dict[int, tuple[Any, float]] | None:
        """Each process's CPU seconds by pid; None when the tree cannot be listed (its root
        gone): no reading, rather than every process "born" at the next one."""
        psutil = self.psutil
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return None
        out: dict[int, tuple[Any, float]] = {}
        for proc in procs:
            with contextlib.suppress(psutil.Error):  # exited meanwhile, or not ours
                out[proc.pid] = (proc, _cpu_seconds(proc))
        return out

    def percent(self) -> float | None:
        """The session's CPU since the last call, None over a period too short to read."""
        now = time.monotonic()
        period = now - self._at
        if period < MIN_CPU_PERIOD:
            return None
        current = self._read()
        if current is None:
            return None
        used = 0.0
        for pid, (proc, seconds) in current.items():
            before = self._seconds.get(pid)
            # Process.__eq__ compares the creation time too: a reused pid is a new process.
            if before is None or before[0] != proc:
                used += seconds  # born since the last reading
            else:
                used += max(seconds - before[1], 0.0)
        self._at, self._seconds = now, current
        return round(100.0 * used / period, 1)


class ProcessTree:
    """CPU %, RSS and disk bytes of a run's processes: the sampling process's :func:`run_root`
    and all its descendants (DataLoader workers, the other ranks of an njobs job...).

    ``cpu_percent`` is summed over the tree (100 = one core busy). RSS is summed too, which
    counts the pages that forked workers share with their parent more than once: an upper bound,
    and cheap (exact PSS would read every process's smaps). Disk bytes are what the tree's
    processes read from or wrote to storage since the start (page-cache hits are not disk reads);
    a worker that exited keeps counting with its last known values.
    """

    def __init__(self, psutil: Any, pid: int, marker: str | None = None,
                 session: SessionCpu | None = None) -> None:
        """``marker``: the run's ``DLBENCH_STREAM`` (default: this process's, when ``pid`` is
        this process; :data:`OWN_TREE`: none); the tree is rooted at :func:`run_root`.
        ``session``: the CPU of the session around the run, sampled with the machine's
        (``session_cpu_percent``)."""
        self.psutil = psutil
        self.session = session
        if marker is None and pid == os.getpid():
            marker = os.environ.get(Env.STREAM)
        self.pid = pid
        self.root = run_root(psutil, psutil.Process(pid), marker)
        self._procs: dict[int, Any] = {}
        self._io: dict[int, tuple[int, int]] = {}
        self._io_ok = True
        self._io_base = (0, 0)
        # cpu_percent compares with its previous call; over a few milliseconds (the first
        # sample, the last one right after a thread sample) CPU-time ticks of 10 ms make it
        # noise (550 % on 2 cores was seen), so a sample that close gives None instead.
        self._cpu_at = time.monotonic()
        self._walk(cpu=True)
        self._system_primed: set[int] = set()
        self._io_base = self._io_total()

    def prime_system(self) -> None:
        """Set this thread's reference for the machine's CPU now, so that its first sample is a
        reading (of the time since): the sampler thread calls it as it starts. Without it the
        thread's first sample, one interval in, has none, and a timed window of a second or two
        (one or two samples) shows nothing of what else ran (results/figures/busy.py)."""
        with contextlib.suppress(Exception):
            self.psutil.cpu_percent(None)
            self._system_primed.add(threading.get_ident())

    def _walk(self, cpu: bool) -> list[tuple[Any, float, int]]:
        psutil = self.psutil
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            children = []
        current: dict[int, Any] = {}
        for proc in [self.root, *children]:
            cached = self._procs.get(proc.pid)
            # Process.__eq__ compares the creation time too: a reused pid is a new process.
            current[proc.pid] = cached if cached is not None and cached == proc else proc
        self._procs = current
        out = []
        for pid, proc in current.items():
            try:
                with proc.oneshot():
                    percent = proc.cpu_percent(None) if cpu else 0.0
                    rss = proc.memory_info().rss
                    if self._io_ok:
                        try:
                            io = proc.io_counters()
                            self._io[pid] = (int(io.read_bytes), int(io.write_bytes))
                        except AttributeError:  # no per-process I/O on this OS (macOS)
                            self._io_ok = False
                        except psutil.AccessDenied:
                            pass
            except psutil.Error:  # exited between children() and here, or not ours
                continue
            out.append((proc, float(percent), int(rss)))
        return out

    def _io_total(self) -> tuple[int, int]:
        return (sum(r for r, _ in self._io.values()), sum(w for _, w in self._io.values()))

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()  # psutil's own clock, not the monitor's (maybe fake) one
        cpu = now - self._cpu_at >= MIN_CPU_PERIOD
        if cpu:
            self._cpu_at = now
        procs = self._walk(cpu)
        system = None
        if cpu:
            with contextlib.suppress(Exception):
                system = float(self.psutil.cpu_percent(None))
            # psutil keeps cpu_percent(None)'s reference per thread: a thread's first call
            # compares with nothing and says 0.0, so that one is not a reading.
            thread = threading.get_ident()
            if thread not in self._system_primed:
                self._system_primed.add(thread)
                system = None
        read, write = self._io_total()
        out = {
            "cpu_percent": round(sum(c for _, c, _ in procs), 1) if procs and cpu else None,
            "system_cpu_percent": system,
            "rss_bytes": sum(r for _, _, r in procs) if procs else None,
            "procs": len(procs),
            "disk_read_bytes": read - self._io_base[0] if self._io_ok else None,
            "disk_write_bytes": write - self._io_base[1] if self._io_ok else None,
        }
        if self.session is not None:
            # Right after the machine's reading: both cover (nearly) the same period.
            out["session_cpu_percent"] = self.session.percent() if cpu else None
        return out


NO_PROCESS = {
    "cpu_percent": None,
    "system_cpu_percent": None,
    "rss_bytes": None,
    "procs": None,
    "disk_read_bytes": None,
    "disk_write_bytes": None,
}
