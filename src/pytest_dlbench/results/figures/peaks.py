"""Peak throughput of known accelerators, for model FLOPs utilisation (MFU = achieved / peak).

Dense tensor-core peaks (no structured sparsity), in TFLOP/s, from the vendors' datasheets:
NVIDIA H100 (SXM5, PCIe and NVL), H200 (SXM and NVL), A100 (SXM4/PCIe), L40S; AMD Instinct
MI300X. The datasheets give tensor-core figures with 2:4 sparsity; the dense peak is half. A device
that is not in the table (and every CPU) takes its peak from the suite's own matmul benchmark
measured in the same run, when there is one: then MFU says how close the model gets to what this
machine's matrix multiply does, and the report says so.

A measured peak is taken from the matmul's fastest steps, not its mean (:func:`stable_peak`): on a
shared CPU its steps alternated 59 and 4.3 GFLOP/s (std% 100 %), and a model's MFU over that mean
read 73 %, 6 % and 39 % in three runs. What the machine can do is what its fastest steps did,
when enough of them agree; when they do not, there is no MFU, and the report says why.

A matmul slowed as a whole is no peak either, though its steps agree: one the monitor judged
taken on a busy machine (the run's telemetry ``busy``, results/figures/busy.py: a neighbour that
loaded the machine only while the matmul ran made it 60 times slower, and lm-tiny's usual figure
"an error of measurement"), or one far below the other benchmarks (most of two or more of them
above :data:`CEILING` times it). Then there is no MFU, the report says why, and the others'
figures stand: a slow reference never makes them errors.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_dlbench.core.numbers import printable
from pytest_dlbench.results.model.figures import figure
from pytest_dlbench.results.model.summary import BenchSummary

__all__ = ["CEILING", "CEILING_ERROR", "MFU_ERROR", "MIG_REASON", "PEAKS", "PEAK_AGREEMENT",
           "MeasuredPeak", "dtype_of", "flops_notes", "is_mig_slice", "no_mfu_reason",
           "stable_peak", "table_peak", "with_mfu"]

#: A model's TFLOP/s above this many times the matmul measured on the same machine is an error
#: of measurement (a model's large GEMMs may outrun a small matmul, never by half again).
CEILING = 1.5
#: What an MFU above 100 % is (of a datasheet's peak): never a figure to show.
MFU_ERROR = "MFU above 100 %: error of measurement"
#: A model's TFLOP/s above CEILING x this machine's measured matmul.
CEILING_ERROR = f"TFLOP/s above {CEILING:g} x this machine's matmul: error of measurement"
#: The matmul's fastest steps must agree within this ratio (slowest / fastest).
PEAK_AGREEMENT = 0.8
#: The fastest steps the peak is the median of.
PEAK_STEPS = 3

#: (name fragment, {dtype: dense TFLOP/s}); the first fragment found in the device name wins,
#: so the more specific names come first. fp8 is the datasheets' figure with sparsity halved
#: (the A100 has no fp8).
PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    # NVIDIA H100 PCIe datasheet
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}),
    # NVIDIA H100 NVL datasheet, per GPU ("NVIDIA H100 NVL", 94 GB): FP32 60, TF32 835 and
    # BF16/FP16 1,671 TFLOP/s with sparsity. Before "H100": it is no SXM part.
    ("H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}),
    # NVIDIA H200 NVL datasheet, per GPU ("NVIDIA H200 NVL"): the same figures as the H100 NVL.
    ("H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}),
    # NVIDIA H100 SXM5 datasheet ("NVIDIA H100 80GB HBM3")
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}),
    # NVIDIA H200 SXM datasheet (same compute as H100 SXM)
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}),
    # NVIDIA A100 datasheet (SXM4 and PCIe)
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    # NVIDIA L40S datasheet
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.1, "fp16": 362.1, "fp8": 733.0}),
    # AMD Instinct MI300X datasheet
    ("MI300X", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}),
)

# What the workloads' precision arguments compute in (tf32-fp16: fp16 autocast, tf32 matmuls).
_PRECISIONS = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
               "tf32-fp16": "fp16", "amp": "fp16", "fp8": "fp8"}
#: The arguments that name it, the first found wins.
_FLAGS = ("--precision", "--dtype")


def dtype_of(spec: Mapping[str, Any], precision: str | None = None) -> str:
    """The compute type of a benchmark: the ``config`` record's ``precision`` when it has one
    (what ran), else the ``--precision`` or ``--dtype`` of its ``argv`` (a mapping, or a list
    with ``--precision bf16`` or ``--precision=bf16``), else of its rendered ``args``; fp32 when
    none says."""
    for value in (precision, *_argv_values(spec.get("argv")), *_argv_values(spec.get("args"))):
        if isinstance(value, str) and value.lower() in _PRECISIONS:
            return _PRECISIONS[value.lower()]
    return "fp32"


def _argv_values(argv: Any) -> list[Any]:
    """The ``--precision`` then the ``--dtype`` value of an argv mapping or list (of a flag given
    twice, the last, as argparse takes it)."""
    if isinstance(argv, Mapping):
        return [argv.get(flag) for flag in _FLAGS]
    if not isinstance(argv, (list, tuple)):
        return []
    words = [str(a) for a in argv]
    given: dict[str, str] = {}
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in _FLAGS and (eq or i + 1 < len(words)):
            given[name] = value if eq else words[i + 1]
    return [given.get(flag) for flag in _FLAGS]


#: Why a benchmark on a MIG slice has no MFU: the datasheet's peak is the whole GPU's.
MIG_REASON = "MIG slice: no datasheet peak for a slice"


def is_mig_slice(device_name: str | None) -> bool:
    """A MIG instance, as torch and NVML name one ("NVIDIA A100-SXM4-40GB MIG 1g.5gb")."""
    return bool(device_name) and " MIG " in f" {device_name} "


def table_peak(device_name: str | None, dtype: str) -> float | None:
    """The datasheet peak of a known accelerator in TFLOP/s, else None (a MIG slice: None, the
    datasheet's figure is the whole GPU's)."""
    if not device_name or is_mig_slice(device_name):
        return None
    for fragment, peaks in PEAKS:
        # As a whole word: an "NVIDIA GH200" is no H200 (another part, its own datasheet).
        if re.search(rf"(?<![a-z0-9]){re.escape(fragment.lower())}(?![a-z0-9])",
                     device_name.lower()):
            return peaks.get(dtype)
    return None


@dataclass(frozen=True)
class MeasuredPeak:
    """A peak measured in this run (TFLOP/s per GPU), or None with ``source`` saying why not."""

    tflops: float | None
    source: str


def stable_peak(step_tflops: Sequence[float], name: str) -> MeasuredPeak:
    """The peak of a matmul benchmark ``name`` from its steady steps' TFLOP/s: the median of its
    :data:`PEAK_STEPS` fastest, when it has that many and they agree within
    :data:`PEAK_AGREEMENT` (one fast outlier is no peak); else no peak, and why."""
    steps = sorted((v for v in step_tflops if v > 0), reverse=True)
    top = steps[:PEAK_STEPS]
    if len(top) < PEAK_STEPS:
        return MeasuredPeak(None, f"{name} in this run has {len(steps)} steady steps, too few "
                                  f"for a peak: no MFU")
    if top[-1] < PEAK_AGREEMENT * top[0]:
        return MeasuredPeak(None, f"{name} in this run is too noisy for a peak (its fastest "
                                  f"{len(top)} steps span {top[-1]:.3g} to {top[0]:.3g} "
                                  f"TFLOP/s): no MFU")
    return MeasuredPeak(statistics.median(top), f"{name} in this run (median of its fastest "
                                                f"{len(top)} of {len(steps)} steps)")


def _measured_peaks(benches: tuple[BenchSummary, ...]) -> dict[str, MeasuredPeak]:
    """Per compute type, the peak of this run's matmul benchmarks (units TFLOP/s): the best
    stable one (:func:`stable_peak`) of its runs on a quiet machine, else an unstable or busy
    one, for its reason; none where the others' figures show it far too slow
    (:func:`_far_below`)."""
    out: dict[str, MeasuredPeak] = {}
    for b in benches:
        ok = [r for r in b.runs if r.ok]
        if b.units != "TFLOP/s" or not b.tflops or not ok or not b.perf:
            continue
        per_gpu = b.tflops / b.perf  # an njobs matmul's steps are the job's: one GPU's share
        quiet = [r for r in ok if not r.telemetry.get("busy")]
        if quiet:
            peak = stable_peak([v * per_gpu for r in quiet for _, v in r.steady], b.name)
        else:
            why = ok[0].telemetry.get("busy_reason") or "other processes used the CPU"
            peak = MeasuredPeak(None, f"{b.name} in this run was measured on a busy machine "
                                      f"({why}): no peak, no MFU")
        best = out.get(ok[0].dtype)
        if best is None or (peak.tflops or 0.0) > (best.tflops or 0.0):
            out[ok[0].dtype] = peak
    for dtype, peak in out.items():
        out[dtype] = _far_below(peak, dtype, benches)
    return out


def _far_below(peak: MeasuredPeak, dtype: str, benches: tuple[BenchSummary, ...]) -> MeasuredPeak:
    """``peak``, or none when most of the other benchmarks of its compute type (two or more)
    run above :data:`CEILING` times it: then the matmul was slowed (a busy machine the monitor
    missed), not every model miscounted; one model alone above it is that model's error."""
    if peak.tflops is None:
        return peak
    others = [b.tflops for b in benches
              if b.units != "TFLOP/s" and b.tflops and (ok := [r for r in b.runs if r.ok])
              and ok[0].dtype == dtype and not table_peak(ok[0].device_name, dtype)]
    above = [t for t in others if t > CEILING * peak.tflops]
    if len(others) < 2 or 2 * len(above) <= len(others):
        return peak
    name = peak.source.split(" in this run")[0]
    return MeasuredPeak(None, f"{name} in this run ({peak.tflops:.3g} TFLOP/s) is far below "
                              f"the other benchmarks ({len(above)} of {len(others)} above "
                              f"{CEILING:g} x it): no peak, no MFU")


