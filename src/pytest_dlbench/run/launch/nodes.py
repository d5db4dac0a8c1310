"""Running launchers: ``python -m pytest_dlbench.run.launch node|launch|slurm``.

``node`` runs this node's torchrun (under ``srun``, or started over ssh by ``launch``) and ends
it at the run's deadline; ``launch`` runs on the main node, checks that every other node
answers, starts them over ssh, relays their output and waits for all of them; the first node
that fails stops the others and is the benchmark's reason (:mod:`.node_failure`). ``slurm``
does the same inside a Slurm allocation, on its first node: one ``srun --label`` step with a
``node`` launcher per node, whose lines it splits by node (:class:`.relay.LabelledOutput`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dlbench.core.protocol import USAGE_ERROR, Env, Outcome, Status
from pytest_dlbench.run.launch.netif import (
    IFNAME_VARIABLES,
    interface_of,
    is_this_machine,
    slurm_local_addr,
    socket_ifname_env,
)
from pytest_dlbench.run.launch.node_failure import (
    NodeFailure,
    first_failure,
    record_end,
    record_failure,
)
from pytest_dlbench.run.launch.relay import LabelledOutput, NodeOutput, exit_line, start_line
from pytest_dlbench.run.launch.torchrun import (
    SHUTDOWN_TIMEOUT_S,
    allocation_nodes,
    launch_env,
    node_command,
    node_launches,
    slurm_node_rank,
    srun_command,
    ssh_command,
    ssh_options,
    ssh_target,
    torchrun_command,
)

__all__ = ["NodeJob", "forwarded_env", "join_timeout", "launch_nodes", "main", "run_nodes",
           "run_srun", "slurm_refusal"]

#: Exit status of a node launcher that ended its torchrun at the run's deadline (timeout's).
DEADLINE_EXIT = 124
#: After a first failure that is another's echo, how long to wait for the cause to show.
SETTLE_S = 2.0
#: Variables of the parent's environment that reach the other nodes' launchers: the run's
#: own (its deadline above all) and the user's settings of gloo, NCCL and the group timeout.
#: ``*_SOCKET_IFNAME`` is not sent: interface names differ between nodes; each node finds the
#: one holding its own ``ip`` (:func:`.netif.socket_ifname_env`).
FORWARDED = (Env.DEADLINE, Env.STREAM, Env.LAUNCHED, Env.RUN_DIR, Env.WORKER,
             Env.PG_TIMEOUT_S)
FORWARDED_PREFIXES = ("GLOO_", "NCCL_")


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What of this process's environment the other nodes get (see :data:`FORWARDED`)."""
    return {k: v for k, v in environ.items()
            if (k in FORWARDED or k.startswith(FORWARDED_PREFIXES))
            and k not in IFNAME_VARIABLES}


def _deadline(environ: Mapping[str, str]) -> float | None:
    try:
        return float(environ[Env.DEADLINE])
    except (KeyError, ValueError):
        return None


def join_timeout(deadline: float | None, now: float | None = None) -> int:
    """Seconds every node has to join the rendezvous: a quarter of the time the run has left,
    between 20 s and torch's 600 s (60 s without a deadline). torch's default of 600 s would
    keep a job whose node never came waiting far past its ``max_duration``."""
    if deadline is None:
        return 60
    left = deadline - (time.time() if now is None else now)
    return int(min(600.0, max(20.0, left / 4)))


# -- one launcher per node, the first failure stops the others ---------------------------------


@dataclass(frozen=True)
class NodeJob:
    """One node's launcher: where it runs and the command that starts it from here."""

    name: str
    ip: str
    argv: list[str]
    remote: bool = True


