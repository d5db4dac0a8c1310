"""Telemetry: a thread sampling the GPUs (nvml.py) and the benchmark's process tree (process.py).

A :class:`Monitor` wraps one run of a benchmark function::

    with Monitor(stream, interval=parse_interval(spec.interval)) as monitor:
        bench_fn(...)
    monitor.summary  # a MonitorSummary (monitor/summary.py), also the ``monitor_summary`` record

It writes, into the run's stream (docs/telemetry.md):

- one ``monitor`` record when it starts: ``gpu`` true with the sampled GPUs, or ``gpu`` false
  with the ``reason`` (no driver, no nvidia-ml-py, no visible GPU): the single info line of a
  CPU-only run, which never fails because of it; with several slots at once, the session's
  root (``session_pid``) and its slots' cores (``session_cpus``);
- one ``telemetry`` record per sample: at start, every ``interval`` seconds, and at stop;
- one ``monitor_summary`` record when it stops, with torch's own peak memory of the run when
  CUDA was used through torch (monitor/torch_memory.py: reset at start, read at stop).

Samples are taken by a daemon thread, never by the benchmark's (timed) thread, except the first
(in :meth:`Monitor.start`, before the benchmark runs) and the last (in :meth:`Monitor.stop`,
after it ended). Nothing here raises into the benchmark: a failing NVML call makes its field
``None``, a failing sample is counted in ``errors``.

No pytest and no torch here; NVML and psutil are imported lazily and may be injected (tests).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pytest_dlbench.core.errors import one_line, quoted
from pytest_dlbench.measure.monitor.gpu_sampler import GpuSampler
from pytest_dlbench.measure.monitor.process import (
    NO_PROCESS,
    OWN_TREE,
    ProcessTree,
    Session,
    SessionCpu,
    session_from_env,
)
from pytest_dlbench.measure.monitor.summary import MonitorSummary, Summarizer
from pytest_dlbench.measure.monitor.torch_memory import read_peaks, reset_peaks
from pytest_dlbench.measure.stream import Event, Stream
from pytest_dlbench.measure.timing import MonotonicWallClock
from pytest_dlbench.suite.interval import (  # the suite's option
    DEFAULT_INTERVAL,
    IntervalError,
    parse_interval,
)

__all__ = ["DEFAULT_INTERVAL", "IntervalError", "Monitor", "parse_interval"]

# How long stop() waits for a sample in progress (an NVML call on a wedged GPU can hang).
JOIN_TIMEOUT_S = 5.0


class Monitor:
    """Samples NVML and psutil every ``interval`` seconds into ``stream`` (module docstring).

    ``gpu_indices``: NVML indices to sample; None (default) maps this process's
    ``CUDA_VISIBLE_DEVICES`` (all GPUs when unset), ``[]`` samples no GPU. ``nvml`` and
    ``psutil`` replace the modules (tests); ``clock`` (monotonic seconds) times the energy
    integration and ``elapsed``; ``wall`` is the records' ``time`` (UNIX seconds, like ``rate``
    records, so both can be put on one time axis); ``torch_cuda`` replaces ``torch.cuda`` for
    the peak memory (tests; by default the one of an already imported torch). ``session``:
    the session whose slots run at once around this run (default: ``DLBENCH_SESSION``'s, when
    ``pid`` is this process), whose CPU each sample adds (``session_cpu_percent``).
    ``inherit_run``: False for a run that no dlbench parent started (the ``bench`` fixture in
    an ordinary test run): the run marker and session of its environment are not its own, and
    its process tree is ``pid`` and its children (process.OWN_TREE).
    """

    def __init__(
        self,
        stream: Stream,
        *,
        interval: float = DEFAULT_INTERVAL,
        gpu_indices: Sequence[int] | None = None,
        pid: int | None = None,
        nvml: Any = None,
        clock: Callable[[], float] = time.monotonic,
        psutil: Any = None,
        wall: Callable[[], float] | None = None,
        torch_cuda: Any = None,
        session: Session | None = None,
        inherit_run: bool = True,
    ) -> None:
        if not interval > 0:
            raise IntervalError(f"interval must be positive, got {quoted(interval)}")
        self.stream = stream
        self.interval = float(interval)
        self.pid = os.getpid() if pid is None else pid
        self.marker = None if inherit_run else OWN_TREE
        if session is None and self.pid == os.getpid() and inherit_run:
            session = session_from_env(os.environ)
        self.session = session
        self._session_open = False
        self.clock = clock
        # The Bench's timer's clock (measure/timing.py): samples line up with the steps' times
        # after a clock step (NTP, a resume) as before it.
        self.wall = wall if wall is not None else MonotonicWallClock()
        self.summary: MonitorSummary | None = None
        self._nvml = GpuSampler(nvml, None if gpu_indices is None else list(gpu_indices))
        self._psutil = psutil
        self._tree: ProcessTree | None = None
        self._gpu_reason = ""
        self._t0 = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one sample at a time (thread, start/stop, tests)
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopped = False
        self._samples = 0
        self._errors = 0
        self._last_error = ""
        self._acc = Summarizer()
        self._torch_cuda = torch_cuda

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Monitor:
        """Open NVML and psutil, write the ``monitor`` record and a first sample, then start the
        thread. Never raises: what cannot be opened is left out (and said in the record)."""
        if self._started:
            return self
        self._started = True
        self._t0 = self.clock()
        try:
            self._gpu_reason = self._nvml.open()
        except Exception as exc:  # noqa: BLE001 - a broken binding is still "no GPU telemetry"
            self._gpu_reason = f"NVML unavailable ({type(exc).__name__}: {exc})"
        self._tree = self._open_tree()
        info: dict[str, Any] = {"gpu": not self._gpu_reason, "interval": self.interval,
                                "pid": self.pid, "time": self.wall()}
        if self._gpu_reason:
            info["reason"] = self._gpu_reason
        else:
            info["gpus"] = self._nvml.info
        if self.session is not None and self._session_open:
            info["session_pid"] = self.session.pid
            info["session_cpus"] = list(self.session.cpus)
        if self._nvml.notes:
            info["notes"] = self._nvml.notes
        self._write(Event.MONITOR, info)
        # Before the benchmark's first step: the peaks are this run's, not an earlier one's
        # in the same process (inline runs, the bench fixture).
        reset_peaks(self._torch_cuda)
        self.sample()
        self._thread = threading.Thread(target=self._run, name="dlbench-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MonitorSummary:
        """Stop the thread, take a last sample, write ``monitor_summary``; idempotent."""
        if self.summary is not None:
            return self.summary
        self._stopped = True
        self._stop.set()
        joined = True
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
            joined = not self._thread.is_alive()
        if not self._started:
            self.summary = Summarizer().summary(gpu=False, reason="not started", interval=None)
            return self.summary
        if joined:  # a thread stuck in NVML would make this one stick too
            self.sample()
        self.summary = self._acc.summary(
            gpu=self.gpu, reason=self._gpu_reason, interval=self.interval,
            errors=self._errors, last_error=self._last_error,
            torch_memory=read_peaks(self._torch_cuda),  # after the last step
        )
        self._write(Event.MONITOR_SUMMARY, {**self.summary.to_dict(), "time": self.wall()})
        if joined:
            self._nvml.close()
        return self.summary

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()  # whatever the benchmark raised: the monitor never hides it

    # -- sampling ----------------------------------------------------------------------------
    def sample(self) -> dict[str, Any] | None:
        """Take one sample now and write it; None if it could not be taken (counted in
        ``errors``). Called by the thread every interval; callable directly (tests)."""
        with self._lock:
            try:
                t, wall = self.clock(), self.wall()
                record: dict[str, Any] = {"time": wall, "elapsed": round(t - self._t0, 6)}
                record.update(self._sample_tree())
                record["gpus"] = self._nvml.sample(t, wall) if not self._gpu_reason else []
            except Exception as exc:  # noqa: BLE001 - the benchmark must never see it
                self._error(exc)
                return None
            self._samples += 1
            self._acc.add(record)
            self._write(Event.TELEMETRY, record)
            return record

    def _sample_tree(self) -> dict[str, Any]:
        if self._tree is None:
            return dict(NO_PROCESS)
        try:
            return self._tree.sample()
        except Exception as exc:  # noqa: BLE001 - e.g. the root process is gone
            self._error(exc)
            return dict(NO_PROCESS)

    def _run(self) -> None:
        if self._tree is not None:
            self._tree.prime_system()  # the thread's first sample then reads the machine's CPU
        # Event.wait returns True as soon as stop() sets it: stopping never waits an interval.
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except BaseException as exc:  # noqa: BLE001 - never let the thread die noisily
                self._error(exc)

    # -- helpers -----------------------------------------------------------------------------
    def _open_tree(self) -> ProcessTree | None:
        psutil = self._psutil
        if psutil is None:
            try:
                import psutil as installed
            except ImportError:
                return None
            psutil = installed
        try:
            tree = ProcessTree(psutil, self.pid, self.marker)
        except Exception as exc:  # noqa: BLE001 - no such pid, no permission: no CPU fields
            self._error(exc)
            return None
        if self.session is not None:
            try:
                tree.session = SessionCpu(psutil, self.session.pid, self.pid)
                self._session_open = True
            except ValueError:  # a rank on another node (srun passes the environment on)
                pass  # the run is judged alone, as with one slot
            except Exception as exc:  # noqa: BLE001 - the root is gone, or not ours
                self._error(exc)
        return tree

    def _write(self, event: Event, fields: dict[str, Any]) -> None:
        try:
            self.stream.write(event, **fields)
        except Exception as exc:  # noqa: BLE001 - a closed stream: stop sampling, quietly
            self._error(exc)
            self._stop.set()

    def _error(self, exc: BaseException) -> None:
        self._errors += 1
        self._last_error = one_line(exc)

    @property
    def gpu(self) -> bool:
        """Whether GPUs are being sampled (known after :meth:`start`)."""
        return self._started and not self._gpu_reason

    @property
    def gpu_reason(self) -> str:
        return self._gpu_reason

    @property
    def samples(self) -> int:
        return self._samples
