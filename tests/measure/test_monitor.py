"""Telemetry monitor and usage validation, with a fake NVML module and a fake clock.

The real psutil and the real (driverless) NVML binding of this machine are exercised too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import _fake_gpu as fake_gpu
import pytest
from _fake_gpu import NVMLError, NVMLError_LibraryNotFound, NVMLError_NotSupported
from _polling import wait_until

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.measure.monitor import (
    IntervalError,
    Monitor,
    parse_interval,
    visible_nvml_indices,
)
from pytest_dlbench.measure.monitor.summary import (
    MonitorSummary,
    scored_spans,
    summarize_telemetry,
    timed_window,
)
from pytest_dlbench.measure.monitor.usage import Issue, ValidationError
from pytest_dlbench.measure.stream import NullStream, StreamWriter, read_stream
from pytest_dlbench.results.figures import check_usage, telemetry_stats, validate_usage
from pytest_dlbench.results.model import combine_stats
from pytest_dlbench.run.harness import execute

GIB = 1024**3


# -- a fake NVML: the node's fake (tests/_fake_gpu.py) with the telemetry the monitor reads ----
class FakeNvml(fake_gpu.FakeNvml):
    """The NVML functions the monitor calls. Handles are the device indices. ``fail`` maps a
    field name (``util``, ``memory``, ``power``, ``temp``, ``clock``, ``energy``) to the
    exception that its call raises."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1

    def __init__(self, count: int = 1, *, init_error: Exception | None = None) -> None:
        super().__init__(count, init_error=init_error)
        self.util = [80.0] * count
        self.mem_used = [8 * GIB] * count
        self.mem_total = 16 * GIB
        self.power_mw = [250_000] * count
        self.energy_mj = [5_000_000.0] * count
        self.fail: dict[str, Exception] = {}

    def _call(self, name: str) -> None:
        self._count(name)
        if name in self.fail:
            raise self.fail[name]

    def nvmlDeviceGetName(self, h: int) -> bytes:  # type: ignore[override]  # noqa: N802
        return b"Fake GPU"  # older bindings answer bytes

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:  # noqa: N802
        self._call("util")
        return SimpleNamespace(gpu=self.util[h], memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        self._call("memory")
        used = self.mem_used[h]
        return SimpleNamespace(used=used, total=self.mem_total, free=self.mem_total - used)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        self._call("power")
        return self.power_mw[h]

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # noqa: N802
        assert sensor == self.NVML_TEMPERATURE_GPU
        self._call("temp")
        return 61

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:  # noqa: N802
        assert kind == self.NVML_CLOCK_SM
        self._call("clock")
        return 1410

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> float:  # noqa: N802
        self._call("energy")
        return self.energy_mj[h]


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def events(stream: NullStream, event: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if r["event"] == event]


def fake_monitor(nvml: Any, **kw: Any) -> tuple[Monitor, NullStream, FakeClock]:
    """A monitor whose thread never fires (samples are taken by hand) and a fake clock."""
    stream, clock = NullStream(), FakeClock()
    kw.setdefault("gpu_indices", None)
    monitor = Monitor(stream, interval=3600.0, nvml=nvml, clock=clock, wall=clock, **kw)
    return monitor, stream, clock


@pytest.fixture(autouse=True)
def _all_gpus_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# -- interval ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, 1.0), ("1s", 1.0), ("500ms", 0.5), ("0.5s", 0.5), (" 2 s", 2.0), ("2m", 120.0),
     (3, 3.0), (0.25, 0.25), ("1.5", 1.5), ("100MS", 0.1)],
)
def test_parse_interval(value: Any, seconds: float):
    assert parse_interval(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["fast", "1h", "0s", -1, 0, True, "", [1], "1e-9s"])
def test_parse_interval_rejects_non_durations(value: Any):
    with pytest.raises(IntervalError, match="interval") as info:
        parse_interval(value)
    assert isinstance(info.value, DlbenchError) and isinstance(info.value, ValueError)


# -- sampling ---------------------------------------------------------------------------------
def test_records_gpu_and_process_fields():
    nvml = FakeNvml(count=2)
    monitor, stream, clock = fake_monitor(nvml)
    with monitor:
        clock.t += 1.0
        monitor.sample()
    [info] = events(stream, "monitor")
    assert info["gpu"] is True and "reason" not in info
    assert [g["index"] for g in info["gpus"]] == [0, 1]
    assert info["gpus"][0] == {"index": 0, "name": "Fake GPU", "uuid": "GPU-000-0000",
                               "mem_total": 16 * GIB, "energy": "counter"}
    samples = events(stream, "telemetry")
    assert len(samples) == 3  # start, by hand, stop
    sample = samples[1]
    assert sample["elapsed"] == pytest.approx(1.0)
    # The energy counter did not move in that second: 250 W integrated, not 0 J.
    assert sample["gpus"][1] == {
        "index": 1, "util": 80.0, "mem_used": 8 * GIB, "mem_total": 16 * GIB, "power_w": 250.0,
        "temp_c": 61.0, "sm_clock_mhz": 1410.0, "energy_j": 250.0,
    }
    for key in ("cpu_percent", "system_cpu_percent", "rss_bytes", "procs", "disk_read_bytes",
                "disk_write_bytes"):
        assert key in sample
    assert sample["rss_bytes"] > 0
    [summary] = events(stream, "monitor_summary")
    assert summary["samples"] == 3 and summary["gpu"] is True
    assert nvml.shutdown


