"""One job over a real Slurm allocation (issue 39): Debian's Slurm 22.05 on one machine
(tests/_slurm_cluster.py: munged, slurmctld, a slurmd per node, each node a set of namespaces
whose hostname resolves to ``127.0.1.1``), and the project run through docs/multinode.md's
batch script as it is written.

Covers: ``srun -N2`` over both nodes; the docs' batch script passing the smoke ``ddp`` over
two nodes; a killed rank on node2 named as node2's; pytest off the allocation's first node
refused in seconds; a node cut off (link down) failing the benchmark within 60 s with a summary
and an ``end`` record, nothing of the run left on any node. Needs root, namespaces and the
packages (``.ci/run`` installs them); skipped with its reason elsewhere. Every namespace, link
and daemon is removed on every exit path (the fixture's ``finally``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _netns import remote_rank, wait_for_steps, wait_until_gone
from _paths import REPO_ROOT
from _slurm_cluster import SlurmCluster, missing

pytestmark = [pytest.mark.slow, pytest.mark.release]

DOCS = REPO_ROOT / "docs" / "multinode.md"
MARK = "<!-- tests/run/test_slurm_netns.py runs this script as it is written -->"
STEP = '''
import time
import torch
import torch.distributed as dist


def allreduce(bench, process_group):
    assert process_group is not None
    x = torch.ones(4)
    while not bench.done:
        for _ in bench.iterate(range(1000), batch_size=1):
            dist.all_reduce(x)
            time.sleep(0.25)
'''
SUITE = '''
allreduce:
  definition: step.py:allreduce
  plan: {{method: njobs, n: 1}}
  max_duration: {max_duration}
  voir: {{options: {{skip: 1, stop: {stop}}}}}
'''


def docs_batch_script() -> str:
    """The batch script of docs/multinode.md, as it is written there."""
    text = DOCS.read_text()
    after = text[text.index(MARK) + len(MARK):]
    match = re.match(r"\s*```bash\n(.*?)```", after, re.S)
    assert match, f"{DOCS}: no bash block after {MARK}"
    return match.group(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    made = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        made.build()
        yield made
    finally:
        made.remove()


def project(path: Path, script: str, *, suite: tuple[int, int] | None = None) -> Path:
    """A user's project folder: the venv (this one), the system file, the batch script."""
    path.mkdir()
    (path / ".venv").symlink_to(sys.prefix)
    (path / "pytest.ini").write_text("[pytest]\n")
    (path / "slurm.yaml").write_text("system:\n  launcher: slurm\n")
    if suite is not None:
        (path / "step.py").write_text(STEP)
        max_duration, stop = suite
        (path / "suite.yaml").write_text(SUITE.format(max_duration=max_duration, stop=stop))
        script = script.replace("--bench-suite=smoke -k ddp", "--bench-suite=suite.yaml")
    (path / "job.sh").write_text(script)
    return path


