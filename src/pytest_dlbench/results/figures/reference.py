"""milabench's published per-GPU figures as a verdict on the machine (``--bench-reference``).

milabench's sizer writes, for each GPU model, a benchmark's mean rate per GPU at each batch size
and worker count it ran (``config/scaling/<GPU>.yaml``: ``milabench/sizer.py``,
``push_observation``). ``milabench_reference.csv``, beside this module, holds those rows for the
benchmarks of the shipped ``milabench`` suite at milabench's default worker count, each with its
source file and line and the milabench commit (docs/milabench.md, "milabench's published
figures").

A benchmark is compared with a published figure only on the same configuration: a benchmark of
the shipped ``milabench`` suite whose recorded arguments are the suite's (the batch aside), on
the GPU model the figure is for, at the batch its steps ran. Its ratio below :data:`SLOW_BELOW`
calls it slow. Anything else gets one line saying why there is no ratio; a benchmark of another
name gets nothing.
"""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.numbers import fixed, number, printable, significant
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = [
    "FIGURES",
    "GPU_FILES",
    "SLOW_BELOW",
    "BenchReference",
    "PublishedFigure",
    "RunReference",
    "milabench_arguments",
    "nearest_published",
    "published_figures",
    "reference_lines",
    "run_reference",
    "scaling_file",
]

#: The data file: one published figure a row.
FIGURES = Path(__file__).with_name("milabench_reference.csv")
#: Below this share of the published figure a benchmark is slow: NVIDIA's DGX benchmarking
#: recipes validate a system at more than 95 % of their baseline (docs/milabench.md).
SLOW_BELOW = 0.95
#: The suite whose configuration the figures are for, as it ships.
SUITE = "milabench"
#: The one argument a run may change and still be compared: its batch is matched instead.
BATCH_FLAG = "--batch-size"

#: The device name a run's machine record gives -> milabench's scaling file. milabench's own
#: map (milabench/sizer.py, ``gpu_name_to_file``, lines 25-29) names three; H200.yaml is in no
#: map of milabench's (docs/Contributing/recipes.rst, lines 76-80, writes an H200's figures
#: there): the H200 SXM's name is the project's reading, and "NVIDIA H200 NVL" is not it.
GPU_FILES: dict[str, str] = {
    "AMD Instinct MI325 OAM": "MI325",
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA L40S": "L40S",
    "NVIDIA H200": "H200",
}


@dataclass(frozen=True)
class PublishedFigure:
    """One row of milabench's scaling files: ``items_per_s`` per GPU of ``benchmark`` on
    ``gpu`` (the file's name) at ``batch_size`` with ``workers`` (its ``cpu`` field: the value of
    ``auto({n_worker}, 8)``), read at ``source`` (file:line) at ``commit``."""

    gpu: str
    benchmark: str
    batch_size: int
    workers: int
    items_per_s: float
    source: str
    commit: str


@functools.lru_cache(maxsize=4)
def published_figures(path: Path = FIGURES) -> tuple[PublishedFigure, ...]:
    """Every row of the data file."""
    with open(path, newline="", encoding="utf-8") as f:
        return tuple(
            PublishedFigure(row["gpu"], row["benchmark"], int(row["batch_size"]),
                            int(row["workers"]), float(row["items_per_s"]), row["source"],
                            row["commit"])
            for row in csv.DictReader(f))


def scaling_file(device_name: str | None) -> str | None:
    """The scaling file of a device, by its exact name (as milabench looks it up), or None."""
    return GPU_FILES.get(device_name or "")


def _rate_text(value: float | None) -> str:
    """A rate as the reference lines write it: four significant digits (``3,378``, ``221.9``)."""
    return significant(value, 4, zeros=False)


def _figures(gpu: str, benchmark: str,
             figures: Sequence[PublishedFigure]) -> list[PublishedFigure]:
    return [f for f in figures if f.gpu == gpu and f.benchmark == benchmark]


def nearest_published(device_name: str, benchmark: str, batch: int,
                      figures: Sequence[PublishedFigure] | None = None) -> PublishedFigure | None:
    """The published figure of ``benchmark`` on this device at ``batch``, else at the published
    batch nearest to it (the smaller of two as near); None when the device or the benchmark has
    none, or the nearest batch has several figures (no single reference)."""
    gpu = scaling_file(device_name)
    if gpu is None:
        return None
    rows = _figures(gpu, benchmark, published_figures() if figures is None else figures)
    if not rows:
        return None
    best = min({r.batch_size for r in rows}, key=lambda b: (abs(b - batch), b))
    at = [r for r in rows if r.batch_size == best]
    return at[0] if len(at) == 1 else None