def test_samples_are_taken_at_the_interval():
    stream = NullStream()
    monitor = Monitor(stream, interval=0.05, nvml=FakeNvml())
    monitor.start()
    time.sleep(0.42)  # the window sampled: the workload, not a wait for something
    monitor.stop()
    samples = events(stream, "telemetry")
    # one at start, about 8 by the thread, one at stop; a loaded 2-core box may drop a few.
    assert 5 <= len(samples) <= 11
    by_thread = [r["elapsed"] for r in samples[1:-1]]
    gaps = sorted(b - a for a, b in zip(by_thread, by_thread[1:], strict=False))
    assert 0.045 <= gaps[len(gaps) // 2] <= 0.1
    assert monitor.summary is not None and monitor.summary.samples == len(samples)


def test_thread_stops_promptly():
    monitor = Monitor(NullStream(), interval=30.0, nvml=FakeNvml())
    monitor.start()
    begin = time.monotonic()
    monitor.stop()
    assert time.monotonic() - begin < 1.0
    assert monitor._thread is not None and not monitor._thread.is_alive()


def test_energy_is_the_counter_difference():
    nvml = FakeNvml()
    nvml.power_mw[0] = 1_500
    monitor, stream, clock = fake_monitor(nvml)
    monitor.start()
    nvml.energy_mj[0] += 1500.0  # 1.5 J
    clock.t += 1.0
    # Moved once: it may be one coarse step, so the power integral (1.5 W * 1 s) says.
    assert monitor.sample()["gpus"][0]["energy_j"] == pytest.approx(1.5)
    nvml.energy_mj[0] += 2500.0  # moved again: the counter says (power would say 3 J)
    clock.t += 1.0
    summary = monitor.stop()
    assert events(stream, "telemetry")[-1]["gpus"][0]["energy_j"] == pytest.approx(4.0)
    assert summary.energy_j == pytest.approx(4.0)
    assert events(stream, "monitor_summary")[0]["energy_j"] == pytest.approx(4.0)


def test_energy_integrates_power_without_the_counter():
    nvml = FakeNvml()
    nvml.fail["energy"] = NVMLError_NotSupported()
    monitor, stream, clock = fake_monitor(nvml)
    nvml.power_mw[0] = 100_000
    monitor.start()  # 100 W at t=0
    assert events(stream, "monitor")[0]["gpus"][0]["energy"] == "power"
    nvml.power_mw[0] = 200_000
    clock.t += 2.0
    assert monitor.sample()["gpus"][0]["energy_j"] == pytest.approx(300.0)  # (100+200)/2 * 2 s
    clock.t += 1.0
    assert monitor.stop().energy_j == pytest.approx(500.0)  # + 200 W * 1 s
    assert nvml.calls["energy"] == 1  # not supported: asked once, not every sample


def test_energy_switches_to_power_when_the_counter_stops_working():
    nvml = FakeNvml()
    nvml.power_mw[0] = 100_000
    monitor, _, clock = fake_monitor(nvml)
    monitor.start()
    for joules in (100.0, 150.0):  # two moves: the counter says (power would say 200 J)
        nvml.energy_mj[0] += joules * 1000
        clock.t += 1.0
        monitor.sample()
    assert monitor.sample()["gpus"][0]["energy_j"] == pytest.approx(250.0)
    nvml.fail["energy"] = NVMLError(999)
    clock.t += 1.0
    assert monitor.sample()["gpus"][0]["energy_j"] == pytest.approx(350.0)  # + 100 W * 1 s


class CoarseCounterNvml(FakeNvml):
    """A GPU drawing a steady ``watts`` whose energy counter, like a real one, moves only every
    ``tick`` seconds of ``clock`` and in whole ``step_mj``: between ticks it stands still."""

    def __init__(self, clock: FakeClock, *, watts: float = 300.0, tick: float = 0.1,
                 step_mj: float = 1000.0) -> None:
        super().__init__()
        self.clock, self.tick, self.step_mj = clock, tick, step_mj
        self.power_mw = [int(watts * 1000)]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> float:  # noqa: N802
        self._call("energy")
        ticked = int(self.clock.t / self.tick) * self.tick  # the counter's last update
        return int(ticked * self.power_mw[h] / self.step_mj) * self.step_mj


def coarse_run(seconds: float, *, start: float = 100.02, samples: int = 0,
               **kw: Any) -> tuple[MonitorSummary, NullStream]:
    """A monitor over ``seconds`` of a coarse-counter GPU, ``samples`` taken in between."""
    clock = FakeClock()
    clock.t = start
    nvml = CoarseCounterNvml(clock, **kw)
    stream = NullStream()
    monitor = Monitor(stream, interval=3600.0, nvml=nvml, clock=clock, wall=clock)
    monitor.start()
    for _ in range(samples):
        clock.t += seconds / (samples + 1)
        monitor.sample()
    clock.t = start + seconds
    return monitor.stop(), stream


def test_a_run_within_one_counter_tick_is_not_0_joules():
    # 50 ms (a benchmark that skipped itself) between two updates of the counter: it stood
    # still, and 300 W for 50 ms is 15 J, not 0.
    summary, stream = coarse_run(0.05)
    assert summary.energy_j == pytest.approx(15.0)
    assert telemetry_stats(stream.records)["energy_j"] == pytest.approx(15.0)


def test_a_window_shorter_than_a_tick_is_not_one_whole_tick():
    # 30 ms across one update: the counter jumps a whole 100 ms tick (30 J); 9 J were drawn.
    summary, _ = coarse_run(0.03, start=100.09)
    assert summary.energy_j == pytest.approx(9.0)


def test_a_still_counter_without_power_is_unknown_energy():
    clock = FakeClock()
    nvml = CoarseCounterNvml(clock)
    nvml.fail["power"] = NVMLError_NotSupported()
    stream = NullStream()
    monitor = Monitor(stream, interval=3600.0, nvml=nvml, clock=clock, wall=clock)
    monitor.start()
    clock.t += 0.05
    summary = monitor.stop()
    assert summary.energy_j is None  # unknown, never 0 J
    assert all(g["energy_j"] is None for r in events(stream, "telemetry") for g in r["gpus"])
    assert telemetry_stats(stream.records)["energy_j"] is None


def test_a_long_run_reads_the_coarse_counter():
    # 10 s sampled every 0.5 s: the counter moved in every sample and says, within a tick.
    summary, stream = coarse_run(10.0, samples=19)
    assert summary.energy_j == pytest.approx(3000.0, abs=30.0)
    energies = [r["gpus"][0]["energy_j"] for r in events(stream, "telemetry")]
    assert energies[0] == 0.0 and all(e > 0 for e in energies[1:])


def test_a_failing_field_is_none_and_the_others_are_kept():
    nvml = FakeNvml()
    nvml.fail["temp"] = NVMLError(999)
    nvml.fail["util"] = RuntimeError("not even an NVMLError")
    monitor, stream, _ = fake_monitor(nvml)
    with monitor:
        pass
    gpu = events(stream, "telemetry")[0]["gpus"][0]
    assert gpu["temp_c"] is None and gpu["util"] is None
    assert gpu["mem_used"] == 8 * GIB and gpu["power_w"] == 250.0 and gpu["sm_clock_mhz"] == 1410
    assert nvml.calls["temp"] == 2  # a transient error is retried (only "not supported" is not)
    assert monitor.summary is not None and monitor.summary.errors == 0


def test_no_driver_means_cpu_telemetry_and_one_info_record():
    monitor, stream, _ = fake_monitor(FakeNvml(init_error=NVMLError_LibraryNotFound()))
    with monitor:
        monitor.sample()
    [info] = events(stream, "monitor")
    assert info["gpu"] is False
    assert "NVMLError_LibraryNotFound" in info["reason"]
    assert not events(stream, "warning")
    samples = events(stream, "telemetry")
    assert samples and all(r["gpus"] == [] and r["rss_bytes"] > 0 for r in samples)
    assert monitor.summary is not None and not monitor.summary.gpu
    assert monitor.summary.energy_j is None and monitor.summary.peak_rss_bytes > 0


def test_the_real_binding_without_a_driver_does_not_crash():
    # This machine has nvidia-ml-py and no driver: nvmlInit raises NVMLError_LibraryNotFound.
    stream = NullStream()
    with Monitor(stream, interval=3600.0) as monitor:
        pass
    [info] = events(stream, "monitor")
    if info["gpu"]:  # pragma: no cover - a lent GPU machine
        assert monitor.summary is not None and monitor.summary.gpus
    else:
        assert info["reason"]
        assert monitor.summary is not None and monitor.summary.peak_rss_bytes > 0


def test_no_gpu_assigned_samples_no_gpu():
    nvml = FakeNvml()
    monitor, stream, _ = fake_monitor(nvml, gpu_indices=[])
    with monitor:
        pass
    assert events(stream, "monitor")[0] == {
        "event": "monitor", "gpu": False, "interval": 3600.0, "pid": os.getpid(), "time": 100.0,
        "reason": "no GPU assigned to this run",
    }
    assert not nvml.calls


def test_the_stream_is_json_and_read_back(tmp_path: Path):
    nvml = FakeNvml()
    with StreamWriter(tmp_path / "b.D0.data") as stream, Monitor(stream, interval=3600, nvml=nvml):
        pass
    records = read_stream(tmp_path / "b.D0.data")
    assert [r["event"] for r in records] == ["monitor", "telemetry", "telemetry",
                                             "monitor_summary"]


def test_a_broken_stream_never_raises_into_the_benchmark():
    class Broken:
        def write(self, event: str, **fields: Any) -> dict[str, Any]:
            raise ValueError("stream is closed")

    monitor = Monitor(Broken(), interval=0.01, nvml=FakeNvml())  # type: ignore[arg-type]
    monitor.start()
    assert wait_until(lambda: monitor.samples >= 1, 10)  # sampled into the broken stream
    summary = monitor.stop()
    assert summary.errors >= 1 and "closed" in summary.last_error


def test_a_broken_psutil_leaves_the_cpu_fields_out():
    class NoPsutil:
        Error = Exception

        @staticmethod
        def Process(pid: int) -> Any:  # noqa: N802
            raise PermissionError("no /proc here")

    monitor, stream, _ = fake_monitor(FakeNvml(), psutil=NoPsutil)
    with monitor:
        pass
    sample = events(stream, "telemetry")[0]
    assert sample["rss_bytes"] is None and sample["cpu_percent"] is None
    assert sample["gpus"][0]["util"] == 80.0


# -- visible GPUs -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("visible", "indices", "noted"),
    [
        (None, [0, 1, 2, 3], False),
        ("", [], False),
        ("2", [2], False),
        ("3,1", [3, 1], False),
        ("0,7,1", [0], True),  # CUDA ignores everything from an invalid id on
        ("1,-1,2", [1], True),
        ("GPU-222", [2], False),  # a UUID prefix
        ("gpu-111-0000,0", [1, 0], False),
        ("GPU-", [], True),  # matches all four: ambiguous
        ("MIG-abcd,0", [0], True),
        ("0,0", [0], True),
    ],
)
def test_visible_nvml_indices(visible: str | None, indices: list[int], noted: bool):
    got, notes = visible_nvml_indices(FakeNvml(count=4), visible, 4)
    assert got == indices
    assert bool(notes) == noted


