"""Run streams to numbers: per run rate, per benchmark perf/std/perf_adj, the suite score.

Every formula is the one of ``reference/scoring.md`` (milarun's ``perf_adj`` and weighted
geometric mean, made precise). Pure functions over stream records: no pytest, no torch. The
types they fill are in results/model/run_result.py and results/model/summary.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple, replace
from itertools import chain
from os import PathLike
from typing import Any

from pytest_dlbench.core.numbers import (
    DEFAULT_UNITS,
    MAX_FIGURE,
    in_range,
    is_finite,
    is_integer,
    weighted_geomean,
)
from pytest_dlbench.core.protocol import Status
from pytest_dlbench.layout import (
    Manifest,
    ManifestEntry,
    parse_stream_name,
    read_manifest,
    stream_paths,
)
from pytest_dlbench.measure.rates import Rates
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event, RecordScan
from pytest_dlbench.results.figures.compiled import compile_summary
from pytest_dlbench.results.figures.peaks import dtype_of, with_mfu
from pytest_dlbench.results.figures.plausibility import timed_by_bench, wall_clock_check
from pytest_dlbench.results.figures.telemetry import telemetry_stats
from pytest_dlbench.results.model.run_result import (
    THROUGHPUT,
    TOTAL_TIME,
    Points,
    RunResult,
    StepStats,
)
from pytest_dlbench.results.model.summary import (
    BenchSummary,
    SuiteSummary,
    noise_samples,
    relative_spread,
    spread,
)
from pytest_dlbench.suite.logparsers import OBSERVATIONS, VOIR
from pytest_dlbench.suite.presets import eager_key

__all__ = [
    "BLOCKS",
    "block_rates",
    "load_run",
    "milabench_figure",
    "run_from_records",
    "step_stats",
    "summarize_bench",
    "summarize_dir",
    "summarize_runs",
]

#: Blocks of the steady-state window whose rates estimate a single run's noise (batch means).
BLOCKS = 5
#: A std% above this makes a benchmark's figure unreliable: flagged, with its likely cause.
UNRELIABLE_STD = 0.25
#: perf_adj never discounts more than this for variance: a run that passed never scores 0
#: because of its noise alone; the noise is flagged instead.
MAX_STD_PENALTY = 0.5
#: Fewer steady observations than this in a single run: blocks of fewer than 4 steps, flagged
#: as too few when its std% is unreliable (docs/figures.md, "std% and its blocks").
MIN_STEADY = 4 * BLOCKS
#: A block (or run) this far from the median of the others is a burst of load.
BURST = 0.5


# -- one run ----------------------------------------------------------------------------------
def _window_rate(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Σitems/Σseconds when every record has them; the mean of the values otherwise.

    ``log_rate`` observations (TFLOP/s measured by the benchmark) carry only a value.
    """
    if not records:
        return None
    if _all_timed(records):
        seconds = sum(map(float, _field(records, "seconds")))
        if seconds > 0:
            return sum(map(float, _field(records, "items"))) / seconds
    return _mean(float(v) for v in _field(records, "value") if is_finite(v))


def _field(records: Sequence[Mapping[str, Any]], name: str, default: Any = None) -> Iterator[Any]:
    """The field ``name`` of each record; of the rate records read by :func:`load_run`, straight
    from their columns (measure/rates.py), with no record rebuilt."""
    if isinstance(records, Rates):
        return records.numbers(name, default)
    return (r.get(name, default) for r in records)


def _all_timed(records: Sequence[Mapping[str, Any]]) -> bool:
    """Every record has finite ``items`` and ``seconds``."""
    return (all(map(is_finite, _field(records, "items")))
            and all(map(is_finite, _field(records, "seconds"))))


_SCALE = 2.0**-64


def _mean(values: Iterable[float]) -> float | None:
    """The mean of ``values`` read once (no list of them: a run may have millions); None for
    none."""
    count = 0

    def counted() -> Iterator[float]:
        nonlocal count
        for value in values:
            count += 1
            yield value

    # Summed at 2**-64 of their size: scaling by a power of two is exact, so the mean is the
    # same number to the last bit, and finite values whose sum is not (rates near 1e308) do
    # not overflow fsum.
    total = math.fsum(v * _SCALE for v in counted())
    return total / count / _SCALE if count else None


