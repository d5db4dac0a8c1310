"""A warm launcher: a server process that imports torch and the workload libraries once, then
forks one child per benchmark, so a child starts in a fraction of a second instead of paying
3-4 s of imports.

Each forked child is what a fresh ``python -m pytest ...`` child would be, for the supervision
in :mod:`pytest_dlbench.run.child`: a process group of its own (killed on timeout), dead with its
server (``PR_SET_PDEATHSIG``; the server dies with its launcher the same way), pinned to its
slot's cores, its output in its own log, its environment and working directory set before the
first line of pytest runs. The server never initialises CUDA (a forked child could not use it):
it only imports, and refuses to serve if an import initialised the CUDA driver (``libcuda.so``
mapped in the server and not answering "not initialised" to ``cuDeviceGetCount``: ``cuInit``
may have run, which ``torch.cuda.is_initialized()`` does not tell) or initialised CUDA.
``PYTORCH_NVML_BASED_CUDA_CHECK=1`` in the server makes torch's ``is_available()`` ask NVML
instead of calling ``cuInit``.

Protocol, JSON lines over the server's stdin and stdout: the server says ``{"ready": ...}`` once
its imports are done; a request ``{"argv", "env", "cwd", "log", "cpus", "paths"}`` gets
``{"pid": N}`` when forked, then ``{"exit": N, "returncode": R}`` when that child ended (R as
:attr:`subprocess.Popen.returncode`: negative for a signal). One child at a time.

**Trees of their own** (``ForkServer(child_paths=True, guarded=ROOTS)``: the two sides of a
``bench`` fixture test's paired round, plugin/fixture_against.py). A child's ``PYTHONPATH`` may
then add entries of its own (a side's ``src/``), put on its ``sys.path`` as a fresh interpreter
would put them; the server says which of its imports came from under ``ROOTS`` (the sides'
trees, outside this interpreter's prefix), and refuses to serve when one did: that module would
be one side's in the other side's child.

No pytest here (the forked child imports and runs it); the plugin decides when to use it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.run.preloads import BASE_PRELOAD, PYTEST_PLUGINS
from pytest_dlbench.run.process import package_path, preexec

__all__ = ["ForkServer", "ForkServerError", "ForkServerWarning", "ForkedProcess",
           "cuda_driver_initialized", "cuda_driver_loaded", "fork_blockers"]

# Variables that differ from the server's environment without changing what was imported: they
# are read when a benchmark runs, not when torch or the workloads are imported. A benchmark whose
# environment differs in anything else runs in a fresh interpreter (docs/running.md).
_RUNTIME_ENV = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "PYTHONUNBUFFERED", "PYTORCH_CUDA_ALLOC_CONF", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST",
})
_RUNTIME_PREFIXES = ("DLBENCH_", "NCCL_", "TORCH_NCCL_")


class ForkServerError(OSError):
    """The server cannot start or serve: the launcher runs benchmarks fresh instead."""


class ForkServerWarning(UserWarning):
    """The server refused to serve (a preload touched CUDA): benchmarks start fresh."""


#: In the server's environment before anything imports torch: ``torch.cuda.is_available()``
#: (and ``device_count()``) then count GPUs through NVML, without ``cuInit``, which would make
#: CUDA unusable in every forked child. Not a child's: its environment is the request's.
SERVER_ENV = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}

#: The CUDA driver library (``libcuda.so.1``, ``libcuda.so.580.159.04``); not ``libcudart``.
CUDA_DRIVER = "libcuda.so"


def cuda_driver_loaded(maps: str | os.PathLike[str] = "/proc/self/maps") -> bool | None:
    """Whether the CUDA driver library is mapped in this process; None where the mappings
    cannot be read (not Linux). Loading it is what precedes ``cuInit``, so a process without it
    has certainly not initialised CUDA, whatever torch's flags say."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            return any(_maps_library(line).startswith(CUDA_DRIVER) for line in lines)
    except OSError:
        return None


#: cuDeviceGetCount's answer before cuInit (``CUDA_ERROR_NOT_INITIALIZED``).
_NOT_INITIALIZED = 3


def cuda_driver_initialized(maps: str | os.PathLike[str] = "/proc/self/maps",
                            driver: Any = None) -> bool | None:
    """Whether ``cuInit`` has run in this process: False when the driver library is not even
    mapped, else what the mapped driver says (``cuDeviceGetCount`` answers "not initialised"
    without initialising); None where the mappings cannot be read.

    Why ask: on some installs ``import torch`` maps the driver (torch 2.11 with CUDA 13 on an
    H200, 2026-11-27) without calling ``cuInit``; a fork is safe until ``cuInit``, and refusing
    at the mapping turned the warm launcher off on every such GPU machine. A driver that cannot
    be asked, or answers anything else, counts as initialised: the fork is refused."""
    loaded = cuda_driver_loaded(maps)
    if not loaded:
        return loaded
    try:
        if driver is None:
            import ctypes

            # RTLD_NOLOAD: the library already mapped, never a second load.
            driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        import ctypes

        count = ctypes.c_int(0)
        status = driver.cuDeviceGetCount(ctypes.byref(count))
    except (OSError, AttributeError):
        return True
    return status != _NOT_INITIALIZED