def test_the_monitor_samples_the_gpu_of_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-111-0000")
    monitor, stream, _ = fake_monitor(FakeNvml(count=2))
    with monitor:
        pass
    assert [g["index"] for g in events(stream, "telemetry")[0]["gpus"]] == [1]


# -- the process tree (real psutil) -------------------------------------------------------------
def test_rss_of_the_process_tree_includes_a_child():
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; x = bytearray(96 * 2**20); x[::4096] = b'1' * len(x[::4096]); "
         "print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        stream = NullStream()
        monitor = Monitor(stream, interval=3600.0, gpu_indices=[])
        with monitor:
            time.sleep(0.06)  # CPU percentages need a period of 50 ms at least
            sample = monitor.sample()
            too_soon = monitor.sample()
        import psutil

        own = psutil.Process().memory_info().rss
        assert sample is not None and sample["procs"] >= 2
        assert sample["rss_bytes"] >= own + 90 * 2**20
        assert sample["cpu_percent"] is not None and sample["cpu_percent"] >= 0
        assert too_soon is not None and too_soon["cpu_percent"] is None
        assert too_soon["rss_bytes"] > 0
        assert events(stream, "telemetry")[0]["cpu_percent"] is None  # the first: no period
        assert sample["disk_read_bytes"] is not None and sample["disk_read_bytes"] >= 0
    finally:
        child.kill()
        child.wait()