def block_rates(records: Sequence[Mapping[str, Any]], blocks: int = BLOCKS) -> tuple[float, ...]:
    """The rates of ``blocks`` consecutive blocks of the window, sizes differing by at most one
    and no observation dropped; with fewer observations than blocks, one block each (the rule,
    with an example: docs/figures.md, "std% and its blocks")."""
    k = min(blocks, len(records))
    if k == 0:
        return ()
    size, extra = divmod(len(records), k)
    out: list[float] = []
    start = 0
    for i in range(k):
        end = start + size + (1 if i < extra else 0)
        rate = _window_rate(records[start:end])
        if rate is not None:
            out.append(rate)
        start = end
    return tuple(out)


def step_stats(
    observations: Sequence[Mapping[str, Any]],
    *,
    done_percent: float | None = None,
    planned: int | None = None,
) -> StepStats:
    """Seed 004's sums over a run's ``rate`` records (in stream order, warm-up included).

    ``done_percent`` is the run's last ``progress`` value; without one, the share of the
    ``planned`` observations (skip + stop) the run made, at most 100.
    """
    n = len(observations)
    if done_percent is None and planned:
        done_percent = min(100.0, 100.0 * n / planned)
    counted = observations[1:]  # a view of the columns for a run read by load_run
    if not counted or not _all_timed(observations):
        return StepStats(steps=n, done_percent=done_percent)
    total = 0.0
    for seconds in _field(counted, "seconds"):  # in order, as awk does (not fsum): the same
        total += float(seconds)                 # number to the last bit
    items = 0.0
    for count in _field(counted, "items"):
        items += float(count)
    return StepStats(
        steps=n,
        total_time_secs=total,
        items=items,
        throughput_avg=_mean(float(v) for v in _field(counted, "value") if is_finite(v)),
        time_per_iteration=total / len(counted),
        done_percent=done_percent,
    )


def _job_size(value: object) -> int:
    """A distributed job's size read from a stream someone else wrote: a positive integer, else
    1 (a hand-edited ``"two"`` never stops the report)."""
    return value if is_integer(value) and value > 0 else 1


