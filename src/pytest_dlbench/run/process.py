"""How a helper process of this package starts: dead with its parent, pinned to its slot's cores,
with this package on its ``PYTHONPATH``. Shared by the child's supervisor (run/child.py) and the
fork server (run/forkserver.py), so that neither imports the other to start a process.

Standard library only: the fork server imports it before anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["package_path", "pdeathsig_setter", "pin_running_process", "preexec"]


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def pdeathsig_setter(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A function the forked child calls so that the kernel sends it ``sig`` (SIGKILL; SIGTERM
    for a child that cleans up) when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``); None
    where that does not exist. Looked up here, in the parent: nothing is loaded between fork
    and exec."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]

    def set_pdeathsig() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return set_pdeathsig


def preexec(cpus: Sequence[int] | None) -> Callable[[], None] | None:
    """What the child does between fork and exec: die with its parent, then pin itself to its
    slot's cores (its threads and workers inherit them)."""
    pdeathsig = pdeathsig_setter()
    pin = _pinning(cpus)
    parent = os.getpid()
    if pdeathsig is None and pin is None:
        return None

    def setup() -> None:
        if pdeathsig is not None:
            pdeathsig()
            if os.getppid() != parent:  # the parent died before the call: nobody will signal
                os._exit(1)
        if pin is not None:
            pin()

    return setup


def _pinning(cpus: Sequence[int] | None) -> Callable[[], None] | None:
    """Pin the child to its slot's cores before it starts (its threads and workers inherit)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    chosen = set(cpus)

    def pin() -> None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, chosen)

    return pin


def pin_running_process(cpus: Sequence[int]) -> list[int]:
    """Pin this running process, every thread of it, to ``cpus`` (a process torchrun started,
    which no ``preexec`` could pin before its first line); returns the cores, ``[]`` where
    affinity is not supported. The caller sizes its thread pools to them."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return []
    cores = sorted(set(cpus))
    # sched_setaffinity(0) pins the calling thread only; threads already running (gloo, OpenMP,
    # pytest's) keep the old mask unless each is set. New threads inherit the caller's mask.
    tasks = Path("/proc/self/task")
    tids = [int(t) for t in os.listdir(tasks)] if tasks.is_dir() else [0]
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cores)
    return cores


def package_path(env: Mapping[str, str]) -> str:
    """``PYTHONPATH`` for a helper process (the guard, the fork server) that imports this very
    package, whatever the parent's working directory."""
    here = str(Path(__file__).resolve().parents[2])
    rest = env.get("PYTHONPATH")
    return os.pathsep.join([here, rest] if rest else [here])