def with_mfu(benches: tuple[BenchSummary, ...]) -> tuple[BenchSummary, ...]:
    """MFU = achieved TFLOP/s per GPU over one GPU's peak: a known accelerator's datasheet peak
    for the benchmark's compute type, else this run's matmul benchmark of the same type, from its
    fastest steps when they agree. A TFLOP/s above the datasheet's peak, or above
    :data:`CEILING` times the measured one, is an error of measurement: neither it nor the MFU
    is shown as a figure (``mfu_error`` says why)."""
    measured = _measured_peaks(benches)
    out = []
    for b in benches:
        ok = [r for r in b.runs if r.ok]
        if b.tflops is None or not ok:
            out.append(b)
            continue
        run = ok[0]
        if is_mig_slice(run.device_name) and run.dtype not in measured:
            out.append(replace(b, mfu=None, peak_source=MIG_REASON))
            continue
        peak = table_peak(run.device_name, run.dtype)
        if peak:
            source = f"{run.device_name} datasheet, {run.dtype}"
            if b.tflops > peak:
                out.append(_flops_error(b, f"{MFU_ERROR} ({b.tflops:.4g} TFLOP/s per GPU "
                                           f"against a peak of {peak:.4g}, {source})", source))
                continue
            out.append(replace(b, mfu=b.tflops / peak, peak_source=source))
            continue
        found = measured.get(run.dtype)
        if found is None or b.units == "TFLOP/s":  # a matmul is its own reference
            out.append(b)
        elif found.tflops is None:
            out.append(replace(b, mfu=None, peak_source=found.source))
        elif b.tflops > CEILING * found.tflops:
            out.append(_flops_error(b, f"{CEILING_ERROR} ({b.tflops:.4g} TFLOP/s per GPU "
                                       f"against {found.tflops:.4g}, {found.source})",
                                    found.source))
        elif b.tflops > found.tflops:
            # A small matmul is no peak for a model that outruns it: no MFU above 100 %.
            name = found.source.split(" in this run")[0]
            out.append(replace(b, mfu=None, peak_source=(
                f"{name} in this run is slower than this model: no MFU")))
        else:
            out.append(replace(b, mfu=b.tflops / found.tflops, peak_source=found.source))
    return tuple(out)