# -- what the run did ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Recorded:
    """What a benchmark's successful runs recorded: the device kind and name (``meta``), its
    arguments (``config``) and the items of its steady steps (``rate``)."""

    on_cpu: bool
    device_name: str | None
    argv: Any
    definition: Any
    batches: frozenset[float]


def _recorded(bench: BenchSummary) -> _Recorded | None:
    """Read from the streams of ``bench``'s successful runs; None without one."""
    on_cpu = False
    names: set[str] = set()
    batches: set[float] = set()
    argv = definition = None
    read = False
    for run in bench.runs:
        if not run.ok or not run.path:
            continue
        try:
            records = RunRecords.read(run.path)
        except (OSError, ValueError):  # scored before, gone or damaged since: not this run
            continue
        read = True
        for meta in records.kind(Event.META):
            device = str(meta.get("device") or "")
            on_cpu = on_cpu or device == "cpu" or device.startswith("cpu:")
            if meta.get("device_name"):
                names.add(str(meta["device_name"]))
        config = records.first(Event.CONFIG)
        if config is not None and argv is None:
            spec = config.get("spec") or {}
            argv, definition = spec.get("argv"), spec.get("definition")
        for items in records.steady.numbers("items", float("nan")):
            batches.add(float(items) if isinstance(items, (int, float)) else float("nan"))
    if not read:
        return None
    return _Recorded(on_cpu, next(iter(names)) if len(names) == 1 else None, argv, definition,
                     frozenset(batches))


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[str, tuple[Any, Any]]:
    """The shipped ``milabench`` suite: name -> (argv, definition) as a stream records them."""
    from pytest_dlbench.suite import locate
    from pytest_dlbench.suite.resolve import resolve_suite

    # The package's own suite (never one of the working directory's of the same name).
    package = Path(locate.__file__).resolve().parents[1]
    for folder in (package / locate.SUITE_DIR, package.parent.parent / locate.SUITE_DIR):
        path = folder / f"{SUITE}.yaml"
        if path.is_file():
            return {spec.name: _as_recorded(spec.to_dict())
                    for spec in resolve_suite(path).specs}
    return {}


def milabench_arguments(name: str) -> tuple[Any, Any] | None:
    """(argv, definition) of ``name`` in the shipped ``milabench`` suite, as a stream records
    them; None for a name it does not hold (benchmarks/gpu_check.py runs its resnet50-noio)."""
    return _shipped().get(name)


def _as_recorded(spec: Mapping[str, Any]) -> tuple[Any, Any]:
    """(argv, definition) as they read back from a stream's JSON."""
    return json.loads(json.dumps([spec.get("argv"), spec.get("definition")], default=str))


def _differences(argv: Any, shipped: Any) -> list[str] | None:
    """``--flag value`` for each argument of ``argv`` that differs from the suite's (the batch
    aside); None when ``argv`` is not a mapping (nothing to compare)."""
    if not isinstance(argv, Mapping) or not isinstance(shipped, Mapping):
        return None
    def shown(values: Mapping[str, Any], key: str) -> str:
        return repr(values[key]) if key in values else "absent"

    keys = sorted((set(argv) | set(shipped)) - {BATCH_FLAG})
    return [f"{key} {shown(argv, key)}, not {shown(shipped, key)}" for key in keys
            if key not in argv or key not in shipped or argv[key] != shipped[key]]


# -- the verdict ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchReference:
    """One benchmark of the ``milabench`` suite against milabench's published figure: the ratio
    of its rate per GPU to the figure, or why there is none (``reason``)."""

    bench: str
    batch: int | None = None
    rate: float | None = None
    units: str = ""
    figure: PublishedFigure | None = None
    reason: str = ""

    @property
    def ratio(self) -> float | None:
        if self.figure is None or self.rate is None or not self.figure.items_per_s:
            return None
        return self.rate / self.figure.items_per_s

    @property
    def slow(self) -> bool:
        """Below :data:`SLOW_BELOW` of milabench's figure."""
        return self.ratio is not None and self.ratio < SLOW_BELOW


@dataclass(frozen=True)
class RunReference:
    """The reference of a run: one line for the run when it has none (``reason``: on a CPU, no
    benchmark of the suite), else each benchmark's."""

    reason: str = ""
    benches: tuple[BenchReference, ...] = ()
    #: GPU models with no published figure, once each.
    unpublished_gpus: tuple[str, ...] = ()
    commit: str = ""


