"""What a run's telemetry amounts to in the results: the report's numbers of one run (a
benchmark's runs together: ``combine_stats``, results/model/summary.py). The summary of the
samples (:class:`MonitorSummary`, :func:`summarize_telemetry`) is the monitor's own, in
:mod:`pytest_dlbench.measure.monitor.summary`.
Pure functions over records: no NVML, no psutil, no pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_dlbench.measure.monitor.summary import (
    scored_spans,
    summarize_telemetry,
    timed_window,
)
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.results.figures.busy import busy_stats
from pytest_dlbench.results.model.summary import torch_peaks

__all__ = [
    "NO_WINDOW_SAMPLE",
    "telemetry_stats",
]

# Why a run has no mean GPU load: no utilisation sample's period lies inside its scored window.
NO_WINDOW_SAMPLE = "no sample in the scored window"


def telemetry_stats(
    records: Iterable[Mapping[str, Any]] | RunRecords,
) -> dict[str, Any]:
    """The report's telemetry numbers of one run, from its stream records (None when unknown):

    - ``peak_gpu_mem_bytes``: NVML's device peak, the largest per-GPU memory used of the
      whole run's samples (the whole device's: other processes, the CUDA context, library
      workspaces; a sample every interval can miss a short peak, which torch's reserved peak
      below then shows: the two are reported side by side, each under its own name, never
      one in place of the other);
    - ``peak_rss_bytes``: the peak RSS of the benchmark's process tree (whole run);
    - ``torch_max_allocated_bytes``, ``torch_max_reserved_bytes``: torch's own peaks on the
      run's device (tensors; the allocator's cache), as the monitor read them (absent: a CPU
      run, or a run from before they were recorded);
    - ``energy_j``: joules of all sampled GPUs, from the monitor's start to its stop;
    - ``mean_gpu_util``: percent, over the timed window (all samples without one); None, with
      ``gpu_util_reason`` saying so, when the timed window holds no GPU sample: the whole run's
      mean would count the idle set-up the window is there to leave out;
    - ``busy`` (and ``busy_share``, ``outside_cpu_cores``, ``busy_reason``): whether something
      outside the run used the CPU during its timed window (results/figures/busy.py; absent:
      unknown).
    """
    records = RunRecords.of(records)  # parsed once, read three times
    whole = summarize_telemetry(records)
    window = timed_window(records)
    timed = (summarize_telemetry(records, start=window[0], end=window[1],
                                 spans=scored_spans(records)) if window else whole)
    # No utilisation sample whose period lies in the scored window: no figure. The whole
    # run's mean is mostly set-up (4 % on an H200's resnet50 whose scored steps kept it busy).
    no_sample = (window is not None and timed.mean_gpu_util is None
                 and whole.mean_gpu_util is not None)
    util = timed.mean_gpu_util
    return {
        "peak_gpu_mem_bytes": whole.peak_gpu_mem_bytes,
        "peak_rss_bytes": whole.peak_rss_bytes,
        "energy_j": whole.energy_j,
        "mean_gpu_util": None if no_sample else util,
        **({"gpu_util_reason": NO_WINDOW_SAMPLE} if no_sample else {}),
        **torch_peaks(whole.torch_max_allocated_bytes, whole.torch_max_reserved_bytes),
        **busy_stats(records),
    }
