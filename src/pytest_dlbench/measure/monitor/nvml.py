"""The NVML binding (nvidia-ml-py), opened in one place: the GPUs there are, the ones
``CUDA_VISIBLE_DEVICES`` shows, and a sampler of their load, memory, power and energy.

NVML numbers GPUs by PCI bus and never creates a CUDA context, so the controller can count and
name GPUs without initialising CUDA. The binding is imported lazily; every entry point takes
``nvml`` (None: ``import pynvml``) so that tests can inject a fake. Nothing here raises because
there is no driver: what cannot be opened is a reason string, what cannot be read a None field.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.measure.monitor.summary import as_float, as_int

__all__ = [
    "GpuInfo",
    "GpuState",
    "Inventory",
    "close_nvml",
    "gpu_info",
    "gpu_inventory",
    "gpu_state",
    "nvml_session",
    "open_nvml",
    "parse_visible_devices",
    "visible_nvml_indices",
]

# NVML_ERROR_NOT_SUPPORTED: the field is never available on this GPU, so stop asking.
_NVML_ERROR_NOT_SUPPORTED = 3
_INDEX = re.compile(r"^-?\d+$")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _try(fn: Callable[..., Any] | None, *args: Any) -> Any:
    """``fn(*args)``, or None when there is no such function or it fails."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - any failure is one missing field, never a crash
        return None


# -- opening -----------------------------------------------------------------------------------
def open_nvml(nvml: Any = None) -> tuple[Any, str]:
    """Initialise NVML: ``(binding, "")``, or ``(None, why not)`` without nvidia-ml-py or a
    driver. A binding opened here is closed with :func:`close_nvml`."""
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound: no driver here
        return None, f"NVML unavailable ({type(exc).__name__}: {exc})"
    return nvml, ""


def close_nvml(nvml: Any) -> None:
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


@contextlib.contextmanager
def nvml_session(nvml: Any = None) -> Iterator[tuple[Any, str]]:
    """``with nvml_session() as (binding, reason):`` :func:`open_nvml`, closed on leaving."""
    binding, reason = open_nvml(nvml)
    try:
        yield binding, reason
    finally:
        if binding is not None:
            close_nvml(binding)


# -- what there is -----------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML names it; a field NVML could not read is None."""

    index: int  # NVML's (PCI bus order)
    name: str | None
    uuid: str | None
    memory: int | None  # bytes


def gpu_info(
    nvml: Any, index: int, handle: Any, call: Callable[[str, Any], Any] | None = None
) -> GpuInfo:
    """Name, UUID and total memory of the GPU of ``handle``. ``call(field, fn)`` calls
    ``fn(handle)`` its own way (the sampler remembers what is not supported)."""
    if call is None:
        call = lambda _, fn: _try(fn, handle)  # noqa: E731
    name = call("name", getattr(nvml, "nvmlDeviceGetName", None))
    uuid = call("uuid", getattr(nvml, "nvmlDeviceGetUUID", None))
    memory = call("memory", getattr(nvml, "nvmlDeviceGetMemoryInfo", None))
    return GpuInfo(index, _text(name), _text(uuid), as_int(getattr(memory, "total", None)))


@dataclass(frozen=True)
class Inventory:
    """Every GPU NVML sees (whatever ``CUDA_VISIBLE_DEVICES`` says) and the driver version."""

    gpus: tuple[GpuInfo, ...] = ()
    driver: str | None = None
    reason: str = ""  # why NVML gave no answer (no nvidia-ml-py, no driver); "" when it did


def gpu_inventory(nvml: Any = None) -> Inventory:
    """The GPUs of this machine, NVML opened and closed around the questions."""
    with nvml_session(nvml) as (binding, reason):
        if binding is None:
            return Inventory(reason=reason)
        try:
            count = int(binding.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            return Inventory(reason=f"NVML cannot count GPUs ({type(exc).__name__}: {exc})")
        gpus = tuple(
            gpu_info(binding, i, _try(binding.nvmlDeviceGetHandleByIndex, i)) for i in range(count)
        )
        return Inventory(gpus, _text(_try(getattr(binding, "nvmlSystemGetDriverVersion", None))))


# -- the state that changes benchmark numbers --------------------------------------------------
# nvmlClocksEventReasonApplicationsClocksSetting: clocks held back now by an application-clocks
# or locked-clocks setting (``nvidia-smi -ac`` / ``-lgc``). Raised only while the setting is
# what limits a busy GPU: an idle GPU reports GpuIdle (0x1) instead.
_REASON_CLOCKS_SETTING = 0x2
#: Clock-event reasons that are a genuine slowdown (nvmlClocksEventReason*): a GPU too hot, or
#: whose power is being braked, measures less than it can. The others are not: idle (0x1), a
#: clocks setting (0x2, the locked clocks a benchmark wants), the software power cap (0x4, a
#: lowered limit is a common way to steady a GPU), sync boost (0x10), display clocks (0x100).
SLOWDOWN_REASONS = {
    0x8: "hardware slowdown",
    0x20: "thermal slowdown (software)",
    0x40: "thermal slowdown (hardware)",
    0x80: "power brake",
}


@dataclass(frozen=True)
class GpuState:
    """One GPU's settings that change a benchmark's numbers; None where NVML could not say."""

    index: int
    name: str | None
    sm_clock_mhz: int | None  # now
    max_sm_clock_mhz: int | None
    app_clock_mhz: int | None  # applications clock (graphics)
    default_app_clock_mhz: int | None
    # Applications or locked clocks set (nvidia-smi -ac / -lgc); None: NVML cannot tell
    clocks_locked: bool | None
    persistence: bool | None
    power_limit_w: float | None
    default_power_limit_w: float | None
    ecc: bool | None  # current ECC mode
    processes: tuple[int, ...] | None  # pids of other processes using the GPU
    # Genuine slowdowns now (SLOWDOWN_REASONS' names); None when NVML gives no reasons
    slowdown: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "sm_clock_mhz": self.sm_clock_mhz,
            "max_sm_clock_mhz": self.max_sm_clock_mhz, "app_clock_mhz": self.app_clock_mhz,
            "default_app_clock_mhz": self.default_app_clock_mhz,
            "clocks_locked": self.clocks_locked, "persistence": self.persistence,
            "power_limit_w": self.power_limit_w,
            "default_power_limit_w": self.default_power_limit_w, "ecc": self.ecc,
            "processes": list(self.processes) if self.processes is not None else None,
            "slowdown": list(self.slowdown) if self.slowdown is not None else None,
        }