def _bench_reference(bench: BenchSummary, recorded: _Recorded, shipped: tuple[Any, Any],
                     figures: Sequence[PublishedFigure]) -> BenchReference | str:
    """The benchmark's reference, or the GPU model without a published figure (a string)."""
    name = bench.name
    argv, definition = shipped
    differs = _differences(recorded.argv, argv)
    if differs is None:
        return BenchReference(name, reason="its stream records no arguments to compare with "
                              "the milabench suite's: no ratio")
    if recorded.definition != definition:
        return BenchReference(name, reason=f"another workload ({recorded.definition}, not "
                              f"{definition}): not the milabench suite's configuration, no ratio")
    if differs:
        shown = "; ".join(differs[:3]) + (f"; {len(differs) - 3} more" if len(differs) > 3 else "")
        return BenchReference(name, reason=f"not the milabench suite's configuration ({shown}):"
                              " no ratio")
    gpu = scaling_file(recorded.device_name)
    if gpu is None:
        return recorded.device_name or "an unnamed device"
    rows = _figures(gpu, name, figures)
    if not rows:
        return BenchReference(name, reason=f"milabench published no figure of it for {gpu}")
    batches = recorded.batches
    if len(batches) != 1 or not float(next(iter(batches))).is_integer():
        shown = ", ".join(sorted(number(b) for b in batches)) or "none recorded"
        return BenchReference(name, reason=f"no single batch size in its steps ({shown}): "
                              "no ratio")
    batch = int(next(iter(batches)))
    rate, units = bench.perf_per_gpu, bench.units
    at = [r for r in rows if r.batch_size == batch]
    if not at:
        published = ", ".join(str(b) for b in sorted({r.batch_size for r in rows}))
        return BenchReference(name, batch, rate, units, reason=(
            f"milabench published none for {gpu} at batch {batch} (its batches: {published})"))
    if len(at) > 1:
        low, high = min(r.items_per_s for r in at), max(r.items_per_s for r in at)
        return BenchReference(name, batch, rate, units, reason=(
            f"milabench published {len(at)} figures for {gpu} at batch {batch} ({_rate_text(low)} "
            f"to {_rate_text(high)}): no single reference"))
    return BenchReference(name, batch, rate, units, figure=at[0])


def run_reference(summary: SuiteSummary,
                  figures: Sequence[PublishedFigure] | None = None) -> RunReference:
    """Each benchmark of the run named as one of the ``milabench`` suite's, against milabench's
    published figure for its GPU model, batch and configuration."""
    figures = published_figures() if figures is None else figures
    commit = next((f.commit for f in figures), "")
    shipped = _shipped()
    ours = [b for b in summary.benchmarks if b.name in shipped]  # the others: nothing to say
    if not ours:
        return RunReference(reason="no benchmark of the milabench suite in this run "
                            "(--bench-suite=milabench)", commit=commit)
    benches: list[BenchReference] = []
    unpublished: dict[str, None] = {}
    on_cpu = on_gpu = 0
    for bench in ours:
        recorded = _recorded(bench)
        if recorded is None:
            benches.append(BenchReference(bench.name, reason="no successful run: no ratio"))
            continue
        if recorded.on_cpu:  # said once for the run, below
            on_cpu += 1
            continue
        on_gpu += 1
        found = _bench_reference(bench, recorded, shipped[bench.name], figures)
        if isinstance(found, str):
            unpublished[found] = None
        else:
            benches.append(found)
    if on_cpu and not on_gpu:
        return RunReference(reason="none on a CPU: milabench publishes per-GPU figures only",
                            commit=commit)
    return RunReference(benches=tuple(benches), unpublished_gpus=tuple(unpublished),
                        commit=commit)


def _bench_line(ref: BenchReference) -> str:
    name = ref.bench + (f" bs{ref.batch}" if ref.batch is not None else "")
    if ref.figure is None:
        return f"  {name}: {ref.reason}"
    verdict = "slow" if ref.slow else "not slow"
    return (f"  {name}: {_rate_text(ref.rate)} {ref.units} per GPU = {fixed(ref.ratio, 3)} × "
            f"milabench's {_rate_text(ref.figure.items_per_s)} ({ref.figure.source}), {verdict}")


def reference_lines(summary: SuiteSummary,
                    figures: Sequence[PublishedFigure] | None = None) -> list[str]:
    """The terminal's lines for ``--bench-reference`` (report/evaluation.py shows them under
    the score): a title, then one line a benchmark of the suite, or one line for the run."""
    ref = run_reference(summary, figures)
    title = (f"milabench reference (milabench's published per-GPU figures, config/scaling at "
             f"{ref.commit[:7]}; slow: below {SLOW_BELOW:g} of its figure)")
    if ref.reason:
        return [printable(f"{title}: {ref.reason}")]
    lines = [title + ":"]
    lines += [_bench_line(b) for b in ref.benches]
    lines += [f"  milabench published no figure for {gpu} (its scaling files: "
              f"{', '.join(sorted(GPU_FILES))}): no ratio" for gpu in ref.unpublished_gpus]
    return [printable(line) for line in lines]