# -- summaries and validation -----------------------------------------------------------------
def run_records(
    utils: list[float],
    *,
    gpu: bool = True,
    mem_used: int = 8 * GIB,
    idle_before: int = 0,
) -> list[dict[str, Any]]:
    """A run's records: ``idle_before`` 0% samples before the timed window, then one sample
    per second with the given utilisations, observations covering those seconds."""
    records: list[dict[str, Any]] = [
        {"event": "monitor", "gpu": gpu, "interval": 1.0, **({} if gpu else {"reason": "x"})}
    ]
    t0 = 1000.0
    for k in range(idle_before):
        records.append(sample(t0 - idle_before + k, 0.0 if gpu else None, 1 * GIB, k * 10.0))
    for k, util in enumerate(utils):
        # Read at the end of the second it describes: NVML averages over the period before it.
        records.append(sample(t0 + k + 1.0, util if gpu else None, mem_used, 100.0 + k * 10.0))
        records.append({"event": "rate", "value": 10.0, "time": t0 + k + 1.0, "seconds": 1.0,
                        "items": 10, "step": k, "warmup": False})
    records.append(sample(t0 + len(utils) + 2.0, 0.0 if gpu else None, 1 * GIB, 999.0))
    return records


def sample(t: float, util: float | None, mem_used: int, energy: float) -> dict[str, Any]:
    gpus = [] if util is None else [
        {"index": 0, "util": util, "mem_used": mem_used, "mem_total": 16 * GIB, "power_w": 200.0,
         "temp_c": 60.0, "sm_clock_mhz": 1400.0, "energy_j": energy}
    ]
    return {"event": "telemetry", "time": t, "cpu_percent": 100.0, "rss_bytes": int(t),
            "disk_read_bytes": 0, "disk_write_bytes": 0, "gpus": gpus}


LOAD = {"usage": {"gpu_load_threshold": 0.5}}


