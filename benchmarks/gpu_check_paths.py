"""The parts of ``gpu_check.py`` that exercise the paths no shipped run had taken on a GPU, and
read each run's load over its scored window (docs/gpu.md, "Reading the table").

- :func:`paths_suite`: the ``paths`` run, a suite written here that includes the shipped
  ``standard`` suite and adds, in priority order, ``torch.compile`` with CUDA graphs
  (``reduce-overhead``) on resnet50, fp16 autocast on a ViT, and CLIP at GPU size, in-process
  and through OpenCLIP's own training script;
- :func:`nvml_probe`: NVML's utilisation sample period on the part, and whether its sample
  timestamps are UNIX microseconds (what the load over a scored window relies on);
- :func:`stream_row`: one stream's load over its scored window with its sample count, the
  suite's load check on it (the product's own ``check_usage``), NVML's peak beside torch's
  reserved, TFLOP/s and MFU;
- :func:`write_archive`: everything but the table and the summaries in one ``tar.gz``, so that
  ``--copy-to`` receives at most 8 files.

Plain Python: torch only inside :func:`gpu_load` (a worker process's), NVML only through the
binding handed in.
"""

from __future__ import annotations

import io
import os
import statistics
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# -- the paths run ------------------------------------------------------------------------------
#: The benchmarks of the ``paths`` run, in the order they run (the most wanted first: a run cut
#: by its timeout loses the last), with what each checks.
PATHS: tuple[tuple[str, str], ...] = (
    ("resnet50-reduce-overhead", "torch.compile with CUDA graphs (mode reduce-overhead)"),
    ("vit-fp16", "fp16 autocast and its gradient scaler on a ViT-B/16 (timm)"),
    ("clip-b32", "CLIP ViT-B-32 in-process (open_clip), amp"),
    ("openclip-b32", "OpenCLIP's own training script, ViT-B-32, amp"),
)
# One compile of resnet50 (inductor, cold cache) takes about a minute on a GPU host: the
# compiled benchmark's cut; the others are short.
COMPILED_MAX_DURATION_S = 180
PATHS_MAX_DURATION_S = 120
CLIP_BATCH = 128


def paths_suite(standard: Path, *, quick: bool) -> str:
    """The ``paths`` run's suite: the shipped ``standard`` suite (``standard``: its file) for its
    templates, and the entries of :data:`PATHS` (select them with :func:`paths_selection`)."""
    import yaml

    stop = 20 if quick else 60
    short = {"max_duration": PATHS_MAX_DURATION_S,
             "voir": {"options": {"skip": 5, "stop": stop, "interval": "1s"}}}
    clip = {"--model": "ViT-B-32", "--batch-size": CLIP_BATCH, "--precision": "amp",
            "--train-num-samples": CLIP_BATCH * (stop + 10), "--epochs": 1,
            "--workers": "{n_worker}", "--local-loss": True, "--gather-with-grad": True}
    suite: dict[str, Any] = {
        "include": str(standard),
        "resnet50-reduce-overhead": {
            "inherits": "resnet50", "max_duration": COMPILED_MAX_DURATION_S,
            "voir": short["voir"], "argv": {"--compile": "reduce-overhead"}},
        "vit-fp16": {"inherits": "vit_b_16", **short, "argv": {"--precision": "fp16"}},
        "clip-b32": {
            "inherits": "_defaults", **short, "definition": "pytest_dlbench.workloads.clip:train",
            "group": "clip", "tags": ["clip"], "weight": 0,
            "plan": {"method": "njobs", "n": 1}, "argv": clip},
        # An njobs command runs to its end: its epoch is exactly the observations wanted.
        "openclip-b32": {
            "inherits": "_defaults", "max_duration": PATHS_MAX_DURATION_S,
            "voir": {"options": {"skip": 1, "stop": stop - 1, "interval": "1s"}},
            "group": "clip", "tags": ["clip"], "weight": 0,
            "metric": "total_time_secs", "plan": {"method": "njobs", "n": 1},
            "definition": {"command": ["python", "-m", "open_clip_train.main"],
                           "parser": "open_clip",
                           "prepare": "pytest_dlbench.workloads.clip:prepare_training"},
            "argv": {**clip, "--train-num-samples": CLIP_BATCH * stop,
                     "--dataset-type": "synthetic", "--dist-url": "env://",
                     "--name": "gpu-check", "--logs": "logs", "--log-every-n-steps": 1,
                     "--save-frequency": 0}},
    }
    return ("# Written by benchmarks/gpu_check.py: the paths no shipped run takes on a GPU; the\n"
            "# standard suite is included for its templates (-k selects the entries below).\n"
            + yaml.safe_dump(suite, sort_keys=False))


def paths_selection(names: Iterable[str] | None = None) -> str:
    """pytest's ``-k`` for exactly ``names`` (default: the run's; no standard entry holds one
    as a substring)."""
    return " or ".join(names if names is not None else (name for name, _ in PATHS))


