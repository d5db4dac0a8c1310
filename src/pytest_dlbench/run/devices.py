"""Device discovery, device slots, and the launch-time placeholder context.

A *slot* is what one replica of a ``per_gpu`` benchmark runs on: one GPU and its share of the
CPU cores, or, with no GPU, an equal group of CPU cores (milabench gives each GPU
``cpu_count / gpu_count`` cores to simulate several users at once).

GPUs are counted through NVML so the controller never initialises CUDA (a CUDA context costs
seconds and must not leak into worker processes). Where NVML cannot be loaded (a container
without the ``utility`` driver capability) the driver's files count them instead, announced.
A GPU slot's cores are whole physical cores near its GPU (NUMA and SMT, from sysfs or NVML).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.monitor.nvml import (
    nvml_session,
    parse_visible_devices,
    visible_nvml_indices,
)
from pytest_dlbench.run.topology import Topology, parse_cpulist, read_topology, topology_split
from pytest_dlbench.suite import SystemConfig

__all__ = [
    "GpuDiscovery",
    "Slot",
    "SlotError",
    "Topology",
    "allowed_cpus",
    "check_inline_slots",
    "cpu_count",
    "discover_gpus",
    "gpu_count",
    "gpu_driver_present",
    "gpu_required",
    "parse_cpulist",
    "placeholder_context",
    "plan_slots",
    "read_topology",
    "visible_gpus",
]

#: The root of the files that describe this machine (/proc, /sys, /dev); tests point it at a
#: fake tree.
HOST_ROOT = Path("/")


class SlotError(DlbenchError):
    """The requested workers or slot sizes do not fit this machine."""


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None  # the CUDA_VISIBLE_DEVICES value of this slot's GPU; None on CPU
    cpus: tuple[int, ...]

    def env(self) -> dict[str, str]:
        """What a process running on this slot needs in its environment from its first line."""
        env = {
            Env.SLOT: str(self.index),
            Env.CPUS: ",".join(map(str, self.cpus)),
            "OMP_NUM_THREADS": str(len(self.cpus)),
        }
        if self.gpu is not None:
            # NVML numbers GPUs by PCI bus; CUDA's default order can differ on mixed nodes.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        return env

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "gpu": self.gpu, "cpus": list(self.cpus)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Slot:
        return cls(index=int(data["index"]), gpu=data.get("gpu"), cpus=tuple(data["cpus"]))


def allowed_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def cpu_count() -> int:
    return len(allowed_cpus())


def _call(fn: Callable[..., Any] | None, *args: Any) -> Any:
    """``fn(*args)``, or None when there is no such function or it fails."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a missing fact, never a crash
        return None


def _pci_bus_id(value: Any) -> str | None:
    """NVML's PCI bus id (``00000000:3B:00.0``) in sysfs' form (``0000:3b:00.0``)."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    match = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])",
                         str(value or "").strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def _visible_ids(visible: str | None, count: int) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` values of the GPUs this process may use, of ``count``."""
    if visible is None:
        return [str(i) for i in range(count)]
    ids = []
    for kind, entry in parse_visible_devices(visible):
        if kind == "invalid" or (kind == "index" and int(entry) < 0):
            break  # CUDA ignores everything from the first invalid id on
        ids.append(entry)
    return ids[:count]


@dataclass(frozen=True)
class GpuDiscovery:
    """The GPUs this process may use and what is known of where they sit."""

    #: ``CUDA_VISIBLE_DEVICES`` values, one per GPU (indices in PCI bus order, or UUIDs).
    ids: tuple[str, ...] = ()
    #: Each GPU's PCI bus id in sysfs' form (``0000:3b:00.0``); None where unknown.
    bus_ids: tuple[str | None, ...] = ()
    #: Each GPU's CPUs as NVML's CPU affinity gives them; None where unknown.
    nvml_cpus: tuple[frozenset[int] | None, ...] = ()
    #: One line when the GPUs were counted without NVML (there is then no GPU telemetry).
    note: str = ""


