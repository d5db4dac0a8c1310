"""The rate's ceiling: a rate that implies more items than the wall clock allows is an error of
measurement, never a figure (docs/figures.md).

Within one chain of the Bench's timer (measure/timing.py ``Timer``) a step's ``time`` is derived
from its ``seconds``, so nothing can be checked there. Across chains the wall clock is
independent: each chain's start is the host's ``wall_clock()``, taken after the window read that
ended the chain before. Over a run's steady records the wall-clock span must then be covered by
the timed seconds, up to the untimed gaps between windows (a sync and a window read: small). The
gap before the first step of an ``iterate`` call (its ``rate`` record says ``loop_start``) is
never held against the timer: making the iterator (a DataLoader's workers) and whatever the
benchmark does between calls (an epoch's end, an evaluation) is not the timer's to measure. A
timer that under-reports (CUDA events on a stream other than the work's, an event never waited
on, a clock in the wrong unit) leaves most of the span untimed and inflates the rate by that
factor.

The check is generous on purpose: each gap between chains is allowed :data:`READ_ALLOWANCE`
seconds first (a window read took 17 to 25 ms on a loaded 2-core CPU, after steps of 0.5 ms: a
microbenchmark's reads are not its timer's fault), and a run is flagged only when the rest makes
its rate more than :data:`FACTOR` times what the wall clock supports, over the judged span and in
the median window.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.numbers import DEFAULT_UNITS, is_finite, number
from pytest_dlbench.measure.rates import Rates
from pytest_dlbench.measure.stream import LOOP_START
from pytest_dlbench.suite.definitions import EXTERNAL_RUNNER, VOIR_RUNNER

__all__ = ["FACTOR", "RATE_ERROR", "READ_ALLOWANCE", "WallClockCheck", "timed_by_bench",
           "wall_clock_check"]

#: A reported rate more than this times what the wall clock supports is an error: the gaps
#: between windows (a sync, a read) are far below the windows' own time, so a healthy run's
#: factor is close to 1; 2 means half the span went untimed.
FACTOR = 2.0
#: Seconds of each gap between chains that are never held against the timer: a window read
#: (its sync, its records) on a loaded host, a garbage collection.
READ_ALLOWANCE = 0.1
#: The reason of a run whose rate is past the ceiling (results/figures/scoring.py fails it).
RATE_ERROR = "error of measurement"
#: Runners that time their steps themselves (``Bench.log_step``) and pause between them.
_SELF_TIMED = (EXTERNAL_RUNNER, VOIR_RUNNER)
# Within a chain, time[i] - seconds[i] differs from time[i-1] by a rounding or two; a gap wider
# than this many ulps of the time is a new chain.
_ULPS = 16


@dataclass(frozen=True)
class WallClockCheck:
    """A run's steady rate against its wall clock (:func:`wall_clock_check`)."""

    rate: float  # Σ items / Σ seconds: the rate the run reports
    supported: float  # Σ items / span: the rate the wall clock supports
    # seconds of wall clock from the first steady step's start to the last's end, less the gaps
    # before iterate calls (not the timer's)
    span: float
    # The same ratios with :data:`READ_ALLOWANCE` of each gap forgiven: the median window's
    # (timed seconds + the rest of its gap) / (timed seconds), and the whole span's.
    window_factor: float
    span_factor: float

    @property
    def factor(self) -> float:
        """How many times the wall clock's rate the reported one is."""
        return self.rate / self.supported if self.supported > 0 else math.inf

    @property
    def flagged(self) -> bool:
        """The rate is more than :data:`FACTOR` times what the wall clock supports, over the
        whole span and in the median window, each gap's allowance forgiven."""
        return self.span_factor > FACTOR and self.window_factor > FACTOR

    def reason(self, units: str = DEFAULT_UNITS) -> str:
        """The failed run's reason: the figures, so that the measurement is not lost."""
        return (f"{RATE_ERROR}: the rate ({number(self.rate)} {units}) is {self.factor:.3g} "
                f"times what the wall clock supports ({number(self.supported)} {units} over "
                f"{number(self.span)} s)")


def timed_by_bench(spec: Mapping[str, Any], commands: Sequence[Mapping[str, Any]] = ()) -> bool:
    """Whether a run's steps are timed by the Bench's timer: not an external command's or a
    voir run's (its ``definition``, or the ``command`` records their runners write), which
    report their own step times and pause for evaluation between them."""
    return (spec.get("definition") not in _SELF_TIMED and not spec.get("command")
            and not commands)


def _columns(steady: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Any, Any, Any, bool]]:
    """(time, seconds, items, starts an ``iterate`` call) of each record; straight from the
    columns of a :class:`Rates`."""
    if isinstance(steady, Rates):
        return zip(steady.numbers("time"), steady.numbers("seconds"), steady.numbers("items"),
                   steady.marked(LOOP_START), strict=True)
    return ((r.get("time"), r.get("seconds"), r.get("items"), bool(r.get(LOOP_START)))
            for r in steady)


def wall_clock_check(steady: Sequence[Mapping[str, Any]]) -> WallClockCheck | None:
    """The steady ``rate`` records (in stream order) of a run timed by the Bench, against the
    wall clock; None (no judgement) when a record lacks ``time``, ``seconds`` or ``items``,
    when the records span fewer than two chains, or when no chain holds two steps (each record
    timed on its own: ``log_step``, not the timer's windows)."""
    first = next(_columns(steady), None)
    if first is None or not all(map(is_finite, first[:3])):
        return None
    start = float(first[0]) - float(first[1])  # the first steady step's start
    chain_seconds, chain_steps, longest = 0.0, 0, 0
    factors: list[float] = []
    total_seconds = items = excess = forgiven = 0.0
    previous = start
    for time, seconds, count, loop_start in _columns(steady):
        if not (is_finite(time) and is_finite(seconds) and is_finite(count)):
            return None
        begin = float(time) - float(seconds)
        if abs(begin - previous) > _ULPS * math.ulp(previous) and chain_steps:
            # A new chain: its start is the wall clock's own, and the gap since the last step's
            # end was untimed (a read, or the part of the chain before that the timer missed);
            # before a new iterate call, the benchmark's own time (not judged).
            untimed = begin - previous
            if loop_start:
                forgiven += untimed
            else:
                rest = max(0.0, untimed - READ_ALLOWANCE)
                factors.append(_factor(chain_seconds + rest, chain_seconds))
                excess += rest
            longest = max(longest, chain_steps)
            chain_seconds, chain_steps = 0.0, 0
        chain_seconds += float(seconds)
        chain_steps += 1
        total_seconds += float(seconds)
        items += float(count)
        previous = float(time)
    longest = max(longest, chain_steps)
    span = previous - start - forgiven  # the wall clock the timer answers for
    if not factors or longest < 2 or total_seconds <= 0 or span <= 0:
        return None
    return WallClockCheck(rate=items / total_seconds, supported=items / span, span=span,
                          window_factor=statistics.median(factors),
                          span_factor=(total_seconds + excess) / total_seconds)


def _factor(wall: float, seconds: float) -> float:
    """A chain's wall clock (to the next chain's start, less the allowance) over its timed
    seconds."""
    return wall / seconds if seconds > 0 else math.inf
