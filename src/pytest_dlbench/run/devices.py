"""Device discovery, device slots, and the launch-time placeholder context.

A *slot* is what one replica of a ``per_gpu`` benchmark runs on: one GPU and its share of the
CPU cores, or, with no GPU, an equal group of CPU cores (milabench gives each GPU
``cpu_count / gpu_count`` cores to simulate several users at once).

GPUs are counted through NVML so the controller never initialises CUDA (a CUDA context costs
seconds and must not leak into worker processes).
"""

from __future__ import annotations

import contextlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.measure.monitor.nvml import gpu_inventory, parse_visible_devices
from pytest_dlbench.run.protocol import Env
from pytest_dlbench.suite import SystemConfig

__all__ = [
    "Slot",
    "SlotError",
    "allowed_cpus",
    "cpu_count",
    "gpu_count",
    "gpu_driver_present",
    "placeholder_context",
    "plan_slots",
    "visible_gpus",
]


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


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES values (honouring it)."""
    count = len(gpu_inventory().gpus)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in range(count)]
    ids = []
    for kind, entry in parse_visible_devices(visible):
        if kind == "invalid" or (kind == "index" and int(entry) < 0):
            break  # CUDA ignores everything from the first invalid id on
        ids.append(entry)
    return ids[:count]


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


def plan_slots(
    *,
    workers: int | None = None,
    cpus_per_slot: int | None = None,
    gpus: list[str] | None = None,
    cpus: list[int] | None = None,
) -> list[Slot]:
    """The device slots of this machine.

    ``workers`` is the number of xdist workers asked for (None: not distributed, or ``-n auto``
    deciding from the result). With GPUs: one slot per GPU, each with an equal share of the
    cores; fewer workers use the first GPUs, more workers than GPUs is an error. Without GPUs:
    one slot of all cores by default, ``workers`` equal groups, or groups of ``cpus_per_slot``.
    """
    gpus = visible_gpus() if gpus is None else gpus
    cpus = allowed_cpus() if cpus is None else cpus
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
