"""Running launchers: ``python -m pytest_dlbench.run.launch node|launch``.

``node`` execs this node's torchrun (under ``srun``, or started over ssh by ``launch``);
``launch`` runs on the main node, starts the other nodes over ssh and waits for all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_dlbench.run.launch.torchrun import (
    launch_env,
    node_launches,
    slurm_node_rank,
    ssh_command,
    torchrun_command,
)

__all__ = ["launch_nodes", "main"]


# -- running launchers (the `node` and `launch` subcommands) -----------------------------------


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


def launch_nodes(
    commands: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    poll_s: float = 0.2,
) -> int:
    """Run one launcher per node at once and wait for all; the first failure stops the rest.

    Returns 0, or the exit status of the first launcher that failed (128 + signal if killed).
    On SIGTERM/SIGINT the launchers are stopped, then this returns.
    """
    procs = [
        subprocess.Popen(list(cmd), env={**os.environ, **(env or {})}, cwd=cwd,
                         stdin=subprocess.DEVNULL)
        for cmd in commands
    ]
    stopped: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stopped:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _terminate(procs)
                code = failed[0]
                return 128 - code if code < 0 else code
            if all(c == 0 for c in codes):
                return 0
            time.sleep(poll_s)
        _terminate(procs)
        return 128 + stopped[0]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_node(args: argparse.Namespace) -> int:
    node_rank = args.node_rank if args.node_rank is not None else slurm_node_rank()
    if node_rank is None:
        node_rank = 0
    role = "main" if node_rank == 0 else "worker"
    conf = dict(item.split("=", 1) for item in args.rdzv_conf)
    cmd = torchrun_command(
        args.child, nproc=args.nproc, nnodes=args.nnodes, node_rank=node_rank,
        endpoint=args.endpoint, run_id=args.run_id, local_addr=args.local_addr, rdzv_conf=conf,
    )
    env = {**os.environ, **launch_env(role)}
    sys.stdout.flush()
    # exec: signals from srun, ssh's SIGHUP or the parent reach torchrun itself.
    os.execvpe(cmd[0], cmd, env)
    return 1  # pragma: no cover - execvpe does not return


def _run_launch(args: argparse.Namespace) -> int:
    from pytest_dlbench.suite import load_system

    system = load_system(args.system)
    env = dict(item.split("=", 1) for item in args.env)
    rdzv_conf = dict(item.split("=", 1) for item in args.rdzv_conf)
    launches = node_launches(system, args.child, nproc=args.nproc, run_id=args.run_id,
                             rdzv_conf=rdzv_conf)
    sshkey = system.options.get("sshkey")
    commands: list[list[str]] = []
    for launch in launches:
        if launch.is_main:
            commands.append(launch.argv)  # this machine: no ssh to itself
        else:
            commands.append(ssh_command(launch.node, launch.argv, cwd=args.cwd or os.getcwd(),
                                        env=env, sshkey=str(sshkey) if sshkey else None))
    return launch_nodes(commands, env=env)


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
    launch = sub.add_parser("launch", help="on the main node: this node plus the others over ssh")
    launch.add_argument("--system", required=True, help="the --bench-system file")
    launch.add_argument("--nproc", type=int, required=True, help="ranks per node")
    launch.add_argument("--run-id", required=True)
    launch.add_argument("--cwd", default=None, help="directory on the other nodes")
    launch.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment for the other nodes' launchers")
    launch.add_argument("--rdzv-conf", action="append", default=[], metavar="KEY=VALUE")
    for sub_parser in (node, launch):
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
    return _run_launch(args)
