"""torch's own peak memory per run, beside NVML's device-wide figure (issue 37, item 9): reset
before the first step, read after the last, carried unchanged to the summary and the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _fake_gpu import no_nvml
from _runs import write_run

from pytest_dlbench.core.numbers import byte_size
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.monitor import Monitor
from pytest_dlbench.measure.monitor.torch_memory import read_peaks, reset_peaks
from pytest_dlbench.measure.stream import Event, NullStream
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results.figures import summarize_dir, telemetry_stats
from pytest_dlbench.results.model import combine_stats

GIB = 1024**3


class FakeTorchCuda:
    """The part of ``torch.cuda`` the peaks use, with an allocator the test drives: every call
    goes to ``log``; the peaks are the largest values since the last reset."""

    def __init__(self, log: list[str], *, initialized: bool = True) -> None:
        self.log = log
        self.initialized = initialized
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0

    def is_initialized(self) -> bool:
        return self.initialized

    def allocate(self, allocated: int, reserved: int) -> None:
        self.allocated, self.reserved = allocated, reserved
        self.peak_allocated = max(self.peak_allocated, allocated)
        self.peak_reserved = max(self.peak_reserved, reserved)

    def empty_cache(self) -> None:
        """Cached blocks go back to the driver: what stays reserved is what is allocated."""
        self.log.append("empty_cache")
        self.reserved = self.allocated

    def reset_peak_memory_stats(self) -> None:
        self.log.append("reset")
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def current_device(self) -> int:
        return 0

    def max_memory_allocated(self) -> int:
        self.log.append("read")
        return self.peak_allocated

    def max_memory_reserved(self) -> int:
        return self.peak_reserved


def _run(cuda: FakeTorchCuda, log: list[str], steps: int = 4) -> NullStream:
    """A monitored run as the plugin does it (plugin/items.py): the monitor around the whole
    benchmark. An earlier run in this process left 9 GiB as its peak; this run's step
    allocates 3 GiB (4 reserved), its last step 5 GiB (6 reserved)."""
    cuda.allocate(9 * GIB, 10 * GIB)
    cuda.allocate(1 * GIB, 2 * GIB)  # what is still held when this run starts
    stream = NullStream()
    with Monitor(stream, interval=3600.0, nvml=no_nvml(), torch_cuda=cuda), \
            Bench(name="b", device="cpu", stream=stream, skip=1, stop=steps - 1) as bench:
        for i in bench.iterate(range(steps), batch_size=1):
            log.append("step")
            last = i == steps - 1
            cuda.allocate((5 if last else 3) * GIB, (6 if last else 4) * GIB)
    return stream


def test_the_peaks_are_reset_before_the_first_step_and_read_after_the_last() -> None:
    log: list[str] = []
    cuda = FakeTorchCuda(log)
    stream = _run(cuda, log)
    assert log == ["empty_cache", "reset", "step", "step", "step", "step", "read"]
    summary = [r for r in stream.records if r["event"] == Event.MONITOR_SUMMARY.value]
    assert len(summary) == 1
    # The run's peaks (the last step's 5 and 6 GiB), not the earlier run's 9 and 10 GiB.
    assert summary[0]["torch_max_allocated_bytes"] == 5 * GIB
    assert summary[0]["torch_max_reserved_bytes"] == 6 * GIB


def test_the_previous_benchmarks_cache_is_released_before_the_reset() -> None:
    """In one process the last benchmark's cache (2 GiB reserved, 1 GiB held) would be this
    run's reserved peak if the reset came before ``empty_cache``."""
    log: list[str] = []
    cuda = FakeTorchCuda(log)
    cuda.allocate(1 * GIB, 8 * GIB)  # a cache the last benchmark left
    stream = NullStream()
    with Monitor(stream, interval=3600.0, nvml=no_nvml(), torch_cuda=cuda):
        cuda.allocate(1 * GIB, 1 * GIB)  # this run reserves nothing more
    assert log[:2] == ["empty_cache", "reset"]
    summary = next(r for r in stream.records if r["event"] == Event.MONITOR_SUMMARY.value)
    assert summary["torch_max_reserved_bytes"] == 1 * GIB


def test_cuda_never_used_records_nothing_and_touches_nothing() -> None:
    """A CPU run: no figure (not a zero), and no reset or read that would start CUDA."""
    log: list[str] = []
    stream = _run(FakeTorchCuda(log, initialized=False), log, steps=2)
    assert log == ["step", "step"]
    summary = next(r for r in stream.records if r["event"] == Event.MONITOR_SUMMARY.value)
    assert summary["torch_max_allocated_bytes"] is None
    assert summary["torch_max_reserved_bytes"] is None
    assert "torch_max_allocated_bytes" not in telemetry_stats(stream.records)


def test_without_torch_imported_nothing_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert reset_peaks() is False and read_peaks() is None
    assert "torch" not in sys.modules
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=FakeTorchCuda([])))
    assert read_peaks() == {"device": 0, "max_allocated_bytes": 0, "max_reserved_bytes": 0}


