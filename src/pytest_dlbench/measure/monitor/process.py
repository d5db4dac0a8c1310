"""The benchmark's process tree, sampled with psutil: CPU, resident memory and disk bytes.

psutil is passed in (imported lazily by the monitor, or a fake in tests); a process that
exits between two samples is simply left out of the next one.

The tree is the *run's*, not only the sampling process's: its root is the furthest ancestor
that carries the same run marker (``DLBENCH_STREAM``, which every process of a run inherits:
core/protocol.py). In an njobs job the monitor runs in the reporting rank, whose siblings (the
other ranks of this node) are children of the torchrun agent, not its own: rooted at the rank,
they counted as "other processes" and every multi-rank run was judged busy (results/busy.py).
Rooted at the agent (or the launcher above it), they are the run's.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from pytest_dlbench.core.protocol import Env

__all__ = ["NO_PROCESS", "ProcessTree", "run_root"]

#: Ancestors looked at above the sampling process (rank, torchrun, node launcher...).
MAX_RUN_DEPTH = 8


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


class ProcessTree:
    """CPU %, RSS and disk bytes of a run's processes: the sampling process's :func:`run_root`
    and all its descendants (DataLoader workers, the other ranks of an njobs job...).

    ``cpu_percent`` is summed over the tree (100 = one core busy). RSS is summed too, which
    counts the pages that forked workers share with their parent more than once: an upper bound,
    and cheap (exact PSS would read every process's smaps). Disk bytes are what the tree's
    processes read from or wrote to storage since the start (page-cache hits are not disk reads);
    a worker that exited keeps counting with its last known values.
    """

    def __init__(self, psutil: Any, pid: int, marker: str | None = None) -> None:
        """``marker``: the run's ``DLBENCH_STREAM`` (default: this process's, when ``pid`` is
        this process); the tree is rooted at :func:`run_root`."""
        self.psutil = psutil
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
        (one or two samples) shows nothing of what else ran (results/busy.py)."""
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
            # compares with nothing and says 0.0 (issue 15), so that one is not a reading.
            thread = threading.get_ident()
            if thread not in self._system_primed:
                self._system_primed.add(thread)
                system = None
        read, write = self._io_total()
        return {
            "cpu_percent": round(sum(c for _, c, _ in procs), 1) if procs and cpu else None,
            "system_cpu_percent": system,
            "rss_bytes": sum(r for _, _, r in procs) if procs else None,
            "procs": len(procs),
            "disk_read_bytes": read - self._io_base[0] if self._io_ok else None,
            "disk_write_bytes": write - self._io_base[1] if self._io_ok else None,
        }


NO_PROCESS = {
    "cpu_percent": None,
    "system_cpu_percent": None,
    "rss_bytes": None,
    "procs": None,
    "disk_read_bytes": None,
    "disk_write_bytes": None,
}
