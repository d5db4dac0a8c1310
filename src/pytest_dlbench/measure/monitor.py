"""Telemetry: a thread sampling the GPUs (NVML) and the benchmark's process tree (psutil).

A :class:`Monitor` wraps one run of a benchmark function::

    with Monitor(stream, interval=parse_interval(spec.interval)) as monitor:
        bench_fn(...)
    monitor.summary  # a MonitorSummary; also written as the ``monitor_summary`` record

It writes, into the run's stream (docs/telemetry.md):

- one ``monitor`` record when it starts: ``gpu`` true with the sampled GPUs, or ``gpu`` false
  with the ``reason`` (no driver, no nvidia-ml-py, no visible GPU): the single info line of a
  CPU-only run, which never fails because of it;
- one ``telemetry`` record per sample: at start, every ``interval`` seconds, and at stop;
- one ``monitor_summary`` record when it stops.

Samples are taken by a daemon thread, never by the benchmark's (timed) thread, except the first
(in :meth:`Monitor.start`, before the benchmark runs) and the last (in :meth:`Monitor.stop`,
after it ended). Nothing here raises into the benchmark: a failing NVML call makes its field
``None``, a failing sample is counted in ``errors``.

No pytest and no torch here; NVML and psutil are imported lazily and may be injected (tests).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.measure.stream import Stream

__all__ = [
    "DEFAULT_INTERVAL",
    "GpuSummary",
    "IntervalError",
    "Monitor",
    "MonitorSummary",
    "parse_interval",
    "summarize_telemetry",
    "visible_nvml_indices",
]

#: Seconds between samples when the suite gives no ``voir.options.interval``.
DEFAULT_INTERVAL = 1.0
# Below this the sampling thread would cost more than it tells (psutil walks /proc each time).
MIN_INTERVAL = 0.01
# How long stop() waits for a sample in progress (an NVML call on a wedged GPU can hang).
JOIN_TIMEOUT_S = 5.0
# CPU percentages over a shorter period are tick noise (see _ProcessTree).
MIN_CPU_PERIOD = 0.05
# NVML_ERROR_NOT_SUPPORTED: the field is never available on this GPU, so stop asking.
_NVML_ERROR_NOT_SUPPORTED = 3

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "m": 60.0, "min": 60.0}
_INTERVAL = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[a-z]*)\s*$")


class IntervalError(DlbenchError, ValueError):
    """A ``voir.options.interval`` that is not a positive duration."""


def parse_interval(value: Any) -> float:
    """Seconds from a suite's ``interval``: ``"1s"``, ``"500ms"``, ``"0.5s"``, ``"2m"``, a number
    of seconds, or ``None`` (the default, 1 s). Raises :class:`IntervalError` otherwise."""
    if value is None:
        return DEFAULT_INTERVAL
    if isinstance(value, bool):  # YAML `interval: yes` is not a duration
        raise IntervalError(f"interval must be a duration like '1s' or '500ms', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _INTERVAL.match(value.lower())
        if not match or match["unit"] not in _UNITS:
            raise IntervalError(
                f"interval must be a duration like '1s' or '500ms', got {value!r}"
            )
        seconds = float(match["num"]) * _UNITS[match["unit"]]
    else:
        raise IntervalError(f"interval must be a duration like '1s' or '500ms', got {value!r}")
    if not math.isfinite(seconds) or seconds < MIN_INTERVAL:
        raise IntervalError(f"interval must be at least {MIN_INTERVAL * 1000:g} ms, got {value!r}")
    return seconds


# -- NVML -------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_nvml_indices(
    nvml: Any, visible: str | None, count: int
) -> tuple[list[int], list[str]]:
    """NVML indices of the GPUs that ``CUDA_VISIBLE_DEVICES`` (``visible``) shows, and notes on
    entries that were not mapped.

    Entries are CUDA's: indices (``"0,2"``), GPU UUIDs or unique prefixes of them
    (``"GPU-8932f937"``), or MIG instances (``"MIG-..."``, not sampled: NVML has no utilisation
    for them, and the parent GPU's counters include the other instances). Like CUDA, everything
    from the first invalid entry on is ignored. An index is taken as an NVML index, which is
    CUDA's index only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or on a node of identical GPUs
    (CUDA's default order puts the fastest first, ties in PCI order).
    """
    if visible is None:
        return list(range(count)), []
    uuids: list[str | None] | None = None
    indices: list[int] = []
    notes: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            continue
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if not 0 <= index < count:
                notes.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} is not a GPU here")
                break
        elif entry.upper().startswith("MIG-"):
            notes.append(f"MIG instance {entry} is not sampled")
            continue
        elif entry.upper().startswith("GPU-"):
            if uuids is None:
                uuids = []
                for i in range(count):
                    try:
                        uuids.append(_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))))
                    except Exception:  # noqa: BLE001 - an unreadable UUID matches nothing
                        uuids.append(None)
            found = [i for i, u in enumerate(uuids) if u and u.lower().startswith(entry.lower())]
            if len(found) != 1:
                notes.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches no single GPU")
                break
            index = found[0]
        else:
            notes.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} is not a GPU id")
            break
        if index in indices:  # CUDA rejects a repeated device the same way
            notes.append(f"CUDA_VISIBLE_DEVICES repeats GPU {index}")
            break
        indices.append(index)
    return indices, notes


@dataclass
class _Gpu:
    """One sampled GPU and its energy bookkeeping."""

    index: int
    handle: Any
    # Energy counter (mJ) at the start; None: integrate power instead (counter not supported).
    counter_base_mj: float | None = None
    counter_last_mj: float | None = None
    energy_j: float | None = None
    last_power_w: float | None = None
    last_t: float | None = None
    unsupported: set[str] = field(default_factory=set)


def _not_supported(nvml: Any, exc: BaseException) -> bool:
    code = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", _NVML_ERROR_NOT_SUPPORTED)
    return getattr(exc, "value", None) == code


class _Nvml:
    """The NVML side of a monitor: init, the visible GPUs, one guarded call per field."""

    def __init__(self, nvml: Any, gpu_indices: Sequence[int] | None) -> None:
        self.nvml = nvml
        self.gpus: list[_Gpu] = []
        self.notes: list[str] = []
        self.info: list[dict[str, Any]] = []
        self._initialised = False
        self._requested = gpu_indices

    def open(self) -> str:
        """Initialise NVML and pick the GPUs; returns why there is no GPU telemetry, or ``""``."""
        if self._requested is not None and not self._requested:
            return "no GPU assigned to this run"
        if self.nvml is None:
            try:
                import pynvml  # nvidia-ml-py
            except ImportError:
                return "nvidia-ml-py is not installed"
            self.nvml = pynvml
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound: no driver here
            return f"NVML unavailable ({type(exc).__name__}: {exc})"
        self._initialised = True
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            return f"NVML cannot count GPUs ({type(exc).__name__}: {exc})"
        if self._requested is not None:
            indices = [i for i in self._requested if 0 <= i < count]
            self.notes += [f"GPU {i} does not exist" for i in self._requested if i not in indices]
        else:
            indices, self.notes = visible_nvml_indices(
                nvml, os.environ.get("CUDA_VISIBLE_DEVICES"), count
            )
        for index in indices:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001
                self.notes.append(f"GPU {index}: no handle ({type(exc).__name__}: {exc})")
                continue
            gpu = _Gpu(index, handle)
            counter = self._call(gpu, "energy", nvml.nvmlDeviceGetTotalEnergyConsumption)
            gpu.counter_base_mj = gpu.counter_last_mj = _num(counter)
            name = self._call(gpu, "name", getattr(nvml, "nvmlDeviceGetName", None))
            uuid = self._call(gpu, "uuid", getattr(nvml, "nvmlDeviceGetUUID", None))
            memory = self._call(gpu, "memory", nvml.nvmlDeviceGetMemoryInfo)
            self.info.append({
                "index": index,
                "name": _text(name) if name is not None else None,
                "uuid": _text(uuid) if uuid is not None else None,
                "mem_total": int(memory.total) if memory is not None else None,
                "energy": "counter" if gpu.counter_base_mj is not None else "power",
            })
            self.gpus.append(gpu)
        if not self.gpus:
            return "; ".join(self.notes) or "no GPU visible to this process"
        return ""

    def _call(self, gpu: _Gpu, name: str, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """``fn(handle, *args)``, or None when it fails; a field NVML does not support on this GPU
        is not asked again (it would fail the same way every sample)."""
        if fn is None or name in gpu.unsupported:
            return None
        try:
            return fn(gpu.handle, *args)
        except Exception as exc:  # noqa: BLE001 - any failure is one missing field, never a crash
            if _not_supported(self.nvml, exc):
                gpu.unsupported.add(name)
            return None

    def sample(self, t: float) -> list[dict[str, Any]]:
        nvml = self.nvml
        out = []
        for gpu in self.gpus:
            util = self._call(gpu, "util", nvml.nvmlDeviceGetUtilizationRates)
            memory = self._call(gpu, "memory", nvml.nvmlDeviceGetMemoryInfo)
            power_mw = self._call(gpu, "power", nvml.nvmlDeviceGetPowerUsage)
            temp = self._call(
                gpu, "temp", nvml.nvmlDeviceGetTemperature,
                getattr(nvml, "NVML_TEMPERATURE_GPU", 0),
            )
            clock = self._call(
                gpu, "sm_clock", nvml.nvmlDeviceGetClockInfo, getattr(nvml, "NVML_CLOCK_SM", 1)
            )
            power_w = float(power_mw) / 1000.0 if power_mw is not None else None
            out.append({
                "index": gpu.index,
                "util": _num(getattr(util, "gpu", None)),
                "mem_used": _int(getattr(memory, "used", None)),
                "mem_total": _int(getattr(memory, "total", None)),
                "power_w": power_w,
                "temp_c": _num(temp),
                "sm_clock_mhz": _num(clock),
                "energy_j": self._energy(gpu, t, power_w),
            })
        return out

    def _energy(self, gpu: _Gpu, t: float, power_w: float | None) -> float | None:
        """Joules since the start: the energy counter's difference while it works, else power
        integrated over time (trapezoids between samples, from the first known power on)."""
        counted = False
        if gpu.counter_base_mj is not None:
            counter = self._call(gpu, "energy", self.nvml.nvmlDeviceGetTotalEnergyConsumption)
            last = gpu.counter_last_mj if gpu.counter_last_mj is not None else gpu.counter_base_mj
            if counter is not None and float(counter) >= last:
                gpu.counter_last_mj = float(counter)
                gpu.energy_j = (float(counter) - gpu.counter_base_mj) / 1000.0
                counted = True
            else:
                # The counter stopped working or went back (driver reload): integrate power from
                # the last sample on, continuing from the energy counted so far.
                gpu.counter_base_mj = None
        if not counted and power_w is not None:
            if gpu.energy_j is None:
                gpu.energy_j = 0.0
            elif gpu.last_t is not None:
                before = gpu.last_power_w if gpu.last_power_w is not None else power_w
                gpu.energy_j += (before + power_w) / 2.0 * max(0.0, t - gpu.last_t)
        # A sample without power keeps the last known one: the next trapezoid spans the gap.
        if power_w is not None or gpu.last_t is None:
            gpu.last_power_w, gpu.last_t = power_w, t
        return gpu.energy_j

    def close(self) -> None:
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


def _num(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# -- psutil -----------------------------------------------------------------------------------
class _ProcessTree:
    """CPU %, RSS and disk bytes of a process and all its descendants (DataLoader workers...).

    ``cpu_percent`` is summed over the tree (100 = one core busy). RSS is summed too, which
    counts the pages that forked workers share with their parent more than once: an upper bound,
    and cheap (exact PSS would read every process's smaps). Disk bytes are what the tree's
    processes read from or wrote to storage since the start (page-cache hits are not disk reads);
    a worker that exited keeps counting with its last known values.
    """

    def __init__(self, psutil: Any, pid: int) -> None:
        self.psutil = psutil
        self.root = psutil.Process(pid)
        self._procs: dict[int, Any] = {}
        self._io: dict[int, tuple[int, int]] = {}
        self._io_ok = True
        self._io_base = (0, 0)
        # cpu_percent compares with its previous call; over a few milliseconds (the first
        # sample, the last one right after a thread sample) CPU-time ticks of 10 ms make it
        # noise (550 % on 2 cores was seen), so a sample that close gives None instead.
        self._cpu_at = time.monotonic()
        self._walk(cpu=True)
        with contextlib.suppress(Exception):
            psutil.cpu_percent(None)
        self._io_base = self._io_total()

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
        read, write = self._io_total()
        return {
            "cpu_percent": round(sum(c for _, c, _ in procs), 1) if procs and cpu else None,
            "system_cpu_percent": system,
            "rss_bytes": sum(r for _, _, r in procs) if procs else None,
            "procs": len(procs),
            "disk_read_bytes": read - self._io_base[0] if self._io_ok else None,
            "disk_write_bytes": write - self._io_base[1] if self._io_ok else None,
        }


_NO_PROCESS = {
    "cpu_percent": None,
    "system_cpu_percent": None,
    "rss_bytes": None,
    "procs": None,
    "disk_read_bytes": None,
    "disk_write_bytes": None,
}


# -- summaries (pure: also computed from a stream's records) -----------------------------------
@dataclass(frozen=True)
class GpuSummary:
    index: int
    samples: int  # samples with a utilisation value
    mean_util: float | None  # percent
    max_util: float | None
    mean_mem_used: float | None  # bytes
    peak_mem_used: int | None  # bytes, whole device (other processes and the CUDA context too)
    mem_total: int | None
    energy_j: float | None
    peak_power_w: float | None
    max_temp_c: float | None

    @property
    def mean_mem_fraction(self) -> float | None:
        if self.mean_mem_used is None or not self.mem_total:
            return None
        return self.mean_mem_used / self.mem_total

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "samples": self.samples,
            "mean_util": self.mean_util,
            "max_util": self.max_util,
            "mean_mem_used": self.mean_mem_used,
            "peak_mem_used": self.peak_mem_used,
            "mem_total": self.mem_total,
            "energy_j": self.energy_j,
            "peak_power_w": self.peak_power_w,
            "max_temp_c": self.max_temp_c,
        }


@dataclass(frozen=True)
class MonitorSummary:
    """What a run's telemetry amounts to (the ``monitor_summary`` record)."""

    gpu: bool
    reason: str  # why there is no GPU telemetry; "" with GPUs
    interval: float | None
    samples: int
    duration_s: float | None
    gpus: tuple[GpuSummary, ...] = ()
    peak_rss_bytes: int | None = None
    mean_cpu_percent: float | None = None
    disk_read_bytes: int | None = None
    disk_write_bytes: int | None = None
    errors: int = 0
    last_error: str = ""

    @property
    def peak_gpu_mem_bytes(self) -> int | None:
        """The largest per-GPU peak (what must fit in one device's memory)."""
        peaks = [g.peak_mem_used for g in self.gpus if g.peak_mem_used is not None]
        return max(peaks) if peaks else None

    @property
    def energy_j(self) -> float | None:
        """Energy of all sampled GPUs together."""
        values = [g.energy_j for g in self.gpus if g.energy_j is not None]
        return sum(values) if values else None

    @property
    def mean_gpu_util(self) -> float | None:
        """Mean of the per-GPU mean utilisations, in percent."""
        values = [g.mean_util for g in self.gpus if g.mean_util is not None]
        return sum(values) / len(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "reason": self.reason,
            "interval": self.interval,
            "samples": self.samples,
            "duration_s": self.duration_s,
            "gpus": [g.to_dict() for g in self.gpus],
            "peak_gpu_mem_bytes": self.peak_gpu_mem_bytes,
            "energy_j": self.energy_j,
            "mean_gpu_util": self.mean_gpu_util,
            "peak_rss_bytes": self.peak_rss_bytes,
            "mean_cpu_percent": self.mean_cpu_percent,
            "disk_read_bytes": self.disk_read_bytes,
            "disk_write_bytes": self.disk_write_bytes,
            "errors": self.errors,
            "last_error": self.last_error,
        }


class _GpuAcc:
    def __init__(self, index: int) -> None:
        self.index = index
        self.util: list[float] = []
        self.mem: list[float] = []
        self.peak_mem: int | None = None
        self.mem_total: int | None = None
        self.energy: float | None = None
        self.power: float | None = None
        self.temp: float | None = None

    def add(self, g: Mapping[str, Any]) -> None:
        util, used = _num(g.get("util")), _int(g.get("mem_used"))
        if util is not None:
            self.util.append(util)
        if used is not None:
            self.mem.append(float(used))
            self.peak_mem = used if self.peak_mem is None else max(self.peak_mem, used)
        self.mem_total = _int(g.get("mem_total")) or self.mem_total
        energy = _num(g.get("energy_j"))
        if energy is not None:
            self.energy = energy  # cumulative: the last known value is the run's
        self.power = _max(self.power, _num(g.get("power_w")))
        self.temp = _max(self.temp, _num(g.get("temp_c")))

    def summary(self) -> GpuSummary:
        return GpuSummary(
            index=self.index,
            samples=len(self.util),
            mean_util=sum(self.util) / len(self.util) if self.util else None,
            max_util=max(self.util) if self.util else None,
            mean_mem_used=sum(self.mem) / len(self.mem) if self.mem else None,
            peak_mem_used=self.peak_mem,
            mem_total=self.mem_total,
            energy_j=self.energy,
            peak_power_w=self.power,
            max_temp_c=self.temp,
        )


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


class _Summarizer:
    """Running aggregates of ``telemetry`` records (constant memory, however long the run)."""

    def __init__(self) -> None:
        self.gpus: dict[int, _GpuAcc] = {}
        self.samples = 0
        self.first: float | None = None
        self.last: float | None = None
        self.rss: int | None = None
        self.cpu_sum = 0.0
        self.cpu_n = 0
        self.disk_read: int | None = None
        self.disk_write: int | None = None

    def add(self, record: Mapping[str, Any]) -> None:
        self.samples += 1
        t = _num(record.get("time"))
        if t is not None:
            self.first = t if self.first is None else min(self.first, t)
            self.last = t if self.last is None else max(self.last, t)
        for g in record.get("gpus") or ():
            index = _int(g.get("index"))
            if index is not None:
                self.gpus.setdefault(index, _GpuAcc(index)).add(g)
        rss = _int(record.get("rss_bytes"))
        if rss is not None:
            self.rss = rss if self.rss is None else max(self.rss, rss)
        cpu = _num(record.get("cpu_percent"))
        if cpu is not None:
            self.cpu_sum += cpu
            self.cpu_n += 1
        # Cumulative since the start: the last known values are the run's.
        read, write = _int(record.get("disk_read_bytes")), _int(record.get("disk_write_bytes"))
        self.disk_read = read if read is not None else self.disk_read
        self.disk_write = write if write is not None else self.disk_write

    def summary(
        self, *, gpu: bool, reason: str, interval: float | None, errors: int = 0,
        last_error: str = "",
    ) -> MonitorSummary:
        return MonitorSummary(
            gpu=gpu,
            reason=reason,
            interval=interval,
            samples=self.samples,
            duration_s=(self.last - self.first) if self.first is not None else None,  # type: ignore[operator]
            gpus=tuple(self.gpus[i].summary() for i in sorted(self.gpus)),
            peak_rss_bytes=self.rss,
            mean_cpu_percent=self.cpu_sum / self.cpu_n if self.cpu_n else None,
            disk_read_bytes=self.disk_read,
            disk_write_bytes=self.disk_write,
            errors=errors,
            last_error=last_error,
        )


def summarize_telemetry(
    records: Iterable[Mapping[str, Any]],
    *,
    start: float | None = None,
    end: float | None = None,
) -> MonitorSummary:
    """Summarise the ``telemetry`` records of a stream; with ``start``/``end`` (UNIX seconds),
    only the samples taken in between. Pure: no NVML, no psutil.

    ``gpu`` and ``reason`` come from the ``monitor`` record (without one: whether any sample
    has GPUs); ``errors`` from the ``monitor_summary`` record.
    """
    acc = _Summarizer()
    monitor: Mapping[str, Any] | None = None
    errors, last_error = 0, ""
    windowed = start is not None or end is not None
    for record in records:
        event = record.get("event")
        if event == "monitor" and monitor is None:
            monitor = record
        elif event == "monitor_summary":
            errors = int(record.get("errors") or 0)
            last_error = str(record.get("last_error") or "")
        elif event == "telemetry":
            if windowed:
                t = _num(record.get("time"))
                if t is None or (start is not None and t < start) or (end is not None and t > end):
                    continue
            acc.add(record)
    if monitor is not None:
        gpu, reason = bool(monitor.get("gpu")), str(monitor.get("reason") or "")
        interval = _num(monitor.get("interval"))
    else:
        gpu, reason, interval = bool(acc.gpus), "", None
    return acc.summary(
        gpu=gpu, reason=reason, interval=interval, errors=errors, last_error=last_error
    )


# -- the monitor ------------------------------------------------------------------------------
class Monitor:
    """Samples NVML and psutil every ``interval`` seconds into ``stream`` (module docstring).

    ``gpu_indices``: NVML indices to sample; None (default) maps this process's
    ``CUDA_VISIBLE_DEVICES`` (all GPUs when unset), ``[]`` samples no GPU. ``nvml`` and
    ``psutil`` replace the modules (tests); ``clock`` (monotonic seconds) times the energy
    integration and ``elapsed``; ``wall`` is the records' ``time`` (UNIX seconds, like ``rate``
    records, so both can be put on one time axis).
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
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not interval > 0:
            raise IntervalError(f"interval must be positive, got {interval!r}")
        self.stream = stream
        self.interval = float(interval)
        self.pid = os.getpid() if pid is None else pid
        self.clock = clock
        self.wall = wall
        self.summary: MonitorSummary | None = None
        self._nvml = _Nvml(nvml, None if gpu_indices is None else list(gpu_indices))
        self._psutil = psutil
        self._tree: _ProcessTree | None = None
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
        self._acc = _Summarizer()

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
        if self._nvml.notes:
            info["notes"] = self._nvml.notes
        self._write("monitor", info)
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
            self.summary = _Summarizer().summary(gpu=False, reason="not started", interval=None)
            return self.summary
        if joined:  # a thread stuck in NVML would make this one stick too
            self.sample()
        self.summary = self._acc.summary(
            gpu=self.gpu, reason=self._gpu_reason, interval=self.interval,
            errors=self._errors, last_error=self._last_error,
        )
        self._write("monitor_summary", {**self.summary.to_dict(), "time": self.wall()})
        if joined:
            self._nvml.close()
        return self.summary

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- sampling ----------------------------------------------------------------------------
    def sample(self) -> dict[str, Any] | None:
        """Take one sample now and write it; None if it could not be taken (counted in
        ``errors``). Called by the thread every interval; callable directly (tests)."""
        with self._lock:
            try:
                t = self.clock()
                record: dict[str, Any] = {"time": self.wall(), "elapsed": round(t - self._t0, 6)}
                record.update(self._sample_tree())
                record["gpus"] = self._nvml.sample(t) if not self._gpu_reason else []
            except Exception as exc:  # noqa: BLE001 - the benchmark must never see it
                self._error(exc)
                return None
            self._samples += 1
            self._acc.add(record)
            self._write("telemetry", record)
            return record

    def _sample_tree(self) -> dict[str, Any]:
        if self._tree is None:
            return dict(_NO_PROCESS)
        try:
            return self._tree.sample()
        except Exception as exc:  # noqa: BLE001 - e.g. the root process is gone
            self._error(exc)
            return dict(_NO_PROCESS)

    def _run(self) -> None:
        # Event.wait returns True as soon as stop() sets it: stopping never waits an interval.
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except BaseException as exc:  # noqa: BLE001 - never let the thread die noisily
                self._error(exc)

    # -- helpers -----------------------------------------------------------------------------
    def _open_tree(self) -> _ProcessTree | None:
        psutil = self._psutil
        if psutil is None:
            try:
                import psutil
            except ImportError:
                return None
        try:
            return _ProcessTree(psutil, self.pid)
        except Exception as exc:  # noqa: BLE001 - no such pid, no permission: no CPU fields
            self._error(exc)
            return None

    def _write(self, event: str, fields: dict[str, Any]) -> None:
        try:
            self.stream.write(event, **fields)
        except Exception as exc:  # noqa: BLE001 - a closed stream: stop sampling, quietly
            self._error(exc)
            self._stop.set()

    def _error(self, exc: BaseException) -> None:
        self._errors += 1
        self._last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]

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