def dropped(planned: Sequence[str], ran: Iterable[str]) -> list[str]:
    """The planned benchmarks a run did not reach (its time ran out first), in order."""
    seen = set(ran)
    return [name for name in planned if name not in seen]


# -- NVML's utilisation samples ----------------------------------------------------------------
PROBE_LOAD_S = 2.0
#: The last samples whose values the row prints.
PROBE_LAST = 6
#: NVML's sample timestamps are taken for UNIX microseconds when the newest lies this close to
#: the wall clock (a sample is at most a second or two old after a load of 2 s).
UNIX_WITHIN_S = 10.0
#: c_nvmlValue_t's field for each NVML_VALUE_TYPE_* (nvml.h).
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                 6: "usVal"}


def sample_value(sample: Any, value_type: int) -> float:
    value = sample.sampleValue
    return float(getattr(value, _VALUE_FIELDS.get(int(value_type), "uiVal")))


def nvml_probe(nvml: Any, handle: Any, load: Callable[[float], None],
               now: Callable[[], float] = time.time) -> dict[str, Any]:
    """Keep the GPU busy for PROBE_LOAD_S (``load``), then read NVML's buffered utilisation
    samples (``nvmlDeviceGetSamples``, every sample it holds): the median gap between their
    timestamps (NVML's sample period), the newest timestamp minus ``now()`` in microseconds
    (about zero when the timestamps are UNIX microseconds) and the last values."""
    load(PROBE_LOAD_S)
    value_type, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    read_at_us = now() * 1e6
    points = sorted((int(s.timeStamp), sample_value(s, value_type)) for s in samples)
    stamps = [t for t, _ in points]
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a]
    return {"samples": len(points),
            "period_us": statistics.median(gaps) if gaps else None,
            "newest_minus_now_us": stamps[-1] - read_at_us if stamps else None,
            "last_values": [v for _, v in points[-PROBE_LAST:]],
            "last_gaps_us": gaps[-(PROBE_LAST - 1):]}


def nvml_probe_row(result: Mapping[str, Any]) -> tuple[str, bool]:
    """The table's figure: ok when there are samples and their timestamps are UNIX
    microseconds; FAIL when they are not (the load over a scored window then picks the wrong
    samples)."""
    count, period = result.get("samples") or 0, result.get("period_us")
    offset = result.get("newest_minus_now_us")
    if not count or offset is None:
        return "NVML returned no utilisation sample", False
    values = ", ".join(f"{v:g}" for v in result.get("last_values") or [])
    gaps = ", ".join(f"{g / 1000:.0f}" for g in result.get("last_gaps_us") or [])
    unix = abs(offset) <= UNIX_WITHIN_S * 1e6
    figure = (f"period {'?' if period is None else f'{period / 1000:.1f} ms'} (median gap of "
              f"{count} samples; last gaps {gaps or '-'} ms); newest timestamp - time.time() = "
              f"{offset / 1e6:+.3f} s ({'UNIX microseconds' if unix else 'NOT UNIX microseconds'}"
              f"); last values {values} % after {PROBE_LOAD_S:g} s of load")
    return figure, unix


def gpu_load(seconds: float) -> None:
    """Matmuls on the first visible GPU for ``seconds`` (a sync every few, so the host does not
    queue minutes of work ahead of the clock)."""
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(5):
            a @ a  # noqa: B018 - the work itself
        torch.cuda.synchronize()


@dataclass
class FakeSample:
    timeStamp: int  # noqa: N815 - NVML's field name
    sampleValue: Any  # noqa: N815


@dataclass
class _UInt:
    uiVal: int  # noqa: N815


