"""Whether a run was taken on a busy machine, from its monitor's samples: the CPU something
outside the run's process tree used at the same time (``system_cpu_percent / 100 x cores -
cpu_percent / 100``). A sample is busy at :data:`BUSY_CORES` outside cores above the run's own
quiet level (load that came and went), or above nothing when the run had every core; a run is
busy when :data:`BUSY_SHARE` of its timed window's samples are.

With several device slots at once (xdist workers, each pinned to its slot's cores), the other
slots' benchmarks are not a neighbour, yet they are outside the run's tree: judged as above,
a neighbour that ran all along hid in the run's quiet level beside them. The monitor then also
samples the CPU of the whole session (``session_cpu_percent``: the pytest process at its root
and all its descendants, every slot's benchmarks) and records the slots' cores
(``session_cpus`` in its ``monitor`` record). Outside is then what the machine used beyond the
session (``system_cpu_percent / 100 x cores - session_cpu_percent / 100``), and a sample is busy
at :data:`BUSY_CORES` above the session's quiet level, or above the cores the slots leave idle
(those of no slot: ``cores - len(session_cpus)``): CPU beyond them can only have run on the
slots' own cores, whatever the other slots ran. Two one-core slots on two cores leave none, so
half a core of steady outside load is busy. A stream without those fields (one slot, or a run
of an older version) is judged by its own tree as before.

It cannot see a neighbour that uses no CPU the kernel counts (another VM's steal), nor a run
too short for a sample (``busy`` is None: unknown). docs/reports.md, "A busy machine". Pure
functions over records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.measure.monitor.summary import as_float, timed_window
from pytest_dlbench.measure.records import RunRecords

__all__ = ["BUSY_CORES", "BUSY_SHARE", "Busy", "busy_note", "busy_share", "busy_stats",
           "machine_busy", "outside_cores", "outside_session_cores"]

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
        """The run's telemetry keys (results/figures/telemetry.py): saved with the summary."""
        return {"busy": self.busy, "busy_share": round(self.busy_share, 3),
                "outside_cpu_cores": round(self.mean_outside, 3),
                "busy_reason": self.reason or None}


def _outside(sample: Mapping[str, Any], cores: int, own: str) -> float | None:
    system, tree = as_float(sample.get("system_cpu_percent")), as_float(sample.get(own))
    if system is None or tree is None or not (math.isfinite(system) and math.isfinite(tree)):
        return None
    return max(system / 100.0 * cores - tree / 100.0, 0.0)


def outside_cores(sample: Mapping[str, Any], cores: int) -> float | None:
    """The cores something outside the run's process tree used during one sample, None when
    the sample lacks a reading (the first one; psutil missing)."""
    return _outside(sample, cores, "cpu_percent")


def outside_session_cores(sample: Mapping[str, Any], cores: int) -> float | None:
    """The cores something outside the session's processes (every slot's) used during one
    sample, None when the sample lacks a reading (one slot, an older stream: no session's)."""
    return _outside(sample, cores, "session_cpu_percent")


def _lower_quartile(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 4]


def machine_busy(outside: Sequence[float], *, whole_machine: bool,
                 idle: float = 0.0) -> Busy | None:
    """The verdict on the outside CPU of a window's samples (cores each); None without any.
    ``whole_machine``: no other slot's load is in ``outside`` (the run's affinity was every
    core, or ``outside`` leaves out every slot's processes); its samples are then busy at
    :data:`BUSY_CORES` beyond ``idle``, the cores no slot was pinned to."""
    if not outside:
        return None
    quiet = _lower_quartile(outside)
    moved = sum(x - quiet >= BUSY_CORES for x in outside) / len(outside)
    level = idle + BUSY_CORES
    shared = sum(x >= level for x in outside) / len(outside) if whole_machine else 0.0
    share = max(moved, shared)
    mean = math.fsum(outside) / len(outside)
    reason = ""
    if share >= BUSY_SHARE:
        came = moved >= BUSY_SHARE
        above = BUSY_CORES if came else level
        reason = (f"other processes used {mean:.2f} cores on average and {above:g} or more "
                  f"in {share:.0%} of {len(outside)} samples "
                  f"({'came and went' if came else 'ran all along'})")
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


def _slot_cores(monitor: Mapping[str, Any] | None, cores: int) -> int | None:
    """How many of the machine's cores the session's slots were pinned to (the ``monitor``
    record's ``session_cpus``); None when the run was not one of several slots at once."""
    cpus = (monitor or {}).get("session_cpus")
    if not isinstance(cpus, list) or not cpus or not all(is_integer(c) for c in cpus):
        return None
    return min(len(set(cpus)), cores)


def busy_stats(records: Iterable[Mapping[str, Any]] | RunRecords) -> dict[str, Any]:
    """A run's busy keys for its telemetry (:meth:`Busy.to_dict`); ``{}`` when unknown (no
    meta record with the cores, no sample with both readings in the window): a run of an older
    version, or one too short to be sampled, is never judged busy. A run of several slots at
    once is judged on the CPU outside the whole session, when its samples have it (module
    docstring)."""
    run = RunRecords.of(records)
    cores, whole = _cores(run.meta)
    window = timed_window(run)
    if cores is None or window is None:
        return {}
    start, end = window
    samples = [s for s in run.telemetry
               if (t := as_float(s.get("time"))) is not None and start <= t <= end]
    slots = _slot_cores(run.monitor, cores)
    result = None
    if slots is not None:
        outside = [v for s in samples if (v := outside_session_cores(s, cores)) is not None]
        result = machine_busy(outside, whole_machine=True, idle=float(cores - slots))
    if result is None:  # one slot, an older stream, or no session reading in the window
        outside = [v for s in samples if (v := outside_cores(s, cores)) is not None]
        result = machine_busy(outside, whole_machine=whole)
    return result.to_dict() if result is not None else {}


def busy_share(bench: Any) -> tuple[int, int, str]:
    """(runs taken on a busy machine, successful runs, why the first busy one was) of a
    benchmark's side (a results/model/summary.BenchSummary): the one count both modes' doubts
    read."""
    ok = [r for r in bench.runs if r.ok]
    busy = [r for r in ok if r.telemetry.get("busy")]
    why = busy[0].telemetry.get("busy_reason") if busy else None
    return len(busy), len(ok), str(why or "other processes used the CPU")


def busy_note(bench: Any) -> str | None:
    """Why a benchmark's figures measure the machine's load as well as its code: some of its
    runs were taken while other processes used the CPU (:func:`busy_share`, the count the
    gate's doubts read), the words every report prints, in a plain run too; None when no run
    was busy."""
    busy, ok, why = busy_share(bench)
    if not busy:
        return None
    return (f"{busy} of {ok} run{'s' if ok != 1 else ''} while {why}: its figures measure this "
            "machine's load as well as the code")
