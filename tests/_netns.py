"""Nodes on one machine, for the tests that need more than one (tests/run/test_multinode_netns.py,
an sshd; _slurm_cluster.py, a real Slurm): network namespaces and their links, a node's hosts
file, what is left in a namespace, and the run's processes seen from outside."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from _polling import wait_until


def sh(*cmd: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, **kw)  # type: ignore[call-overload]


def missing(tools: Iterable[str], hint: str = "") -> str | None:
    """Why this machine cannot make namespaced nodes (None: it can): root on Linux, each of
    ``tools`` on PATH (``hint`` names where they come from), and a network namespace that can
    really be made (a container may forbid it)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux (network namespaces)"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"needs {tool}" + (f" ({hint})" if hint else "")
    probe = f"dlbprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def in_namespace(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *cmd, check=check)


def bring_up(ns: str, link: str, address: str) -> None:
    """``link`` (already moved into ``ns``) up with ``address``/24, and the namespace's
    loopback up."""
    in_namespace(ns, "ip", "addr", "add", f"{address}/24", "dev", link)
    in_namespace(ns, "ip", "link", "set", link, "up")
    in_namespace(ns, "ip", "link", "set", "lo", "up")


def set_link(ns: str, link: str, up: bool) -> None:
    """A node cut off (``up=False``: its packets vanish, a silent node) or back."""
    in_namespace(ns, "ip", "link", "set", link, "up" if up else "down")


def write_hosts(path: Path, name: str, others: Mapping[str, str] | None = None) -> None:
    """A node's hosts file as Debian's installer writes it: its own name resolves to a loopback
    address (``127.0.1.1``), not to the node's address; ``others``: name to address."""
    lines = ["127.0.0.1 localhost", f"127.0.1.1 {name}"]
    lines += [f"{address} {other}" for other, address in (others or {}).items()]
    path.write_text("\n".join(lines) + "\n")


def remove_namespace(ns: str) -> None:
    """Whatever is left in ``ns`` (sessions, ranks, what nsenter put there) killed, then the
    namespace deleted; never raises."""
    for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    sh("ip", "netns", "del", ns, check=False)


# -- the run's processes, seen from the machine ------------------------------------------------

def run_processes(project: Path) -> list[int]:
    """The pids of the live processes of a run under ``project`` (its stream is in their
    environment), on any node."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if str(project) in process.environ().get("DLBENCH_STREAM", ""):
                found.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return found


def remote_rank(project: Path, timeout: float = 60) -> int:
    """The pid of a rank of ``project``'s run on a node other than the launching one."""
    import psutil

    def find() -> int | None:
        for process in psutil.process_iter(["pid"]):
            try:
                env = process.environ()
            except (psutil.Error, OSError):
                continue
            if (str(project) in env.get("DLBENCH_STREAM", "") and "RANK" in env
                    and env.get("DLBENCH_NODE_ROLE") == "worker"):
                return int(process.pid)
        return None

    found: list[int] = []

    def started() -> bool:
        pid = find()
        if pid is not None:
            found.append(pid)
        return pid is not None

    if not wait_until(started, timeout, step=0.2):
        raise AssertionError("no rank started on node2")
    return found[-1]


def wait_for_steps(stream_dir: Path, bench: str, steps: int = 1, timeout: float = 120) -> None:
    """Until ``bench``'s stream under ``stream_dir`` holds ``steps`` timed steps' rates: the
    job's ranks are in their steps (a fault injected before would hit their start instead)."""
    def stepping() -> bool:
        for stream in stream_dir.rglob(f"{bench}.D0.data"):
            rates = 0
            for line in stream.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):  # a line being written
                    rates += json.loads(line).get("event") == "rate"
            if rates >= steps:
                return True
        return False

    if not wait_until(stepping, timeout, step=0.2):
        raise AssertionError(f"{bench} never reached its steps under {stream_dir}")


def wait_until_gone(project: Path, deadline: float) -> list[int]:
    """Poll until nothing of ``project``'s run is left or ``deadline`` (monotonic) passes; what is
    left then."""
    wait_until(lambda: not run_processes(project), max(0.0, deadline - time.monotonic()),
               step=1.0)
    return run_processes(project)
