"""benchmarks/gpu_check_paths.py: the paths gpu_check exercises that no shipped run takes on a
GPU, NVML's sample period, one stream's load over its scored window, the archive --copy-to
receives (docs/gpu.md, "Reading the table")."""

from __future__ import annotations

import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _bench_scripts import load_script
from _paths import REPO_ROOT

STANDARD = REPO_ROOT / "bench_suites" / "standard.yaml"


@pytest.fixture(scope="module")
def paths() -> ModuleType:
    return load_script("gpu_check_paths")


# -- the paths run ------------------------------------------------------------------------------
def test_the_paths_run_selects_exactly_its_benchmarks_with_the_shipped_templates(
        paths: ModuleType, tmp_path: Path):
    """Issue 49 item 12: torch.compile with CUDA graphs on resnet50, fp16 autocast on the ViT,
    CLIP in-process and through OpenCLIP's script, each from the standard suite's own
    templates (resolved by the project's resolver, as pytest will)."""
    from pytest_dlbench.suite.resolve import resolve_suite

    suite = tmp_path / "paths.yaml"
    suite.write_text(paths.paths_suite(STANDARD, quick=True))
    resolved = resolve_suite(suite)
    selection = paths.paths_selection().split(" or ")
    assert paths.paths_selection() == " or ".join(selection)  # the same on every call
    # What pytest's -k selects: every entry whose name holds a term, case aside (the shipped
    # mmoclip-ViT-B-32, an hour's run, holds "clip-vit-b-32").
    chosen = {s.name: s for s in resolved.enabled
              if any(term.lower() in s.name.lower() for term in selection)}
    assert list(chosen) == [name for name, _ in paths.PATHS]

    compiled = chosen["resnet50-reduce-overhead"]
    assert compiled.argv["--compile"] == "reduce-overhead"
    assert compiled.argv["--model"] == "resnet50" and compiled.argv["--synthetic-data"]
    assert compiled.max_duration == paths.COMPILED_MAX_DURATION_S
    vit = chosen["vit-fp16"]
    assert vit.argv["--precision"] == "fp16" and vit.argv["--model"] == "vit_base_patch16_224"
    assert vit.validation["usage"]["gpu_load_threshold"] == 0.5  # the shipped load check
    clip = chosen["clip-b32"]
    assert clip.argv["--model"] == "ViT-B-32" and clip.argv["--precision"] == "amp"
    openclip = chosen["openclip-b32"]
    assert openclip.args[:3] == ("python", "-m", "open_clip_train.main")
    assert "--dataset-type" in openclip.args and "synthetic" in openclip.args
    # It runs its whole epoch (an njobs command is not stopped): that epoch is the observations.
    samples = int(openclip.args[openclip.args.index("--train-num-samples") + 1])
    assert samples == paths.CLIP_BATCH * (openclip.skip + openclip.stop)


def test_the_benchmarks_a_cut_run_did_not_reach_are_named_in_order(paths: ModuleType):
    planned = [name for name, _ in paths.PATHS]
    assert paths.dropped(planned, {"resnet50-reduce-overhead": {}}) == planned[1:]
    assert paths.dropped(planned, planned) == []


# -- NVML's sample period -----------------------------------------------------------------------
def test_the_probe_reads_the_period_and_the_clock_of_nvmls_samples(paths: ModuleType):
    """The median gap between the samples' timestamps is the period; the newest timestamp
    minus the wall clock says whether they are UNIX microseconds."""
    now = 1_764_345_600.0
    loads: list[float] = []
    nvml = paths.FakeNvml(period_us=100_000, now=lambda: now)
    result = paths.nvml_probe(nvml, None, loads.append, now=lambda: now)
    assert loads == [paths.PROBE_LOAD_S]  # the load ran before the samples were read
    assert result["period_us"] == 100_000 and result["samples"] == 40
    assert -100_000 < result["newest_minus_now_us"] < 0
    assert result["last_values"] == [100.0] * paths.PROBE_LAST
    figure, ok = paths.nvml_probe_row(result)
    assert ok is True and "period 100.0 ms" in figure and "(UNIX microseconds)" in figure
    assert "-0.033 s" in figure


def test_timestamps_that_are_not_unix_microseconds_fail_the_row(paths: ModuleType):
    """A boot-relative clock (the newest sample hours from time.time()) would make the load
    over a scored window pick the wrong samples, or none: FAIL, with the offset."""
    now = 1_764_345_600.0
    nvml = paths.FakeNvml(offset_us=-int(now * 1e6) + 3_600_000_000, now=lambda: now)
    figure, ok = paths.nvml_probe_row(paths.nvml_probe(nvml, None, lambda s: None,
                                                       now=lambda: now))
    assert ok is False and "NOT UNIX microseconds" in figure
    assert paths.nvml_probe_row({"samples": 0, "newest_minus_now_us": None}) == (
        "NVML returned no utilisation sample", False)


def test_each_nvml_value_type_reads_its_own_field(paths: ModuleType):
    class Value:
        dVal, uiVal, ullVal = 12.5, 7, 9

    class Sample:
        sampleValue = Value()

    assert paths.sample_value(Sample(), 0) == 12.5
    assert paths.sample_value(Sample(), 1) == 7.0
    assert paths.sample_value(Sample(), 3) == 9.0


# -- one stream's row -----------------------------------------------------------------------------
T0 = 1_764_345_600.0


