"""Telemetry of a running benchmark: :class:`Monitor` samples the GPUs and the process tree.

- ``sampler``: the :class:`Monitor` thread and the suite's ``interval``;
- ``nvml``: the NVML binding, opened in one place (GPU inventory, ``CUDA_VISIBLE_DEVICES``,
  per-GPU sampling and energy);
- ``process``: the psutil sampler of the benchmark's process tree.

- ``summary``: what the samples amount to (:class:`MonitorSummary`), live and read back.
"""

from __future__ import annotations

from pytest_dlbench.measure.monitor.nvml import visible_nvml_indices
from pytest_dlbench.measure.monitor.sampler import (
    DEFAULT_INTERVAL,
    IntervalError,
    Monitor,
    parse_interval,
)

__all__ = ["DEFAULT_INTERVAL", "IntervalError", "Monitor", "parse_interval", "visible_nvml_indices"]