def _cuda_version(value: Any) -> str | None:
    """NVML's CUDA driver version (12040) as ``"12.4"``."""
    number = as_int(value)
    if number is None or number <= 0:
        return None
    return f"{number // 1000}.{number % 1000 // 10}"


def _watts(milliwatts: Any) -> float | None:
    value = as_float(milliwatts)
    return value / 1000.0 if value is not None else None


def _processes(nvml: Any, handle: Any, ignore: set[int]) -> tuple[int, ...] | None:
    """Pids of the compute and graphics processes on a GPU, less ``ignore``; None when NVML
    cannot list them (in a container it often sees no pid: then the list is empty)."""
    found: set[int] = set()
    answered = False
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        procs = _try(getattr(nvml, name, None), handle)
        if procs is None:
            continue
        answered = True
        for proc in procs:
            pid = as_int(getattr(proc, "pid", None))
            if pid is not None and pid not in ignore:
                found.add(pid)
    return tuple(sorted(found)) if answered else None


def _clock_event_reasons(nvml: Any, handle: Any) -> int | None:
    """The GPU's current clock-event (formerly throttle) reasons, a bit mask; None unreadable."""
    reasons = _try(getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None), handle)
    if reasons is None:
        reasons = _try(getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None), handle)
    return as_int(reasons)


def _clocks_locked(reasons: int | None, app: int | None, default: int | None) -> bool | None:
    """True when NVML shows the clocks set: applications clocks moved from their default
    (``nvidia-smi -ac``), or a clocks setting holding them now (``-lgc`` on a busy GPU).
    Otherwise None, never False: NVML has no getter for locked clocks (``-lgc``), and the
    clocks-setting reason is raised only while the setting holds a busy GPU back, so a GPU
    locked with ``-lgc`` looks unlocked while idle, when a run checks it."""
    if app is not None and default is not None and app != default:
        return True
    if reasons is not None and reasons & _REASON_CLOCKS_SETTING:
        return True
    return None


def _slowdown(reasons: int | None) -> tuple[str, ...] | None:
    """The genuine slowdowns among ``reasons`` (:data:`SLOWDOWN_REASONS`); None if unknown."""
    if reasons is None:
        return None
    return tuple(name for bit, name in SLOWDOWN_REASONS.items() if reasons & bit)


def _ecc(value: Any) -> bool | None:
    # nvmlDeviceGetEccMode returns [current, pending]
    if isinstance(value, list | tuple) and value:
        value = value[0]
    number = as_int(value)
    return None if number is None else bool(number)


def _one_gpu_state(nvml: Any, index: int, handle: Any, ignore: set[int]) -> GpuState:
    graphics = getattr(nvml, "NVML_CLOCK_GRAPHICS", 0)
    sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    app = as_int(_try(getattr(nvml, "nvmlDeviceGetApplicationsClock", None), handle, graphics))
    default = as_int(_try(getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None), handle,
                          graphics))
    persistence = as_int(_try(getattr(nvml, "nvmlDeviceGetPersistenceMode", None), handle))
    reasons = _clock_event_reasons(nvml, handle)
    return GpuState(
        index=index,
        name=_text(_try(getattr(nvml, "nvmlDeviceGetName", None), handle)),
        sm_clock_mhz=as_int(_try(getattr(nvml, "nvmlDeviceGetClockInfo", None), handle, sm)),
        max_sm_clock_mhz=as_int(_try(getattr(nvml, "nvmlDeviceGetMaxClockInfo", None), handle,
                                     sm)),
        app_clock_mhz=app,
        default_app_clock_mhz=default,
        clocks_locked=_clocks_locked(reasons, app, default),
        persistence=None if persistence is None else bool(persistence),
        power_limit_w=_watts(_try(getattr(nvml, "nvmlDeviceGetPowerManagementLimit", None),
                                  handle)),
        default_power_limit_w=_watts(
            _try(getattr(nvml, "nvmlDeviceGetPowerManagementDefaultLimit", None), handle)),
        ecc=_ecc(_try(getattr(nvml, "nvmlDeviceGetEccMode", None), handle)),
        processes=_processes(nvml, handle, ignore),
        slowdown=_slowdown(reasons),
    )