def no_mfu_reason(b: BenchSummary) -> str | None:
    """Why a benchmark whose TFLOP/s is shown has no MFU (None: it has one, or the TFLOP/s is
    not shown either): the peak's own reason (``peak_source``: a matmul too noisy for a peak),
    else that no peak is known for its device (:func:`with_mfu`). The reports only print it."""
    if b.mfu is not None or b.mfu_error or b.tflops is None:
        return None
    if b.peak_source:
        return str(b.peak_source)
    run = next((r for r in b.runs if r.ok), None)
    device = (run.device_name if run is not None else None) or "this device"
    dtype = run.dtype if run is not None else "fp32"
    if b.units == "TFLOP/s":
        return (f"no datasheet peak for {device} ({dtype}): a matmul benchmark is the peak of "
                "the others, not its own")
    return (f"no peak known for {device} ({dtype}): no datasheet peak "
            f"(results/figures/peaks.py) and no matmul benchmark of {dtype} in this run to "
            "measure one")


def flops_notes(benches: Sequence[BenchSummary]) -> list[str]:
    """Why a TFLOP/s or MFU cell has no figure, one line each (its FLOPs not counted, a figure
    past a ceiling, :func:`no_mfu_reason`'s, benchmarks of one reason on one line), when the
    tables have those columns (results/model/figures.py): the terminal prints them under its
    tables, the HTML page under its results table, in these words."""
    if not figure("tflops").shown(benches):
        return []
    out = [printable(f"FLOPs not counted: {b.name} ({b.flops_reason})")
           for b in benches if b.tflops is None and b.flops_reason]
    out += [printable(f"{'MFU' if b.tflops is not None else 'TFLOP/s and MFU'} not shown: "
                      f"{b.name} ({b.mfu_error})")
            for b in benches if b.mfu_error]
    by_reason: dict[str, list[str]] = {}
    for b in benches:
        why = no_mfu_reason(b)
        if why is not None:
            by_reason.setdefault(why, []).append(b.name)
    # An MFU of "-" is never left unexplained.
    out += [printable(f"MFU not shown: {', '.join(names)} ({why})")
            for why, names in by_reason.items()]
    return out


def _flops_error(b: BenchSummary, why: str, source: str) -> BenchSummary:
    """``b`` with its TFLOP/s and MFU withheld: past a physical ceiling, the FLOPs count or the
    rate is wrong (a miscounted item, a timing without synchronisation), never a figure."""
    return replace(b, tflops=None, mfu=None, peak_source=source, mfu_error=why)
