"""Multi-node launching without a second machine: interfaces, ssh options, the node's verdict,
the relay, the deadline on a node, and the main-node check (issue 28)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.core.protocol import USAGE_ERROR, Env
from pytest_dlbench.run.launch import nodes
from pytest_dlbench.run.launch.netif import interface_of, is_this_machine, socket_ifname_env
from pytest_dlbench.run.launch.node_failure import NodeFailure, first_failure, record_failure
from pytest_dlbench.run.launch.relay import NodeOutput, plain
from pytest_dlbench.run.launch.torchrun import ssh_command
from pytest_dlbench.suite.system import Node, SshOptions, load_system

PY = sys.executable


def addr(ip: str) -> SimpleNamespace:
    return SimpleNamespace(family=socket.AF_INET, address=ip)


INTERFACES = {"lo": [addr("127.0.0.1")], "veth1": [addr("10.77.0.2")],
              "eth0": [addr("172.17.0.5"), SimpleNamespace(family=socket.AF_INET6,
                                                           address="fe80::1%eth0")]}


# -- 1. gloo and NCCL on the interface of the node's ip -------------------------------------------


def test_the_socket_interface_is_the_one_holding_the_nodes_ip():
    assert interface_of("10.77.0.2", INTERFACES) == "veth1"
    assert interface_of("fe80::1", INTERFACES) == "eth0"
    assert interface_of("10.77.0.9", INTERFACES) is None
    assert socket_ifname_env("10.77.0.2", {}, INTERFACES) == {
        "GLOO_SOCKET_IFNAME": "veth1", "NCCL_SOCKET_IFNAME": "veth1"}


def test_a_users_interface_stands_and_an_unknown_ip_sets_nothing():
    env = {"NCCL_SOCKET_IFNAME": "ib0"}
    assert socket_ifname_env("10.77.0.2", env, INTERFACES) == {"GLOO_SOCKET_IFNAME": "veth1"}
    assert socket_ifname_env("10.77.0.9", {}, INTERFACES) == {}
    assert socket_ifname_env(None, {}, INTERFACES) == {}


def test_this_machine_is_one_of_its_addresses_or_the_loopback():
    assert is_this_machine("10.77.0.2", INTERFACES)
    assert is_this_machine("127.0.1.1", INTERFACES)
    assert not is_this_machine("10.77.0.1", INTERFACES)
    assert not is_this_machine("manager.example", INTERFACES)


# -- 6. ssh options from the system file ---------------------------------------------------------


def write_system(tmp_path: Path, ssh: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text("system:\n  sshkey: ~/.ssh/k\n" + ssh + "  nodes:\n"
                    "    - {name: a, ip: 10.0.0.1, main: true}\n    - {name: b, ip: 10.0.0.2}\n")
    return path


def test_ssh_options_come_from_the_system_file(tmp_path: Path):
    system = load_system(write_system(tmp_path, "  ssh: {port: 2222, known_hosts: /k/hosts, "
                                                "connect_timeout: 3, alive_interval: 2}\n"))
    assert system.ssh == SshOptions(port=2222, identity="~/.ssh/k", known_hosts="/k/hosts",
                                    connect_timeout=3, alive_interval=2)
    cmd = ssh_command(Node("b", "10.0.0.2", user="u"), ["true"], ssh=system.ssh)
    text = " ".join(cmd)
    for part in ("-p 2222", "UserKnownHostsFile=/k/hosts", "ConnectTimeout=3",
                 "ServerAliveInterval=2", "ServerAliveCountMax=3",
                 f"-i {os.path.expanduser('~/.ssh/k')}"):
        assert part in text
    assert cmd[-2:] == ["u@10.0.0.2", "true"]
    assert system.ssh.silence_s == 6


@pytest.mark.parametrize("ssh, message", [
    ("  ssh: {prot: 22}\n", "no option 'prot'"),
    ("  ssh: {port: 0}\n", "'system.ssh.port' must be a positive integer"),
    ("  ssh: {alive_count: yes}\n", "'system.ssh.alive_count' must be a positive integer"),
    ("  ssh: [22]\n", "'system.ssh' must be a mapping"),
])
def test_bad_ssh_options_name_the_file(tmp_path: Path, ssh: str, message: str):
    with pytest.raises(SuiteError, match=message) as error:
        load_system(write_system(tmp_path, ssh))
    assert "cluster.yaml" in str(error.value)


def test_the_remote_nodes_get_the_run_variables_and_gloo_settings_not_the_interface():
    environ = {Env.DEADLINE: "123.5", Env.STREAM: "/r/x.data", "GLOO_TIMEOUT": "9",
               "GLOO_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO", Env.PG_TIMEOUT_S: "20",
               "HOME": "/root"}
    assert nodes.forwarded_env(environ) == {Env.DEADLINE: "123.5", Env.STREAM: "/r/x.data",
                                            "GLOO_TIMEOUT": "9", "NCCL_DEBUG": "INFO",
                                            Env.PG_TIMEOUT_S: "20"}


def test_the_rendezvous_join_timeout_is_well_under_the_time_left():
    assert nodes.join_timeout(1000.0 + 128, now=1000.0) == 32
    assert nodes.join_timeout(1000.0 + 10, now=1000.0) == 20
    assert nodes.join_timeout(1000.0 + 1e5, now=1000.0) == 600
    assert nodes.join_timeout(None) == 60


# -- the relay: plain lines, one prefix per node ------------------------------------------------


def test_remote_lines_lose_crlf_and_colours():
    assert plain("\x1b[32mPASSED\x1b[0m ok\r\n") == "PASSED ok"
    assert plain("10%\r50%\r100%\r\n") == "100%"


def test_the_relay_prefixes_every_line_and_keeps_the_tail():
    out = io.StringIO()
    relay = NodeOutput("node2", io.BytesIO(b"one\r\n\x1b[31mtwo\x1b[0m\r\n"), out)
    assert relay.join() == ["one", "two"]
    assert out.getvalue() == "[node2] one\n[node2] two\n"


# -- 2. the failing node named -------------------------------------------------------------------

TORCHRUN_SUMMARY = [
    "ValueError: boom in the step",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "============================================================",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-11-24_18:00:00",
    "  rank      : 1 (local_rank: 0)",
    "  exitcode  : 1 (pid: 4242)",
    "  error_file: <N/A>",
]


def test_a_rank_that_raised_is_named_with_its_status_and_last_error_line():
    failure = NodeFailure("node2", "10.77.0.2", 1, tuple(TORCHRUN_SUMMARY))
    assert failure.reason() == ("node2 (10.77.0.2): its rank exited with status 1: "
                                "ValueError: boom in the step")
    assert not failure.is_echo


def test_a_killed_rank_and_an_ssh_error_are_causes():
    killed = NodeFailure("node2", "10.77.0.2", 1, ("  exitcode  : -9 (pid: 1)",))
    assert killed.reason() == "node2 (10.77.0.2): its rank was killed by SIGKILL"
    assert not killed.is_echo and killed.status == "crash"
    refused = NodeFailure("node2", "10.77.0.2", 255,
                          ("ssh: connect to host 10.77.0.2 port 22: Connection refused",))
    assert refused.reason() == ("node2 (10.77.0.2): ssh: connect to host 10.77.0.2 port 22: "
                                "Connection refused")
    silent = NodeFailure("node2", "10.77.0.2", 255, ("Timeout, server 10.77.0.2 not responding.",))
    assert silent.reason().endswith("ssh: Timeout, server 10.77.0.2 not responding.")


def test_the_first_failure_that_is_no_echo_is_the_cause():
    echo = NodeFailure("main", "10.77.0.1", 1, (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
        "by peer [10.77.0.2]:4242", "  exitcode  : 1 (pid: 7)"), remote=False)
    cause = NodeFailure("node2", "10.77.0.2", 1, ("  exitcode  : -9 (pid: 1)",))
    assert echo.is_echo
    assert first_failure([echo, cause]) is cause
    assert first_failure([echo]) is echo
    assert first_failure([]) is None


def end_records(stream: Path) -> list[dict]:
    return [r for r in map(json.loads, stream.read_text().splitlines()) if r["event"] == "end"]


def test_a_remote_cause_replaces_the_main_ranks_echo_in_the_stream(tmp_path: Path):
    stream = tmp_path / "ddp.D0.data"
    stream.write_text('{"event": "config"}\n{"event": "end", "status": "fail", '
                      '"reason": "RuntimeError: Connection closed by peer"}\n')
    cause = NodeFailure("node2", "10.77.0.2", 1, ("  exitcode  : -9 (pid: 1)",))
    record_failure(stream, cause)
    assert [(e["status"], e["reason"]) for e in end_records(stream)] == [
        ("crash", "node2 (10.77.0.2): its rank was killed by SIGKILL")]
    assert stream.read_text().startswith('{"event": "config"}\n')


def test_the_main_nodes_own_failure_and_a_parents_end_stay(tmp_path: Path):
    stream = tmp_path / "s.data"
    stream.write_text('{"event": "end", "status": "fail", "reason": "ValueError: mine"}\n')
    record_failure(stream, NodeFailure("main", "10.0.0.1", 1, (), remote=False))
    assert end_records(stream)[0]["reason"] == "ValueError: mine"
    stream.write_text('{"event": "end", "status": "timeout", "reason": "t", "writer": "parent"}\n')
    record_failure(stream, NodeFailure("n", "10.0.0.2", 255, ("ssh: connect: refused",)))
    assert end_records(stream)[0]["reason"] == "t"
    empty = tmp_path / "empty.data"
    record_failure(empty, NodeFailure("n", "10.0.0.2", 255, ("ssh: connect: refused",)))
    assert end_records(empty)[0]["reason"] == "n (10.0.0.2): ssh: connect: refused"


# -- the failure that stops the others, and the settle time -------------------------------------


def test_a_failed_node_stops_the_others_and_is_named(capfd: pytest.CaptureFixture[str]):
    jobs = [
        nodes.NodeJob("main", "10.0.0.1", [PY, "-c", "import time; time.sleep(60)"], False),
        nodes.NodeJob("node2", "10.0.0.2", [PY, "-c", "print('ValueError: boom'); exit(3)"]),
    ]
    start = time.monotonic()
    code, failures = nodes.run_nodes(jobs, poll_s=0.05)
    assert time.monotonic() - start < 20
    assert code == 3
    assert [f.reason() for f in failures] == [
        "node2 (10.0.0.2): its launcher exited with status 3: ValueError: boom"]
    assert "[node2] ValueError: boom" in capfd.readouterr().out


# -- 4. the deadline on a node -------------------------------------------------------------------


def test_a_node_launcher_ends_its_job_and_what_it_started_at_the_deadline(tmp_path: Path):
    marker = f"t{os.getpid()}-{time.time_ns()}/1"
    # A "torchrun" that ignores SIGTERM and whose "rank" lives in a session of its own.
    script = ("import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, "
              "signal.SIG_IGN); subprocess.Popen([sys.executable, '-c', 'import time; "
              "time.sleep(60)'], start_new_session=True); print('started', flush=True); "
              "time.sleep(60)")
    env = {**os.environ, Env.NODE_LAUNCH: marker}
    proc = subprocess.Popen([PY, "-c", script], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        start = time.monotonic()
        code = nodes.supervise(proc, deadline=time.time() + 0.5, marker=marker, grace=0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert code == nodes.DEADLINE_EXIT
    assert time.monotonic() - start < 10
    assert nodes._kill_marked(marker) == 0  # nothing of it is left


def test_a_node_launcher_returns_its_jobs_status():
    marker = f"t{os.getpid()}-{time.time_ns()}/0"
    proc = subprocess.Popen([PY, "-c", "raise SystemExit(5)"])
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert nodes.supervise(proc, deadline=None, marker=marker) == 5
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- 5. pytest on a node that is not the main one -------------------------------------------------


def test_launching_from_another_node_fails_at_once_naming_the_main_node(tmp_path: Path):
    system = tmp_path / "cluster.yaml"
    system.write_text("system:\n  nodes:\n    - {name: manager, ip: 192.0.2.11, main: true}\n"
                      "    - {name: me, ip: 127.0.0.1}\n")
    stream = tmp_path / "ddp.D0.data"
    start = time.monotonic()
    proc = subprocess.run(
        [PY, "-m", "pytest_dlbench.run.launch", "launch", f"--system={system}", "--nproc=1",
         "--run-id=x", "--", PY, "-c", "pass"],
        env={**os.environ, Env.STREAM: str(stream)}, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == USAGE_ERROR
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "manager, 192.0.2.11, is not this machine" in lines[0]
    assert end_records(stream)[0]["reason"].startswith(f"{system}: pytest runs on a node other")


# -- what the summary and the manifest say of a job over several nodes -------------------------
def test_a_job_over_two_nodes_is_said_under_the_table_and_in_the_manifest(tmp_path: Path):
    from pytest_dlbench.layout import write_manifest
    from pytest_dlbench.measure.stream import StreamWriter
    from pytest_dlbench.report.voir_lines import observation_lines
    from pytest_dlbench.results.figures import summarize_dir
    from pytest_dlbench.results.model import SuiteSummary
    from pytest_dlbench.suite.spec import BenchSpec

    for name, distributed in (("ddp", {"world_size": 4, "nnodes": 2, "nproc_per_node": 2}),
                              ("local", {"world_size": 2, "nnodes": 1, "nproc_per_node": 2})):
        with StreamWriter(tmp_path / f"{name}.D0.data") as stream:
            stream.write("config", spec={"name": name, "weight": 1.0,
                                         "plan": {"method": "njobs"}, "skip": 0, "stop": 3},
                         device=0, repeat=None, distributed={**distributed, "rank": 0})
            for step in range(3):
                stream.write("rate", value=10.0, units="items/s", step=step, warmup=False,
                             time=1000.0 + step, items=10, seconds=1.0)
            stream.write("end", status="ok", reason="")
    summary = summarize_dir(tmp_path)
    lines = observation_lines(summary)
    assert "nodes: ddp spanned 2 nodes (world size 4)" in lines
    assert not any("local" in line for line in lines)  # one node: nothing to say
    again = SuiteSummary.from_dict(json.loads(json.dumps(summary.to_dict(), default=str)))
    assert observation_lines(again) == lines  # a saved summary says the same
    ddp, ddp_again = summary.get("ddp"), again.get("ddp")
    assert ddp is not None and ddp_again is not None
    assert ddp_again.perf_per_gpu == ddp.perf_per_gpu == ddp.perf / 4  # its world size kept

    njobs = BenchSpec("ddp", "m:f", "s.yaml", plan={"method": "njobs"})
    per_gpu = BenchSpec("toy", "m:f", "s.yaml", plan={"method": "per_gpu"})
    manifest = json.loads(write_manifest(tmp_path, "s", [njobs, per_gpu], nodes=2).read_text())
    assert manifest["benchmarks"]["ddp"]["nodes"] == 2
    assert "nodes" not in manifest["benchmarks"]["toy"]  # a per-GPU run stays on this node
    single = json.loads(write_manifest(tmp_path, "s", [njobs], nodes=1).read_text())
    assert "nodes" not in single["benchmarks"]["ddp"]


def test_a_hand_edited_job_size_never_stops_the_report(tmp_path: Path):
    from pytest_dlbench.measure.stream import StreamWriter
    from pytest_dlbench.results.figures import summarize_dir

    with StreamWriter(tmp_path / "ddp.D0.data") as stream:
        stream.write("config", spec={"name": "ddp", "weight": 1.0, "plan": {"method": "njobs"},
                                     "skip": 0, "stop": 2},
                     device=0, repeat=None, distributed={"world_size": 2, "nnodes": "two"})
        for step in range(2):
            stream.write("rate", value=5.0, units="items/s", step=step, warmup=False,
                         time=1000.0 + step, items=5, seconds=1.0)
        stream.write("end", status="ok", reason="")
    bench = summarize_dir(tmp_path).get("ddp")
    assert bench is not None and bench.perf == 5.0
    assert (bench.nnodes, bench.world_size) == (1, 2)  # the bad field alone falls back