def _maps_library(line: str) -> str:
    """The file name of a ``/proc/<pid>/maps`` line (address, perms, offset, dev, inode,
    path); "" for an anonymous mapping."""
    fields = line.split(maxsplit=5)
    return os.path.basename(fields[5].strip()) if len(fields) == 6 else ""


def fork_blockers(server_env: Mapping[str, str], env: Mapping[str, str], *,
                  child_paths: bool = False) -> list[str]:
    """The variables whose values differ between the server's environment and a child's, and
    that may have been read at import time (so a forked child would not see them).
    ``child_paths``: ``PYTHONPATH`` too is the child's own (put on its ``sys.path`` after the
    fork, a server with :attr:`ForkServer.child_paths`)."""
    keys = set(server_env) | set(env)
    return sorted(
        k for k in keys
        if server_env.get(k) != env.get(k)
        and k not in _RUNTIME_ENV and not k.startswith(_RUNTIME_PREFIXES)
        and not (child_paths and k == "PYTHONPATH")
    )


# -- the client: in the launcher (the controller or an xdist worker) ---------------------------


class _Lines:
    """Reads JSON lines from a pipe, with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message; None when ``timeout`` passed first. EOF is a ForkServerError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.fd], [], [], left)
            if not readable:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise ForkServerError("the fork server ended")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


class ForkedProcess:
    """A benchmark child forked by the server: what :func:`run_child` needs of a ``Popen``."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        #: Set when the server died before the child's exit was reported: how it ended (the
        #: child died with it, by SIGKILL, which is then no sign of running out of memory).
        self.launcher_died: str | None = None

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.wait(timeout=0)
        return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        try:
            message = self.server.lines.read(timeout)
        except ForkServerError:
            # The server died: its child died with it (PR_SET_PDEATHSIG), by SIGKILL.
            self.returncode = -signal.SIGKILL
            self.server.broken = "the fork server died"
            self.launcher_died = f"the warm launcher (its fork server) {self.server.ended()}"
            return self.returncode
        if message is None:
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0)
        if message.get("exit") != self.pid:
            raise ForkServerError(f"fork server: unexpected message {message!r}")
        self.returncode = int(message["returncode"])
        return self.returncode


