"""An unmodified external command as a benchmark (docs/time-to-train.md).

A suite entry whose ``definition`` is a mapping::

    definition:
      command: [python, -m, open_clip_train.main]
      parser: open_clip          # or {regex: '...(?P<seconds>...)...'}
    argv:
      --batch-size: 512

resolves to :func:`main`, a benchmark function like any other: it runs in the benchmark's child
process, under the same supervision (run/child.py: its own process group, ``max_duration``,
crash, OOM and Ctrl-C handling) and, for ``plan: njobs``, under torchrun, one rank per device
slot. :func:`main` starts the command (``args``: the command, then the rendered argv) as a
subprocess *in the child's process group*, so whatever kills the child (a timeout, torchrun
stopping its ranks) kills the command too. It reads the command's output line by line, copies
it to its own output (the run's ``.log``), and turns each line the parser reads into one
observation (:meth:`Bench.log_step`: items and seconds, the loss, the progress).

- ``python`` as the first word, or ``{python}`` anywhere, is this interpreter; ``voir`` as the
  first word is this environment's voir.
- ``parser: voir`` reads voir's data channel instead of the output: a pipe named by ``DATA_FD``
  (run/voir_data.py); a milabench folder (``definition: ../benchmarks/torchvision``) is run
  that way by run/voir.py.
- ``{workdir}`` is the run's own working folder (``<run>/<bench>.D0.work``), also the command's
  working directory unless ``cwd`` says otherwise: ``--logs logs`` lands there.
- Launch-time placeholders (``{data}``, ``{cpu_per_gpu}``, ...) are filled as in every argv.
- ``prepare: module:function`` is called with the ``bench`` before the command starts (write a
  model config, check a package); ``pytest.skip`` there skips the benchmark.
- Once the run has ``skip + stop`` observations, a ``per_gpu`` command is stopped (as milabench
  stops a benchmark after its observations); an ``njobs`` command runs to its end (stopping one
  rank would leave the others hanging in a collective) and its later lines are not recorded.
- It fails with a one-line reason when the command exits non-zero (or is killed), or when the
  reporting rank's command printed no line the parser reads; the output stays in the run's log.
- A throughput command that ends before ``skip + stop`` observations leaves a warning, and
  fails below ``min(stop, MIN_STEADY)`` steady ones (:func:`check_observations`).
- Its output is read linearly, a line at most :data:`LINE_CAP` bytes (64 KiB; voir's data lines
  :data:`DATA_LINE_CAP`, the stream's 1 MiB): a longer line keeps its head, the rest is dropped
  and the log says so (:class:`LineBuffer`). Once the command has exited its output is read for
  :data:`DRAIN_S` seconds more at most: a process it left in the background that keeps the
  output open (``sleep 60 &``) neither holds the run to ``max_duration`` nor outlives it (it is
  killed: :func:`kill_pipe_holders`), and the steps logged are scored. Only the run's own
  processes are killed (:class:`CommandProcess`); another that holds the output (one started
  before the run that opened it through /proc) is named in the log and left alone.

Under torchrun every rank runs its own copy of the command, which reads torchrun's variables
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...) as if torchrun had started it: the benchmark's
ranks never make a process group of their own. The reporting rank's command must print the
job's lines (OpenCLIP's rank 0 does); its numbers already count the whole job, so they are not
multiplied by the world size.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import DlbenchError, quoted, shorten
from pytest_dlbench.core.numbers import printable
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.logparse import StepReader
from pytest_dlbench.measure.stream import Event
from pytest_dlbench.run.voir_data import STOP, DataChannel
from pytest_dlbench.suite.logparsers import OBSERVATIONS, VOIR, LogParser, make_parser

__all__ = [
    "BENCHMATE_ENV", "DATA_LINE_CAP", "DRAIN_S", "LINE_CAP", "MIN_STEADY", "CommandResult",
    "ExternalCommandError", "LineBuffer", "check_observations", "command_argv",
    "CommandProcess", "PipeHolders", "command_process", "environment_voir", "holder_lines",
    "kill_pipe_holders", "main", "read_lines", "reason_line", "run_command",
]

#: Seconds a command gets to exit after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
#: Lines of output kept to explain a failure.
TAIL_LINES = 30
#: The fewest steady observations a command's run may end with when it ends before its
#: ``skip + stop`` (or ``stop``, when smaller): ``std%`` needs one per block of the window.
MIN_STEADY = 5
#: What benchmate is told on voir's data channel: push every step as it happens (not in one
#: burst at an epoch's end), with its own seconds (``elapsed``).
BENCHMATE_ENV = {"BENCHMATE_EAGER_SYNC": "1", "BENCHMATE_LOG_MODE": "all"}
#: The longest line of a command's output kept, its head: a log line is under a kilobyte, and
#: one of 48 MiB without a newline (a progress bar's carriage returns, a dumped tensor) must
#: cost neither its size in memory nor a parser's regex over all of it.
LINE_CAP = 64 << 10
#: The longest line of voir's data channel kept: the stream's own line limit, so that any line
#: kept can become a record (a telemetry sample of 8 GPUs is a few kilobytes).
DATA_LINE_CAP = untrusted.MAX_LINE_BYTES
#: Seconds the output is still read once the command has exited: enough for what its last
#: writes left in the pipe, short beside a run, where a process it left in the background that
#: keeps the pipe open (``sleep 60 &``, a logging daemon) would never give end-of-file.
DRAIN_S = 2.0
#: Seconds a process killed for holding the command's output is waited for, to be gone.
KILL_WAIT_S = 2.0
#: How often the reader looks whether the command has exited while its output is quiet.
POLL_S = 0.2


class ExternalCommandError(DlbenchError, RuntimeError):
    """The external command failed (its output is in the run's log)."""


@dataclass
class CommandResult:
    """What running the command gave."""

    argv: list[str]
    returncode: int | None = None
    lines: int = 0
    steps: int = 0  # lines the parser read
    recorded: int = 0  # of which observations of the run (at most skip + stop)
    stopped: bool = False  # stopped by us once the run had its observations
    tail: list[str] = field(default_factory=list)


def command_argv(args: Sequence[str], *, workdir: Path | str,
                 python: str = sys.executable) -> list[str]:
    """The command line to start: ``{python}`` and ``{workdir}`` filled, a leading ``python``
    (or ``python3``) replaced by this interpreter and a leading ``voir`` by this environment's
    (:func:`environment_voir`): the benchmark's environment."""
    from pytest_dlbench.suite.argv import fill_all

    argv = fill_all(list(args), {"python": python, "workdir": str(workdir)})
    if argv and argv[0] in ("python", "python3"):
        argv[0] = python
    elif argv and argv[0] == "voir":
        argv[:1] = environment_voir(python)
    return argv


def environment_voir(python: str = sys.executable) -> list[str]:
    """The benchmark environment's ``voir``: the script beside ``python`` (a virtual
    environment's ``bin/``), else ``python -m voir``."""
    script = Path(python).parent / "voir"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [python, "-m", "voir"]


def _stop(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def reason_line(tail: Sequence[str]) -> str:
    """The line that best says why the command failed: the last error-looking line of its
    output, else its last line (shortened to errors.MAX_REASON, like every reason)."""
    lines = [t.strip() for t in tail if t.strip()]
    errors = [t for t in lines if "Error" in t or "error:" in t or "Exception" in t
              or "out of memory" in t.lower()]
    line = (errors or lines or [""])[-1]
    return shorten(line)


def _failure(result: CommandResult, reason: str | None = None) -> ExternalCommandError:
    code = result.returncode
    last = reason or reason_line(result.tail)
    said = f": {last}" if last else ""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if -code == signal.SIGKILL:
            # "out of memory" in the message: the harness records the run as oom.
            return ExternalCommandError(
                f"the command was killed by {name} (most likely out of memory: the kernel's "
                "OOM killer)"
            )
        return ExternalCommandError(f"the command was killed by {name}{said}")
    return ExternalCommandError(f"the command exited with status {code}{said}")


class LineBuffer:
    """Splits a pipe's bytes into lines, keeping at most ``cap`` bytes of each (its head).

    Linear: each byte is searched for a newline once (:attr:`scanned` counts them) and a line's
    pieces are joined once, when it ends; nothing past ``cap`` is kept (:attr:`held`)."""

    def __init__(self, cap: int = LINE_CAP) -> None:
        self.cap = cap
        self.scanned = 0  # bytes searched for a newline, in all
        self.held = 0  # bytes of the current line kept
        self._parts: list[bytes] = []
        self._size = 0  # bytes of the current line, kept or not

    def feed(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """The lines ``chunk`` ends, each ``(head + b"\\n", bytes dropped from it)``."""
        done: list[tuple[bytes, int]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self.scanned += (len(chunk) if end < 0 else end + 1) - start
            if end < 0:
                self._keep(chunk[start:] if start else chunk)
                return done
            self._keep(chunk[start:end])
            done.append(self._take(b"\n"))
            start = end + 1

    def flush(self) -> tuple[bytes, int] | None:
        """The last line, which had no newline (None when there is none)."""
        return self._take(b"") if self._size else None

    def _keep(self, piece: bytes) -> None:
        self._size += len(piece)
        room = self.cap - self.held
        if room <= 0 or not piece:
            return
        piece = piece[:room] if len(piece) > room else piece
        self._parts.append(piece)
        self.held += len(piece)

    def _take(self, end: bytes) -> tuple[bytes, int]:
        line = b"".join(self._parts) + end
        dropped = self._size - self.held
        self._parts, self.held, self._size = [], 0, 0
        return line, dropped


def read_lines(streams: Mapping[int, tuple[str, int]], *,
                exited: Callable[[], bool] | None = None, drain: float = DRAIN_S,
                held_open: set[int] | None = None) -> Iterator[tuple[str, bytes, int]]:
    """``(name, line, bytes dropped from it)`` from several pipes (fd: name and line cap) as
    their lines come, until all of them are closed, or ``drain`` seconds after ``exited()``
    says the command ended: the output and voir's data channel are read apart, neither waiting
    for the other, and a background process holding a pipe open cannot hold the reader. The
    pipes still open then are added to ``held_open``."""
    selector = selectors.DefaultSelector()
    buffers: dict[int, LineBuffer] = {}
    for fd, (name, cap) in streams.items():
        selector.register(fd, selectors.EVENT_READ, name)
        buffers[fd] = LineBuffer(cap)
    deadline: float | None = None
    try:
        while selector.get_map():
            if deadline is None and exited is not None and exited():
                deadline = time.monotonic() + drain
            left = POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:  # the command ended, something it left keeps the pipe open
                if held_open is not None:
                    held_open.update(key.fd for key in selector.get_map().values())
                break
            for key, _ in selector.select(left if exited is not None else None):
                fd = key.fd
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    continue
                for line, dropped in buffers[fd].feed(chunk):
                    yield key.data, line, dropped
        for fd, buffer in buffers.items():  # the last line of each, without its newline
            last = buffer.flush()
            if last is not None:
                yield streams[fd][0], *last
    finally:
        selector.close()


def _pipe_inode(fd: int) -> int | None:
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_ino if stat.S_ISFIFO(info.st_mode) else None


@dataclass(frozen=True)
class CommandProcess:
    """What marks a process as the command's own (:func:`command_process`): started no earlier
    than the command, and in its process group or marked with the run's stream
    (:data:`Env.STREAM`, which run/child.py sets and a daemon's fork keeps)."""

    since: int | None  # the command's start, in clock ticks since boot (/proc/PID/stat)
    group: int
    marker: str | None


@dataclass
class PipeHolders:
    """The processes found holding a command's pipes: its own, killed; any other, named."""

    killed: list[int] = field(default_factory=list)
    others: list[tuple[int, str]] = field(default_factory=list)  # (pid, name)


def _stat(pid: int | str) -> tuple[str, int, int] | None:
    """A process's name, process group and start (clock ticks since boot), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode("utf-8", "replace")
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        return name, int(fields[2]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _marker(pid: str) -> str | None:
    prefix = f"{Env.STREAM}=".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            for item in file.read().split(b"\0"):
                if item.startswith(prefix):
                    return item[len(prefix):].decode("utf-8", "replace")
    except OSError:
        pass  # another user's: not ours
    return None


def command_process(pid: int, env: Mapping[str, str] | None = None) -> CommandProcess:
    """The marks of the command ``pid`` just started (``env``: the environment it got)."""
    stat_ = _stat(pid)
    env = os.environ if env is None else env
    return CommandProcess(since=stat_[2] if stat_ else None,
                          group=stat_[1] if stat_ else os.getpgrp(),
                          marker=env.get(Env.STREAM) or None)


def _owned(pid: str, command: CommandProcess) -> tuple[bool, str]:
    """Whether ``pid`` is one of the command's processes, and its name."""
    stat_ = _stat(pid)
    if stat_ is None:
        return False, "?"
    name, group, start = stat_
    if command.since is not None and start < command.since:
        return False, name  # older than the command: never one it started
    mine = group == command.group or (command.marker is not None
                                      and _marker(pid) == command.marker)
    return mine, name


def kill_pipe_holders(fds: Sequence[int], command: CommandProcess | None = None) -> PipeHolders:
    """SIGKILL every process of the command (``command``; by default this process group and
    the run's stream marker) that holds one of the pipes ``fds`` (their other end): what a
    command that exited left running with its output open. Any other holder (a process that
    opened the pipe through /proc, another user's) is named, never signalled. Linux's
    ``/proc`` only (elsewhere none are found: the child's process group is still killed at
    its end)."""
    found = PipeHolders()
    inodes = {f"pipe:[{ino}]" for ino in map(_pipe_inode, fds) if ino is not None}
    if not inodes:
        return found
    if command is None:
        command = CommandProcess(None, os.getpgrp(), os.environ.get(Env.STREAM) or None)
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me or not _holds(entry.name,
                                                                               inodes):
                continue
            mine, name = _owned(entry.name, command)
            if not mine:
                found.others.append((int(entry.name), name))
                continue
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
                found.killed.append(int(entry.name))
    _wait_gone(found.killed)
    return found


def _wait_gone(pids: Sequence[int], timeout: float = KILL_WAIT_S) -> None:
    """Wait until the killed ``pids`` have ended (gone, or a zombie nobody reaped yet): a
    loaded machine takes a moment to end a killed process, and the log says it was killed."""
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if _state(pid) not in (None, "Z", "X")]
        if left:
            time.sleep(0.02)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode("utf-8", "replace")
        return text[text.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return None


def holder_lines(found: PipeHolders) -> list[str]:
    """What the log says of the processes that kept a command's output open."""
    lines, left = [], found.killed
    if left:  # the reader stopped DRAIN_S after the command exited: they kept it open
        lines.append(f"pytest-dlbench: the command exited, and {len(left)} process"
                     f"{'es' if len(left) > 1 else ''} it left running (pid "
                     f"{', '.join(map(str, left))}) kept its output open: stopped reading "
                     f"{DRAIN_S:g} s later and killed {'them' if len(left) > 1 else 'it'}")
    for pid, name in found.others:
        lines.append(f"pytest-dlbench: process {pid} ({printable(name)}), not the run's, holds "
                     f"the command's output open: stopped reading it {DRAIN_S:g} s after the "
                     "command exited, and left that process alone")
    return lines


def _holds(pid: str, inodes: set[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False  # gone, or another user's: not ours
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
    return False


def _echo(out: IO[str], tail: collections.deque[str], line: str, size: int, bench: Any,
          said_cut: list[bool]) -> None:
    """Copy an output line to the log, and to the tail; ``size``: the bytes of a line that was
    cut (0 when it was not), which a note after it says (and, once a run, the stream)."""
    out.write(line if line.endswith("\n") else line + "\n")
    if size:
        cut = f"cut: {size} bytes without a newline, its first {LINE_CAP} kept"
        out.write(f"pytest-dlbench: the line above was {cut}\n")
        if not said_cut:
            said_cut.append(True)
            bench.stream.write(Event.WARNING, source="command",
                               message=f"a line of the command's output was {cut}")
    out.flush()
    tail.append(line.rstrip("\n"))


def run_command(
    bench: Any,
    args: Sequence[str],
    *,
    parser: LogParser | str | Mapping[str, Any] | None,
    workdir: Path | str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    reporting: bool = True,
    stop_when_done: bool = True,
    time_to_train: bool = False,
    out: IO[str] | None = None,
    channel: DataChannel | None = None,
) -> CommandResult:
    """Run ``args`` (see :func:`command_argv`), recording each step ``parser`` reads in
    ``bench``. Raises :class:`ExternalCommandError` when it fails (module docstring);
    ``reporting=False`` (a rank that does not write the stream) only requires a clean exit.

    With a ``channel`` (voir's, run/voir_data.py) the command gets a data pipe: its write end
    is inherited by the command, named by ``DATA_FD``; its lines, not the output's, are the
    steps, and voir's ``stop`` ends the command as the run's own ``skip + stop`` does."""
    if channel is None and (parser is None or parser == VOIR):
        raise ValueError("voir's lines are read from its data channel: pass a channel")
    log_parser = make_parser(parser) if channel is None else None
    out = sys.stdout if out is None else out
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    argv = command_argv(args, workdir=workdir)
    run_cwd = Path(command_argv([str(cwd)], workdir=workdir)[0]) if cwd else workdir
    result = CommandResult(argv=argv)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    bench.stream.write(Event.COMMAND, status="start", argv=argv, cwd=str(run_cwd),
                       parser=log_parser.to_dict() if log_parser else {"name": VOIR},
                       time=time.time())
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    data_read = data_write = -1
    if channel is not None:
        # A real pipe, inherited by the command alone (pass_fds); subprocess closes every
        # other descriptor above 2, so without it voir's data would go to /dev/null.
        data_read, data_write = os.pipe()
        full_env["DATA_FD"] = str(data_write)
    try:
        proc = subprocess.Popen(
            argv, cwd=run_cwd, env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(data_write,) if channel is not None else (),
            # Deliberately no new session: the child's process group is the command's, so the
            # supervisor's timeout kill (and torchrun's) reaches it.
        )
    except OSError as exc:
        if channel is not None:
            os.close(data_read)
        raise ExternalCommandError(f"cannot start {quoted(argv[0])}: {exc}") from exc
    finally:
        if channel is not None:
            os.close(data_write)  # the command's copy is the only writer: EOF when it ends
    command = command_process(proc.pid, full_env)  # what marks its processes as the run's
    reader = StepReader(log_parser) if log_parser else None
    last_percent: float | None = None
    capped = False
    output_lines = 0  # with a channel: the parser reads none of them
    said_cut: list[bool] = []  # whether a cut line was said in the stream (once a run)

    def stop_now() -> None:
        if not result.stopped:
            result.stopped = True
            _stop(proc)

    try:
        assert proc.stdout is not None
        streams = {proc.stdout.fileno(): ("out", LINE_CAP)}
        if channel is not None:
            streams[data_read] = ("data", DATA_LINE_CAP)
        held_open: set[int] = set()
        lines = read_lines(streams, exited=lambda: proc.poll() is not None, held_open=held_open)
        for name, raw, dropped in lines:
            line = raw.decode("utf-8", errors="replace")
            size = len(raw.rstrip(b"\n")) + dropped if dropped else 0
            if channel is not None and name == "data":
                if channel.feed(line, cut=dropped) == STOP and reporting:
                    stop_now()  # voir's early stop: milabench ends the command here
                if reporting and bench.done and stop_when_done:
                    stop_now()
                continue
            if channel is not None:
                output_lines += 1
                line, data = channel.unsmuggle(line)
                if line.strip() or not data:
                    _echo(out, tail, line, size, bench, said_cut)
                for text in data:
                    if channel.feed(text) == STOP and reporting:
                        stop_now()
                if reporting and bench.done and stop_when_done:
                    stop_now()
                continue
            _echo(out, tail, line, size, bench, said_cut)
            assert reader is not None
            step = reader.feed(line)
            if step is None or not reporting or result.stopped:
                continue
            items = step.items if step.items is not None else 1.0
            if bench.log_step(items, step.seconds, per_rank=False, loss=step.loss):
                result.recorded += 1
            elif not capped:
                capped = True
                if time_to_train:
                    bench.stream.write(
                        Event.WARNING,
                        message=f"time-to-train: only the first {result.recorded} steps are "
                                "recorded (skip + stop); total_time_secs covers those",
                    )
            if step.percent is not None and step.percent != last_percent:
                last_percent = step.percent
                bench.log_progress(step.percent)
            if bench.done and stop_when_done:
                stop_now()
        if held_open:
            for note in holder_lines(kill_pipe_holders(sorted(held_open), command)):
                out.write(note + "\n")
            out.flush()
        result.returncode = proc.wait()
    except BaseException:
        # Ctrl-C, a NaN loss, a broken stream: the command must not outlive the run.
        _stop(proc, grace=3.0)
        kill_pipe_holders([*([proc.stdout.fileno()] if proc.stdout else []),
                           *([data_read] if channel is not None else [])], command)
        raise
    finally:
        if channel is not None:
            os.close(data_read)
            result.recorded = min(channel.rates, bench.observations)
        result.lines = reader.lines if reader else output_lines
        result.steps = reader.steps if reader else channel.rates if channel else 0
        result.tail = list(tail)
        bench.stream.write(Event.COMMAND, status="end", returncode=proc.returncode,
                           lines=result.lines, steps=result.steps, recorded=result.recorded,
                           stopped=result.stopped, time=time.time(),
                           **({"data_dropped": channel.dropped} if channel else {}))
    if not result.stopped and result.returncode != 0:
        raise _failure(result, channel.error if channel is not None else None)
    if reporting and result.steps == 0:
        if channel is not None:
            raise ExternalCommandError(
                f"voir's data channel gave no train rate ({channel.lines} data lines, "
                f"{result.lines} lines of output): does the voirfile log 'rate'?"
            )
        assert log_parser is not None
        raise ExternalCommandError(
            f"the command printed no line the {log_parser.name!r} parser reads "
            f"({result.lines} lines of output)"
        )
    return result


def check_observations(bench: Any, spec: Any, result: CommandResult) -> None:
    """A throughput command that ended before its ``skip + stop`` observations (docs/suites.md):
    a ``warning`` record (the table and the report show it), or a failure when its steady
    window has fewer than ``min(stop, MIN_STEADY)`` observations. A time-to-train command's
    ``stop`` only caps its steps: it is not checked."""
    if spec.metric == "total_time_secs":
        return
    wanted, have = bench.skip + bench.stop, bench.observations
    if have >= wanted:
        return
    steady = max(0, have - bench.skip)
    minimum = min(bench.stop, MIN_STEADY)
    how = "voir said stop" if result.stopped else "the command ended"
    said = (f"too few observations: {how} after {have} of the {wanted} wanted "
            f"(skip {bench.skip} + stop {bench.stop}), {steady} steady")
    if steady < minimum:
        raise ExternalCommandError(f"{said}; a figure needs {minimum} steady at least")
    bench.stream.write(Event.WARNING, source=OBSERVATIONS, message=said)


def main(bench: Any, request: Any) -> None:
    """The benchmark function of ``definition: {command: ...}`` entries (module docstring).

    ``request`` is pytest's: its node is the benchmark item, holding the resolved spec and the
    run (stream path, arguments with launch-time placeholders filled)."""
    from pytest_dlbench.layout import work_dir
    from pytest_dlbench.run.definition import load_definition
    from pytest_dlbench.run.launch.rank import RankInfo

    node = request.node
    spec = node.spec
    run = node.run
    command = spec.command or {}
    if not command:
        raise ExternalCommandError(f"{spec.name}: not an external command (no 'command')")
    if spec.units:
        bench.set_units(spec.units)
    prepare = command.get("prepare")
    if prepare:
        load_definition(prepare, bench=spec.name)(bench)
    reporting = RankInfo.from_env().is_main
    workdir = work_dir(run.path)
    voir = command["parser"] == VOIR
    with contextlib.ExitStack() as stack:
        channel = None
        if voir:  # ``parser: voir``: the data pipe, as for a voir folder (run/voir.py)
            workdir.mkdir(parents=True, exist_ok=True)
            keep = stack.enter_context(open(workdir / "voir.data.jsonl", "w", encoding="utf-8"))
            channel = DataChannel(bench, keep=keep, units=spec.units)
        result = run_command(
            bench,
            bench.args,
            parser=command["parser"],
            workdir=workdir,
            cwd=command.get("cwd"),
            env=BENCHMATE_ENV if voir else None,
            reporting=reporting,
            # A time-to-train command runs to its end (its time is the whole run); a throughput
            # one is stopped once the window is measured. njobs ranks stop together, at their end.
            stop_when_done=not spec.is_njobs and spec.metric != "total_time_secs",
            time_to_train=spec.metric == "total_time_secs",
            channel=channel,
        )
    if reporting:
        check_observations(bench, spec, result)