def test_load_below_the_threshold_fails():
    issues = check_usage(run_records([10.0, 12.0, 14.0]), LOAD)
    assert issues == [Issue("fail", "GPU load 12% below the 50% threshold "
                                    "(mean of 3 samples, max 14%)")]


def test_load_above_the_threshold_passes():
    assert check_usage(run_records([70.0, 90.0, 80.0]), LOAD) == []


def test_idle_samples_before_the_timed_window_do_not_count():
    records = run_records([90.0] * 3, idle_before=10)
    assert check_usage(records, LOAD) == []
    assert timed_window(records) == (1000.0, 1003.0)
    # Over all its samples the run would have failed.
    assert summarize_telemetry(records).mean_gpu_util < 50


def test_an_idle_warm_up_step_does_not_count_against_the_load():
    """The standard resnet50 on an H200 (2026-11-27): its first, warm-up step took 13 s
    (cuDNN autotuning, the loader's workers starting) at 0-2 % load, then the scored steps kept
    the GPU busy; a load over warm-up and all failed a healthy run."""
    records = run_records([90.0] * 3)
    records[1:1] = [sample(1000.0 - 13 + k, 0.0, 1 * GIB, k * 1.0) for k in range(13)]
    records.insert(14, {"event": "rate", "value": 4.9, "time": 1000.0, "seconds": 13.0,
                        "items": 64, "step": 0, "warmup": True, "loop_start": True})
    assert timed_window(records) == (1000.0, 1003.0)
    assert check_usage(records, LOAD) == []
    warm_only = [r for r in records if r.get("event") != "rate" or r.get("warmup")]
    assert timed_window(warm_only) == (987.0, 1000.0)  # no scored step: the warm-up's


def test_a_percent_threshold_is_accepted():
    [issue] = check_usage(run_records([40.0]), {"usage": {"gpu_load_threshold": 50}})
    assert issue.level == "fail"


def test_low_memory_only_warns():
    issues = check_usage(run_records([90.0] * 2, mem_used=4 * GIB),
                         {"usage": {"gpu_load_threshold": 0.5, "gpu_mem_threshold": 0.5}})
    assert issues == [Issue("warn", "GPU memory 25% below the 50% threshold "
                                    "(mean 4.0 of 16.0 GiB, peak 4.0 GiB)")]


def test_cpu_runs_are_not_validated():
    assert check_usage(run_records([0.0] * 3, gpu=False), LOAD) == []
    no_gpu = MonitorSummary(gpu=False, reason="no driver", interval=1.0, samples=3, duration_s=2)
    assert check_usage(no_gpu, LOAD) == []


def test_no_sample_in_a_short_timed_window_warns_instead_of_failing():
    records = run_records([])
    records.insert(1, {"event": "rate", "value": 1.0, "time": 1500.0, "seconds": 0.1})
    [issue] = check_usage(records, LOAD)
    assert issue.level == "warn" and "no GPU sample in the timed window" in issue.message


def test_validation_is_off_unless_asked():
    assert check_usage(run_records([1.0]), {}) == []
    assert check_usage(run_records([1.0]), {"usage": {"gpu_load_threshold": None}}) == []
    [bad] = check_usage(run_records([1.0]), {"usage": {"gpu_load_threshold": "high"}})
    assert bad.level == "warn" and "not checked" in bad.message


def test_check_usage_of_a_monitor_summary():
    nvml = FakeNvml(count=2)
    nvml.util = [90.0, 20.0]
    monitor, _, _ = fake_monitor(nvml)
    with monitor:
        pass
    assert monitor.summary is not None
    [issue] = check_usage(monitor.summary, LOAD)
    assert issue.message.startswith("GPU 1 load 20% below the 50% threshold")


def test_validate_usage_writes_warnings_and_raises_on_failure():
    stream = NullStream()
    for r in run_records([10.0, 20.0], mem_used=2 * GIB):
        stream.write(**r)
    validation = {"usage": {"gpu_load_threshold": 0.5, "gpu_mem_threshold": 0.5}}
    with pytest.raises(ValidationError, match=r"^GPU load 15% below the 50% threshold") as info:
        validate_usage(stream, validation)
    assert [i.level for i in info.value.issues] == ["fail", "warn"]
    [warning] = events(stream, "warning")
    assert warning["source"] == "validation" and "GPU memory 12%" in warning["message"]


def test_a_validation_failure_is_a_failed_run(tmp_path: Path):
    path = tmp_path / "b.D0.data"
    with StreamWriter(path) as stream:
        stream.write_many(run_records([5.0, 5.0]))
        outcome, exc = execute(lambda: validate_usage(stream, LOAD), stream)
    assert isinstance(exc, ValidationError)
    assert outcome.status == "fail"
    # The reason is the validation's own sentence (no exception class in front of it).
    assert outcome.reason == "GPU load 5% below the 50% threshold (mean of 2 samples, max 5%)"
    assert read_stream(path)[-1]["status"] == "fail"


def test_validate_usage_passes_quietly():
    stream = NullStream()
    stream.write_many(run_records([90.0]))
    assert validate_usage(stream, LOAD) == []
    assert validate_usage(stream, {}) == []
    assert not events(stream, "warning")