def _stream_with(tmp: Path, name: str, monitor_records: list[dict[str, Any]],
                 repeat: int | None = None) -> None:
    path = write_run(tmp, name, status=None, repeat=repeat)
    with path.open("a") as f:
        for record in [*monitor_records, {"event": "end", "status": "ok"}]:
            f.write(json.dumps(record) + "\n")


def test_the_peaks_reach_the_summary_and_the_report_unchanged(tmp_path: Path) -> None:
    log: list[str] = []
    first = _run(FakeTorchCuda(log), log).records
    cuda = FakeTorchCuda(log)
    cuda.allocate(0, 0)
    second_stream = NullStream()
    with Monitor(second_stream, interval=3600.0, nvml=no_nvml(), torch_cuda=cuda):
        cuda.allocate(7 * GIB + 123, 8 * GIB + 456)  # a second repeat's larger peak
    monitor_kinds = {Event.MONITOR.value, Event.TELEMETRY.value, Event.MONITOR_SUMMARY.value}
    _stream_with(tmp_path, "net", [r for r in first if r["event"] in monitor_kinds], repeat=0)
    _stream_with(tmp_path, "net", [r for r in second_stream.records
                                   if r["event"] in monitor_kinds], repeat=1)
    bench = summarize_dir(tmp_path).benchmarks[0]
    # The largest repeat's, to the byte (as the device peak is combined).
    assert bench.telemetry["torch_max_allocated_bytes"] == 7 * GIB + 123
    assert bench.telemetry["torch_max_reserved_bytes"] == 8 * GIB + 456
    text = render_summary(summarize_dir(tmp_path), width=250)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "torch alloc" in line)  # the details table
    assert "torch reserved" in lines[at]
    row = lines[at + 1]
    assert row.split()[0] == "net"
    assert byte_size(7 * GIB + 123) in row and byte_size(8 * GIB + 456) in row
    # The loggers send them too: per run, and per benchmark in the session's summary.
    from pytest_dlbench.loggers.source import bench_metrics, read_run, run_stats
    from pytest_dlbench.results.model import summary_dict

    _, result = read_run(tmp_path / "net.D0.R1.data")
    assert run_stats(result)["torch_max_reserved_bytes"] == 8 * GIB + 456
    metrics = bench_metrics(summary_dict(summarize_dir(tmp_path)))["net"]
    assert metrics["bench_torch_max_allocated_bytes"] == 7 * GIB + 123


def test_combining_runs_keeps_the_largest_and_leaves_unknown_out() -> None:
    runs = [{"torch_max_allocated_bytes": 3, "torch_max_reserved_bytes": 8},
            {"torch_max_allocated_bytes": 5, "torch_max_reserved_bytes": 6}, {}]
    combined = combine_stats(runs)
    assert (combined["torch_max_allocated_bytes"], combined["torch_max_reserved_bytes"]) == (5, 8)
    assert "torch_max_allocated_bytes" not in combine_stats([{}, {}])


def test_nvmls_device_peak_and_torchs_reserved_peak_are_both_shown_by_name(
        tmp_path: Path) -> None:
    """NVML is sampled once an interval and missed cuDNN's autotuning workspaces on an H200
    (2026-11-27: resnet18 bs4, NVML's peak 1.6 GiB beside torch's reserved 2.3 GiB). The device
    peak is NVML's figure, never torch's in its place (a figure that is sometimes one and
    sometimes the other): both are in the summary and the report, each under its own name."""
    gpu = {"index": 0, "util": 50.0, "mem_total": 16 * GIB, "power_w": 100.0}
    records: list[dict[str, Any]] = [
        {"event": "monitor", "gpu": True, "interval": 1.0},
        {"event": "telemetry", "time": 1.0, "gpus": [{**gpu, "mem_used": int(1.6 * GIB)}]},
        {"event": "monitor_summary", "torch_max_allocated_bytes": 2 * GIB,
         "torch_max_reserved_bytes": int(2.3 * GIB)},
    ]
    stats = telemetry_stats(records)
    assert stats["peak_gpu_mem_bytes"] == int(1.6 * GIB)  # NVML's, though torch's is higher
    assert stats["torch_max_reserved_bytes"] == int(2.3 * GIB)
    _stream_with(tmp_path, "net", records)
    lines = render_summary(summarize_dir(tmp_path), width=250).splitlines()
    at = next(i for i, line in enumerate(lines) if "nvml peak" in line)
    assert "torch reserved" in lines[at]
    header, row = lines[at], lines[at + 1]
    nvml, reserved = header.index("nvml peak"), header.index("torch reserved")
    assert byte_size(int(1.6 * GIB)) in row[nvml - 2:nvml + 12]
    assert byte_size(int(2.3 * GIB)) in row[reserved - 2:reserved + 16]
