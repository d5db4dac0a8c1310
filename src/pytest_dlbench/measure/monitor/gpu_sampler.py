"""Per-GPU NVML samples for the monitor thread: utilisation, memory, power, clocks, temperature
and energy of the GPUs a run uses (measure/monitor/sampler.py drives it). The facts and the state
read once per run are in measure/monitor/nvml.py, the owner of NVML."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_dlbench.measure.monitor.nvml import (
    _NVML_ERROR_NOT_SUPPORTED,
    close_nvml,
    gpu_info,
    open_nvml,
    visible_nvml_indices,
)
from pytest_dlbench.measure.monitor.summary import as_float, as_int

__all__ = ["MIN_COUNTER_MOVES", "GpuSampler"]

# pynvml's NVML_GPU_UTILIZATION_SAMPLES: the driver's own utilisation samples, each with the
# time its period ended (docs/telemetry.md, "GPU load over the scored window").
_UTILIZATION_SAMPLES = 1
# Samples the driver buffered before the monitor started are not this run's.
_SAMPLES_BEFORE_START_S = 2.0
# NVML stamps its samples with the host's UNIX time in microseconds; a stamp further than this
# from the wall clock is on another clock, and the samples are placed by their newest one.
_CLOCK_MISMATCH_S = 60.0

#: Samples in which the energy counter must have moved before its difference is the energy:
#: the counter is coarse (it moves every ~20-100 ms, in steps of up to tens of joules), so a
#: window that saw it move once may be shorter than one step, and one that saw it move not at
#: all (a benchmark that skipped itself) is not 0 J. Until then, power is integrated.
MIN_COUNTER_MOVES = 2


@dataclass
class _Gpu:
    """One sampled GPU and its energy bookkeeping."""

    index: int
    handle: Any
    # Energy counter (mJ) at the start; None: integrate power instead (counter not supported).
    counter_base_mj: float | None = None
    counter_last_mj: float | None = None
    counter_moves: int = 0  # samples in which the counter had moved since the one before
    energy_j: float | None = None  # what the samples report: None until it is known
    power_j: float | None = None  # power integrated from the first known power on
    last_power_w: float | None = None
    last_t: float | None = None
    unsupported: set[str] = field(default_factory=set)
    last_util_stamp_us: int = 0  # the newest driver utilisation sample read so far


def _not_supported(nvml: Any, exc: BaseException) -> bool:
    code = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", _NVML_ERROR_NOT_SUPPORTED)
    return getattr(exc, "value", None) == code


class GpuSampler:
    """The NVML side of a monitor: init, the visible GPUs, one guarded call per field.

    ``gpu_indices``: NVML indices to sample; None maps ``CUDA_VISIBLE_DEVICES``, ``[]`` none.
    """

    def __init__(self, nvml: Any, gpu_indices: Sequence[int] | None) -> None:
        self.nvml = nvml
        self.gpus: list[_Gpu] = []
        self.notes: list[str] = []
        self.info: list[dict[str, Any]] = []
        self._initialised = False
        self._requested = gpu_indices
        self._first_wall: float | None = None  # the first sample's time (records' axis)
        self.host_clock: Callable[[], float] = time.time  # NVML's stamps' clock (tests: fake)

    def open(self) -> str:
        """Initialise NVML and pick the GPUs; returns why there is no GPU telemetry, or ``""``."""
        if self._requested is not None and not self._requested:
            return "no GPU assigned to this run"
        nvml, reason = open_nvml(self.nvml)
        if nvml is None:
            return reason
        self.nvml = nvml
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
            gpu.counter_base_mj = gpu.counter_last_mj = as_float(counter)
            info = gpu_info(nvml, index, handle, functools.partial(self._call, gpu))
            self.info.append({
                "index": index,
                "name": info.name,
                "uuid": info.uuid,
                "mem_total": info.memory,
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

    def sample(self, t: float, wall: float | None = None) -> list[dict[str, Any]]:
        """One record's ``gpus``: ``t`` is the monotonic clock (energy), ``wall`` the records'
        time axis (the driver's utilisation samples are placed on it; None: leave them out)."""
        nvml = self.nvml
        if self._first_wall is None and wall is not None:
            self._first_wall = wall
        out = []
        for gpu in self.gpus:
            util = self._call(gpu, "util", nvml.nvmlDeviceGetUtilizationRates)
            stamped = self._utilisation_samples(gpu, wall) if wall is not None else None
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
                "util": as_float(getattr(util, "gpu", None)),
                "mem_used": as_int(getattr(memory, "used", None)),
                "mem_total": as_int(getattr(memory, "total", None)),
                "power_w": power_w,
                "temp_c": as_float(temp),
                "sm_clock_mhz": as_float(clock),
                "energy_j": self._energy(gpu, t, power_w),
                **({"util_samples": stamped} if stamped else {}),
            })
        return out

    def _utilisation_samples(self, gpu: _Gpu, wall: float) -> list[list[float]] | None:
        """The driver's utilisation samples newer than the last read, as ``[time, percent]``
        on the records' time axis, each ``time`` the end of the sample's period. None when
        the driver keeps none (an older GPU or binding) or has no new one (NVML answers
        "not found")."""
        fn = getattr(self.nvml, "nvmlDeviceGetSamples", None)
        kind = getattr(self.nvml, "NVML_GPU_UTILIZATION_SAMPLES", _UTILIZATION_SAMPLES)
        answer = self._call(gpu, "util_samples", fn, kind, gpu.last_util_stamp_us)
        if not answer:
            return None
        stamps: list[tuple[int, float]] = []
        for sample in answer[1] or ():
            stamp = as_int(getattr(sample, "timeStamp", None))
            value = getattr(getattr(sample, "sampleValue", None), "uiVal", None)
            percent = as_float(value)
            if stamp is not None and percent is not None and stamp > gpu.last_util_stamp_us:
                stamps.append((stamp, percent))
        if not stamps:
            return None
        stamps.sort()
        gpu.last_util_stamp_us = stamps[-1][0]
        # The stamps are the host's UNIX microseconds; the records' axis is the monitor's
        # wall clock (measure/timing.py's MonotonicWallClock), offset from time.time() by
        # however far the host's clock stepped since the run began.
        host = self.host_clock()
        offset = wall - host
        if abs(stamps[-1][0] / 1e6 - host) > _CLOCK_MISMATCH_S:
            offset = wall - stamps[-1][0] / 1e6  # another clock: the newest sample is now
        first_kept = (self._first_wall or wall) - _SAMPLES_BEFORE_START_S
        return [[round(stamp / 1e6 + offset, 6), percent] for stamp, percent in stamps
                if stamp / 1e6 + offset >= first_kept]

    def _energy(self, gpu: _Gpu, t: float, power_w: float | None) -> float | None:
        """Joules since the start: the energy counter's difference once it has moved in
        :data:`MIN_COUNTER_MOVES` samples, else power integrated over time (trapezoids between
        samples, from the first known power on), else the counter's one step; None while
        nothing says (a counter that has not moved is no measurement of 0 J). Once known it
        stays known: a summary takes the last value."""
        step_j = self._integrate_power(gpu, t, power_w)
        if gpu.counter_base_mj is not None:
            counter = as_float(self._call(gpu, "energy",
                                          self.nvml.nvmlDeviceGetTotalEnergyConsumption))
            last = gpu.counter_last_mj if gpu.counter_last_mj is not None else gpu.counter_base_mj
            if counter is not None and counter >= last:
                gpu.counter_moves += counter > last
                gpu.counter_last_mj = counter
                gpu.energy_j = self._counted_energy(gpu)
                return gpu.energy_j
            # The counter stopped working or went back (driver reload): integrate power from
            # the last sample on, continuing from the energy reported so far.
            gpu.counter_base_mj = None
        if step_j is not None:
            gpu.energy_j = (gpu.energy_j or 0.0) + step_j
        return gpu.energy_j

    def _integrate_power(self, gpu: _Gpu, t: float, power_w: float | None) -> float | None:
        """Add the trapezoid since the last sample with power to ``gpu.power_j``; returns it
        (0 at the first known power), None without power now. A sample without power keeps
        the last known one: the next trapezoid spans the gap."""
        if power_w is None:
            return None
        step = 0.0
        if gpu.last_t is not None and gpu.last_power_w is not None:
            step = (gpu.last_power_w + power_w) / 2.0 * max(0.0, t - gpu.last_t)
        gpu.power_j = (gpu.power_j or 0.0) + step
        gpu.last_power_w, gpu.last_t = power_w, t
        return step

    @staticmethod
    def _counted_energy(gpu: _Gpu) -> float | None:
        """The energy while the counter works: its difference once it moved often enough to be
        finer than the window, else the power integral, else its difference if it moved at
        all, else unknown."""
        assert gpu.counter_base_mj is not None and gpu.counter_last_mj is not None
        counted = (gpu.counter_last_mj - gpu.counter_base_mj) / 1000.0
        if gpu.counter_moves >= MIN_COUNTER_MOVES:
            return counted
        if gpu.power_j is not None:
            return gpu.power_j
        return counted if gpu.counter_moves else None

    def close(self) -> None:
        if self._initialised:
            self._initialised = False
            close_nvml(self.nvml)
