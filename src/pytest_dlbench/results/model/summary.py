"""The results' data model: one benchmark over its runs (:class:`BenchSummary`), a whole run
directory (:class:`SuiteSummary`), where a benchmark's noise comes from, and their saved form.

One run is results/model/run_result.py; the formulas that fill them are results/figures/scoring.py
(reference/scoring.md); the saved form's versions and types results/model/summary_json.py. Each type
owns its JSON: ``to_dict`` writes the current version, ``from_dict`` reads any version back
(migrated, types checked). No pytest, no torch.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.layout import ManifestEntry
from pytest_dlbench.results.model.run_result import (
    THROUGHPUT,
    TOTAL_TIME,
    RunResult,
    optional_float,
    saved_numbers,
)
from pytest_dlbench.results.model.summary_json import PROVENANCE, SCHEMA, VERSION, checked

__all__ = [
    "BenchSummary",
    "MilabenchScore",
    "SuiteSummary",
    "combine_stats",
    "noise_samples",
    "relative_spread",
    "spread",
    "torch_peaks",
]


# -- where a benchmark's noise comes from (reference/scoring.md) ------------------------------
def noise_samples(runs: Iterable[RunResult]) -> tuple[float, ...]:
    """What a benchmark's noise is estimated from: the successful runs' rates when there are
    two or more, else the single successful run's block rates (batch means of its window)."""
    ok = [r for r in runs if r.ok and r.rate is not None]
    if len(ok) >= 2:
        return tuple(r.rate for r in ok if r.rate is not None)
    return tuple(ok[0].block_rates) if ok else ()


def spread(samples: Sequence[float]) -> float:
    """The population standard deviation of the noise samples (0 with fewer than two)."""
    return statistics.pstdev(samples) if len(samples) >= 2 else 0.0


def relative_spread(std: float, mean: float) -> float | None:
    """std% (std / mean, within [0, 1]); None when the mean is not positive."""
    return min(max(std / mean, 0.0), 1.0) if mean > 0 else None