def test_telemetry_stats():
    records = run_records([60.0, 80.0], idle_before=3, mem_used=10 * GIB)
    assert telemetry_stats(records) == {
        "peak_gpu_mem_bytes": 10 * GIB,
        "peak_rss_bytes": 1004,  # the last sample's (its time is its RSS here)
        "energy_j": 999.0,  # cumulative: the last sample's
        "mean_gpu_util": 70.0,  # over the timed window
    }
    cpu = telemetry_stats(run_records([0.0], gpu=False))
    assert cpu["peak_gpu_mem_bytes"] is None and cpu["energy_j"] is None
    assert cpu["mean_gpu_util"] is None and cpu["peak_rss_bytes"] == 1003
    assert telemetry_stats([]) == dict.fromkeys(
        ("peak_gpu_mem_bytes", "peak_rss_bytes", "energy_j", "mean_gpu_util")
    )


def test_combine_stats_of_a_benchmark_runs():
    runs = [
        {"peak_gpu_mem_bytes": 10, "peak_rss_bytes": 5, "energy_j": 100.0, "mean_gpu_util": 90.0},
        {"peak_gpu_mem_bytes": 12, "peak_rss_bytes": 4, "energy_j": 50.0, "mean_gpu_util": 80.0},
        dict.fromkeys(("peak_gpu_mem_bytes", "peak_rss_bytes", "energy_j", "mean_gpu_util")),
    ]
    assert combine_stats(runs) == {
        "peak_gpu_mem_bytes": 12, "peak_rss_bytes": 5, "energy_j": 150.0, "mean_gpu_util": 85.0,
    }
    assert combine_stats([]) == dict.fromkeys(
        ("peak_gpu_mem_bytes", "peak_rss_bytes", "energy_j", "mean_gpu_util")
    )


def test_a_threads_first_system_cpu_reading_is_dropped():
    # psutil keeps cpu_percent(None)'s reference per thread: the sampler thread's first call
    # says 0.0 whatever the load. That reading must not reach the stream (issue 15).
    import threading

    import psutil

    from pytest_dlbench.measure.monitor.process import MIN_CPU_PERIOD, ProcessTree

    tree = ProcessTree(psutil, os.getpid())
    readings: list[object] = []

    def sample_twice() -> None:
        for _ in range(2):
            time.sleep(MIN_CPU_PERIOD * 2)
            readings.append(tree.sample()["system_cpu_percent"])

    thread = threading.Thread(target=sample_twice)
    thread.start()
    thread.join()
    assert readings[0] is None
    assert isinstance(readings[1], float)


def test_the_sampler_threads_first_sample_reads_the_machines_cpu():
    """A gate_power run's timed window is about a second: with a 1 s interval, one or two of the
    thread's samples. Its first one must carry the machine's CPU, or a neighbour that ran then
    goes unseen by the busy check (results/figures/busy.py); before, the thread's first call set
    psutil's reference and gave no reading (195 kept runs: 105 of them judged "unknown")."""
    import psutil

    stream = NullStream()
    monitor = Monitor(stream, interval=0.2, nvml=FakeNvml(), pid=os.getpid(), psutil=psutil)
    monitor.start()
    # The start's sample, then the thread's first.
    wait_until(lambda: len(events(stream, "telemetry")) >= 2, 30)
    monitor.stop()
    by_thread = events(stream, "telemetry")[1:-1]
    assert by_thread, "no sample by the thread"
    assert isinstance(by_thread[0]["system_cpu_percent"], float)


def test_the_monitor_s_times_are_on_the_timer_s_clock() -> None:
    """Telemetry is lined up with the steps by their times (summary.timed_window): after a
    clock step both must have moved alike, so the monitor's default clock is the timer's."""
    from pytest_dlbench.measure.monitor.sampler import Monitor
    from pytest_dlbench.measure.stream import NullStream
    from pytest_dlbench.measure.timing import MonotonicWallClock

    assert isinstance(Monitor(NullStream()).wall, MonotonicWallClock)


def test_no_sample_in_the_scored_window_is_no_load_figure():
    """A scored window between two NVML samples: the whole run's mean (4 % on an H200's
    resnet50, its idle set-up) is not the load; the report says why there is none, and the
    load check warns instead of failing."""
    records = run_records([])
    records[1:1] = [sample(990.0 + k, 4.0, 1 * GIB, k * 1.0) for k in range(5)]
    records.append({"event": "rate", "value": 1.0, "time": 1500.2, "seconds": 0.1,
                    "items": 10, "step": 0, "warmup": False})
    stats = telemetry_stats(records)
    assert stats["mean_gpu_util"] is None
    assert stats["gpu_util_reason"] == "no sample in the scored window"
    [issue] = check_usage(records, LOAD)
    assert issue.level == "warn"
    combined = combine_stats([stats, dict(stats)])
    assert combined["mean_gpu_util"] is None
    assert combined["gpu_util_reason"] == "no sample in the scored window"
    # A run that has the figure wins over one that has only the reason.
    assert "gpu_util_reason" not in combine_stats([stats, {"mean_gpu_util": 80.0}])


