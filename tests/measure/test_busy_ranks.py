"""A multi-rank job is not "busy" because of its own ranks (issue 37, item 4).

The monitor runs in the reporting rank; the other ranks of its node are the torchrun agent's
children, not the rank's. The process tree is rooted at the run's furthest ancestor carrying
the run's marker (``DLBENCH_STREAM``), so they are the run's CPU, and only what is outside the
run is "outside". Fake processes here (a fake psutil); a real two-rank job in the slow test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _fake_psutil import FakePsutil
from _paths import REPO_ROOT

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.monitor.process import ProcessTree
from pytest_dlbench.results.figures import BUSY_CORES, machine_busy, outside_cores

CORES = 2
STREAM = "/runs/r1/ddp.scaling.2.D0.data"


class FakeMachine(FakePsutil):
    """psutil over fake processes: a worker, the torchrun agent it started (marked), two ranks
    (marked), and a neighbour outside the run."""

    def __init__(self) -> None:
        super().__init__()
        marked = {Env.STREAM: STREAM}
        self.worker = self.add(None)
        self.agent = self.add(self.worker, marked)
        self.rank0 = self.add(self.agent, marked)
        self.rank1 = self.add(self.agent, marked)
        self.neighbour = self.add(None)

    def cpu_percent(self, interval: float | None) -> float:
        """The machine's CPU: the sum of every process's, over all cores."""
        return sum(p.cpu for p in self.procs) / CORES


def sample_outside(machine: FakeMachine, tree: ProcessTree, loads: list[tuple[float, ...]],
                   monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Outside cores of one sample per (rank0, rank1, neighbour) load, in percent of a core."""
    # From the real clock on: the tree noted its first CPU reading's time when it was made,
    # and a fake clock behind that would read no CPU at all (on a machine up for long enough).
    clock = [time.monotonic()]
    monkeypatch.setattr("pytest_dlbench.measure.monitor.process.time.monotonic",
                        lambda: clock[0])
    tree.prime_system()
    out = []
    for rank0, rank1, neighbour in loads:
        machine.rank0.cpu, machine.rank1.cpu, machine.neighbour.cpu = rank0, rank1, neighbour
        clock[0] += 1.0
        value = outside_cores(tree.sample(), CORES)
        assert value is not None
        out.append(value)
    return out


#: Two ranks on two cores: rank 1 waits in its all-reduce a third of the time, then works.
RANKS = [(100.0, 100.0 if k % 3 else 30.0, 0.0) for k in range(12)]


def test_the_tree_is_rooted_at_the_runs_furthest_marked_ancestor() -> None:
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.rank0.pid, marker=STREAM)
    assert tree.root is machine.agent  # not the rank, not the unmarked worker above
    assert ProcessTree(machine, machine.rank0.pid, marker="another run").root is machine.rank0


def test_the_other_rank_is_the_runs_cpu_not_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.rank0.pid, marker=STREAM)
    outside = sample_outside(machine, tree, RANKS, monkeypatch)
    assert max(outside) < BUSY_CORES / 10  # all of the machine's CPU was the run's
    verdict = machine_busy(outside, whole_machine=False)
    assert verdict is not None and not verdict.busy


def test_the_tree_of_the_rank_alone_saw_its_sibling_as_a_neighbour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the monitor saw before: the rank's own tree (no marker), its sibling's changing
    load outside, judged busy. The reference for the fix above."""
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.rank0.pid, marker="")
    verdict = machine_busy(sample_outside(machine, tree, RANKS, monkeypatch),
                           whole_machine=False)
    assert verdict is not None and verdict.busy


@pytest.mark.parametrize(("marker", "busy"), [(STREAM, False), ("", True)],
                         ids=["the-run", "the-rank-alone"])
def test_an_unpinned_rank_on_a_gpu_node_is_busy_only_with_its_siblings_outside(
    monkeypatch: pytest.MonkeyPatch, marker: str, busy: bool
) -> None:
    """Rank 0's affinity is the whole machine (no other slot can be outside): the siblings'
    steady core, seen as outside, made every sample busy ("ran all along")."""
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.rank0.pid, marker=marker)
    steady = [(100.0, 100.0, 0.0)] * 12
    verdict = machine_busy(sample_outside(machine, tree, steady, monkeypatch), whole_machine=True)
    assert verdict is not None and verdict.busy is busy


def test_a_real_neighbour_is_still_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = FakeMachine()
    tree = ProcessTree(machine, machine.rank0.pid, marker=STREAM)
    # The neighbour takes a core a quarter of the time (the ranks get less then).
    loads = [(50.0, 50.0, 100.0) if k % 4 == 0 else (100.0, 100.0, 0.0) for k in range(12)]
    outside = sample_outside(machine, tree, loads, monkeypatch)
    assert outside.count(1.0) == 3
    verdict = machine_busy(outside, whole_machine=False)
    assert verdict is not None and verdict.busy


# -- a real two-rank job -------------------------------------------------------------------------

SUITE = REPO_ROOT / "bench_suites" / "scaling.yaml"


@pytest.mark.slow
def test_ddp_scaling_2_on_two_cpu_slots_counts_both_ranks_as_its_own(tmp_path: Path) -> None:
    from pytest_dlbench.measure.records import RunRecords
    from pytest_dlbench.measure.stream import read_stream
    from pytest_dlbench.results.figures import busy_stats

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two CPU slots need two cores")
    # Two slots of one core each without xdist (run/devices.py's plan_slots): the job's ranks
    # are what this is about, not xdist workers, which would only add two idle interpreters.
    cmd = [sys.executable, "-m", "pytest", f"--bench-suite={SUITE}", "-k", "ddp.scaling.2",
           "--bench-cpus-per-slot=1", "-p", "no:cacheprovider", "-q"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    streams = sorted(tmp_path.glob(".dlbench/runs/*/ddp.scaling.2.D0.data"))
    assert streams, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = RunRecords.of(read_stream(streams[-1]))
    # The tree held the run: the torchrun agent and both ranks (rank 0 alone before: 1).
    procs = [s.get("procs") for s in run.telemetry if s.get("procs")]
    assert procs and max(procs) >= 3, procs
    # Judged, and on its own tree: whether it reads busy depends on the machine's other load
    # (under `pytest -n 2` on 2 cores, the other worker's tests are a real neighbour), so the
    # verdict itself is held by the fake-process tests above.
    stats = busy_stats(run)
    assert stats and "busy" in stats, (stats, proc.stdout[-2000:])
