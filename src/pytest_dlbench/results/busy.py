"""Whether a run was taken on a busy machine, from its monitor's samples: the CPU something
outside the run's process tree used at the same time (``system_cpu_percent / 100 x cores -
cpu_percent / 100``). A sample is busy at :data:`BUSY_CORES` outside cores above the run's own
quiet level (load that came and went), or above nothing when the run had every core; a run is
busy when :data:`BUSY_SHARE` of its timed window's samples are. It cannot see a neighbour that
uses no CPU the kernel counts (another VM's steal), nor a run too short for a sample (``busy``
is None: unknown). docs/reports.md, "A busy machine". Pure functions over records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.measure.monitor.summary import as_float, timed_window
from pytest_dlbench.measure.records import RunRecords

__all__ = ["BUSY_CORES", "BUSY_SHARE", "Busy", "busy_share", "busy_stats", "machine_busy",
           "outside_cores"]

#: Outside CPU (in cores) that makes a sample busy: half a core, far above what a quiet
#: machine's daemons use (a few percent of one core) and below a neighbour's burst (one core).
BUSY_CORES = 0.5
#: The share of the window's samples that must be busy: a 25 % duty cycle is 25 %; a single
#: stray sample in a long run (a cron job's second) is not.
BUSY_SHARE = 0.1


@dataclass(frozen=True)
class Busy:
    """What the monitor saw of the rest of the machine during a run's timed window."""

    busy: bool
    samples: int  # samples of the window with both CPU readings
    busy_share: float  # of those, the share taken while something else ran
    mean_outside: float  # cores used outside the run, on average
    reason: str  # one phrase when busy ("" when not)

    def to_dict(self) -> dict[str, Any]:
        """The run's telemetry keys (results/telemetry.py): saved with the summary."""
        return {"busy": self.busy, "busy_share": round(self.busy_share, 3),
                "outside_cpu_cores": round(self.mean_outside, 3),
                "busy_reason": self.reason or None}


def outside_cores(sample: Mapping[str, Any], cores: int) -> float | None:
    """The cores something outside the run's process tree used during one sample, None when
    the sample lacks a reading (the first one; psutil missing)."""
    system, tree = as_float(sample.get("system_cpu_percent")), as_float(sample.get("cpu_percent"))
    if system is None or tree is None or not (math.isfinite(system) and math.isfinite(tree)):
        return None
    return max(system / 100.0 * cores - tree / 100.0, 0.0)


def _lower_quartile(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 4]


def machine_busy(outside: Sequence[float], *, whole_machine: bool) -> Busy | None:
    """The verdict on the outside CPU of a window's samples (cores each); None without any.
    ``whole_machine``: the run's affinity was every core (no other slot of it ran beside)."""
    if not outside:
        return None
    quiet = _lower_quartile(outside)
    moved = sum(x - quiet >= BUSY_CORES for x in outside) / len(outside)
    shared = sum(x >= BUSY_CORES for x in outside) / len(outside) if whole_machine else 0.0
    share = max(moved, shared)
    mean = math.fsum(outside) / len(outside)
    reason = ""
    if share >= BUSY_SHARE:
        how = "came and went" if moved >= BUSY_SHARE else "ran all along"
        reason = (f"other processes used {mean:.2f} cores on average and {BUSY_CORES:g} or more "
                  f"in {share:.0%} of {len(outside)} samples ({how})")
    return Busy(bool(reason), len(outside), share, mean, reason)


def _cores(meta: Mapping[str, Any] | None) -> tuple[int | None, bool]:
    """(the machine's cores, whether the run's affinity covered all of them)."""
    state = (meta or {}).get("state") or {}
    cores = state.get("cores") if isinstance(state, Mapping) else None
    if not is_integer(cores) or cores < 1:
        return None, False
    cpus = (meta or {}).get("cpus")
    whole = not isinstance(cpus, list) or len(cpus) >= cores
    return cores, whole


def busy_stats(records: Iterable[Mapping[str, Any]] | RunRecords) -> dict[str, Any]:
    """A run's busy keys for its telemetry (:meth:`Busy.to_dict`); ``{}`` when unknown (no
    meta record with the cores, no sample with both readings in the window): a run of an older
    version, or one too short to be sampled, is never judged busy."""
    run = RunRecords.of(records)
    cores, whole = _cores(run.meta)
    window = timed_window(run)
    if cores is None or window is None:
        return {}
    start, end = window
    outside = []
    for sample in run.telemetry:
        t = as_float(sample.get("time"))
        value = outside_cores(sample, cores)
        if t is not None and value is not None and start <= t <= end:
            outside.append(value)
    result = machine_busy(outside, whole_machine=whole)
    return result.to_dict() if result is not None else {}


def busy_share(bench: Any) -> tuple[int, int, str]:
    """(runs taken on a busy machine, successful runs, why the first busy one was) of a
    benchmark's side (a results/summary.BenchSummary): the one count both modes' doubts read."""
    ok = [r for r in bench.runs if r.ok]
    busy = [r for r in ok if r.telemetry.get("busy")]
    why = busy[0].telemetry.get("busy_reason") if busy else None
    return len(busy), len(ok), str(why or "other processes used the CPU")