# -- NVML's utilisation is the mean of the period before the reading --------------------------
class TrailingNvml(FakeNvml):
    """The driver's utilisation as NVML reports it: every ``period`` seconds the driver closes
    a sample, the share of that period during which a kernel ran (``busy``: intervals of the
    fake clock); ``nvmlDeviceGetUtilizationRates`` answers the last closed sample, and
    ``nvmlDeviceGetSamples`` the closed samples newer than a stamp, stamped in the host's
    microseconds (``stamped=False``: a binding or part without it)."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, clock: FakeClock, busy: list[tuple[float, float]], period: float,
                 *, stamped: bool = True) -> None:
        super().__init__(count=1)
        self.clock, self.busy, self.period = clock, busy, period
        if not stamped:
            self.nvmlDeviceGetSamples = None  # type: ignore[assignment]

    def _share(self, a: float, b: float) -> float:
        overlap = sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in self.busy)
        return 100.0 * overlap / (b - a)

    def _closed_ends(self) -> list[float]:
        last = int(self.clock.t / self.period + 1e-9)
        return [k * self.period for k in range(1, last + 1)]

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:  # noqa: N802
        self._call("util")
        end = self._closed_ends()[-1]
        return SimpleNamespace(gpu=round(self._share(end - self.period, end)), memory=0)

    def nvmlDeviceGetSamples(self, h: int, kind: int, since_us: int) -> Any:  # noqa: N802
        assert kind == self.NVML_GPU_UTILIZATION_SAMPLES
        new = [SimpleNamespace(timeStamp=round(end * 1e6),
                               sampleValue=SimpleNamespace(uiVal=round(
                                   self._share(end - self.period, end))))
               for end in self._closed_ends() if round(end * 1e6) > since_us]
        if not new:
            raise NVMLError(6)  # NVML_ERROR_NOT_FOUND: no sample since the stamp
        return 1, new


def clocked_monitor(nvml: TrailingNvml, clock: FakeClock) -> tuple[Monitor, NullStream]:
    """A monitor sampled by hand whose records, energy and NVML's stamps share ``clock``."""
    stream = NullStream()
    monitor = Monitor(stream, interval=3600.0, nvml=nvml, clock=clock, wall=clock)
    monitor._nvml.host_clock = clock
    return monitor, stream


def monitored_run(nvml: TrailingNvml, clock: FakeClock, *, warmup_end: float,
                  steps: list[float]) -> list[dict[str, Any]]:
    """A run monitored every second from t=100 to the last step and a little after: a
    warm-up step ending at ``warmup_end``, then scored steps ending at ``steps``."""
    monitor, stream = clocked_monitor(nvml, clock)
    clock.t = 100.0
    with monitor:
        while clock.t + 1.0 <= steps[-1] + 0.6:
            clock.t += 1.0
            monitor.sample()
        clock.t = steps[-1] + 0.6
    records: list[dict[str, Any]] = list(stream.records)
    records.append({"event": "rate", "value": 1.0, "time": warmup_end, "seconds": warmup_end - 100,
                    "items": 64, "warmup": True})
    before = warmup_end
    for t in steps:
        records.append({"event": "rate", "value": 1.0, "time": t, "seconds": t - before,
                        "items": 64, "warmup": False})
        before = t
    return records


def standard_resnet50(period: float, *, stamped: bool) -> list[dict[str, Any]]:
    """The standard resnet50 on an H200 (2026-11-28): an idle warm-up (cuDNN autotuning) of
    10 s, then 30 scored steps in 0.55 s that keep the GPU busy."""
    clock = FakeClock()
    steps = [110.0 + 0.55 * (k + 1) / 30 for k in range(30)]
    nvml = TrailingNvml(clock, busy=[(110.0, steps[-1])], period=period, stamped=stamped)
    return monitored_run(nvml, clock, warmup_end=110.0, steps=steps)


@pytest.mark.parametrize("stamped", [True, False])
def test_a_scored_window_shorter_than_the_period_is_not_judged_on_the_warm_up(stamped: bool):
    """The reading taken inside the 0.55 s window is the mean of the idle second before it:
    the run failed its 50 % load check at 41 % (mean of 1 sample) on an H200 while its steps
    kept the GPU busy. No period lies inside the window: no figure, and a warning."""
    records = standard_resnet50(1.0, stamped=stamped)
    [issue] = check_usage(records, LOAD)
    assert issue.level == "warn"
    assert "load not validated" in issue.message and "0.55 s scored window" in issue.message
    stats = telemetry_stats(records)
    assert stats["mean_gpu_util"] is None
    assert stats["gpu_util_reason"] == "no sample in the scored window"


