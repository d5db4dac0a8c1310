"""The Slurm path without a Slurm (issue 39): the node's address from the route to srun's
node, the failing node named from ``srun --label`` output, pytest off the allocation's first
node refused at once, and the step stopped soon after a node's launcher fails. Slurm is
simulated: SLURM_* variables, a fake ``srun`` (and ``scancel``) on PATH that prints what a real
step's labelled output holds."""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from _hostile_cases import SLURM_CASES

from pytest_dlbench.core.protocol import USAGE_ERROR, Env
from pytest_dlbench.run.launch import nodes
from pytest_dlbench.run.launch.netif import interface_of, route_source, slurm_local_addr
from pytest_dlbench.run.launch.relay import LabelledOutput, exit_line, start_line
from pytest_dlbench.run.launch.torchrun import (
    MAX_HOSTS,
    allocation_nodes,
    expand_hostlist,
    free_port,
    njobs_launch,
)
from pytest_dlbench.suite.system import Node, SystemConfig

PY = sys.executable
CHILD = [PY, "-m", "pytest", "x.py::t"]


# -- 1. each node's address: the route to srun's node, or the system file's ip ---------------


def test_a_slurm_node_advertises_the_source_of_its_route_to_the_launch_node():
    routes = {"10.79.0.1": "10.79.0.2"}
    env = {"SLURM_LAUNCH_NODE_IPADDR": "10.79.0.1", "SLURMD_NODENAME": "node2"}
    assert slurm_local_addr(env, route=routes.get) == "10.79.0.2"
    # The system file's ip for this node stands first.
    assert slurm_local_addr(env, {"node2": "192.168.1.2"}, route=routes.get) == "192.168.1.2"
    # No launch node, no route, or a loopback route: nothing (torchrun's own default).
    assert slurm_local_addr({}, route=routes.get) is None
    assert slurm_local_addr({"SLURM_LAUNCH_NODE_IPADDR": "10.0.0.9"}, route=routes.get) is None
    assert slurm_local_addr({"SLURM_LAUNCH_NODE_IPADDR": "10.0.0.9"},
                            route=lambda ip: "127.0.1.1") is None


def _an_address_here() -> str | None:
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return str(address.address)
    return None


def test_the_route_source_is_an_address_of_this_machine():
    assert route_source("127.0.0.1") == "127.0.0.1"
    assert route_source("not-an-ip") is None
    here = _an_address_here()
    if here is None:
        pytest.skip("this machine has no address but the loopback")
    # srun ran on this node: the route to its address starts from that address, whose
    # interface is what gloo and NCCL get.
    assert route_source(here) == here
    assert interface_of(here) is not None