def _stream(*, warmup_util: float, steady_util: float, steps: int = 10, seconds: float = 0.3,
            samples_every: int = 1, threshold: float | None = 0.5) -> list[dict[str, Any]]:
    """A per-GPU run's records: a 10 s warm-up step (cuDNN's autotuning), then ``steps`` scored
    steps of ``seconds`` each, an NVML sample after every ``samples_every`` steps."""
    validation = {"usage": {"gpu_load_threshold": threshold}} if threshold else {}
    records: list[dict[str, Any]] = [
        {"event": "config", "spec": {"name": "resnet50", "validation": validation}},
        {"event": "monitor", "gpu": True, "interval": 1.0, "time": T0},
        {"event": "telemetry", "time": T0 + 5, "gpus": [_gpu(warmup_util, 4, 5.0)]},
        {"event": "rate", "value": 6.4, "units": "items/s", "step": 0, "warmup": True,
         "time": T0 + 10, "items": 64, "seconds": 10.0},
    ]
    t = T0 + 10
    for step in range(steps):
        t += seconds
        records.append({"event": "rate", "value": 64 / seconds, "units": "items/s",
                        "step": step + 1, "warmup": False, "time": t, "items": 64,
                        "seconds": seconds})
        if (step + 1) % samples_every == 0:
            records.append({"event": "telemetry", "time": t,
                            "gpus": [_gpu(steady_util, 5, t - T0)]})
    records.append({"event": "monitor_summary", "errors": 0,
                    "torch_max_reserved_bytes": 4 * 2**30})
    records.append({"event": "telemetry", "time": t + 5, "gpus": [_gpu(0.0, 5, t + 5 - T0)]})
    return records


def _gpu(util: float, gib: float, since_start_s: float) -> dict[str, Any]:
    return {"index": 0, "util": util, "mem_used": gib * 2**30, "mem_total": 141 * 2**30,
            "power_w": 400.0, "energy_j": 400.0 * since_start_s}  # a counter, in joules


def test_the_row_shows_the_load_over_the_scored_window_and_the_whole_run_apart(
        paths: ModuleType):
    """Issue 49 item 11: the load over the scored window with its sample count, the load
    check's outcome on it, the whole run's mean named as such, NVML's peak beside torch's
    reserved, TFLOP/s and MFU from the run's summary."""
    figure, ok = paths.stream_row(_stream(warmup_util=2.0, steady_util=95.0),
                                  {"tflops": 74.5, "mfu": 0.0753})
    # 7 of the window's 10 readings: the first second's describe the warm-up before it
    # (docs/telemetry.md, "GPU load over the scored window").
    assert figure.startswith("window 3.00 s: load 95% (7 samples); check ok; ")
    assert "whole-run mean " in figure and "whole-run mean 95" not in figure
    assert "peak NVML 5.0 GiB / torch reserved 4.0 GiB" in figure
    assert "74.5 TFLOP/s, MFU 7.5%" in figure and ok


def test_a_low_load_in_the_window_fails_the_row_with_the_checks_own_words(paths: ModuleType):
    figure, ok = paths.stream_row(_stream(warmup_util=2.0, steady_util=30.0), None)
    assert not ok and "check FAIL: GPU load 30% below the 50% threshold" in figure
    assert "TFLOP/s" not in figure  # the run counted no FLOPs: nothing to show
    figure, ok = paths.stream_row(_stream(warmup_util=2.0, steady_util=30.0, threshold=None),
                                  None)
    assert ok and "no load check set" in figure


def test_a_window_without_a_sample_says_so(paths: ModuleType):
    figure, _ = paths.stream_row(_stream(warmup_util=2.0, steady_util=95.0, steps=2,
                                         samples_every=5), None)
    assert "window 0.60 s: no sample in the scored window" in figure


def test_the_window_check_wants_a_window_of_the_length_asked(paths: ModuleType):
    """Issue 49 item 12: the load check on a scored window of at least 1.5 s: a shorter window
    fails the row, saying the benchmark is sized too short."""
    figure, ok = paths.window_check_row(_stream(warmup_util=2.0, steady_util=95.0), 1.5)
    assert ok and figure == "window 3.00 s: load 95% (7 samples); check ok"
    figure, ok = paths.window_check_row(
        _stream(warmup_util=2.0, steady_util=95.0, steps=3), 1.5)
    assert not ok and "the window is under 1.5 s" in figure
    _, ok = paths.window_check_row(_stream(warmup_util=2.0, steady_util=30.0), 1.5)
    assert not ok


# -- the archive ----------------------------------------------------------------------------------
def test_the_archive_holds_the_logs_suite_files_and_streams_and_nothing_big(
        paths: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "out"
    run = out / "smoke" / "runs" / "smoke.1"
    (run / "work").mkdir(parents=True)
    (out / "workers").mkdir()
    for name in ("smoke.log", "smoke.json", "paths.yaml", "workers/nvml.json",
                 "smoke/runs/smoke.1/toy.D0.data", "smoke/runs/smoke.1/work/weights.bin"):
        (out / name).write_text(name)
    (run / "big.D0.data").write_bytes(b"x" * 64)
    monkeypatch.setattr(paths, "ARCHIVE_FILE_LIMIT", 32)
    target = tmp_path / "back" / paths.ARCHIVE
    target.parent.mkdir()
    count = paths.write_archive(out, target, ("smoke", "paths"))
    with tarfile.open(target) as tar:
        names = sorted(tar.getnames())
    assert names == ["paths.yaml", "smoke.json", "smoke.log", "smoke/runs/smoke.1/toy.D0.data",
                     "workers/nvml.json"] and count == 5
    assert [p.name for p in target.parent.iterdir()] == [paths.ARCHIVE]  # no partial left