def _nvml_affinity(nvml: Any, handle: Any) -> frozenset[int] | None:
    """The CPUs NVML says are near a GPU (``nvmlDeviceGetCpuAffinity``: 64-bit words)."""
    # Words enough for every CPU number this process could be allowed (1024 at least).
    words = max(16, ((os.cpu_count() or 1) + 63) // 64)
    mask = _call(getattr(nvml, "nvmlDeviceGetCpuAffinity", None), handle, words)
    if mask is None:
        return None
    try:
        cpus = {64 * w + b for w, word in enumerate(mask) for b in range(64) if int(word) >> b & 1}
    except (TypeError, ValueError):
        return None
    return frozenset(cpus) or None


def _nvml_gpus(nvml: Any, visible: str | None) -> GpuDiscovery | None:
    """The visible GPUs as NVML numbers them, with their PCI bus ids and CPU affinity; None
    when NVML cannot count them."""
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        return None
    ids = _visible_ids(visible, count)
    bus_ids: list[str | None] = []
    affinities: list[frozenset[int] | None] = []
    for gpu in ids:
        indices, _ = visible_nvml_indices(nvml, gpu, count)
        handle = _call(nvml.nvmlDeviceGetHandleByIndex, indices[0]) if indices else None
        if handle is None:  # a MIG instance, or a GPU NVML cannot open: place unknown
            bus_ids.append(None)
            affinities.append(None)
            continue
        pci = _call(getattr(nvml, "nvmlDeviceGetPciInfo", None), handle)
        bus_ids.append(_pci_bus_id(getattr(pci, "busId", None)))
        affinities.append(_nvml_affinity(nvml, handle))
    return GpuDiscovery(tuple(ids), tuple(bus_ids), tuple(affinities))


#: The driver's list of NVIDIA GPUs (one folder per PCI bus id), and their device nodes.
_PROC_GPUS = "proc/driver/nvidia/gpus"
_DEV_GPU = re.compile(r"nvidia\d+")


def _driver_gpus(root: Path) -> tuple[list[str | None], str]:
    """The NVIDIA GPUs the driver's files show (``/proc/driver/nvidia/gpus/<bus id>``, else
    ``/dev/nvidia<N>``), in PCI bus order: their bus ids (None where only the device node is
    known), and where they were found. In a container both hold the container's GPUs only;
    where they disagree the device nodes (what CUDA opens) count."""
    proc = root / _PROC_GPUS
    try:
        bus_ids = sorted(p.name for p in proc.iterdir()) if proc.is_dir() else []
    except OSError:
        bus_ids = []
    try:
        nodes = [p for p in (root / "dev").iterdir() if _DEV_GPU.fullmatch(p.name)]
    except OSError:
        nodes = []
    if bus_ids and (not nodes or len(nodes) == len(bus_ids)):
        return list(bus_ids), "/" + _PROC_GPUS
    return [None] * len(nodes), "/dev/nvidia*"


def discover_gpus(nvml: Any = None, *, root: Path | None = None,
                  visible: str | None = None) -> GpuDiscovery:
    """The GPUs this process may use (honouring ``CUDA_VISIBLE_DEVICES``, or ``visible``):
    from NVML (``nvml``: None imports pynvml), else from the driver's files under ``root``.

    Without NVML (no nvidia-ml-py, or a container without the ``utility`` capability) while
    the driver shows GPUs, CUDA would still see them: each gets its slot all the same, and
    ``note`` says in one line that they were counted without NVML (no GPU telemetry)."""
    root = HOST_ROOT if root is None else root
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    reason = ""
    with nvml_session(nvml) as (binding, why):
        if binding is not None:
            found = _nvml_gpus(binding, visible)
            if found is not None:
                return found
            why = "NVML cannot count the GPUs"
        reason = why
    bus_ids, source = _driver_gpus(root)
    if not bus_ids:
        return GpuDiscovery()
    ids = _visible_ids(visible, len(bus_ids))
    # An index is a place in PCI bus order (the slots set CUDA_DEVICE_ORDER=PCI_BUS_ID); a UUID
    # cannot be placed without NVML.
    placed = [bus_ids[int(i)] if i.isdigit() and int(i) < len(bus_ids) else None for i in ids]
    note = (f"{reason}: {len(bus_ids)} GPU(s) found in {source}, one device slot each; "
            "no GPU telemetry (power, energy, utilisation) without NVML")
    return GpuDiscovery(tuple(ids), tuple(placed), (None,) * len(ids), note)


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES values (honouring it)."""
    return list(discover_gpus().ids)


#: What a GPU driver leaves on a Linux machine: NVIDIA's control device and proc folder, and
#: AMD's compute device (ROCm builds of torch answer ``torch.cuda`` too).
GPU_DRIVER_PATHS = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd")


def gpu_driver_present(paths: tuple[str, ...] = GPU_DRIVER_PATHS) -> bool:
    """Whether torch could find a GPU here. False only on Linux with none of ``paths``: there
    the CPU is the device without asking torch (whose import costs a fresh child 1-2 s)."""
    if platform.system() != "Linux":
        return True  # no cheap answer: torch decides
    return any(Path(p).exists() for p in paths)


def gpu_count() -> int:
    """NVIDIA GPUs this process may use, honouring CUDA_VISIBLE_DEVICES; 0 without a driver."""
    return len(visible_gpus())


def _slot_gpus(env: Mapping[str, str]) -> list[str]:
    """The GPUs the controller gave this process's slot (or, in an njobs rank, the run's)."""
    try:
        slots = [Slot.from_dict(d) for d in json.loads(env.get(Env.SLOTS) or "[]")]
    except (ValueError, KeyError, TypeError):
        return []
    own = env.get(Env.SLOT)
    mine = [s for s in slots if str(s.index) == own] if own is not None else slots
    return [s.gpu for s in mine or slots if s.gpu is not None]


def gpu_required(env: Mapping[str, str] | None = None, *, root: Path | None = None) -> str:
    """Why this process must run on a GPU, or ``""`` when the CPU is its device: its device
    slot names a GPU, or this machine's driver shows GPUs and ``CUDA_VISIBLE_DEVICES`` does not
    hide them (``-1`` or ``""`` does). Where it says so, a torch that cannot use CUDA is an
    error, never a run on the CPU whose numbers would pass for the GPU's."""
    env = os.environ if env is None else env
    root = HOST_ROOT if root is None else root
    visible = env.get("CUDA_VISIBLE_DEVICES")
    named = _slot_gpus(env)
    if named:
        return (f"its device slot names GPU {', '.join(named)} "
                f"(CUDA_VISIBLE_DEVICES={visible if visible is not None else 'unset'})")
    if visible is not None and not _visible_ids(visible, len(visible) + 1):
        return ""  # GPUs hidden on purpose: the CPU is the device
    # NVIDIA GPUs only: /dev/kfd is on many machines whose only AMD GPU is an APU.
    bus_ids, source = _driver_gpus(root)
    return f"this machine has {len(bus_ids)} NVIDIA GPU(s) ({source})" if bus_ids else ""