def test_a_node_launcher_under_srun_sets_the_socket_interface(tmp_path: Path):
    here = _an_address_here()
    if here is None:
        pytest.skip("this machine has no address but the loopback")
    out = tmp_path / "env.json"
    child = [PY, "-c", "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
             "('GLOO_SOCKET_IFNAME', 'NCCL_SOCKET_IFNAME', 'MASTER_ADDR')}, "
             f"open({str(out)!r}, 'w'))"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLOO_", "NCCL_", "SLURM"))}
    env.update(SLURM_STEP_ID="0", SLURM_JOB_ID="7", SLURM_NODEID="0", SLURMD_NODENAME="node1",
               SLURM_LAUNCH_NODE_IPADDR=here)
    proc = subprocess.run(
        [PY, "-m", "pytest_dlbench.run.launch", "node", "--nnodes=1", "--nproc=1",
         f"--endpoint=127.0.0.1:{free_port()}",
         "--run-id=t", "--", *child], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(out.read_text())
    name = interface_of(here)
    assert seen == {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name, "MASTER_ADDR": here}
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"dlbench: slurm node node1 ({here}), node rank 0, step 7.0")
    assert lines[-1] == "dlbench: slurm node node1: its launcher exits with status 0"


# -- 2. the failing node named from srun's labelled output -----------------------------------


def _labelled(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


START1 = "0: " + start_line("node1", "10.79.0.1", 0, "7.0")
START2 = "1: " + start_line("node2", "10.79.0.2", 1, "7.0")
KILLED2 = ["1: [rank1]: running", "1:   exitcode  : -9 (pid: 4242)",
           "1: " + exit_line("node2", 1)]
ECHO1 = ["0: E   RuntimeError: Connection closed by peer [10.79.0.2]:5678",
         "0:   exitcode  : 1 (pid: 99)", "0: " + exit_line("node1", 1)]


def test_srun_lines_are_prefixed_with_their_node_and_the_ends_queued():
    out = io.StringIO()
    source = io.BytesIO(_labelled([START1, START2, *KILLED2,
                                   "srun: error: node2: task 1: Exited with exit code 1"]))
    relay = LabelledOutput(["n1", "n2"], source, out)
    relay.join()
    text = out.getvalue()
    assert "[node2] [rank1]: running\n" in text and "[srun] srun: error: node2" in text
    assert relay.name(1) == "node2" and relay.addrs[1] == "10.79.0.2"
    assert relay.tail(1)[-2].strip().startswith("exitcode")
    events = [relay.events.get_nowait() for _ in range(3)]
    assert [(e.task, e.name, e.code) for e in events] == [(0, "node1", None), (1, "node2", None),
                                                          (1, "node2", 1)]


def fake_srun(tmp_path: Path, lines: list[str], *, code: int = 1, hang: bool = False) -> Path:
    """A ``srun`` that records its arguments, prints ``lines`` and exits with ``code`` (or,
    with ``hang``, ignores SIGTERM and waits, as srun does for a lost node)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(
        f"#!{PY}\nimport json, signal, sys, time\n"
        f"json.dump(sys.argv[1:], open({str(tmp_path / 'srun.json')!r}, 'w'))\n"
        f"for line in {lines!r}:\n    print(line, flush=True)\n    time.sleep(0.05)\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)\n" if hang else "")
        + f"sys.exit({code})\n")
    scancel = bin_dir / "scancel"
    scancel.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'scancel.args'}\n")
    for tool in (srun, scancel):
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_a_killed_rank_on_node2_is_named_as_node2s(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capfd: pytest.CaptureFixture[str]):
    monkeypatch.setenv("PATH", f"{fake_srun(tmp_path, [START1, START2, *KILLED2, *ECHO1])}"
                               f"{os.pathsep}{os.environ['PATH']}")
    code, outcome, cause = nodes.run_srun(["srun", "--label"], ["node1", "node2"], poll_s=0.05)
    assert code == 1 and outcome is None and cause is not None
    assert cause.reason() == "node2 (10.79.0.2): its rank was killed by SIGKILL"
    assert "[node2] [rank1]: running" in capfd.readouterr().out


def test_the_slurm_launcher_records_node2_as_the_reason_over_the_main_ranks_echo(
        tmp_path: Path):
    stream = tmp_path / "ddp.D0.data"
    # The main node's reporting rank ended the stream with its echo of node2's death.
    stream.write_text(json.dumps({"event": "end", "status": "fail",
                                  "reason": "RuntimeError: Connection closed by peer"}) + "\n")
    bin_dir = fake_srun(tmp_path, [START1, START2, *KILLED2, *ECHO1])
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           Env.STREAM: str(stream), "SLURM_JOB_NODELIST": "node[1-2]",
           "SLURMD_NODENAME": "node1", Env.DEADLINE: str(time.time() + 400)}
    proc = subprocess.run(
        [PY, "-m", "pytest_dlbench.run.launch", "slurm", "--nnodes=2", "--nproc=1",
         "--endpoint=node1:29500", "--run-id=j", "--", *CHILD],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ends = [json.loads(x) for x in stream.read_text().splitlines()]
    assert ends == [{**ends[0], "event": "end", "status": "crash", "writer": "launcher",
                     "reason": "node2 (10.79.0.2): its rank was killed by SIGKILL"}]
    assert "[node2] [rank1]: running" in proc.stdout
    srun_args = json.loads((tmp_path / "srun.json").read_text())
    assert srun_args[:6] == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                             "--kill-on-bad-exit=1", "--label", PY]
    # 3. the rendezvous join timeout, as over ssh: a quarter of the 400 s left.
    assert any(a.startswith("--rdzv-conf=join_timeout=99") or a ==
               "--rdzv-conf=join_timeout=100" for a in srun_args), srun_args


# -- 3. pytest off the allocation's first node: refused at once --------------------------------


@pytest.mark.parametrize(("text", "names"), [
    ("node1", ["node1"]),
    ("node[1-3,5]", ["node1", "node2", "node3", "node5"]),
    ("gpu[08-10],login", ["gpu08", "gpu09", "gpu10", "login"]),
    ("r[1-2]-n[1,3]", ["r1-n1", "r1-n3", "r2-n1", "r2-n3"]),
])
def test_slurm_host_lists_are_expanded_in_order(text: str, names: list[str]):
    assert expand_hostlist(text) == names
    assert allocation_nodes({"SLURM_NODELIST": text}, scontrol=None) == names


@pytest.mark.parametrize("text", ["node[1-", "node[a-b]", "node]1["])
def test_a_bad_host_list_is_refused(text: str):
    with pytest.raises(ValueError, match="host list"):
        expand_hostlist(text)


@pytest.mark.parametrize(("text", "says"), [
    ("node[1-100000000]", "names 100,000,000 hosts, more than 100,000"),
    ("a[1-1000],b[1-1000]x[1-1000]", "names 1,001,000 hosts, more than 100,000"),
    ("node[9-2]", "it ends before it starts"),
    ("node[1-99999999999999999999999]", "bad Slurm host list range"),
])
def test_a_host_list_past_the_bound_is_refused_before_it_is_expanded(text: str, says: str):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="host list") as caught:
            expand_hostlist(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert peak < 1 << 20  # counted, never built
    assert len(expand_hostlist(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


# The rows of docs/running.md's "Bad input" table these tests check (tests/_hostile_cases.py).
@pytest.mark.parametrize(("nodelist", "message"), [
    (case[0].split("=", 1)[1].split("`")[0], case[2]) for case in SLURM_CASES
], ids=[case[0] for case in SLURM_CASES])
def test_the_slurm_launcher_with_an_unreadable_nodelist_exits_4_with_one_line(
    tmp_path: Path, nodelist: str, message: str
):
    assert nodes.slurm_refusal({"SLURM_JOB_NODELIST": nodelist}, hostname="node1",
                               scontrol=None) == message
    stream = tmp_path / "ddp.D0.data"
    bin_dir = fake_srun(tmp_path, [], code=0)  # no scontrol on the PATH: a container
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", Env.STREAM: str(stream),
                "SLURM_JOB_NODELIST": nodelist})
    proc = subprocess.run(
        [PY, "-m", "pytest_dlbench.run.launch", "slurm", "--nnodes=2", "--nproc=1",
         "--endpoint=h:29500", "--run-id=j", "--", *CHILD],
        env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == USAGE_ERROR, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines() == [f"dlbench: {message}"]
    assert not (tmp_path / "srun.json").exists()  # no step started
    end = json.loads(stream.read_text().splitlines()[-1])
    assert end["event"] == "end" and end["status"] == "fail" and end["reason"] == message


def test_pytest_off_the_allocations_first_node_is_refused():
    env = {"SLURM_JOB_NODELIST": "node[2-3]"}
    reason = nodes.slurm_refusal(env, hostname="node1", scontrol=None)
    assert reason is not None and "pytest runs on node1, not on the allocation's first node " \
        "node2 (node2,node3)" in reason
    assert nodes.slurm_refusal({**env, "SLURMD_NODENAME": "node2"}, hostname="x",
                               scontrol=None) is None
    assert nodes.slurm_refusal(env, hostname="node2.cluster.example", scontrol=None) is None
    assert "no Slurm allocation" in (nodes.slurm_refusal({}, hostname="n", scontrol=None) or "")
    # A system file whose main node is not this machine (the first node).
    reason = nodes.slurm_refusal(env, hostname="node2", main_addr="192.0.2.250", scontrol=None)
    assert reason is not None and "main node (192.0.2.250) is not this machine" in reason


def test_the_slurm_launcher_off_the_first_node_fails_at_once(tmp_path: Path):
    stream = tmp_path / "ddp.D0.data"
    bin_dir = fake_srun(tmp_path, [], code=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", Env.STREAM: str(stream),
                "SLURM_JOB_NODELIST": "zz-not-this-host[2-3]"})
    start = time.monotonic()
    proc = subprocess.run(
        [PY, "-m", "pytest_dlbench.run.launch", "slurm", "--nnodes=2", "--nproc=1",
         "--endpoint=h:29500", "--run-id=j", "--", *CHILD],
        env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == USAGE_ERROR
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "not on the allocation's first node zz-not-this-host2" in lines[0]
    assert not (tmp_path / "srun.json").exists()  # no step started
    end = json.loads(stream.read_text().splitlines()[-1])
    assert end["event"] == "end" and "zz-not-this-host2" in end["reason"]


def test_njobs_launch_under_slurm_runs_the_slurm_launcher():
    system = SystemConfig(None, (Node("a", "10.0.0.1", port=5000, main=True),
                                 Node("b", "10.0.0.2")), options={"launcher": "slurm"})
    launch = njobs_launch(CHILD, system=system, nproc=4, run_id="j", python="/py")
    assert (launch.launcher, launch.nnodes) == ("slurm", 2)
    assert launch.argv == ["/py", "-m", "pytest_dlbench.run.launch", "slurm", "--nnodes=2",
                           "--nproc=4", "--endpoint=10.0.0.1:5000", "--run-id=j",
                           "--addr=a=10.0.0.1", "--addr=b=10.0.0.2", "--main-addr=10.0.0.1",
                           "--", *CHILD]
    here = SystemConfig(None, (Node("local", "127.0.0.1", port=29411, main=True),),
                        options={"launcher": "slurm"})
    alloc = njobs_launch(CHILD, system=here, nproc=4, run_id="j",
                         slurm_env={"SLURM_JOB_NUM_NODES": "3"})
    assert alloc.nnodes == 3 and "--nnodes=3" in alloc.argv
    assert f"--endpoint={socket.gethostname()}:29411" in alloc.argv
    single = njobs_launch(CHILD, system=here, nproc=4, run_id="j",
                          slurm_env={"SLURM_JOB_NUM_NODES": "1"})
    assert single.launcher == "local"
    with pytest.raises(ValueError, match="launcher"):
        njobs_launch(CHILD, system=SystemConfig(None, system.nodes, options={"launcher": "mpi"}),
                     nproc=1, run_id="j")


# -- 4. the step stopped soon after a node's launcher fails -----------------------------------


def test_a_lost_node_is_named_and_the_step_stopped_in_seconds(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    # The main node's rank lost its peer; node2 says nothing more (its link is down) and srun
    # waits for it, deaf to SIGTERM, as it does until Slurm declares the node DOWN.
    bin_dir = fake_srun(tmp_path, [START1, START2, "1: [rank1]: step 3", *ECHO1], hang=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    start = time.monotonic()
    code, outcome, cause = nodes.run_srun(["srun"], ["node1", "node2"], poll_s=0.05,
                                          settle_s=0.5, grace=1.0)
    assert time.monotonic() - start < 20
    assert code == 1 and cause is None and outcome is not None
    assert outcome.reason.startswith("node2 (10.79.0.2): its launcher went silent")
    assert "node1 (10.79.0.1): its rank exited with status 1" in outcome.reason
    assert (tmp_path / "scancel.args").read_text().split() == ["--quiet", "7.0"]


def test_a_node_slurm_lost_is_the_reason_over_the_main_nodes_killed_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # What srun printed when node2's link went down in tests/run/test_slurm_netns.py: Slurm
    # declared node2 lost and killed the step; the main node's launcher said nothing more.
    lines = [START1, START2, "srun: error: Node failure on node2",
             "srun: error: node1: task 0: Killed",
             "srun: launch/slurm: _step_signal: Terminating StepId=7.0"]
    bin_dir = fake_srun(tmp_path, lines, code=137)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, outcome, cause = nodes.run_srun(["srun"], ["node1", "node2"], poll_s=0.05)
    assert (code, cause) == (137, None) and outcome is not None
    assert outcome.reason == ("node2 (10.79.0.2): Slurm lost the node (srun: error: Node "
                              "failure on node2)")
    assert str(outcome.status) == "crash"


def test_srun_failing_on_its_own_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = fake_srun(tmp_path, ["srun: error: Unable to create step for job 7: "
                                   "Requested node configuration is not available"], code=1)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    code, outcome, cause = nodes.run_srun(["srun"], ["node1"], poll_s=0.05)
    assert (code, cause) == (1, None) and outcome is not None
    assert outcome.reason == ("srun exited with status 1: srun: error: Unable to create step "
                              "for job 7: Requested node configuration is not available")


def test_a_passing_step_is_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lines = [START1, START2, "1: " + exit_line("node2", 0), "0: " + exit_line("node1", 0)]
    monkeypatch.setenv("PATH", f"{fake_srun(tmp_path, lines, code=0)}{os.pathsep}"
                               f"{os.environ['PATH']}")
    assert nodes.run_srun(["srun"], ["node1", "node2"], poll_s=0.05) == (0, None, None)

