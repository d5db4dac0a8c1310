"""Device discovery and the launch-time placeholder context.

GPUs are counted through NVML so the controller never initialises CUDA (a CUDA context in the
parent would be inherited badly by forked workers and costs seconds).
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

from .suite import SystemConfig

__all__ = ["cpu_count", "gpu_count", "placeholder_context"]


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _visible_limit() -> int | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
    return len(ids)


def gpu_count() -> int:
    """NVIDIA GPUs this process may use, honouring CUDA_VISIBLE_DEVICES; 0 without a driver."""
    try:
        import pynvml  # provided by nvidia-ml-py
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound and friends: no GPU telemetry
        return 0
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        count = 0
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    limit = _visible_limit()
    return count if limit is None else min(count, limit)


def placeholder_context(
    *,
    system: SystemConfig | None = None,
    run_name: str = "",
    bench_name: str = "",
    data_dir: Path | str = "",
    slots: int = 1,
    gpus: int | None = None,
    cpus: int | None = None,
) -> dict[str, Any]:
    """The names a suite may use as ``{placeholder}`` in argv (suite-format.md)."""
    gpus = gpu_count() if gpus is None else gpus
    cpus = cpu_count() if cpus is None else cpus
    per_slot = max(1, cpus // max(1, gpus or slots))
    device_name = "cuda" if gpus else "cpu"
    context: dict[str, Any] = dict(system.placeholders()) if system else {}
    context.update(
        cpu_count=cpus,
        gpu_count=gpus,
        cpu_per_gpu=per_slot,
        n_worker=min(16, max(2, per_slot)),
        device_name=device_name,
        arch=(system.arch if system and system.arch else device_name),
        ccl="nccl" if gpus else "gloo",
        data=str(data_dir),
        run_name=run_name,
        bench_name=bench_name,
        machine=platform.machine(),
    )
    return context