class ForkServer:
    """The launcher's handle on its server process: started once, serves one child at a time."""

    def __init__(self, *, cwd: Path, env: Mapping[str, str] | None = None,
                 preload: Sequence[str] = BASE_PRELOAD, child_paths: bool = False,
                 guarded: Sequence[Path] = ()) -> None:
        self.cwd = Path(cwd)
        self.env = dict(os.environ if env is None else env)
        self.preload = list(dict.fromkeys(preload))
        #: A child's own PYTHONPATH entries go on its sys.path (the module docstring).
        self.child_paths = child_paths
        #: Trees the server must import nothing from (the sides' of a paired round).
        self.guarded = [str(Path(p).resolve()) for p in guarded]
        self.proc: subprocess.Popen | None = None
        self.lines: _Lines
        self.ready: dict[str, Any] | None = None
        self.broken: str | None = None  # why it cannot serve (then benchmarks run fresh)

    def start(self) -> None:
        """Start the server; its imports go on in the background (see :meth:`wait_ready`)."""
        env = {**self.env, "PYTHONPATH": package_path(self.env), **SERVER_ENV}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_dlbench.run.forkserver", json.dumps(self.preload),
             json.dumps(self.guarded)],
            cwd=self.cwd, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C on the terminal is the launcher's to handle
            preexec_fn=preexec(None),  # dies with the launcher
        )
        assert self.proc.stdout is not None
        self.lines = _Lines(self.proc.stdout.fileno())

    def wait_ready(self, timeout: float = 120.0) -> bool:
        """Wait until the server's imports are done; False (and :attr:`broken` says why) when
        it cannot serve."""
        if self.broken:
            return False
        if self.ready is not None:
            return True
        if self.proc is None:
            self.start()
        try:
            message = self.lines.read(timeout)
        except (ForkServerError, ValueError) as exc:
            self.broken = f"the fork server did not start: {exc}"
            return False
        if message is None:
            self.broken = f"the fork server's imports took over {timeout:g} s"
            return False
        refused = _refusal(message)
        if refused:
            self.broken = refused
            _note(f"pytest-dlbench: warm launcher off, benchmarks start in fresh interpreters: "
                  f"{refused}")
            return False
        self.ready = message
        return True

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None,
              log: Path, cpus: Sequence[int] | None) -> ForkedProcess:
        """Fork a child running ``pytest`` with ``argv`` (its arguments, without the program)."""
        if not self.wait_ready():
            raise ForkServerError(self.broken or "the fork server is not ready")
        assert self.proc is not None and self.proc.stdin is not None
        request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd or self.cwd),
                   "log": str(log), "cpus": list(cpus) if cpus else None,
                   "paths": self._own_paths(env)}
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            reply = self.lines.read(30.0)
        except (OSError, ValueError) as exc:
            self.broken = f"the fork server stopped serving: {exc}"
            raise ForkServerError(self.broken) from None
        if reply is None or "pid" not in reply:
            self.broken = f"the fork server could not fork: {reply and reply.get('error')}"
            raise ForkServerError(self.broken)
        return ForkedProcess(self, int(reply["pid"]))

    def _own_paths(self, env: Mapping[str, str]) -> list[str]:
        """The child's ``PYTHONPATH`` entries the server's has not (with :attr:`child_paths`)."""
        if not self.child_paths:
            return []
        server = package_path(self.env).split(os.pathsep)
        return [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep)
                if p and p not in server]

    def ended(self) -> str:
        """How the server process ended, in words (``was killed by SIGKILL``), once it has."""
        proc = self.proc
        code = None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(timeout=2.0)
        if code is None:
            return "stopped serving"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with status {code}"

    def close(self) -> None:
        """End the server (end of file on its stdin), killing it if it does not go, or at once
        while it still imports."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self.ready is None:  # still importing (a run that ended early): nothing to lose
            proc.kill()
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            assert proc.stdout is not None
            proc.stdout.close()


def _refusal(ready: Mapping[str, Any]) -> str:
    """Why a server whose ready message is ``ready`` must not fork; "" when it may: the
    driver mapped but not initialised is fine (:func:`cuda_driver_initialized`)."""
    if ready.get("cuda_driver") and ready.get("cuda_driver_initialized", True):
        by = ready.get("cuda_driver_by")
        who = f"the preload {by!r}" if by else "a preload"
        return (f"{who} loaded the CUDA driver ({CUDA_DRIVER}) in the fork server, and the "
                f"driver does not say it is uninitialised")
    if ready.get("cuda_initialized"):
        return "an import initialised CUDA in the fork server"
    shadowed = ready.get("guarded_imports")
    if shadowed:
        names = ", ".join(str(n) for n in shadowed[:3]) + (", ..." if len(shadowed) > 3 else "")
        return (f"the fork server imported {names} from a tree a side runs: each side's child "
                "must import its own")
    return ""


def _note(text: str) -> None:
    """A one-line note in pytest's warnings summary (a warning, which pytest collects)."""
    with contextlib.suppress(Warning):  # -W error: the note is lost, ``broken`` still says it
        warnings.warn(text, ForkServerWarning, stacklevel=3)


# -- the server ---------------------------------------------------------------------------------


def _preload(names: Sequence[str]) -> tuple[list[str], str | None]:
    """Import what the children will need: the names that failed (not installed, broken), and
    the first one after whose import the CUDA driver was mapped in this process (None: none,
    or it was already there, or the mappings cannot be read)."""
    import importlib
    import importlib.metadata

    failed = []
    driver_by: str | None = None
    watch = cuda_driver_loaded() is False  # watched only when it can be, and was not yet loaded
    queue = list(names)
    while queue:
        name = queue.pop(0)
        if name == PYTEST_PLUGINS:
            queue[:0] = [ep.module for ep in importlib.metadata.entry_points(group="pytest11")
                         if not ep.module.startswith("hypothesis")]  # its children block it
            continue
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a library that cannot load is the child's to report
            failed.append(name)
            module = None
        if watch and driver_by is None and cuda_driver_loaded():
            driver_by = name
        if module is not None:
            queue[:0] = list(getattr(module, "WARM_IMPORTS", ()))
    return failed, driver_by