@dataclass(frozen=True)
class BenchSummary:
    """One benchmark over all its runs. ``perf``/``total``/``std``/``std_pct`` are None when no
    run succeeded (then ``perf_adj`` is 0); ``n`` is 0 for a benchmark that never ran."""

    name: str
    units: str
    weight: float
    n: int
    fail: int
    perf: float | None
    total: float | None
    std: float | None
    std_pct: float | None
    perf_adj: float
    per_device: dict[int, float]
    runs: tuple[RunResult, ...]
    method: str
    enabled: bool = True
    #: why the figure cannot be trusted (std% above UNRELIABLE_STD), else None
    unreliable: str | None = None
    #: achieved TFLOP/s per GPU (perf per GPU x FLOPs per item: an njobs job's rate over its
    #: world size), and its share of one GPU's peak
    tflops: float | None = None
    mfu: float | None = None
    peak_source: str | None = None  # where the peak came from (a datasheet, a matmul run)
    #: why the MFU is not shown although a peak is known: above 100 % is an error of measurement
    mfu_error: str | None = None
    flops_reason: str = ""  # why FLOPs are unknown, when they are
    metric: str = THROUGHPUT
    #: what ``std`` was computed from (:func:`noise_samples`): saved, and what the comparison's
    #: test reads of each side
    noise_samples: tuple[float, ...] = ()
    #: milabench's perf for a voir benchmark (results/figures/scoring.milabench_figure), beside
    #: ``perf``
    milabench_perf: float | None = None
    #: a baseline merged from several sessions (``dlbench baseline``): each session's run
    #: rates, from which the noise model estimates the drift between sessions; () for one
    #: session (its runs are ``rates``)
    session_rates: tuple[tuple[float, ...], ...] = ()

    @property
    def session_count(self) -> int:
        """How many sessions its figure comes from (1 unless merged: ``session_rates``)."""
        return max(len(self.session_rates), 1)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What its runs that passed warn of (too few observations), each once."""
        return tuple(dict.fromkeys(w for r in self.runs if r.ok for w in r.warnings))

    @property
    def lower_is_better(self) -> bool:
        """A time-to-train benchmark: its reported metric is a time (perf stays items/s)."""
        return self.metric == TOTAL_TIME

    def _ok_mean(self, values: Iterable[float | None]) -> float | None:
        kept = [v for v in values if v is not None]
        return statistics.fmean(kept) if kept else None

    @property
    def total_time_secs(self) -> float | None:
        """Mean ``total_time_secs`` of the successful runs (MMoCLIP's metric)."""
        return self._ok_mean(r.timing.total_time_secs for r in self.runs if r.ok)

    @property
    def throughput_avg(self) -> float | None:
        return self._ok_mean(r.timing.throughput_avg for r in self.runs if r.ok)

    @property
    def time_per_iteration(self) -> float | None:
        return self._ok_mean(r.timing.time_per_iteration for r in self.runs if r.ok)

    @property
    def done_percent(self) -> float | None:
        """The least done run's last ``done_percent`` (a sweep row is done when all its runs
        are)."""
        values = [r.timing.done_percent for r in self.runs if r.timing.done_percent is not None]
        return min(values) if values else None

    @property
    def nnodes(self) -> int:
        """The most machines one of its runs spanned (1: a single-node benchmark)."""
        return max((r.nnodes for r in self.runs), default=1)

    @property
    def world_size(self) -> int:
        """Ranks of an njobs job (1 for per_gpu runs, one device each)."""
        return max((r.world_size for r in self.runs), default=1)

    @property
    def perf_per_gpu(self) -> float | None:
        """``perf`` per device: an njobs job's rate over its ranks; a per_gpu run's rate is
        already per device."""
        if self.perf is None:
            return None
        return self.perf / self.world_size if self.method == "njobs" else self.perf

    @property
    def matrix(self) -> dict[str, Any]:
        """The matrix combination this benchmark was generated from ({} if none)."""
        return next((dict(r.matrix) for r in self.runs if r.matrix), {})

    @property
    def rates(self) -> tuple[float, ...]:
        """The successful runs' rates."""
        return tuple(r.rate for r in self.runs if r.ok and r.rate is not None)

    @property
    def noise_from(self) -> str | None:
        """``"runs"`` (the noise samples are run rates), ``"blocks"`` (one run's block rates),
        None when no run succeeded."""
        if len(self.rates) >= 2:
            return "runs"
        return "blocks" if any(r.ok for r in self.runs) else None

    def device_std_pct(self, device: int) -> float | None:
        """std% of one device's runs alone, by the benchmark's rule (:func:`noise_samples`)
        around that device's mean rate; None when none of them succeeded."""
        mean = self.per_device.get(device)
        if mean is None:
            return None
        runs = [r for r in self.runs if r.device == device]
        return relative_spread(spread(noise_samples(runs)), mean)

    @property
    def scored(self) -> bool:
        """Whether this benchmark enters the score (enabled, weighted, perf_adj > 0)."""
        return self.enabled and self.weight > 0 and self.perf_adj > 0

    @property
    def skipped(self) -> bool:
        """Every run of it skipped itself (e.g. a precision this hardware cannot do)."""
        return bool(self.runs) and all(r.skipped for r in self.runs)

    @property
    def precision(self) -> str | None:
        """The precision preset its runs recorded (None: none recorded)."""
        return next((r.precision for r in self.runs if r.precision), None)

    @property
    def compile(self) -> Mapping[str, Any] | None:
        """``{"mode", "backend"}`` when its runs were compiled, else None (eager)."""
        return next((r.compile for r in self.runs if r.compile), None)

    @property
    def variant(self) -> str | None:
        """The key it shares with its eager (or compiled) sibling."""
        return next((r.variant for r in self.runs if r.variant), None)

    @property
    def telemetry(self) -> dict[str, Any]:
        """Peak memory (GPU, process RSS), energy and mean GPU load over the runs."""
        return combine_stats(r.telemetry for r in self.runs)

    @property
    def manifest_entry(self) -> ManifestEntry:
        """This benchmark as a manifest entry: its order, weight and units kept when its runs
        are summarised again (confirmation runs added, sessions merged, rounds paired)."""
        return ManifestEntry(weight=self.weight, enabled=self.enabled, units=self.units,
                             metric=self.metric, plan={"method": self.method})

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "units": self.units,
            "weight": self.weight,
            "enabled": self.enabled,
            "method": self.method,
            "n": self.n,
            "fail": self.fail,
            "perf": self.perf,
            "total": self.total,
            "std": self.std,
            "std_pct": self.std_pct,
            "perf_adj": self.perf_adj,
            "unreliable": self.unreliable,
            "tflops": self.tflops,
            "mfu": self.mfu,
            "peak_source": self.peak_source,
            "mfu_error": self.mfu_error,
            # JSON keys are strings: from_dict makes them device numbers again.
            "per_device": {str(k): v for k, v in sorted(self.per_device.items())},
            "rates": list(self.rates),
            "samples": list(self.noise_samples),
            "telemetry": self.telemetry,
            **({"milabench_perf": self.milabench_perf}
               if self.milabench_perf is not None else {}),
            **({"precision": self.precision} if self.precision else {}),
            **({"compile": dict(self.compile)} if self.compile else {}),
            # A distributed job's size: an njobs perf per GPU divides by it, read back too.
            **({"world_size": self.world_size} if self.world_size > 1 else {}),
            **({"sessions": [list(s) for s in self.session_rates]}
               if len(self.session_rates) > 1 else {}),
            **self._time_to_train(),
            "runs": [r.to_dict() for r in self.runs],
        }

    def _time_to_train(self) -> dict[str, Any]:
        """The saved form of a time-to-train benchmark: its time, said to be lower-is-better
        (``perf`` and ``perf_adj`` are its equivalent throughput, as for every benchmark)."""
        if self.metric != TOTAL_TIME:
            return {}
        return {
            "metric": self.metric,
            "lower_is_better": True,
            "total_time_secs": self.total_time_secs,
            "throughput_avg": self.throughput_avg,
            "time_per_iteration_secs": self.time_per_iteration,
            "perf_per_gpu": self.perf_per_gpu,
            "world_size": self.world_size,
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> BenchSummary:
        """A saved benchmark (checked: results/model/summary_json.py), named by its key."""
        compiled = data.get("compile")
        shared: dict[str, Any] = {
            "bench": name,
            "units": str(data.get("units") or ""),
            "weight": float(data.get("weight") or 0.0),
            "method": str(data.get("method") or "per_gpu"),
            "enabled": bool(data.get("enabled", True)),
            "metric": str(data.get("metric") or THROUGHPUT),
            "precision": data.get("precision"),
            "compile": dict(compiled) if isinstance(compiled, Mapping) else None,
            "world_size": int(data.get("world_size") or 1),
        }
        runs = tuple(RunResult.from_dict(r, shared) for r in data.get("runs") or ())
        samples = data.get("samples")
        return cls(
            name=name,
            units=shared["units"],
            weight=shared["weight"],
            n=int(data["n"]),
            fail=int(data["fail"]),
            perf=optional_float(data.get("perf")),
            total=optional_float(data.get("total")),
            std=optional_float(data.get("std")),
            std_pct=optional_float(data.get("std_pct")),
            perf_adj=float(data.get("perf_adj") or 0.0),
            per_device={int(k): float(v) for k, v in (data.get("per_device") or {}).items()
                        if v is not None},
            runs=runs,
            method=shared["method"],
            enabled=shared["enabled"],
            unreliable=data.get("unreliable"),
            tflops=optional_float(data.get("tflops")),
            mfu=optional_float(data.get("mfu")),
            peak_source=data.get("peak_source"),
            mfu_error=data.get("mfu_error"),
            metric=shared["metric"],
            milabench_perf=optional_float(data.get("milabench_perf")),
            # Older files without samples: the rule applied to the saved runs.
            noise_samples=noise_samples(runs) if samples is None else saved_numbers(samples),
            session_rates=tuple(saved_numbers(s) for s in data.get("sessions") or ()),
        )


@dataclass(frozen=True)
class MilabenchScore:
    """milabench's score of a run (results/figures/milabench_score.py, ``--bench-score=milabench``):
    each benchmark's figure (None: it has no successful run, counted as 0), the suite's, and the
    weighted benchmarks of the suite this run did not select (counted as 0, as milabench counts
    them) with their weights."""

    score: float | None
    benchmarks: Mapping[str, float | None]
    left_out: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "benchmarks": dict(self.benchmarks),
                "left_out": dict(self.left_out)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MilabenchScore:
        return cls(optional_float(data.get("score")),
                   {str(k): optional_float(v) for k, v in (data.get("benchmarks") or {}).items()},
                   {str(k): float(v) for k, v in (data.get("left_out") or {}).items()})


@dataclass(frozen=True)
class SuiteSummary:
    """A whole run directory: every benchmark, the score and what kept it from being complete."""

    benchmarks: tuple[BenchSummary, ...]
    score: float | None
    incomplete: tuple[str, ...]
    failure_rate: float
    run_dir: str | None = None
    suite: str | None = None
    #: Where a saved summary was measured (``created``, ``machine``, ``versions``, ``commit``,
    #: what the file says, possibly nothing); None for a summary scored here, now.
    provenance: Mapping[str, Any] | None = None
    #: The suites' weighted benchmarks this run did not select (a ``-k``, ``-m`` or
    #: ``--bench-select`` subset: the manifest's ``suite_weighted``); () for the whole suite,
    #: or when the manifest does not say.
    left_out: tuple[str, ...] = ()
    #: milabench's score beside the seed's (milarun's perf_adj), when ``--bench-score=milabench``
    #: asked for it; None otherwise.
    milabench: MilabenchScore | None = None

    @property
    def subset(self) -> bool:
        """The score is a subset's: some weighted benchmark of the suites was not selected."""
        return bool(self.left_out)

    @property
    def weighted(self) -> tuple[str, ...]:
        """The weighted, enabled benchmarks this run selected: what its score is of (those
        that did not run or failed every run make it incomplete)."""
        return tuple(b.name for b in self.benchmarks if b.enabled and b.weight > 0)

    @property
    def suite_weighted_count(self) -> int:
        """How many weighted benchmarks the whole suite's score is of."""
        return len(self.weighted) + len(self.left_out)

    @property
    def runs(self) -> tuple[RunResult, ...]:
        return tuple(r for b in self.benchmarks for r in b.runs)

    @property
    def failed_runs(self) -> tuple[RunResult, ...]:
        return tuple(r for r in self.runs if not r.ok and not r.skipped)

    @property
    def skipped_runs(self) -> tuple[RunResult, ...]:
        """Runs that skipped themselves: in no count, no failure rate, no score."""
        return tuple(r for r in self.runs if r.skipped)

    @property
    def notes(self) -> tuple[str, ...]:
        """Lines of the streams left out (``file:line: ...``), every run's."""
        return tuple(note for r in self.runs for note in r.notes)

    def get(self, name: str) -> BenchSummary | None:
        return next((b for b in self.benchmarks if b.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The saved form, current version (JSON once layout.json_safe has replaced the
        non-finite numbers)."""
        return {
            "schema": SCHEMA,
            "version": VERSION,
            **dict(self.provenance or {}),
            "suite": self.suite,
            "run_dir": self.run_dir,
            "score": self.score,
            "incomplete": list(self.incomplete),
            "failure_rate": self.failure_rate,
            # A subset's score says so (``score`` stays: older readers, saved baselines).
            **({"subset": {"weighted": len(self.weighted), "of": self.suite_weighted_count,
                           "left_out": list(self.left_out)}} if self.subset else {}),
            # milabench's score, its own key: never the seed's ``score``.
            **({"milabench_score": self.milabench.to_dict()} if self.milabench else {}),
            "benchmarks": {b.name: b.to_dict() for b in self.benchmarks},
        }

    @classmethod
    def from_dict(cls, data: Any) -> SuiteSummary:
        """A saved summary of any version read back: migrated, its types checked.

        Raises :class:`~pytest_dlbench.results.model.summary_json.SummaryFormatError` (a
        ValueError), one line naming the key.
        """
        data = checked(data)
        failure_rate = data.get("failure_rate")
        subset = data.get("subset") or {}
        return cls(
            benchmarks=tuple(BenchSummary.from_dict(str(name), bench)
                             for name, bench in data["benchmarks"].items()),
            score=optional_float(data.get("score")),
            incomplete=tuple(data.get("incomplete") or ()),
            # Saved as null when it was not finite.
            failure_rate=math.nan if failure_rate is None else float(failure_rate),
            run_dir=data.get("run_dir"),
            suite=data.get("suite"),
            provenance={key: data[key] for key in PROVENANCE if key in data},
            left_out=tuple(subset.get("left_out") or ()),
            milabench=(MilabenchScore.from_dict(data["milabench_score"])
                       if isinstance(data.get("milabench_score"), Mapping) else None),
        )


# -- a benchmark's telemetry, from its runs' (results/figures/telemetry.py) ----------------------


def torch_peaks(allocated: float | None, reserved: float | None) -> dict[str, int]:
    """torch's peaks, only where known: a CPU run's stats stay as they were."""
    known = {"torch_max_allocated_bytes": allocated, "torch_max_reserved_bytes": reserved}
    return {key: int(value) for key, value in known.items() if value is not None}


def combine_stats(
    stats: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """One benchmark's numbers from its runs' ``telemetry_stats`` (results/figures/telemetry.py):
    the peaks (torch's too) are the largest run's, the energy is the sum (every replica and
    repeat drew it), the utilisation the mean of the runs that have one (none: the runs'
    reason, when one gave it), ``busy`` whether any run was taken on a busy machine. None
    where no run knows (torch's peaks: absent)."""
    stats = list(stats)

    def known(key: str) -> list[float]:
        return [float(v) for s in stats if (v := s.get(key)) is not None]

    gpu_mem, rss = known("peak_gpu_mem_bytes"), known("peak_rss_bytes")
    energy, util = known("energy_j"), known("mean_gpu_util")
    reasons = [str(r) for s in stats if (r := s.get("gpu_util_reason"))]
    busy = [bool(s["busy"]) for s in stats if s.get("busy") is not None]
    allocated, reserved = known("torch_max_allocated_bytes"), known("torch_max_reserved_bytes")
    return {
        "peak_gpu_mem_bytes": int(max(gpu_mem)) if gpu_mem else None,
        "peak_rss_bytes": int(max(rss)) if rss else None,
        "energy_j": sum(energy) if energy else None,
        "mean_gpu_util": sum(util) / len(util) if util else None,
        **({"gpu_util_reason": reasons[0]} if reasons and not util else {}),
        # The largest run's, as the device peak (what must fit on one device).
        **torch_peaks(max(allocated) if allocated else None,
                      max(reserved) if reserved else None),
        # Only when a run knows (results/figures/busy.py): older runs' telemetry stays as it was.
        **({"busy": any(busy)} if busy else {}),
    }