def gpu_state(nvml: Any = None, ignore_pids: Sequence[int] = ()) -> dict[str, Any]:
    """Every GPU's clocks, persistence mode, power limit, ECC and other processes, and the
    driver and CUDA versions: ``{"gpus": [...], "driver", "cuda", "reason"}`` (``reason``: why
    there is no answer, e.g. no NVML; ``""`` otherwise). Processes in ``ignore_pids`` (this
    process and its own) are not "other" processes."""
    with nvml_session(nvml) as (binding, reason):
        if binding is None:
            return {"gpus": [], "driver": None, "cuda": None, "reason": reason}
        driver = _text(_try(getattr(binding, "nvmlSystemGetDriverVersion", None)))
        cuda = _cuda_version(_try(getattr(binding, "nvmlSystemGetCudaDriverVersion", None)))
        try:
            count = int(binding.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            return {"gpus": [], "driver": driver, "cuda": cuda,
                    "reason": f"NVML cannot count GPUs ({type(exc).__name__}: {exc})"}
        ignore = set(ignore_pids)
        states = []
        for i in range(count):
            handle = _try(binding.nvmlDeviceGetHandleByIndex, i)
            if handle is not None:
                states.append(_one_gpu_state(binding, i, handle, ignore).to_dict())
        return {"gpus": states, "driver": driver, "cuda": cuda, "reason": ""}


# -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------
def parse_visible_devices(visible: str) -> list[tuple[str, str]]:
    """The entries of a ``CUDA_VISIBLE_DEVICES`` value, in order, as ``(kind, entry)``: kind
    ``"index"`` (a number, negative ones included), ``"uuid"`` (``GPU-…``, or a unique prefix
    of one), ``"mig"`` (``MIG-…``) or ``"invalid"``. Blank entries are dropped. CUDA ignores
    everything from the first invalid entry on; which entries are valid here (an index below
    the GPU count, a UUID that matches) is for the caller to say."""
    out = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            continue
        if _INDEX.match(entry):
            kind = "index"
        elif entry.upper().startswith("MIG-"):
            kind = "mig"
        elif entry.upper().startswith("GPU-"):
            kind = "uuid"
        else:
            kind = "invalid"
        out.append((kind, entry))
    return out


def visible_nvml_indices(
    nvml: Any, visible: str | None, count: int
) -> tuple[list[int], list[str]]:
    """NVML indices of the GPUs that ``CUDA_VISIBLE_DEVICES`` (``visible``) shows, and notes on
    entries that were not mapped.

    Entries are CUDA's (:func:`parse_visible_devices`): indices (``"0,2"``), GPU UUIDs or
    unique prefixes of them (``"GPU-8932f937"``), or MIG instances (``"MIG-..."``, not sampled:
    NVML has no utilisation for them, and the parent GPU's counters include the other
    instances). Like CUDA, everything from the first invalid entry on is ignored. An index is
    taken as an NVML index, which is CUDA's index only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    or on a node of identical GPUs (CUDA's default order puts the fastest first, ties in PCI
    order).
    """
    if visible is None:
        return list(range(count)), []
    uuids: list[str | None] | None = None
    indices: list[int] = []
    notes: list[str] = []
    for kind, entry in parse_visible_devices(visible):
        if kind == "index":
            index = int(entry)
            if not 0 <= index < count:
                notes.append(f"CUDA_VISIBLE_DEVICES entry {quoted(entry)} is not a GPU here")
                break
        elif kind == "mig":
            notes.append(f"MIG instance {entry} is not sampled")
            continue
        elif kind == "uuid":
            if uuids is None:  # an unreadable UUID (None) matches nothing
                handles = [_try(nvml.nvmlDeviceGetHandleByIndex, i) for i in range(count)]
                uuids = [_text(_try(nvml.nvmlDeviceGetUUID, h)) for h in handles]
            found = [i for i, u in enumerate(uuids) if u and u.lower().startswith(entry.lower())]
            if len(found) != 1:
                notes.append(f"CUDA_VISIBLE_DEVICES entry {quoted(entry)} matches no single GPU")
                break
            index = found[0]
        else:
            notes.append(f"CUDA_VISIBLE_DEVICES entry {quoted(entry)} is not a GPU id")
            break
        if index in indices:  # CUDA rejects a repeated device the same way
            notes.append(f"CUDA_VISIBLE_DEVICES repeats GPU {index}")
            break
        indices.append(index)
    return indices, notes
