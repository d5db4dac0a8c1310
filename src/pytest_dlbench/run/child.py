"""Running one benchmark in a child process that may crash, hang or run out of memory without
taking the suite down: the process is supervised here, and its stream always gets an ``end``.

No pytest here: the plugin builds the child's command line and turns outcomes into reports.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pytest_dlbench.core.protocol import Env, Outcome, Status
from pytest_dlbench.measure.records import Record
from pytest_dlbench.measure.stream import Event, StreamWriteError, StreamWriter, read_last
from pytest_dlbench.run.forkserver import ForkedProcess, ForkServer, ForkServerError, fork_blockers
from pytest_dlbench.run.process import package_path, preexec

__all__ = ["run_child"]


class _Child(Protocol):
    """What supervising a child needs of it: a ``Popen`` or a :class:`ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


# After SIGTERM a child gets this long to flush before SIGKILL.
KILL_GRACE_S = 3.0
# The child's own deadline (Env.DEADLINE) is this much after the parent's: while the parent
# lives, it is always the one that stops a child that ran too long (and writes the ``end``).
DEADLINE_MARGIN_S = KILL_GRACE_S + 5.0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill_group(proc: _Child, stream: str, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's whole process group (data-loader workers too), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _kill_strays(proc, stream)


def _kill_strays(proc: _Child, stream: str) -> None:
    """SIGKILL what is left of the run once the child itself has ended, after a normal exit
    and a crash too: its process group (data-loader workers, a server it started), then every
    process marked as the run's (:data:`Env.STREAM`) that escaped the group.

    The group id is the child's pid (``start_new_session``); Linux does not reuse a pid while
    a process group still has it as its id, so this reaches no one else. torchrun starts each
    rank in a session of its own and, when it is SIGKILLed (the OOM killer, a timeout it did
    not answer), cannot stop them; torch does not make them die with it (no
    ``PR_SET_PDEATHSIG``): they would train on, holding their GPUs, into the next benchmark.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _kill_run_processes(stream)


# -- the guard: what ends a child when its parent dies ------------------------------------------
#
# The child dies with its parent (PR_SET_PDEATHSIG), but what it started in its process group
# would stay, and its stream would have no end. A small guard process, started beside each child,
# reads a pipe from the parent: the parent writes "done" when the child has ended. End of file
# without it means the parent died (killed, crashed): the guard kills the child's process group
# and every process of that run (Env.STREAM in its environment), then writes the stream's end.

_DONE = b"done"


def _start_guard(proc: _Child, stream: Path) -> subprocess.Popen | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest_dlbench.run.child", "guard", str(proc.pid),
             str(stream), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not stopped with the parent's group by a Ctrl-C
            env={**os.environ, "PYTHONPATH": package_path(os.environ)},
        )
    except OSError:
        return None  # no guard: the child still dies with its parent and at its deadline


def _release_guard(guard: subprocess.Popen | None) -> None:
    if guard is None:
        return
    try:
        assert guard.stdin is not None
        guard.stdin.write(_DONE)
        guard.stdin.close()
        guard.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        guard.kill()
        guard.wait()


#: Scans for a run's processes: one that was being killed may have started another meanwhile.
KILL_ROUNDS = 3


def _kill_run_processes(stream: str) -> int:
    """SIGKILL every process whose environment says it belongs to the run writing ``stream``
    (data-loader workers, torchrun ranks in sessions of their own, servers it started), and the
    process group each leads; returns how many were found. A process's environment is the one
    it was started with, which every process of a run inherits from its child."""
    try:
        import psutil
    except ImportError:  # a dependency; without it the process groups are all that is killed
        return 0
    me, found = os.getpid(), 0
    for _ in range(KILL_ROUNDS):
        marked = []
        for process in psutil.process_iter(["pid"]):
            if process.pid == me:
                continue
            try:
                if (process.environ().get(Env.STREAM) == stream
                        and process.status() != psutil.STATUS_ZOMBIE):
                    marked.append(process)
            except (psutil.Error, OSError):
                continue  # gone, or another user's: not this run's
        for process in marked:
            _kill_led_group(process.pid)
            with contextlib.suppress(psutil.Error, OSError):
                process.kill()
        found += len(marked)
        if not marked:
            break
    return found


def _kill_led_group(pid: int) -> None:
    """SIGKILL the process group that ``pid`` leads (a torchrun rank: its session), if any."""
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid and pid != os.getpgrp():
            os.killpg(pid, signal.SIGKILL)


def _guard(pgid: int, stream: str, parent: int) -> int:
    data = sys.stdin.buffer.read()  # until the parent writes "done", or dies
    if data.startswith(_DONE):
        return 0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    _kill_run_processes(stream)
    with contextlib.suppress(OSError, ValueError), StreamWriter(stream) as writer:
        # Refused if the child wrote its end before it was killed.
        writer.write(Event.END, status=Status.FAIL, time=time.time(), writer="guard",
                     reason=f"stopped: its parent process (pid {parent}) died")
    return 0


def _last_end(stream: Path) -> Record | None:
    try:  # line by line: a damaged line elsewhere hides no end, a long stream costs no memory
        return read_last(stream, Event.END)
    except (OSError, ValueError):  # ValueError: not a regular file (core/untrusted.py)
        return None


def _append_end(stream: Path, outcome: Outcome) -> Outcome:
    """Write the parent's ``end`` record; a stream that cannot be written (a full disk) makes
    the reason name the file and the cause, in one line."""
    try:
        with StreamWriter(stream) as writer:
            writer.write(Event.END, status=outcome.status, reason=outcome.reason,
                         time=time.time(), writer="parent", returncode=outcome.returncode)
    except OSError as exc:
        if outcome.reason.startswith(f"cannot write {stream}:"):
            return outcome  # the reason says so already
        return Outcome(outcome.status, f"{StreamWriteError.describe(stream, exc)} "
                                       f"({outcome.reason})", outcome.returncode)
    return outcome


def _start(cmd: Sequence[str], *, env: dict[str, str], cwd: Path | None, log: Path,
           cpus: Sequence[int] | None, server: ForkServer | None,
           stack: contextlib.ExitStack) -> subprocess.Popen | ForkedProcess:
    """The benchmark's process: forked from the warm server when it can, else fresh."""
    if server is not None and _forkable(cmd) and not fork_blockers(
            server.env, env, child_paths=server.child_paths):
        try:
            return server.spawn(cmd[3:], env={**env, Env.LAUNCHER: "warm"}, cwd=cwd, log=log,
                                cpus=cpus)
        except ForkServerError:
            pass  # server.broken says why; this and later benchmarks start fresh
    env[Env.LAUNCHER] = "fresh"
    log_file = stack.enter_context(open(log, "wb"))  # noqa: SIM115 - closed by the stack
    return subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: we can kill it and its workers
        preexec_fn=preexec(cpus),
    )


def _forkable(cmd: Sequence[str]) -> bool:
    """Only ``<this python> -m pytest ...`` is what the server runs (not torchrun)."""
    return len(cmd) >= 3 and cmd[0] == sys.executable and list(cmd[1:3]) == ["-m", "pytest"]


def run_child(
    cmd: Sequence[str],
    *,
    stream: Path,
    log: Path,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    cpus: Sequence[int] | None = None,
    server: ForkServer | None = None,
) -> Outcome:
    """Run one benchmark's child process; whatever happens, the stream ends with one ``end``.

    The child writes its own ``end`` when it can. If it died first (signal, ``os._exit``), ran
    past ``timeout`` seconds or was interrupted, the parent appends the ``end`` record. Whatever
    the child left in its process group is killed when it ends; the child dies with its parent
    (Linux) and ends itself at its deadline (:data:`Env.DEADLINE`) if nobody stopped it.

    With a ``server`` (the warm launcher), ``cmd`` (``python -m pytest ARGS``) is forked from it
    instead of started fresh, when the environment allows (:func:`forkserver.fork_blockers`);
    a server that cannot serve falls back to a fresh start.
    """
    stream.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    env[Env.DEADLINE] = f"{time.time() + timeout + DEADLINE_MARGIN_S:.3f}"
    env[Env.STREAM] = str(stream)
    env[Env.LAUNCHED] = f"{time.time():.6f}"
    with contextlib.ExitStack() as stack:
        proc = _start(cmd, env=env, cwd=cwd, log=log, cpus=cpus, server=server, stack=stack)
        guard = _start_guard(proc, stream)
        try:
            returncode: int | None = proc.wait(timeout=timeout)
            timed_out = False
            _kill_strays(proc, env[Env.STREAM])
        except subprocess.TimeoutExpired:
            _kill_group(proc, env[Env.STREAM])
            returncode, timed_out = proc.returncode, True
        except KeyboardInterrupt:
            _kill_group(proc, env[Env.STREAM], grace=1.0)
            if _last_end(stream) is None:
                _append_end(stream, Outcome(Status.FAIL, "interrupted", proc.returncode))
            raise
        finally:
            _release_guard(guard)
    end = _last_end(stream)
    if end is not None:
        # The child wrote its end (and perhaps hung on its way out after it): one end only.
        return Outcome(Status.parse(end.get("status")), str(end.get("reason") or ""), returncode)
    launcher_died = getattr(proc, "launcher_died", None)
    if timed_out:
        reason = f"timeout: ran past max_duration ({timeout:g} s)"
        outcome = Outcome(Status.TIMEOUT, reason, returncode)
    elif launcher_died:
        # Its SIGKILL came from the server's death (PR_SET_PDEATHSIG), not from the OOM killer.
        outcome = Outcome(Status.CRASH, f"crash: {launcher_died}, and the benchmark with it",
                          returncode)
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
    if _disk_full(stream.parent):
        # The likely cause: the child could not write its stream (nor its log, to say so).
        full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        outcome = Outcome(outcome.status, f"{StreamWriteError.describe(stream, full)} "
                                          f"({outcome.reason})", returncode)
    return _append_end(stream, outcome)


def _disk_full(folder: Path) -> bool:
    """Less than 1 MiB left for this user where the run's files are."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < (1 << 20)


if __name__ == "__main__":  # the guard: python -m pytest_dlbench.run.child guard PGID STREAM PID
    if sys.argv[1:2] == ["guard"] and len(sys.argv) == 5:
        sys.exit(_guard(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
    sys.exit(2)