def run_from_records(
    records: Iterable[Mapping[str, Any]] | RunRecords, *, path: str | PathLike[str] | None = None
) -> RunResult:
    """Score one run's stream records (see docs/running.md for the events); ``records`` are
    parsed once (:class:`RunRecords`), a :class:`RunRecords` is read as is."""
    run = RunRecords.of(records)  # read twice: the scores, then the telemetry
    path_s = str(path) if path is not None else None
    bench, device, repeat = astuple(parse_stream_name(path_s))
    config: Mapping[str, Any] = run.last(Event.CONFIG) or {}
    spec: Mapping[str, Any] = config.get("spec") or {}
    world_size = nnodes = 1
    if config:
        device = int(config.get("device", device) or 0)
        repeat = config.get("repeat", repeat)
        distributed = config.get("distributed")
        if isinstance(distributed, Mapping):
            world_size = _job_size(distributed.get("world_size"))
            nnodes = _job_size(distributed.get("nnodes"))
    end = run.end  # the last one wins (the parent appends after a torn child)
    # Views of the rate records (measure/rates.py): never a list of a million dicts.
    steady, warmup, observations = run.steady, run.warmup, run.rates
    bad_loss = next((r for r in run.losses if not is_finite(r.get("value"))), None)
    flops: Mapping[str, Any] = run.flops or {}
    device_name = next((m["device_name"] for m in reversed(run.kind(Event.META))
                        if m.get("device_name")), None)
    progress = next((float(r["done_percent"]) for r in reversed(run.progress)
                     if is_finite(r.get("done_percent"))), None)
    compiles = run.compiles
    bench = str(spec.get("name") or bench)
    metric = str(spec.get("metric") or THROUGHPUT)
    planned = int(spec.get("skip") or 0) + int(spec.get("stop") or 0)
    timing = step_stats(observations, done_percent=progress, planned=planned or None)
    if metric == TOTAL_TIME:
        # Seed 004: every step but the first, whatever the warm-up; the score's throughput is
        # the equivalent one, items / total_time_secs (reference/scoring.md).
        rate = timing.rate
        blocks = block_rates(observations[1:]) if rate is not None else ()
    else:
        rate = _window_rate(steady)
        blocks = block_rates(steady)
    if end is None:
        status, reason = Status.FAIL, "incomplete stream (no end record)"
    else:
        status = Status.parse(end.get("status"))
        reason = str(end.get("reason") or "")
    # Success also needs a steady observation and finite losses (reference/scoring.md).
    if status is Status.OK and bad_loss is not None:
        status = Status.NAN
        reason = f"loss is {bad_loss.get('value')} at step {bad_loss.get('step')}"
    if status is Status.OK and rate is None:
        status, reason = Status.FAIL, (
            "no steady-state observation" if metric != TOTAL_TIME else
            f"time-to-train needs two timed steps or more (the first is skipped); "
            f"the run has {timing.steps}"
        )
    units = spec.get("units") or next((r.get("units") for r in chain(steady, warmup)), None)
    if status is Status.OK:
        huge = _beyond_range(rate, observations)
        if huge is not None:  # its figures would overflow the statistics: a failed run
            status, reason = Status.FAIL, (
                f"{huge} {units or DEFAULT_UNITS} is beyond what the statistics take (at most "
                f"{MAX_FIGURE:.0e} in magnitude)")
    if status is Status.OK and timed_by_bench(spec, run.kind(Event.COMMAND)):
        # A rate the wall clock cannot support is an error of measurement, never a figure:
        # the run fails, its stream and rate are kept, and the reason gives the figures.
        check = wall_clock_check(steady)
        if check is not None and check.flagged:
            status, reason = Status.FAIL, check.reason(str(units or DEFAULT_UNITS))
    plan = spec.get("plan") or {}
    compiled = config.get("compile")
    return RunResult(
        bench=bench,
        device=device,
        repeat=int(repeat) if repeat is not None else None,
        status=status,
        reason=reason,
        units=str(units or DEFAULT_UNITS),
        rate=rate,
        block_rates=blocks,
        steady=_points(steady),
        warmup=_points(warmup),
        weight=float(spec.get("weight") or 0.0),
        path=path_s,
        method=str(plan.get("method") or "per_gpu"),
        enabled=bool(spec.get("enabled", True)),
        telemetry=telemetry_stats(run),
        flops_per_item=_per_item(flops),
        flops_reason=str(flops.get("reason") or "") or _flops_problem(flops),
        device_name=str(device_name) if device_name else None,
        # The config record's precision is what ran; the arguments only when it has none.
        dtype=dtype_of(spec, config.get("precision")),
        precision=str(config["precision"]) if config.get("precision") else None,
        compile=dict(compiled) if isinstance(compiled, Mapping) else None,
        variant=eager_key(spec) if "precision" in config else None,
        compiled=compile_summary(compiles),
        metric=metric,
        timing=timing,
        world_size=world_size,
        nnodes=nnodes,
        matrix=dict(spec.get("matrix") or {}),
        warnings=tuple(str(r.get("message")) for r in run.warnings
                       if r.get("source") == OBSERVATIONS),
        voir=any(isinstance(c.get("parser"), Mapping) and c["parser"].get("name") == VOIR
                 for c in run.kind(Event.COMMAND)),
    )


def _beyond_range(rate: float | None, observations: Sequence[Mapping[str, Any]]) -> str | None:
    """What of a run's figures is finite but too large for the statistics (a rate of 1e308
    from ``bench.log_rate``, a step timed at 1e-306 s), said in a phrase; None when nothing is."""
    for i, value in enumerate(_field(observations, "value")):
        if is_finite(value) and not in_range(value):
            return f"step {i}'s rate {float(value):.3g}"
    if rate is not None and math.isfinite(rate) and not in_range(rate):
        return f"the rate {rate:.3g}"
    return None


def _points(records: Sequence[Mapping[str, Any]]) -> Points:
    """(time, value) of each observation (time 0 where a record has none)."""
    return Points.of_columns(map(float, _field(records, "time", 0.0)),
                             map(float, _field(records, "value")))


def _per_item(flops: Mapping[str, Any]) -> float | None:
    total, items = flops.get("flops"), flops.get("items")
    if in_range(total) and total >= 0 and in_range(items) and items > 0:
        return float(total) / float(items)
    return None