def _guarded_imports(roots: Sequence[str]) -> list[str]:
    """The modules imported here whose file lies under one of ``roots`` and outside this
    interpreter's own folders (a virtual environment inside the repository is the same for
    every side; a package installed in development mode from the repository is not)."""
    if not roots:
        return []
    import sysconfig

    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                           *sysconfig.get_paths().values()) if p}
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        # Only a file's absolute path says where a module came from: torch's ``torch.ops`` and
        # ``torch.classes`` are made in memory with a bare ``__file__`` ("_ops.py").
        if not isinstance(file, str) or not os.path.isabs(file):
            continue
        path = os.path.realpath(file)
        if any(_under(path, root) for root in roots) and not any(_under(path, p) for p in own):
            found.append(name)
    return sorted(found)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _become_child(request: dict[str, Any], setup: Callable[[], None] | None,
                  keep_closed: Sequence[int]) -> list[str]:
    """In the forked child: become what a fresh ``python -m pytest`` child would have been.
    ``setup`` is :func:`~pytest_dlbench.run.process.preexec`'s, made in the server before the
    fork (dead with the server, pinned). Returns pytest's arguments."""
    os.setsid()  # its own process group, like start_new_session
    if setup is not None:
        setup()
    for fd in keep_closed:
        with contextlib.suppress(OSError):
            os.close(fd)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    # Unbuffered, as PYTHONUNBUFFERED makes a fresh child: nothing written is lost at a crash.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = _unbuffered(1)
    sys.stderr = _unbuffered(2)
    # typeshed marks sys.__stdout__ and co. Final; the forked child rebinds them to its streams.
    sys.__stdout__, sys.__stderr__, sys.__stdin__ = (  # type: ignore[misc]
        sys.stdout, sys.stderr, sys.stdin
    )
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as ``python -m`` puts it
    # Its own PYTHONPATH entries (a side's src/), where a fresh interpreter puts them.
    own = [p for p in request.get("paths") or () if p not in sys.path]
    if own:
        sys.path[1:1] = own
        import importlib

        importlib.invalidate_caches()
    os.environ.clear()
    os.environ.update(request["env"])
    for name in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(name, signal.SIG_DFL if name != signal.SIGPIPE else signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _fresh_runtime_state()
    return list(request["argv"])


def _unbuffered(fd: int) -> io.TextIOWrapper:
    raw = open(fd, "wb", buffering=0, closefd=False)  # noqa: SIM115 - the interpreter's stream
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace",
                            line_buffering=True, write_through=True)


def _fresh_runtime_state() -> None:
    """What a fresh interpreter would not share with its siblings: random seeds, and the thread
    count that torch's OpenMP read from the environment when it was loaded."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads and threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))
        elif hasattr(os, "sched_getaffinity"):
            torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _send(out: int, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode() + b"\n"
    while data:
        data = data[os.write(out, data):]


def serve(preload: Sequence[str], guarded: Sequence[str] = ()) -> int:
    """The server's loop. Returns 0 in the server at end of file on stdin; in a forked child it
    returns that child's pytest exit status (so the interpreter ends as a fresh one would)."""
    # Requests come on fd 0 and replies go on a private copy of fd 1: what an import prints
    # (fd 1 then points at stderr) cannot garble the protocol.
    out = os.dup(1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher ends the server, not Ctrl-C
    os.environ.update(SERVER_ENV)  # before torch is imported (started without ForkServer too)
    failed, driver_by = _preload(preload)
    import gc

    gc.freeze()  # the imported objects stay shared with the children (copy-on-write)
    ready = {"ready": True, "failed": failed, "cuda_initialized": _cuda_initialized(),
             "cuda_driver": cuda_driver_loaded(), "cuda_driver_by": driver_by,
             "cuda_driver_initialized": cuda_driver_initialized(), "pid": os.getpid(),
             "guarded_imports": _guarded_imports(guarded)}
    _send(out, ready)
    refused = _refusal(ready)  # the client does not ask then; if it does, no fork
    requests = os.fdopen(0, "rb", buffering=0)
    buffer = b""
    while True:
        chunk = requests.read(65536)
        if not chunk:
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            if refused:
                _send(out, {"error": refused})
                continue
            setup = preexec(request.get("cpus"))  # reads the server's pid before the fork
            try:
                pid = os.fork()
            except OSError as exc:
                _send(out, {"error": f"fork: {exc.strerror or exc}"})
                continue
            if pid == 0:
                args = _become_child(request, setup, keep_closed=(out,))
                return _run_pytest(args)
            _send(out, {"pid": pid})
            _, status = os.waitpid(pid, 0)
            _send(out, {"exit": pid, "returncode": _returncode(status)})


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def _run_pytest(args: list[str]) -> int:
    import pytest

    sys.argv = ["pytest", *args]
    try:
        return int(pytest.main(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


if __name__ == "__main__":  # python -m pytest_dlbench.run.forkserver '["torch", ...]' '[ROOT]'
    sys.exit(serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else BASE_PRELOAD,
                   json.loads(sys.argv[2]) if len(sys.argv) > 2 else ()))
