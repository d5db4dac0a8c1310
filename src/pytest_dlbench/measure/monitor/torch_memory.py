"""torch's own peak memory of a run, beside NVML's device-wide figure (docs/figures.md).

NVML's used memory is the whole device's: other processes, the CUDA context, cuDNN's and
cuBLAS's workspaces. torch's caching allocator knows what the run itself asked for
(``max_memory_allocated``: the tensors) and held (``max_memory_reserved``: the cache). The
:class:`~pytest_dlbench.measure.monitor.sampler.Monitor` empties torch's cache and resets those
peaks when it starts (before
the benchmark's first step) and reads them when it stops (after its last), into the
``monitor_summary`` record.

Never imports torch and never initialises CUDA: a process in which torch is not imported, or
CUDA not initialised, used no CUDA memory through torch, and nothing is recorded (a CPU run has
no figure, not a zero). ``cuda`` stands in for ``torch.cuda`` in tests.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["read_peaks", "reset_peaks", "torch_cuda"]


def torch_cuda() -> Any:
    """``torch.cuda`` when torch is already imported here, else None (never imported here)."""
    torch = sys.modules.get("torch")
    return getattr(torch, "cuda", None) if torch is not None else None


def _in_use(cuda: Any) -> bool:
    """CUDA initialised in this process: only then can torch have allocated on a device."""
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken build is "no figure", never a failed run
        return False


def reset_peaks(cuda: Any = None) -> bool:
    """Release torch's cached blocks, then reset the current device's peak statistics; False
    when CUDA is not in use yet (a fresh CUDA context starts with zero peaks and an empty
    cache, so there is nothing to reset).

    The cache first: a reset sets the reserved peak to what is reserved now, and in one process
    (inline runs, the bench fixture) that is the previous benchmark's cache; its blocks would
    count as this run's reservation, and this run would reuse them instead of showing its own.
    """
    cuda = cuda if cuda is not None else torch_cuda()
    if not _in_use(cuda):
        return False
    # Telemetry never raises into the benchmark: a failed release still resets.
    with contextlib.suppress(Exception):
        cuda.empty_cache()
    try:
        cuda.reset_peak_memory_stats()
    except Exception:  # noqa: BLE001 - telemetry never raises into the benchmark
        return False
    return True


def read_peaks(cuda: Any = None) -> dict[str, int] | None:
    """``{"device", "max_allocated_bytes", "max_reserved_bytes"}`` of the current device since
    the reset (or since CUDA started), None without CUDA in use."""
    cuda = cuda if cuda is not None else torch_cuda()
    if not _in_use(cuda):
        return None
    try:
        return {
            "device": int(cuda.current_device()),
            "max_allocated_bytes": int(cuda.max_memory_allocated()),
            "max_reserved_bytes": int(cuda.max_memory_reserved()),
        }
    except Exception:  # noqa: BLE001 - telemetry never raises into the benchmark
        return None
