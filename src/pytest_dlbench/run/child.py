"""Running one benchmark: in this process (with a harness that records how it ended) or in a
child process that may crash, hang or run out of memory without taking the suite down.

No pytest here: the plugin builds the child's command line and turns outcomes into reports.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dlbench.measure.stream import StreamWriter, read_stream

__all__ = [
    "Outcome",
    "STATUSES",
    "classify_exception",
    "execute",
    "make_run_dir",
    "machine_meta",
    "run_child",
    "stream_path",
]

STATUSES = ("ok", "fail", "timeout", "oom", "crash", "nan", "skipped")
# After SIGTERM a child gets this long to flush before SIGKILL.
KILL_GRACE_S = 3.0


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def make_run_dir(base: Path, run_name: str, now: _dt.datetime | None = None) -> Path:
    """``<base>/runs/<run-name>.<YYYYmmdd-HHMMSS>``, made unique if that second is taken."""
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    runs = Path(base) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    candidate = runs / f"{run_name}.{stamp}"
    suffix = 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = runs / f"{run_name}.{stamp}-{suffix}"


def stream_path(run_dir: Path, bench: str, device: int, repeat: int | None = None) -> Path:
    name = f"{bench}.D{device}" + (f".R{repeat}" if repeat is not None else "") + ".data"
    return Path(run_dir) / name


def machine_meta(device: Any = None) -> dict[str, Any]:
    """Host, Python, torch and device facts for the ``meta`` record (torch only if loaded)."""
    meta: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "pid": os.getpid(),
        "time": time.time(),
        "slot": os.environ.get("DLBENCH_SLOT"),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        meta["torch"] = torch.__version__
        meta["cuda"] = torch.version.cuda
        meta["device"] = str(device) if device is not None else "cpu"
        if device is not None and getattr(device, "type", None) == "cuda":
            meta["device_name"] = torch.cuda.get_device_name(device)
        else:
            meta["device_name"] = meta["cpu"]
    return meta


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def classify_exception(exc: BaseException) -> Outcome:
    from pytest_dlbench.measure.bench import NonFiniteLoss
    from pytest_dlbench.results.validation import ValidationError

    if isinstance(exc, ValidationError):
        return Outcome("fail", str(exc))
    if isinstance(exc, NonFiniteLoss):
        return Outcome("nan", _one_line(exc))
    if isinstance(exc, SystemExit):
        # argparse exits with status 2 on a bad argument; its message is in the output.
        return Outcome("fail", f"the benchmark exited with status {exc.code} "
                               "(an argument error? see its output)")
    if _is_oom(exc):
        return Outcome("oom", f"out of memory: {_one_line(exc)}")
    return Outcome("fail", _one_line(exc))


def execute(
    call: Callable[[], Any],
    stream: StreamWriter,
    *,
    final: bool = True,
    skip_types: tuple[type[BaseException], ...] = (),
) -> tuple[Outcome, BaseException | None]:
    """Run ``call``; on failure write the ``end`` record and return the exception (not raised,
    so the caller decides how to report it). With ``final``, success writes ``end`` too.
    ``skip_types`` end the run as ``skipped`` (a benchmark that cannot run here, e.g. no GPU).
    KeyboardInterrupt is recorded, then re-raised."""
    try:
        call()
    except KeyboardInterrupt:
        stream.write("end", status="fail", reason="interrupted", time=time.time())
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then reported
        if isinstance(exc, skip_types):
            outcome = Outcome("skipped", str(getattr(exc, "msg", "") or exc))
        else:
            outcome = classify_exception(exc)
        stream.write("end", status=outcome.status, reason=outcome.reason, time=time.time())
        return outcome, exc
    if final:
        stream.write("end", status="ok", reason="", time=time.time())
    return Outcome("ok"), None


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
    ends = [r for r in records if r.get("event") == "end"]
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
                writer.write("end", status="fail", reason="interrupted", time=time.time())
            raise
    end = _last_end(stream)
    if timed_out:
        outcome = Outcome("timeout", f"timeout: ran past max_duration ({timeout:g} s)", returncode)
    elif end is not None:
        return Outcome(end.get("status", "fail"), end.get("reason", ""), returncode)
    elif returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == signal.SIGKILL:
            outcome = Outcome(
                "oom", f"killed by {name} (most likely the out-of-memory killer)", returncode
            )
        else:
            outcome = Outcome("crash", f"crash: killed by {name}", returncode)
    else:
        outcome = Outcome(
            "crash", f"crash: exited with status {returncode} before finishing", returncode
        )
    with StreamWriter(stream) as writer:
        writer.write("end", status=outcome.status, reason=outcome.reason, time=time.time(),
                     writer="parent", returncode=returncode)
    return outcome