def _terminate(procs: Sequence[subprocess.Popen[bytes]], grace: float = 5.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


def run_nodes(
    jobs: Sequence[NodeJob],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    poll_s: float = 0.2,
    settle_s: float = SETTLE_S,
    relay: bool = True,
) -> tuple[int, list[NodeFailure]]:
    """Run every node's launcher at once and wait for all; the first failure stops the rest.

    With ``relay`` each node's output is copied to this process's stdout with a ``[name] ``
    prefix (:mod:`.relay`), and the failures come back with their last lines. A failure that
    looks like another node's echo (:attr:`NodeFailure.is_echo`) waits up to ``settle_s``
    for its cause to end too. Returns the exit status (0, that of the first launcher that
    failed, 128 + signal) and the failures in the order seen. On SIGTERM/SIGINT the launchers
    are stopped, then this returns.
    """
    pipe = subprocess.PIPE if relay else None
    procs = [subprocess.Popen(list(job.argv), env={**os.environ, **(env or {})}, cwd=cwd,
                              stdin=subprocess.DEVNULL, stdout=pipe,
                              stderr=subprocess.STDOUT if relay else None)
             for job in jobs]
    outputs = [NodeOutput(job.name, proc.stdout) if proc.stdout is not None else None
               for job, proc in zip(jobs, procs, strict=True)]
    failures: list[NodeFailure] = []
    stopped: list[int] = []

    def failure(index: int, code: int) -> NodeFailure:
        output, job = outputs[index], jobs[index]
        tail = output.join(timeout=2.0) if output is not None else []
        return NodeFailure(job.name, job.ip, _exit_status(code), tuple(tail), job.remote)

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        first_at: float | None = None
        seen: set[int] = set()
        while not stopped:
            codes = [p.poll() for p in procs]
            for index, code in enumerate(codes):
                if code not in (None, 0) and index not in seen:
                    seen.add(index)
                    failures.append(failure(index, code))
                    first_at = first_at or time.monotonic()
            if failures:
                settled = (any(not f.is_echo for f in failures)
                           or time.monotonic() - (first_at or 0.0) >= settle_s
                           or all(c is not None for c in codes))
                if settled:
                    _terminate(procs)
                    return failures[0].returncode, failures
            elif all(c == 0 for c in codes):
                return 0, failures
            time.sleep(poll_s)
        _terminate(procs)
        return 128 + stopped[0], failures
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for output in outputs:
            if output is not None:
                output.join(timeout=2.0)


def launch_nodes(
    commands: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    poll_s: float = 0.2,
) -> int:
    """:func:`run_nodes` for bare commands (their output not relayed): the exit status."""
    jobs = [NodeJob(f"node{i}", "", list(cmd), remote=False) for i, cmd in enumerate(commands)]
    code, _ = run_nodes(jobs, env=env, cwd=cwd, poll_s=poll_s, settle_s=0.0, relay=False)
    return code


# -- the `node` subcommand: this node's torchrun, ended at the run's deadline ------------------


#: How long the killed processes of a node launcher are waited for (they cannot refuse).
KILL_WAIT_S = 5.0


def _kill_marked(marker: str) -> int:
    """SIGKILL every process this node launcher started (:data:`Env.NODE_LAUNCH`) and the
    process group each leads (torchrun starts its ranks in sessions of their own), and wait a
    little for them to be gone: a loaded machine takes a moment to end a killed process."""
    import psutil

    me, killed = os.getpid(), []
    for process in psutil.process_iter(["pid"]):
        if process.pid == me:
            continue
        try:
            if process.environ().get(Env.NODE_LAUNCH) != marker:
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(process.pid) == process.pid != os.getpgrp():
                    os.killpg(process.pid, signal.SIGKILL)
            process.kill()
            killed.append(process)
        except (psutil.Error, OSError):
            continue  # gone, or not ours to read
    psutil.wait_procs(killed, timeout=KILL_WAIT_S)
    return len(killed)


def _say(message: str) -> None:
    with contextlib.suppress(OSError):  # a terminal that hung up (ssh -tt) takes no more
        print(f"dlbench: {message}", flush=True)


def supervise(proc: subprocess.Popen[bytes], *, deadline: float | None, marker: str,
              grace: float = SHUTDOWN_TIMEOUT_S + 2.0) -> int:
    """Wait for this node's torchrun; forward the signals that stop it (ssh's SIGHUP too);
    past ``deadline`` stop it and everything it started: after a network split nothing else
    would (its ssh session is cut off and its peers are gone). Returns its exit status, or
    :data:`DEADLINE_EXIT`."""
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        left = None if deadline is None else deadline - time.time()
        if left is not None and left <= 0:
            break
        try:
            code = proc.wait(timeout=None if left is None else min(left, 1.0))
        except subprocess.TimeoutExpired:
            continue
        if code != 0:
            _kill_marked(marker)  # ranks a dying torchrun could not stop
        return _exit_status(code)
    _say(f"the run's deadline passed on this node: stopping its torchrun (pid {proc.pid})")
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _kill_marked(marker)
    return DEADLINE_EXIT


def _run_node(args: argparse.Namespace) -> int:
    under_srun = args.node_rank is None and "SLURM_STEP_ID" in os.environ
    node_rank = args.node_rank if args.node_rank is not None else slurm_node_rank()
    if node_rank is None:
        node_rank = 0
    role = "main" if node_rank == 0 else "worker"
    local_addr = args.local_addr
    if local_addr is None and under_srun:
        # srun gives every node the same command: each finds the address the others reach.
        local_addr = slurm_local_addr(os.environ, dict(a.split("=", 1) for a in args.addr))
    conf = dict(item.split("=", 1) for item in args.rdzv_conf)
    cmd = torchrun_command(
        args.child, nproc=args.nproc, nnodes=args.nnodes, node_rank=node_rank,
        endpoint=args.endpoint, run_id=args.run_id, local_addr=local_addr, rdzv_conf=conf,
    )
    marker = f"{args.run_id}/{node_rank}"
    env = {**os.environ, **launch_env(role), Env.NODE_LAUNCH: marker,
           # gloo and NCCL on the interface of the node's own address, not the hostname's.
           **socket_ifname_env(local_addr, os.environ)}
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if under_srun:  # read back by the `slurm` launcher on the first node (relay.py)
        step = f"{os.environ.get('SLURM_JOB_ID', '')}.{os.environ['SLURM_STEP_ID']}"
        _say(start_line(name, local_addr, node_rank, step).removeprefix("dlbench: ")
             + (f", interface {interface_of(local_addr)}" if local_addr else ""))
    sys.stdout.flush()
    proc = subprocess.Popen(cmd, env=env)
    code = supervise(proc, deadline=_deadline(os.environ), marker=marker)
    if under_srun:
        _say(exit_line(name, code).removeprefix("dlbench: "))
    return code


# -- the `slurm` subcommand: every node of the allocation, from its first one -----------------


def slurm_refusal(env: Mapping[str, str], *, hostname: str | None = None,
                  main_addr: str | None = None, scontrol: str | None = "scontrol") -> str | None:
    """Why the ``slurm`` launcher cannot run here (None: it can). Node 0 of the step, the
    allocation's first node, hosts the rendezvous: pytest elsewhere would wait out its
    ``max_duration`` for ranks that cannot reach it."""
    try:
        nodes = allocation_nodes(env, scontrol)
    except ValueError as exc:  # a list scontrol could not read either (or none is installed)
        name = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        return f"launcher: slurm: {name} cannot be read: {exc}"
    if not nodes:
        return ("launcher: slurm: no Slurm allocation here (SLURM_JOB_NODELIST is not set): run "
                "pytest inside one (sbatch or salloc), on its first node")
    host = hostname if hostname is not None else socket.gethostname()
    here = {host, host.split(".")[0], env.get("SLURMD_NODENAME", "")} - {""}
    first = nodes[0]
    if first not in here and first.split(".")[0] not in here:
        where = env.get("SLURMD_NODENAME") or host
        listed = ",".join(nodes[:4]) + (",..." if len(nodes) > 4 else "")
        return (f"launcher: slurm: pytest runs on {where}, not on the allocation's first node "
                f"{first} ({listed}), which hosts the rendezvous: start pytest there "
                f"(from salloc: srun --nodes=1 -w {first} pytest ...)")
    if main_addr is not None and not is_this_machine(main_addr):
        return (f"launcher: slurm: the system file's main node ({main_addr}) is not this "
                f"machine, the allocation's first node {first}: make {first} the main node")
    return None


def _stop_srun(proc: subprocess.Popen[bytes], steps: Sequence[str], grace: float) -> None:
    """End the step now: scancel it (the nodes that still answer end their tasks), SIGTERM to
    srun, SIGKILL after ``grace``. srun alone waits for a lost node until Slurm declares it
    DOWN (SlurmdTimeout, 300 s by default); its launcher ends at the run's deadline."""
    for step in sorted(set(steps)):
        if shutil.which("scancel") and step.split(".")[0]:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(["scancel", "--quiet", step], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10, check=False)
    _terminate([proc], grace=grace)


def run_srun(
    cmd: Sequence[str],
    names: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    poll_s: float = 0.2,
    settle_s: float = SETTLE_S,
    grace: float = 3.0,
) -> tuple[int, Outcome | None, NodeFailure | None]:
    """Run an ``srun --label`` step of node launchers and wait for it; stop it soon after a
    node's launcher fails. Returns the exit status, the outcome to record when it failed, and
    the failing node (recorded with :func:`.node_failure.record_failure`), if one is known.

    ``names`` are the allocation's nodes in order (task ``i`` on the ``i``-th). A failure that
    is another node's echo waits up to ``settle_s`` for its cause, as over ssh
    (:func:`run_nodes`); a node whose launcher said nothing more by then is the one lost."""
    proc = subprocess.Popen(list(cmd), env={**os.environ, **(env or {})},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    output = LabelledOutput(names, proc.stdout)
    steps: list[str] = []
    started: dict[int, str] = {}
    ended: set[int] = set()
    failures: list[NodeFailure] = []
    stopped: list[int] = []

    def drain() -> None:
        while not output.events.empty():
            event = output.events.get_nowait()
            if event.code is None:
                started[event.task] = event.name
                steps.append(event.step)
                continue
            ended.add(event.task)
            if event.code != 0:
                failures.append(NodeFailure(event.name, event.addr, event.code,
                                            tuple(output.tail(event.task)), event.task != 0))

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        first_at: float | None = None
        while not stopped:
            code = proc.poll()
            drain()
            if failures:
                first_at = first_at or time.monotonic()
                if (any(not f.is_echo for f in failures) or code is not None
                        or time.monotonic() - first_at >= settle_s):
                    break
            elif code is not None:
                break
            time.sleep(poll_s)
        if proc.poll() is None:
            _stop_srun(proc, steps, grace)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        output.join(timeout=2.0)
    drain()
    code = _exit_status(proc.returncode)
    if stopped and not failures:
        return 128 + stopped[0], None, None
    cause = first_failure(failures)
    lost_by_slurm = _node_failure(output.srun_tail)
    if lost_by_slurm is not None and (cause is None or cause.is_echo):
        name, line = lost_by_slurm  # Slurm declared the node lost: the cause, not its echoes
        task = next((t for t, n in output.names.items() if n == name), None)
        where = f"{name} ({output.addrs.get(task, '') if task is not None else ''})"
        return code or 1, Outcome(Status.CRASH, f"{where}: Slurm lost the node ({line})"), None
    if cause is None:
        if code == 0:
            return 0, None, None
        errors = [line for line in output.srun_tail if "error" in line.lower()]
        said = f": {errors[-1].strip()}" if errors else ""
        return code, Outcome(Status.FAIL, f"srun exited with status {code}{said}"), None
    lost = [task for task in range(len(names)) if task not in ended and task in started]
    if cause.is_echo and lost:
        task = lost[0]
        where = f"{output.name(task)} ({output.addrs.get(task, '')})"
        reason = (f"{where}: its launcher went silent (node lost?) when "
                  f"{cause.reason()}")
        return cause.returncode, Outcome(Status.CRASH, reason), None
    return cause.returncode, None, cause


#: srun's line when Slurm finds a node of the step gone (``SlurmdTimeout`` without an answer).
_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")


def _node_failure(lines: Sequence[str]) -> tuple[str, str] | None:
    """The node srun said Slurm lost, and srun's line, if it said so."""
    for line in lines:
        match = _NODE_FAILURE.search(line)
        if match is not None:
            return match.group(1), line.strip()
    return None


def _run_slurm(args: argparse.Namespace) -> int:
    stream = os.environ.get(Env.STREAM) or None
    refusal = slurm_refusal(os.environ, main_addr=args.main_addr)
    if refusal is not None:
        _say(record_end(stream, Outcome(Status.FAIL, refusal)).reason)
        return USAGE_ERROR  # where pytest runs does not fit the allocation: bad input
    names = allocation_nodes()[: args.nnodes]
    rdzv_conf: dict[str, Any] = dict(item.split("=", 1) for item in args.rdzv_conf)
    rdzv_conf.setdefault("join_timeout", join_timeout(_deadline(os.environ)))
    argv = node_command(args.child, nnodes=args.nnodes, nproc=args.nproc,
                        endpoint=args.endpoint, run_id=args.run_id, rdzv_conf=rdzv_conf,
                        addrs=dict(a.split("=", 1) for a in args.addr))
    code, outcome, cause = run_srun(srun_command(argv, nnodes=args.nnodes, label=True), names)
    if cause is not None:
        _say(record_failure(stream, cause).reason)
    elif outcome is not None:
        _say(record_end(stream, outcome, replace_rank_end=True).reason)
    return code


# -- the `launch` subcommand: every node, from the main one ------------------------------------


def _fail_now(stream: str | None, job: NodeJob, lines: Sequence[str], code: int) -> int:
    failure = NodeFailure(job.name, job.ip, code, tuple(lines), job.remote)
    outcome = record_failure(stream, failure)
    _say(outcome.reason)
    return code


def check_reachable(jobs: Sequence[tuple[NodeJob, list[str]]],
                    timeout_s: float) -> list[tuple[NodeJob, int, list[str]]]:
    """Run ``ssh ... true`` on every node at once: the nodes that did not answer, with ssh's
    exit status and its last lines. Seconds, where the job would wait out its rendezvous."""
    procs = [(job, subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)) for job, cmd in jobs]
    failed = []
    end = time.monotonic() + timeout_s
    for job, proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(0.1, end - time.monotonic()))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            code, out = 255, out + f"ssh: no answer in {timeout_s:g} s".encode()
        if code != 0:
            lines = out.decode("utf-8", "replace").splitlines()
            failed.append((job, 255, lines or [f"ssh: exited with status {code}"]))
    return failed