def _flops_problem(flops: Mapping[str, Any]) -> str:
    """Why a ``flops`` record's count is left out (infinite, or beyond what the statistics
    take: ``1e999``, a 401-digit integer), one phrase; "" when it is used or says nothing."""
    total, items = flops.get("flops"), flops.get("items")
    if total is None or _per_item(flops) is not None:
        return ""
    return (f"the flops record's count ({total!r} flops over {items!r} items) is not a finite "
            f"positive number up to {MAX_FIGURE:.0e}")


def load_run(path: str | PathLike[str]) -> RunResult:
    """Read and score one stream file, typed (measure/stream.RecordScan, line by line): a record
    of the wrong type is left out with a note; a stream damaged before its last line keeps its
    valid records (its measurements are shown) but is a failed run, whose reason names the
    first bad line."""
    scan = RecordScan(path)  # line by line; the rates kept by column (RunRecords.collect)
    try:
        records = RunRecords.collect(scan)
    except (OSError, ValueError) as exc:  # ValueError: not a regular file (core/untrusted.py)
        run = run_from_records([], path=path)
        return replace(run, status=Status.FAIL, reason=f"unreadable stream: {exc}")
    run = replace(run_from_records(records, path=path), notes=tuple(scan.notes))
    if scan.damaged is None:
        return run
    if run.ok:
        return replace(run, status=Status.FAIL, reason=f"corrupt stream: {scan.damaged}")
    return replace(run, reason=f"{run.reason} (corrupt stream: {scan.damaged})")


# -- one benchmark ----------------------------------------------------------------------------
def milabench_figure(rates: Iterable[float]) -> float | None:
    """milabench's perf of a benchmark (its summary's ``train_rate`` mean, the ``perf`` of its
    report; not its score: results/figures/milabench_score.py): every rate of its runs, warm-up
    included, pooled, the lowest and the highest dropped from 5 values on (milabench/summary.py,
    ``_metrics``), averaged. None without a rate. Ours is the steady window's items over
    seconds."""
    values = sorted(float(v) for v in rates if math.isfinite(v))
    if len(values) >= 5:
        values = values[1:-1]
    return statistics.fmean(values) if values else None


def summarize_bench(
    name: str, runs: Sequence[RunResult], entry: ManifestEntry | None = None
) -> BenchSummary:
    """perf, total, std, std%, perf_adj of one benchmark; ``entry`` is its manifest entry (what
    it does not say, the runs say)."""
    entry = entry or ManifestEntry()
    runs = tuple(sorted(runs, key=lambda r: (r.repeat or 0, r.device, r.path or "")))
    first = runs[0] if runs else None
    weight = entry.weight if entry.weight is not None else first.weight if first else 0.0
    weight = float(weight or 0.0)
    enabled = bool(entry.enabled if entry.enabled is not None else
                   first.enabled if first else True)
    method = str(entry.method or (first.method if first else "per_gpu"))
    units = str(entry.units or (first.units if first else None) or DEFAULT_UNITS)
    metric = str(entry.metric or (first.metric if first else None) or THROUGHPUT)
    ok = [r for r in runs if r.ok and r.rate is not None]
    # A run that skipped itself (it cannot run here) is neither measured nor failed.
    counted = [r for r in runs if not r.skipped]
    n, fail = len(counted), len(counted) - len(ok)
    rates = [r.rate for r in ok if r.rate is not None]  # every one of ``ok``, in order
    per_device: dict[int, list[float]] = {}
    for r, rate in zip(ok, rates, strict=True):
        per_device.setdefault(r.device, []).append(rate)
    device_means = {d: statistics.fmean(v) for d, v in sorted(per_device.items())}
    if not ok:
        return BenchSummary(name, units, weight, n, fail, None, None, None, None, 0.0,
                            device_means, runs, method, enabled, metric=metric)
    perf = statistics.fmean(rates)
    # njobs: rank 0 reports the job's global throughput, so total is the job's rate itself.
    total = sum(device_means.values()) if method == "per_gpu" else perf
    samples = noise_samples(ok)
    std = spread(samples)
    std_pct = relative_spread(std, perf)
    std_pct = 1.0 if std_pct is None else std_pct  # no positive rate: all noise
    perf_adj = perf * (1 - min(std_pct, MAX_STD_PENALTY)) * (1 - fail / n)
    per_item = next((r.flops_per_item for r in ok if r.flops_per_item), None)
    summary = BenchSummary(name, units, weight, n, fail, perf, total, std, std_pct, perf_adj,
                           device_means, runs, method, enabled, _unreliable(std_pct, ok, samples),
                           flops_reason=next((r.flops_reason for r in ok if r.flops_reason), ""),
                           metric=metric, noise_samples=samples)
    # TFLOP/s per GPU, to compare with one GPU's peak: an njobs job's rate is the whole job's.
    per_gpu = summary.perf_per_gpu or 0.0  # perf is known here: never None
    # A matmul benchmark measures TFLOP/s itself.
    return replace(summary, tflops=(per_gpu if units == "TFLOP/s" else
                                    per_gpu * per_item / 1e12 if per_item else None),
                   milabench_perf=milabench_figure(
                       v for r in ok if r.voir for _, v in (*r.warmup, *r.steady)))