def sbatch(cluster: SlurmCluster, path: Path, timeout: float, during: object = None,
           env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """``sbatch --wait job.sh`` from node1 (the job gets ``env`` too: sbatch exports the
    environment): pytest's status (the script's file), the job's output and the seconds it
    took."""
    start = time.monotonic()
    if callable(during):
        threading.Thread(target=during, daemon=True).start()
    done = cluster.run("node1", ["sbatch", "--wait", "--parsable", "job.sh"], cwd=path,
                       check=False, timeout=timeout, env=env)
    took = time.monotonic() - start
    job = done.stdout.strip().split(";")[0]
    out = "\n".join(p.read_text() for p in path.glob("slurm-*.out"))
    status = path / f"pytest-status.{job}"
    assert status.is_file(), f"no pytest status: {done.stdout}{done.stderr}\n{out[-4000:]}"
    return int(status.read_text()), out, took


def stream_of(path: Path, bench: str) -> list[dict]:
    (stream,) = (path / ".dlbench").rglob(f"{bench}.D0.data")
    return [json.loads(line) for line in stream.read_text().splitlines()]


def end_of(path: Path, bench: str) -> dict:
    return [r for r in stream_of(path, bench) if r["event"] == "end"][-1]


def test_srun_spans_both_nodes(cluster: SlurmCluster):
    done = cluster.run("node1", ["srun", "-N2", "hostname"], timeout=60)
    assert sorted(done.stdout.split()) == ["node1", "node2"]


def test_the_docs_batch_script_passes_ddp_over_two_nodes(cluster: SlurmCluster, tmp_path: Path):
    path = project(tmp_path / "p", docs_batch_script())
    # The script as written; only the smoke ddp's max_duration (120 s) is raised, through the
    # environment: ~60 s on an idle 2-core machine, past 120 s on a busy one (both nodes'
    # ranks share its cores).
    status, out, _ = sbatch(cluster, path, timeout=560,
                            env={"PYTEST_ADDOPTS": "--bench-override=ddp.max_duration=480"})
    assert status == 0, out[-4000:]
    assert end_of(path, "ddp")["status"] == "ok"
    config = next(r for r in stream_of(path, "ddp") if r["event"] == "config")
    assert config["distributed"]["nnodes"] == 2 and config["distributed"]["world_size"] == 2
    assert "nodes: ddp spanned 2 nodes" in out
    log = next((path / ".dlbench").rglob("ddp.D0.log")).read_text()
    # Each node advertises its bridge address, not its hostname's 127.0.1.1, and its lines
    # carry its name.
    for name in cluster.names:
        assert (f"[{name}] dlbench: slurm node {name} ({cluster.ip(name)}), node rank "
                in log), log[-3000:]
    assert f"interface {cluster.link('node2')}" in log


def test_a_killed_rank_on_node2_is_named_as_node2s(cluster: SlurmCluster, tmp_path: Path):
    path = project(tmp_path / "p", docs_batch_script(), suite=(150, 400))

    def kill() -> None:
        pid = remote_rank(path, timeout=120)
        wait_for_steps(path / ".dlbench", "allreduce", steps=3)  # killed in its steps
        os.kill(pid, signal.SIGKILL)

    status, out, _ = sbatch(cluster, path, timeout=300, during=kill)
    assert status != 0
    end = end_of(path, "allreduce")
    assert end["reason"] == (f"node2 ({cluster.ip('node2')}): its rank was killed by SIGKILL"), \
        (end, out[-3000:])


def test_pytest_off_the_allocations_first_node_is_refused_in_seconds(cluster: SlurmCluster,
                                                                     tmp_path: Path):
    path = project(tmp_path / "p", docs_batch_script(), suite=(150, 4))
    # salloc runs its command where it was started: node2, while the allocation's first
    # node (the rendezvous' host) is node1.
    start = time.monotonic()
    done = cluster.run("node2", [
        "salloc", "-N2", "--no-kill", "bash", "-c",
        "source .venv/bin/activate && pytest -p no:randomly --bench-suite=suite.yaml "
        "--bench-system=slurm.yaml"], cwd=path, check=False, timeout=200)
    took = time.monotonic() - start
    assert done.returncode != 0
    end = end_of(path, "allreduce")
    assert "pytest runs on node2, not on the allocation's first node node1" in end["reason"], \
        done.stdout[-3000:]
    assert took < 90  # pytest's start and one refusal, not max_duration (150 s)


def test_a_node_cut_off_fails_the_benchmark_and_nothing_is_left(cluster: SlurmCluster,
                                                                tmp_path: Path):
    max_duration = 90
    path = project(tmp_path / "p", docs_batch_script(), suite=(max_duration, 400))
    cut_at: list[float] = []

    def cut() -> None:
        remote_rank(path, timeout=120)
        wait_for_steps(path / ".dlbench", "allreduce", steps=3)  # cut off in its steps
        cluster.set_link("node2", up=False)  # node2 vanishes, the controller stays reachable
        cut_at.append(time.time())

    try:
        status, out, took = sbatch(cluster, path, timeout=300, during=cut)
        assert status != 0
        assert cut_at
        end = end_of(path, "allreduce")
        assert end["reason"].startswith(f"node2 ({cluster.ip('node2')}): "), (end, out[-3000:])
        assert end["time"] - cut_at[0] < 60, end  # Slurm's SlurmdTimeout (30 s), not max_duration
        assert "failed allreduce[D0]: " in out  # pytest's summary
        # Nothing of the run is left on any node once the deadline has passed.
        assert wait_until_gone(path, time.monotonic() + max_duration + 20) == []
    finally:
        cluster.set_link("node2", up=True)
        # Slurm marked node2 DOWN: back to idle for the module's other tests (any order).
        cluster.run("node1", ["scontrol", "update", "nodename=node2", "state=resume"],
                    check=False, timeout=30)
        cluster.wait_idle(timeout=90)