def test_the_drivers_short_samples_inside_the_window_judge_it():
    """A part whose driver closes a sample every 1/6 s: three of them lie inside the 0.55 s
    window, all busy; the point reading taken in it still describes the idle time before."""
    records = standard_resnet50(1 / 6, stamped=True)
    assert check_usage(records, LOAD) == []
    window = timed_window(records)
    assert window is not None
    [gpu] = summarize_telemetry(records, start=window[0], end=window[1]).gpus
    assert gpu.samples == 3 and gpu.mean_util == 100.0
    assert gpu.util_period_s == pytest.approx(1 / 6, abs=1e-5)  # stamps in microseconds
    # Without the driver's stamps the same run's readings are not judged, never failed.
    [issue] = check_usage(standard_resnet50(1 / 6, stamped=False), LOAD)
    assert issue.level == "warn"


@pytest.mark.parametrize("stamped", [True, False])
def test_a_long_window_is_judged_on_its_own_periods(stamped: bool):
    """Busy from 110 to 114, idle before: the reading at 110.x (the idle second before) is
    left out, the others count; a GPU idle in its window still fails."""
    clock = FakeClock()
    steps = [110.0 + 0.25 * (k + 1) for k in range(16)]
    busy = TrailingNvml(clock, busy=[(110.0, 114.0)], period=1.0, stamped=stamped)
    records = monitored_run(busy, clock, warmup_end=110.0, steps=steps)
    window = timed_window(records)
    assert window == (110.0, 114.0)
    [gpu] = summarize_telemetry(records, start=window[0], end=window[1]).gpus
    assert gpu.mean_util == 100.0 and gpu.samples >= 3
    assert check_usage(records, LOAD) == []
    clock = FakeClock()
    idle = TrailingNvml(clock, busy=[(100.0, 110.0)], period=1.0, stamped=stamped)
    [issue] = check_usage(monitored_run(idle, clock, warmup_end=110.0, steps=steps), LOAD)
    assert issue.level == "fail" and issue.message.startswith("GPU load 0% below")


def test_the_drivers_samples_are_kept_from_the_monitors_start_on():
    """The driver's buffer holds samples from before the run (another job's): the first read
    keeps only those from shortly before the monitor started."""
    clock = FakeClock()
    clock.t = 100.0
    nvml = TrailingNvml(clock, busy=[(0.0, 200.0)], period=1.0)
    monitor, stream = clocked_monitor(nvml, clock)
    with monitor:
        clock.t = 101.5
        monitor.sample()
    stamps = [t for r in events(stream, "telemetry") for g in r["gpus"]
              for t, _ in g.get("util_samples", [])]
    assert stamps == [98.0, 99.0, 100.0, 101.0]  # each once, none from before 98


@pytest.mark.parametrize("stamped", [True, False])
def test_the_idle_gap_between_two_loops_is_not_the_benchmarks_load(stamped: bool):
    """Two epochs of busy steps with a 2 s idle gap between them (the loader's workers
    starting again: the second loop's first step says ``loop_start``): the samples of the gap
    describe no step and are left out."""
    clock = FakeClock()
    first = [110.0 + 0.25 * (k + 1) for k in range(8)]  # to 112
    second = [114.0 + 0.25 * (k + 1) for k in range(8)]  # 114 to 116
    nvml = TrailingNvml(clock, busy=[(110.0, 112.0), (114.0, 116.0)], period=1.0,
                        stamped=stamped)
    records = monitored_run(nvml, clock, warmup_end=110.0, steps=first + second)
    for record in records:  # the second loop's first step: timed from its own start
        if record.get("event") == "rate" and record["time"] == 114.25:
            record.update(seconds=0.25, loop_start=True)
    assert scored_spans(records) == [(110.0, 112.0), (114.0, 116.0)]
    strict = {"usage": {"gpu_load_threshold": 0.9}}
    assert check_usage(records, strict) == []
    assert telemetry_stats(records)["mean_gpu_util"] == 100.0


def test_scored_spans_join_short_pauses_and_sort_steps_out_of_order():
    def rate(t: float, seconds: float) -> dict[str, Any]:
        return {"event": "rate", "value": 1.0, "time": t, "seconds": seconds, "items": 1,
                "warmup": False}

    in_order = [rate(1.0, 1.0), rate(2.05, 1.0), rate(5.0, 1.0)]  # a 0.05 s pause, then 2 s
    assert scored_spans(in_order) == [(0.0, 2.05), (4.0, 5.0)]
    assert scored_spans(in_order[::-1]) == [(0.0, 2.05), (4.0, 5.0)]


def test_driver_stamps_on_another_clock_are_placed_by_the_newest():
    """NVML documents its stamps as the host's microseconds; a driver whose stamps are far from
    the host's clock (another epoch) has its samples placed so that the newest is now."""
    clock = FakeClock()
    clock.t = 100.0
    nvml = TrailingNvml(clock, busy=[(0.0, 200.0)], period=1.0)
    monitor, stream = clocked_monitor(nvml, clock)
    monitor._nvml.host_clock = lambda: clock.t + 1e6  # the host's clock: a million s later
    with monitor:
        clock.t = 101.5
        monitor.sample()
    stamps = [t for r in events(stream, "telemetry") for g in r["gpus"]
              for t, _ in g.get("util_samples", [])]
    assert stamps and max(stamps) == pytest.approx(101.5)  # the newest, as the last read