def plan_slots(
    *,
    workers: int | None = None,
    cpus_per_slot: int | None = None,
    gpus: Sequence[str] | GpuDiscovery | None = None,
    cpus: list[int] | None = None,
    topology: Topology | None = None,
) -> list[Slot]:
    """The device slots of this machine.

    ``workers`` is the number of xdist workers asked for (None: not distributed, or ``-n auto``
    deciding from the result). With GPUs: one slot per GPU, each with an equal share of the
    cores; fewer workers use the first GPUs, more workers than GPUs is an error. Without GPUs:
    one slot of all cores by default, ``workers`` equal groups, or groups of ``cpus_per_slot``.

    A GPU slot's share is whole physical cores near its GPU (``topology``; read from this
    machine when the GPUs are discovered here, ``gpus`` None or a :class:`GpuDiscovery`), one
    thread per core before siblings, no core in two slots. Without topology, or when the
    slots cannot each have their own cores, the cores are split in order.
    """
    cpus = allowed_cpus() if cpus is None else cpus
    if gpus is None:
        gpus = discover_gpus()
    if isinstance(gpus, GpuDiscovery):
        if topology is None and gpus.ids:  # only GPU slots are placed by topology
            topology = read_topology(gpus, cpus, root=HOST_ROOT)
        gpus = list(gpus.ids)
    if cpus_per_slot is not None and cpus_per_slot < 1:
        raise SlotError("--bench-cpus-per-slot must be at least 1")
    if gpus:
        if workers is not None and workers > len(gpus):
            raise SlotError(
                f"-n {workers}: this machine has {len(gpus)} GPU(s) visible; one worker per GPU "
                f"at most (use -n {len(gpus)} or -n auto)"
            )
        count = len(gpus) if workers is None else workers
        share = cpus_per_slot or max(1, len(cpus) // count)
        used = list(gpus[:count])
        split = (topology_split(used, share, cpus, topology)
                 if topology is not None and topology.known else None)
        if split is not None:
            return [Slot(k, used[k], split[k]) for k in range(count)]
        return [
            Slot(k, gpus[k], tuple(cpus[(k * share) % len(cpus):][:share]) or tuple(cpus))
            for k in range(count)
        ]
    if workers is None:
        count = len(cpus) // cpus_per_slot if cpus_per_slot else 1
        if count < 1:
            raise SlotError(
                f"--bench-cpus-per-slot={cpus_per_slot}: only {len(cpus)} core(s) available"
            )
    else:
        count = workers
    share = cpus_per_slot or len(cpus) // count
    if share < 1 or count * share > len(cpus):
        raise SlotError(
            f"-n {count}"
            + (f" with --bench-cpus-per-slot={cpus_per_slot}" if cpus_per_slot else "")
            + f": needs {count * max(share, 1)} cores, {len(cpus)} available (no GPU: each "
            "worker gets its own cores)"
        )
    return [Slot(k, None, tuple(cpus[k * share:(k + 1) * share])) for k in range(count)]


def check_inline_slots(slots: Sequence[Slot]) -> None:
    """``--bench-isolation=inline`` without xdist runs every item in one process, which sees
    every GPU: each replica ``[Dk]`` would run on ``cuda:0`` (torch's current device) while its
    monitor sampled every GPU. Refused with more than one GPU slot (one line, how to run)."""
    gpus = [slot.gpu for slot in slots if slot.gpu is not None]
    if len(gpus) > 1:
        raise SlotError(
            f"--bench-isolation=inline runs every benchmark in this one process, which sees "
            f"{len(gpus)} GPUs: every replica would run on cuda:0. Use "
            f"--bench-isolation=process, -n {len(gpus)} (one worker per GPU), or "
            "CUDA_VISIBLE_DEVICES=<one GPU>"
        )


def pin_to_slot(slot: Slot) -> None:
    """Pin this process (and what it starts later) to the slot's cores."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, set(slot.cpus))


def placeholder_context(
    *,
    system: SystemConfig | None = None,
    run_name: str = "",
    bench_name: str = "",
    data_dir: Path | str = "",
    slots: int = 1,
    gpus: int | None = None,
    cpus: int | None = None,
    cpus_per_slot: int | None = None,
) -> dict[str, Any]:
    """The names a suite may use as ``{placeholder}`` in argv (suite-format.md)."""
    gpus = gpu_count() if gpus is None else gpus
    cpus = cpu_count() if cpus is None else cpus
    per_slot = cpus_per_slot or max(1, cpus // max(1, gpus or slots))
    device_name = "cuda" if gpus else "cpu"
    context: dict[str, Any] = dict(system.placeholders()) if system else {}
    # milabench's system options cpu.min/max (the clamp) and cpu.n_workers (a fixed count).
    options = context.get("options")
    cpu_options = (options.get("cpu") if isinstance(options, dict) else None) or {}
    low, high = cpu_options.get("min") or 2, cpu_options.get("max") or 16
    context.update(
        cpu_count=cpus,
        gpu_count=gpus,
        cpu_per_gpu=per_slot,
        n_worker=cpu_options.get("n_workers") or min(high, max(low, per_slot)),
        device_name=device_name,
        arch=(system.arch if system and system.arch else device_name),
        ccl="nccl" if gpus else "gloo",
        data=str(data_dir),
        milabench_data=str(data_dir),  # milabench's name for its data folder
        run_name=run_name,
        bench_name=bench_name,
        machine=platform.machine(),
    )
    return context
