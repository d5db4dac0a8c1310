"""Why a multi-node job failed, in one line naming the node that failed first.

When one node fails, the others soon fail too, because of it: their ranks lose a peer
(``Connection closed by peer``) or their launcher is stopped. The reason of the benchmark is the
first failure that is not such an echo, with the node's name and address: ssh's own error when
it could not reach the node, else the rank's exit status and its last error line (torchrun's
summary of the node names the rank that failed first there).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dlbench.core.protocol import Outcome, Status
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event

__all__ = ["NodeFailure", "first_failure", "record_end", "record_failure"]

#: ssh's exit status for its own errors (it could not connect, the connection died).
SSH_ERROR = 255
#: An ssh error line: ``ssh: connect to host ...``, ``Timeout, server ... not responding``,
#: ``Permission denied (publickey)``, ``Connection closed by ...``, ``Host key verification``.
_SSH_LINE = re.compile(r"^ssh: |Timeout, server .* not responding|Permission denied|"
                       r"Connection (closed|reset|timed out) by|Host key verification|"
                       r"Could not resolve|No route to host|Connection refused|"
                       r"client_loop: send disconnect|Broken pipe", re.IGNORECASE)
#: torchrun's summary of a failed node: ``exitcode  : 1 (pid: 123)``.
_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
#: An error line in a rank's output (a traceback's last line, pytest's FAILED line).
_ERROR_LINE = re.compile(r"^(E\s+)?([\w.]*(Error|Exception|Interrupt|Exit)\b:?|FAILED |"
                         r"Fatal Python error|Killed|Segmentation fault)")
#: Lines of torchrun's own error report, not the rank's error.
_TORCHRUN_LINE = re.compile(r"torch\.distributed\.elastic|ChildFailedError|SignalException|"
                            r"error_file|traceback\s*:|To enable traceback|Root Cause|"
                            r"Failures:|^\s*(time|host|rank|exitcode)\s*:|^[=-]{8,}|"
                            r"\bTraceback \(most recent call last\)")
#: A failure caused by another node's: a peer that went away, a stop asked by the launcher.
_ECHO = re.compile(r"Connection (closed|reset) by peer|Broken pipe|connectFullMesh|"
                   r"RendezvousClosedError|SignalException|Received \d+ death signal|"
                   r"exitcode\s*:\s*-(15|1|2)\b|timed out|Timeout|was aborted|"
                   r"NCCL (error|communicator was aborted)", re.IGNORECASE)


@dataclass(frozen=True)
class NodeFailure:
    """One node launcher that ended badly: its exit status and last output lines."""

    name: str
    ip: str
    returncode: int
    tail: tuple[str, ...]
    remote: bool = True

    def _ssh_error(self) -> str | None:
        if not self.remote or self.returncode != SSH_ERROR:
            return None
        lines = [line for line in self.tail if _SSH_LINE.search(line)]
        return lines[-1].strip() if lines else None

    def last_error_line(self) -> str | None:
        """The last line of the node's output that says what went wrong."""
        for line in reversed(self.tail):
            text = line.strip()
            if text and _ERROR_LINE.search(text) and not _TORCHRUN_LINE.search(text):
                return text
        return None

    def rank_status(self) -> int | None:
        """The exit status of the rank that failed first on the node (torchrun's summary)."""
        for line in self.tail:
            match = _EXITCODE.search(line)
            if match:
                return int(match.group(1))
        return None

    @property
    def is_echo(self) -> bool:
        """It failed because another node did (see the module's docstring)."""
        if self._ssh_error() is not None:
            return False
        status = self.rank_status()
        if status is not None and status < 0 and -status not in (signal.SIGTERM, signal.SIGHUP,
                                                                  signal.SIGINT):
            return False  # its rank was killed (SIGKILL, SIGSEGV): a cause, not an echo
        error = self.last_error_line() or ""
        return bool(_ECHO.search(error)) or (status is not None and bool(_ECHO.search(
            f"exitcode : {status}")))

    def reason(self) -> str:
        """One line: ``node2 (10.0.0.2): ssh: ...`` or ``node2 (...): its rank exited ...``."""
        where = f"{self.name} ({self.ip})"
        ssh_error = self._ssh_error()
        if ssh_error is not None:
            return f"{where}: ssh: {ssh_error.removeprefix('ssh: ')}"
        status, error = self.rank_status(), self.last_error_line()
        if status is not None and status < 0:
            what = f"its rank was killed by {_signal_name(-status)}"
        elif status is not None:
            what = f"its rank exited with status {status}"
        else:
            what = f"its launcher exited with status {self.returncode}"
        return f"{where}: {what}: {error}" if error else f"{where}: {what}"

    @property
    def status(self) -> Status:
        status = self.rank_status()
        if self._ssh_error() is not None or (status is not None and status < 0):
            return Status.CRASH
        return Status.FAIL


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def first_failure(failures: Sequence[NodeFailure]) -> NodeFailure | None:
    """The failure that caused the others: the first (in the order seen) that is not an echo
    of another node's, else the first."""
    return next((f for f in failures if not f.is_echo), failures[0] if failures else None)


def _last_line(data: bytes) -> tuple[int, bytes]:
    body = data.rstrip(b"\n")
    start = body.rfind(b"\n") + 1
    return start, body[start:]


def record_failure(stream: str | os.PathLike[str] | None, failure: NodeFailure) -> Outcome:
    """Make ``failure`` the benchmark's reason: the ``end`` record of the job's stream.

    When another node failed first, the main node's reporting rank has usually ended the
    stream already with its echo of it (``Connection closed by peer``): that ``end`` is replaced,
    under the stream's lock, while its processes have all ended and before the parent reads
    it. An ``end`` of the main node's own failure, or one written by the parent, stays.
    """
    return record_end(stream, Outcome(failure.status, failure.reason()),
                      replace_rank_end=failure.remote)


def record_end(stream: str | os.PathLike[str] | None, outcome: Outcome, *,
               replace_rank_end: bool = False) -> Outcome:
    """Append ``outcome`` as the stream's ``end`` unless it has one; with
    ``replace_rank_end``, a failed rank's ``end`` (no ``writer``) is replaced by it."""
    if not stream:
        return outcome
    record = {"event": Event.END.value, "status": str(outcome.status), "reason": outcome.reason,
              "time": time.time(), "writer": "launcher"}
    with contextlib.suppress(OSError), open(stream, "a+b") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX)  # the lock StreamWriter takes for an end
        file.seek(0)
        data = file.read()
        start, last = _last_line(data)
        try:
            parsed = json.loads(last) if last else None
        except ValueError:
            parsed = None
        end = RunRecords.of([parsed]).end if isinstance(parsed, dict) else None
        if end is not None:
            if (not replace_rank_end or end.get("writer") is not None
                    or end.get("status") == str(Status.OK)):
                return outcome
            file.truncate(start)  # O_APPEND: the write below lands at the new end
        elif data and not data.endswith(b"\n"):
            file.write(b"\n")  # a torn last line stays a line of its own
        file.write((json.dumps(record) + "\n").encode())
    return outcome