class FakeNvml:
    """What a dry run reads instead of NVML: samples every ``period_us`` up to now, in UNIX
    microseconds (``offset_us`` moves them: a test of another clock), busy during the load."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, period_us: int = 166_667, offset_us: int = 0,
                 now: Callable[[], float] = time.time) -> None:
        self.period_us, self.offset_us, self.now = period_us, offset_us, now

    def nvmlDeviceGetSamples(self, handle: Any, kind: int, since: int  # noqa: N802
                             ) -> tuple[int, list[FakeSample]]:
        newest = int(self.now() * 1e6) - self.period_us // 3 + self.offset_us
        stamps = [newest - i * self.period_us for i in reversed(range(40))]
        busy_from = newest - int(PROBE_LOAD_S * 1e6)
        return 1, [FakeSample(t, _UInt(100 if t >= busy_from else 0)) for t in stamps]


# -- one stream's row ---------------------------------------------------------------------------
_GIB = 2**30


def _gib(x: float | None) -> str:
    return "?" if x is None else f"{x / _GIB:.1f} GiB"


def stream_row(records: Sequence[Mapping[str, Any]], bench: Mapping[str, Any] | None
               ) -> tuple[str, bool | str]:
    """The load over the stream's scored window (its sample count), the suite's load check on
    it, the whole run's mean named as such, NVML's peak beside torch's reserved, TFLOP/s and MFU
    (``bench``: the benchmark in the run's summary) and energy."""
    from pytest_dlbench.measure.monitor.summary import summarize_telemetry, timed_window
    from pytest_dlbench.measure.records import RunRecords
    from pytest_dlbench.results.figures import check_usage

    run = RunRecords.of(records)
    config = run.first("config") or {}
    validation = (config.get("spec") or {}).get("validation")
    whole = summarize_telemetry(run)
    window = timed_window(run)
    parts = []
    if window is None:
        parts.append("no scored window")
    else:
        inside = summarize_telemetry(run, start=window[0], end=window[1])
        samples = sum(g.samples for g in inside.gpus)
        load = inside.mean_gpu_util
        parts.append(f"window {window[1] - window[0]:.2f} s: " + (
            f"load {load:.0f}% ({samples} samples)" if load is not None and samples
            else "no sample in the scored window"))
    usage = (validation or {}).get("usage") if isinstance(validation, Mapping) else None
    issues = check_usage(run, validation) if usage else []
    failed = [i for i in issues if i.level == "fail"]
    check = ("no load check set" if not usage else
             f"check FAIL: {failed[0].message}" if failed else
             f"check warn: {issues[0].message}" if issues else "check ok")
    parts.append(check)
    util = whole.mean_gpu_util
    parts.append(f"whole-run mean {'?' if util is None else f'{util:.1f}%'}")
    parts.append(f"peak NVML {_gib(whole.peak_gpu_mem_bytes)} / torch reserved "
                 f"{_gib(whole.torch_max_reserved_bytes)}")
    bench = bench or {}
    tflops, mfu = bench.get("tflops"), bench.get("mfu")
    if tflops is not None:
        parts.append(f"{tflops:,.1f} TFLOP/s, MFU "
                     + (f"{100 * mfu:.1f}%" if mfu is not None
                        else f"none ({bench.get('mfu_error') or 'no peak'})"))
    energy = whole.energy_j
    parts.append(f"{'?' if energy is None else f'{energy:.0f}'} J")
    if not whole.gpu:
        parts.append(f"no GPU telemetry: {whole.reason}")
    ok = whole.gpu and util is not None and energy is not None and energy > 0 and not failed
    return "; ".join(parts), ok


def window_check_row(records: Sequence[Mapping[str, Any]], minimum_s: float
                     ) -> tuple[str, bool]:
    """The load check on a scored window of at least ``minimum_s``: ok when the window is that
    long, holds samples and the suite's load check passed on it."""
    from pytest_dlbench.measure.monitor.summary import timed_window

    window = timed_window(records)
    figure, ok = stream_row(records, None)
    head = figure.split("; whole-run")[0]
    if window is None or window[1] - window[0] < minimum_s:
        return f"{head}; the window is under {minimum_s:g} s: size the benchmark longer", False
    return head, bool(ok) and "no sample" not in head and "check ok" in head


# -- what --copy-to receives --------------------------------------------------------------------
ARCHIVE = "gpu_check_runs.tar.gz"
#: Suffixes of what goes into the archive from a run directory (streams, logs, small results).
ARCHIVED_SUFFIXES = (".data", ".log", ".json", ".yaml", ".txt", ".csv")
ARCHIVE_FILE_LIMIT = 16 * 2**20
ARCHIVE_LIMIT = 40 * 2**20


def archive_members(out: Path, suites: Sequence[str]) -> list[Path]:
    """What the archive holds: each suite's log, summary and suite file, the workers' results
    and every stream and small file of the suites' run directories (each under 16 MiB)."""
    members = [p for suite in suites for p in (out / f"{suite}.log", out / f"{suite}.json",
                                              out / f"{suite}.yaml") if p.is_file()]
    members += sorted((out / "workers").glob("*.json")) if (out / "workers").is_dir() else []
    for suite in suites:
        runs = out / suite / "runs"
        if runs.is_dir():
            members += sorted(p for p in runs.rglob("*") if p.is_file()
                              and p.suffix in ARCHIVED_SUFFIXES
                              and p.stat().st_size <= ARCHIVE_FILE_LIMIT)
    return members


def write_archive(out: Path, target: Path, suites: Sequence[str]) -> int:
    """``target`` (a tar.gz), whole or not at all, its names relative to ``out``; files past
    ARCHIVE_LIMIT in all are left out. Returns how many files it holds."""
    buffer = io.BytesIO()
    total = count = 0
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in archive_members(out, suites):
            size = path.stat().st_size
            if total + size > ARCHIVE_LIMIT:
                continue
            tar.add(path, arcname=str(path.relative_to(out)))
            total, count = total + size, count + 1
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, target)
    return count
