"""One run of a benchmark (benchmark x device x repeat) as the results read it: its
:class:`RunResult` and the sums of its steps (:class:`StepStats`), and their saved form.

Filled by results/figures/scoring.py from a run's stream; gathered per benchmark in
results/model/summary.py.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from pytest_dlbench.core.protocol import Status
from pytest_dlbench.layout import item_name

__all__ = [
    "METRICS",
    "THROUGHPUT",
    "TOTAL_TIME",
    "Point",
    "Points",
    "RunResult",
    "StepStats",
    "optional_float",
    "saved_numbers",
]

Point = tuple[float, float]  # (time, value) of one observation


class Points(Sequence[Point]):
    """A run's observations as (time, value) pairs, kept in two arrays of doubles: 16 bytes an
    observation, whatever their number (a tuple of tuples took ten times that)."""

    __slots__ = ("_times", "_values")

    def __init__(self, pairs: Iterable[Point] = ()) -> None:
        self._times = array("d")
        self._values = array("d")
        for t, v in pairs:
            self._times.append(t)
            self._values.append(v)

    @classmethod
    def of_columns(cls, times: Iterable[float], values: Iterable[float]) -> Points:
        """The points of two columns of the same length."""
        points = cls()
        points._times, points._values = array("d", times), array("d", values)
        if len(points._times) != len(points._values):
            raise ValueError("times and values differ in length")
        return points

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, i: int) -> Point: ...

    @overload
    def __getitem__(self, i: slice) -> Points: ...

    def __getitem__(self, i: int | slice) -> Point | Points:
        if isinstance(i, slice):
            part = Points()
            part._times, part._values = self._times[i], self._values[i]
            return part
        return self._times[i], self._values[i]

    def __iter__(self) -> Iterator[Point]:
        return zip(self._times, self._values, strict=True)

    def values(self) -> array[float]:
        """The observations' values (a view of the column, not a copy: do not change it)."""
        return self._values

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Points):
            return self._times == other._times and self._values == other._values
        if isinstance(other, tuple | list):
            return len(self) == len(other) and all(
                a == tuple(b) for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((len(self), tuple(self._values[:8])))

    def __repr__(self) -> str:
        return f"Points({len(self)} observations)"

#: A benchmark's ``metric`` (docs/time-to-train.md): the steady-state throughput (the default),
#: or the time-to-train of MMoCLIP, ``total_time_secs`` (lower is better).
THROUGHPUT = "throughput"
TOTAL_TIME = "total_time_secs"
METRICS = (THROUGHPUT, TOTAL_TIME)


def optional_float(value: Any) -> float | None:
    """A saved number that may be null."""
    return None if value is None else float(value)


def saved_numbers(values: Iterable[Any] | None) -> tuple[float, ...]:
    """A saved list of numbers; the nulls a non-finite number was saved as are left out."""
    return tuple(float(x) for x in values or () if x is not None)


@dataclass(frozen=True)
class StepStats:
    """What a run's steps add up to, MMoCLIP's way: every observation with ``items`` and
    ``seconds`` in step order, the first one skipped (it includes the start-up).

    ``total_time_secs`` is the sum of those steps' seconds (a plain running sum, so it equals
    MMoCLIP's ``awk '{ sum += $1 }'`` to the last bit), ``items`` the sum of their items,
    ``throughput_avg`` the mean of their per-step rates and ``time_per_iteration`` their mean
    duration (the columns of MMoCLIP's result table). All None when the run has fewer than
    two timed steps, or steps without ``seconds`` (``log_rate`` observations).
    """

    steps: int = 0  # observations in the stream, the first included
    total_time_secs: float | None = None
    items: float | None = None
    throughput_avg: float | None = None
    time_per_iteration: float | None = None
    done_percent: float | None = None  # the last ``progress`` record, else steps / (skip+stop)

    @property
    def rate(self) -> float | None:
        """The equivalent throughput: items / total_time_secs."""
        if self.items is None or not self.total_time_secs:
            return None
        return self.items / self.total_time_secs

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "total_time_secs": self.total_time_secs,
            "items": self.items,
            "throughput_avg": self.throughput_avg,
            "time_per_iteration_secs": self.time_per_iteration,
            "done_percent": self.done_percent,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepStats:
        return cls(
            steps=int(data.get("steps") or 0),
            total_time_secs=optional_float(data.get("total_time_secs")),
            items=optional_float(data.get("items")),
            throughput_avg=optional_float(data.get("throughput_avg")),
            time_per_iteration=optional_float(data.get("time_per_iteration_secs")),
            done_percent=optional_float(data.get("done_percent")),
        )


@dataclass(frozen=True)
class RunResult:
    """One run (benchmark x device x repeat), as read from its stream."""

    bench: str
    device: int
    repeat: int | None
    status: Status  # the end record's status; OK only when the run succeeded
    reason: str
    units: str
    rate: float | None  # Σitems/Σseconds over the steady window; None when there is none
    block_rates: tuple[float, ...]
    steady: Sequence[Point]  # Points (a tuple where a test builds one)
    warmup: Sequence[Point]
    weight: float
    path: str | None
    # Not in the field list, but a benchmark's summary needs them and they live in the
    # same config record: the plan method decides ``total``, ``enabled`` the score.
    method: str = "per_gpu"
    enabled: bool = True
    # Peak GPU memory and process RSS, energy, mean GPU load (telemetry.telemetry_stats).
    telemetry: Mapping[str, Any] = field(default_factory=dict)
    # FLOPs of one item's forward and backward (the ``flops`` record), or why they are unknown.
    flops_per_item: float | None = None
    flops_reason: str = ""
    device_name: str | None = None  # from the meta record: which peak applies
    dtype: str = "fp32"  # the compute type the benchmark's arguments ask for
    # The config record's precision preset (None: not a built-in training workload) and
    # compile settings ({"mode", "backend"}; None: eager), the eager sibling's pairing key
    # (suite/presets.eager_key) and the ``compile`` records (results/figures/compiled.py).
    precision: str | None = None
    compile: Mapping[str, Any] | None = None
    variant: str | None = None
    compiled: Mapping[str, Any] = field(default_factory=dict)
    # ``file:line: ...`` for each line of the stream left out (corrupt, or of the wrong type).
    notes: tuple[str, ...] = ()
    # Time-to-train (docs/time-to-train.md): the metric, the steps' sums, the job's size and
    # the matrix combination the benchmark was generated from (the sweep table's columns).
    metric: str = THROUGHPUT
    timing: StepStats = field(default_factory=StepStats)
    world_size: int = 1
    #: the machines a multi-node job spanned (its ``config`` record's ``distributed.nnodes``)
    nnodes: int = 1
    matrix: Mapping[str, Any] = field(default_factory=dict)
    #: What the table and the report say under a run that passed: an external command that
    #: ended before its ``skip + stop`` observations (``warning`` records of source
    #: ``observations``, run/external.py)
    warnings: tuple[str, ...] = ()
    #: A voir benchmark (its ``command`` record's parser): its summary has milabench's perf
    voir: bool = False

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def median_rate(self) -> float | None:
        """The median of the steady steps' rates: a burst of load over fewer than half of the
        steps does not move it (paired comparisons, ``--bench-paired-rate=median``). A
        time-to-train run has its total time's rate: its figure is the whole run."""
        if self.metric == TOTAL_TIME or not self.steady:
            return self.rate
        return statistics.median(value for _, value in self.steady)

    @property
    def skipped(self) -> bool:
        """The benchmark skipped itself (it cannot run here): neither a success nor a failure."""
        return self.status is Status.SKIPPED

    @property
    def total_time_secs(self) -> float | None:
        return self.timing.total_time_secs

    @property
    def label(self) -> str:
        """``name[D0]`` / ``name[D0-R1]``, the pytest item id of the run."""
        return item_name(self.bench, self.device, self.repeat)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "repeat": self.repeat,
            "status": self.status,
            "reason": self.reason,
            "rate": self.rate,
            "block_rates": list(self.block_rates),
            "path": self.path,
            "telemetry": dict(self.telemetry),
            **({"compiled": dict(self.compiled)} if self.compiled else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"warnings": list(self.warnings)} if self.warnings else {}),
            **({"voir": True} if self.voir else {}),
            **({"nnodes": self.nnodes} if self.nnodes > 1 else {}),
            # Only for time-to-train runs: summaries of other runs keep their shape.
            **({"timing": self.timing.to_dict()} if self.metric == TOTAL_TIME else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], shared: Mapping[str, Any]) -> RunResult:
        """A saved run (checked: results/model/summary_json.py). ``shared``: what a run does not
        save but its benchmark does (name, units, weight, plan, metric, job size, precision). Its
        observations are not saved, only its rate and block rates."""
        repeat = data.get("repeat")
        return cls(
            device=int(data.get("device") or 0),
            repeat=None if repeat is None else int(repeat),
            status=Status.parse(data.get("status")),
            reason=str(data.get("reason") or ""),
            rate=optional_float(data.get("rate")),
            block_rates=saved_numbers(data.get("block_rates")),
            steady=(),
            warmup=(),
            path=data.get("path"),
            telemetry=dict(data.get("telemetry") or {}),
            compiled=dict(data.get("compiled") or {}),
            notes=tuple(data.get("notes") or ()),
            warnings=tuple(data.get("warnings") or ()),
            voir=bool(data.get("voir")),
            nnodes=int(data.get("nnodes") or 1),
            timing=StepStats.from_dict(data.get("timing") or {}),
            **shared,
        )
