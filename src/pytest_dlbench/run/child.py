"""Running one benchmark in a child process that may crash, hang or run out of memory without
taking the suite down: the process is supervised here, and its stream always gets an ``end``.

No pytest here: the plugin builds the child's command line and turns outcomes into reports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.measure.stream import Event, StreamWriter, read_stream
from pytest_dlbench.run.protocol import Outcome, Status

__all__ = ["run_child"]

# After SIGTERM a child gets this long to flush before SIGKILL.
KILL_GRACE_S = 3.0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's whole process group (data-loader workers too), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # Workers left in the group after the leader died.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _pinning(cpus: Sequence[int] | None) -> Callable[[], None] | None:
    """Pin the child to its slot's cores before it starts (its threads and workers inherit)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    chosen = set(cpus)

    def pin() -> None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, chosen)

    return pin


def _last_end(stream: Path) -> dict[str, Any] | None:
    try:
        records = read_stream(stream)
    except (FileNotFoundError, ValueError):
        return None
    ends = [r for r in records if r.get("event") == Event.END]
    return ends[-1] if ends else None


def run_child(
    cmd: Sequence[str],
    *,
    stream: Path,
    log: Path,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpus: Sequence[int] | None = None,
) -> Outcome:
    """Run one benchmark's child process; whatever happens, the stream ends with ``end``.

    The child writes its own ``end`` when it can. If it died first (signal, ``os._exit``), ran
    past ``timeout`` seconds or was interrupted, the parent appends the ``end`` record.
    """
    stream.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: we can kill it and its workers
            preexec_fn=_pinning(cpus),
        )
        try:
            returncode = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode, timed_out = proc.returncode, True
        except KeyboardInterrupt:
            _kill_group(proc, grace=1.0)
            with StreamWriter(stream) as writer:
                writer.write(Event.END, status=Status.FAIL, reason="interrupted", time=time.time())
            raise
    end = _last_end(stream)
    if timed_out:
        reason = f"timeout: ran past max_duration ({timeout:g} s)"
        outcome = Outcome(Status.TIMEOUT, reason, returncode)
    elif end is not None:
        return Outcome(Status.parse(end.get("status")), str(end.get("reason") or ""), returncode)
    elif returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == signal.SIGKILL:
            outcome = Outcome(
                Status.OOM, f"killed by {name} (most likely the out-of-memory killer)", returncode
            )
        else:
            outcome = Outcome(Status.CRASH, f"crash: killed by {name}", returncode)
    else:
        outcome = Outcome(
            Status.CRASH, f"crash: exited with status {returncode} before finishing", returncode
        )
    with StreamWriter(stream) as writer:
        writer.write(Event.END, status=outcome.status, reason=outcome.reason, time=time.time(),
                     writer="parent", returncode=returncode)
    return outcome
