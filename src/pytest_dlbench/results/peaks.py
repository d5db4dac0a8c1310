"""Peak throughput of known accelerators, for model FLOPs utilisation (MFU = achieved / peak).

Dense tensor-core peaks (no structured sparsity), in TFLOP/s, from the vendors' datasheets:
NVIDIA H100 (SXM5 and PCIe), H200 (SXM), A100 (SXM4/PCIe), L40S; AMD Instinct MI300X. A device
that is not in the table (and every CPU) takes its peak from the suite's own matmul benchmark
measured in the same run, when there is one: then MFU says how close the model gets to what this
machine's matrix multiply does, and the report says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PEAKS", "dtype_of", "table_peak"]

#: (name fragment, {dtype: dense TFLOP/s}); the first fragment found in the device name wins,
#: so the more specific names come first.
PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    # NVIDIA H100 PCIe datasheet
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    # NVIDIA H100 SXM5 datasheet ("NVIDIA H100 80GB HBM3")
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    # NVIDIA H200 SXM datasheet (same compute as H100 SXM)
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    # NVIDIA A100 datasheet (SXM4 and PCIe)
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    # NVIDIA L40S datasheet
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.1, "fp16": 362.1}),
    # AMD Instinct MI300X datasheet
    ("MI300X", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4}),
)

# What the workloads' precision arguments compute in (tf32-fp16: fp16 autocast, tf32 matmuls).
_PRECISIONS = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
               "tf32-fp16": "fp16", "amp": "fp16"}


def dtype_of(spec: Mapping[str, Any]) -> str:
    """The compute type of a benchmark, from its ``--precision`` or ``--dtype`` argument."""
    argv = spec.get("argv") or {}
    if isinstance(argv, Mapping):
        for key in ("--precision", "--dtype"):
            value = argv.get(key)
            if isinstance(value, str) and value.lower() in _PRECISIONS:
                return _PRECISIONS[value.lower()]
    return "fp32"


def table_peak(device_name: str | None, dtype: str) -> float | None:
    """The datasheet peak of a known accelerator in TFLOP/s, else None."""
    if not device_name:
        return None
    for fragment, peaks in PEAKS:
        if fragment.lower() in device_name.lower():
            return peaks.get(dtype)
    return None