def _run_launch(args: argparse.Namespace) -> int:
    from pytest_dlbench.suite import load_system

    system = load_system(args.system)
    stream = os.environ.get(Env.STREAM) or None
    main_node = system.main_node
    if not is_this_machine(main_node.ip):
        reason = (f"{args.system}: pytest runs on a node other than the main one "
                  f"({main_node.name}, {main_node.ip}, is not this machine): start it there")
        _say(record_end(stream, Outcome(Status.FAIL, reason)).reason)
        return USAGE_ERROR  # the system file does not fit this machine: bad input
    env = dict(item.split("=", 1) for item in args.env)
    remote_env = {**env, **forwarded_env(os.environ), "PY_COLORS": "0", "NO_COLOR": "1"}
    rdzv_conf: dict[str, Any] = dict(item.split("=", 1) for item in args.rdzv_conf)
    rdzv_conf.setdefault("join_timeout", join_timeout(_deadline(os.environ)))
    launches = node_launches(system, args.child, nproc=args.nproc, run_id=args.run_id,
                             rdzv_conf=rdzv_conf)
    jobs: list[NodeJob] = []
    checks: list[tuple[NodeJob, list[str]]] = []
    for launch in launches:
        node = launch.node
        if launch.is_main:  # this machine: no ssh to itself
            jobs.append(NodeJob(node.name, node.ip, launch.argv, remote=False))
            continue
        job = NodeJob(node.name, node.ip, ssh_command(
            node, launch.argv, cwd=args.cwd or os.getcwd(), env=remote_env, ssh=system.ssh))
        jobs.append(job)
        checks.append((job, ["ssh", *ssh_options(system.ssh), ssh_target(node), "true"]))
    unreachable = check_reachable(checks, system.ssh.connect_timeout + 5.0)
    if unreachable:
        job, code, lines = unreachable[0]
        return _fail_now(stream, job, lines, code)
    code, failures = run_nodes(jobs, env=env)
    cause = first_failure(failures)
    if code != 0 and cause is not None:
        _say(record_failure(stream, cause).reason)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_dlbench.run.launch",
        description="Launch an njobs benchmark's ranks on one node or on all nodes of a system.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    node = sub.add_parser("node", help="this node's torchrun (under srun, or started by launch)")
    node.add_argument("--nnodes", type=int, required=True)
    node.add_argument("--nproc", type=int, required=True, help="ranks on this node")
    node.add_argument("--endpoint", required=True, help="c10d rendezvous HOST:PORT")
    node.add_argument("--run-id", required=True)
    node.add_argument("--node-rank", type=int, default=None,
                      help="0 on the main node (default: SLURM_NODEID, else 0)")
    node.add_argument("--local-addr", default=None, help="the address other nodes reach us at")
    node.add_argument("--rdzv-conf", action="append", default=[], metavar="KEY=VALUE")
    node.add_argument("--addr", action="append", default=[], metavar="NAME=IP",
                      help="under srun: the address of the node named NAME (SLURMD_NODENAME)")
    slurm = sub.add_parser("slurm", help="on the allocation's first node: srun a node launcher "
                                         "on each node")
    slurm.add_argument("--nnodes", type=int, required=True)
    slurm.add_argument("--nproc", type=int, required=True, help="ranks per node")
    slurm.add_argument("--endpoint", required=True, help="c10d rendezvous HOST:PORT")
    slurm.add_argument("--run-id", required=True)
    slurm.add_argument("--addr", action="append", default=[], metavar="NAME=IP",
                       help="a node's address (the system file's)")
    slurm.add_argument("--main-addr", default=None, help="the system file's main node's ip")
    slurm.add_argument("--rdzv-conf", action="append", default=[], metavar="KEY=VALUE")
    launch = sub.add_parser("launch", help="on the main node: this node plus the others over ssh")
    launch.add_argument("--system", required=True, help="the --bench-system file")
    launch.add_argument("--nproc", type=int, required=True, help="ranks per node")
    launch.add_argument("--run-id", required=True)
    launch.add_argument("--cwd", default=None, help="directory on the other nodes")
    launch.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment for the other nodes' launchers")
    launch.add_argument("--rdzv-conf", action="append", default=[], metavar="KEY=VALUE")
    for sub_parser in (node, slurm, launch):
        sub_parser.add_argument("child", nargs=argparse.REMAINDER,
                                help="-- then the command every rank runs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child and args.child[0] == "--":
        args.child = args.child[1:]
    if not args.child:
        _parser().error("give the command to run after --")
    if args.command == "node":
        return _run_node(args)
    if args.command == "slurm":
        return _run_slurm(args)
    return _run_launch(args)