def _unreliable(
    std_pct: float, ok: Sequence[RunResult], samples: Sequence[float]
) -> str | None:
    """Why a benchmark's noise makes its figure untrustworthy, or None when it does not.
    ``samples``: its noise samples (run rates, or the single run's block rates)."""
    if std_pct <= UNRELIABLE_STD:
        return None
    causes = []
    single = len(ok) == 1
    steady = len(ok[0].steady) if single else None
    if steady is not None and steady < MIN_STEADY:
        causes.append(f"too few observations ({steady} steady)")
    if len(samples) >= 3:
        middle = statistics.median(samples)
        worst = max(samples, key=lambda x: abs(x - middle))
        if middle > 0 and abs(worst - middle) / middle > BURST:
            what = "block" if single else "run"
            causes.append(f"a burst of load (one {what} at {worst / middle:.0%} of the median)")
    return f"std% {std_pct:.0%}: " + (", ".join(causes) or "noisy steps")


# -- the suite --------------------------------------------------------------------------------
def summarize_runs(
    runs: Iterable[RunResult],
    manifest: Manifest | Mapping[str, Any] | None = None,
    *,
    run_dir: str | None = None,
) -> SuiteSummary:
    """Group runs by benchmark and score the suite.

    With a ``manifest`` (layout.Manifest, or a mapping read as its file: ``{"suite": ...,
    "benchmarks": {name: {weight, enabled, ...}}}``), its benchmarks come first in its order,
    its weights win, and a listed benchmark with no run is kept (``n == 0``) and, when
    weighted, makes the score incomplete.
    """
    manifest = Manifest.of(manifest)
    entries = manifest.benchmarks
    by_bench: dict[str, list[RunResult]] = {}
    for run in runs:
        by_bench.setdefault(run.bench, []).append(run)
    names = list(entries) + sorted(n for n in by_bench if n not in entries)
    benches = tuple(summarize_bench(n, by_bench.get(n, ()), entries.get(n)) for n in names)
    score = weighted_geomean((b.perf_adj, b.weight) for b in benches if b.scored)
    benches = with_mfu(benches)  # last: MFU takes the run's matmul, and no score reads it
    # Weighted and enabled but not in the score: never ran, every run failed, or perf_adj 0.
    incomplete = tuple(b.name for b in benches if b.enabled and b.weight > 0 and not b.scored)
    n_runs = sum(b.n for b in benches)
    failed = sum(b.fail for b in benches)
    # The suites' weighted benchmarks not selected (-k, -m, --bench-select): a subset's score.
    # Never incomplete for it: it was not asked for.
    suite_weighted = manifest.suite_weighted or ()
    return SuiteSummary(
        benchmarks=benches,
        score=score,
        incomplete=incomplete,
        failure_rate=failed / n_runs if n_runs else 0.0,
        run_dir=run_dir,
        suite=manifest.suite,
        left_out=tuple(dict.fromkeys(str(n) for n in suite_weighted if n not in names)),
    )


def summarize_dir(run_dir: str | PathLike[str]) -> SuiteSummary:
    """Score every stream of a run directory (and its manifest, when there is one)."""
    manifest, paths = read_manifest(run_dir), stream_paths(run_dir)
    return summarize_runs([load_run(p) for p in paths], manifest, run_dir=str(run_dir))

