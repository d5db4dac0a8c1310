"""``njobs`` benchmarks: one job over all device slots, launched with torchrun, on one node or many.

The parent pytest process runs the item's child command (``python -m pytest <nodeid> ...``)
under torch.distributed's elastic launcher instead of plain python, so every rank runs the very
same item with the same fixtures (design.md, "Execution"):

- one node: :func:`torchrun_command` (c10d rendezvous on ``127.0.0.1:0``: torchrun binds a free
  port itself, so concurrent jobs never clash);
- several nodes (``--bench-system`` lists them): the main node hosts the c10d rendezvous at its
  ``ip:port`` and the other nodes join it. :func:`njobs_launch` picks how they are started: over
  ``ssh`` from the main node as milabench does (``python -m pytest_dlbench.run.launch.torchrun launch``),
  or one launcher per node under Slurm's ``srun`` (``python -m pytest_dlbench.run.launch.torchrun node``).

Inside a rank, :class:`RankInfo` reads torchrun's environment, :func:`rank_device` picks and
pins the rank's device, :func:`init_process_group` makes the group, and :func:`open_rank_stream`
gives the reporting rank the run stream and the others a :class:`~pytest_dlbench.measure.stream.NullStream`.

The reporting rank is local rank 0 of the main node (``DLBENCH_NODE_ROLE=main``, set by the
launchers here), else global rank 0. Not always global rank 0: c10d numbers the nodes by sorting
their addresses, so rank 0 may live on another node, whose disk the parent never reads.

torch is imported inside functions only: importing this module (to build a command line) is cheap.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.measure.stream import NullStream, Stream, StreamWriter
from pytest_dlbench.suite.system import Node, SystemConfig

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_RDZV_PORT",
    "ROLE_ENV",
    "Launch",
    "NodeLaunch",
    "RankInfo",
    "cpu_share",
    "destroy_process_group",
    "free_port",
    "init_process_group",
    "launch_nodes",
    "main",
    "njobs_launch",
    "node_launches",
    "open_rank_stream",
    "pin_cpu_share",
    "rank_device",
    "rendezvous_endpoint",
    "slurm_node_rank",
    "srun_command",
    "ssh_command",
    "torchrun_command",
]

#: The c10d rendezvous port when the main node has no ``port`` (torchrun's own default).
DEFAULT_RDZV_PORT = 29400
#: ``main`` on the node whose local rank 0 writes the stream, ``worker`` on the others.
ROLE_ENV = "DLBENCH_NODE_ROLE"
#: Seconds torchrun waits for its workers after SIGTERM before SIGKILL (its default is 30). Less
#: than the runner's KILL_GRACE_S, so on a timeout torchrun kills its workers before it is
#: killed itself: they run in sessions of their own, which killing torchrun's group misses.
SHUTDOWN_TIMEOUT_S = 2
#: Default timeout of a collective (a peer that died or never came).
PG_TIMEOUT_S = 300.0


# -- command lines (parent side, no torch) ------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"rendezvous endpoint must be HOST:PORT, got {endpoint!r}")
    return host, int(port)


def torchrun_command(
    child_cmd: Sequence[str],
    *,
    nproc: int,
    nnodes: int = 1,
    node_rank: int | None = None,
    endpoint: str = "127.0.0.1:0",
    run_id: str,
    python: str = sys.executable,
    local_addr: str | None = None,
    rdzv_conf: Mapping[str, object] | None = None,
) -> list[str]:
    """``python -m torch.distributed.run ... --no-python -- <child_cmd>`` for one node.

    ``endpoint`` is the c10d rendezvous; port 0 lets torchrun bind a free one (one node only:
    other nodes could not find it). ``node_rank`` says which node hosts the rendezvous store
    (``is_host``: node 0); it is not passed as ``--node-rank``, which c10d ignores (with a
    warning) and which torchrun documents for the static backend only. ``local_addr`` is what
    this node advertises to the others (its IP from the system file; the default is its FQDN,
    which other nodes may not resolve).
    """
    if nproc < 1 or nnodes < 1:
        raise ValueError(f"nproc and nnodes must be >= 1, got {nproc} and {nnodes}")
    _, port = _split_endpoint(endpoint)
    if nnodes > 1 and port == 0:
        raise ValueError("a multi-node rendezvous needs a fixed port, not 0")
    conf: dict[str, object] = dict(rdzv_conf or {})
    if nnodes > 1 and node_rank is not None:
        # Explicit, not guessed from hostnames: the main node's IP may be one of several.
        conf.setdefault("is_host", "true" if node_rank == 0 else "false")
    cmd = [
        python, "-m", "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        # A restarted worker would run the item again and append to the same stream.
        "--max-restarts=0",
    ]
    if conf:
        cmd.append("--rdzv-conf=" + ",".join(f"{k}={_conf_value(v)}" for k, v in conf.items()))
    if local_addr:
        cmd.append(f"--local-addr={local_addr}")
    # --no-python: child_cmd starts with its own interpreter (`python -m pytest ...`).
    return [*cmd, "--no-python", "--", *child_cmd]


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def launch_env(role: str | None = None) -> dict[str, str]:
    """Environment for a torchrun launcher: the node role and torchrun's shutdown grace."""
    env = {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(SHUTDOWN_TIMEOUT_S)}
    if role is not None:
        env[ROLE_ENV] = role
    return env


def rendezvous_endpoint(system: SystemConfig, default_port: int = DEFAULT_RDZV_PORT) -> str:
    """``<main ip>:<main port>``: where the main node hosts the c10d rendezvous."""
    main_node = system.main_node
    return f"{main_node.ip}:{main_node.port or default_port}"


def _ordered_nodes(system: SystemConfig) -> list[Node]:
    """The main node first (node rank 0), then the others in file order."""
    main_node = system.main_node
    return [main_node, *(n for n in system.nodes if n is not main_node)]


@dataclass(frozen=True)
class NodeLaunch:
    """What one node runs: its ``node`` launcher command (see :func:`main`)."""

    node: Node
    node_rank: int
    argv: list[str]

    @property
    def is_main(self) -> bool:
        return self.node_rank == 0


def node_command(
    child_cmd: Sequence[str],
    *,
    nnodes: int,
    nproc: int,
    endpoint: str,
    run_id: str,
    node_rank: int | None = None,
    local_addr: str | None = None,
    python: str = sys.executable,
    rdzv_conf: Mapping[str, object] | None = None,
) -> list[str]:
    """``python -m pytest_dlbench.run.launch.torchrun node ...``: one node's launcher.

    Without ``node_rank`` it is read from Slurm on that node (``SLURM_NODEID``).
    """
    cmd = [
        python, "-m", "pytest_dlbench.run.launch.torchrun", "node",
        f"--nnodes={nnodes}", f"--nproc={nproc}", f"--endpoint={endpoint}", f"--run-id={run_id}",
    ]
    if node_rank is not None:
        cmd.append(f"--node-rank={node_rank}")
    if local_addr:
        cmd.append(f"--local-addr={local_addr}")
    for key, value in (rdzv_conf or {}).items():
        cmd.append(f"--rdzv-conf={key}={_conf_value(value)}")
    return [*cmd, "--", *child_cmd]


def node_launches(
    system: SystemConfig,
    child_cmd: Sequence[str],
    *,
    nproc: int,
    run_id: str,
    python: str = sys.executable,
    rdzv_conf: Mapping[str, object] | None = None,
) -> list[NodeLaunch]:
    """One launcher per node of ``system``, the main node first (node rank 0)."""
    nodes = _ordered_nodes(system)
    endpoint = rendezvous_endpoint(system)
    return [
        NodeLaunch(
            node=node,
            node_rank=rank,
            argv=node_command(
                child_cmd, nnodes=len(nodes), nproc=nproc, endpoint=endpoint, run_id=run_id,
                node_rank=rank, local_addr=node.ip, python=python, rdzv_conf=rdzv_conf,
            ),
        )
        for rank, node in enumerate(nodes)
    ]


def ssh_command(
    node: Node,
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    sshkey: str | None = None,
) -> list[str]:
    """``ssh [-i KEY] user@ip 'cd CWD && env K=V ... ARGV'``: ``argv`` run on ``node``.

    ssh does not forward the environment, hence ``env``. ``-tt`` gives the remote command a
    terminal: when this ssh is killed (the benchmark timed out), the remote torchrun gets SIGHUP
    and stops its workers, instead of running on unattended. ``BatchMode`` fails rather than
    prompting for a password nobody will type.
    """
    target = f"{node.user}@{node.ip}" if node.user else node.ip
    cmd = ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"]
    if sshkey:
        cmd += ["-i", os.path.expanduser(sshkey)]
    remote = shlex.join(argv)
    if env:
        remote = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + remote
    if cwd is not None:
        remote = f"cd {shlex.quote(str(cwd))} && {remote}"
    return [*cmd, target, remote]


def srun_command(node_argv: Sequence[str], *, nnodes: int) -> list[str]:
    """``srun`` starting one node launcher per node of the allocation (node rank from Slurm)."""
    return [
        "srun", f"--nodes={nnodes}", f"--ntasks={nnodes}", "--ntasks-per-node=1",
        # One failed node ends the step instead of leaving the others waiting in a collective.
        "--kill-on-bad-exit=1",
        *node_argv,
    ]


def slurm_node_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This node's rank in a one-task-per-node ``srun`` step: SLURM_NODEID, else SLURM_PROCID."""
    env = os.environ if env is None else env
    for key in ("SLURM_NODEID", "SLURM_PROCID"):
        value = env.get(key)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


@dataclass(frozen=True)
class Launch:
    """What the parent runs for one njobs item: ``argv`` with ``env`` added to its own."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    nnodes: int = 1
    launcher: str = "local"  # local | ssh | slurm


def njobs_launch(
    child_cmd: Sequence[str],
    *,
    system: SystemConfig,
    nproc: int,
    run_id: str,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
    slurm_env: Mapping[str, str] | None = None,
) -> Launch:
    """The command that runs one njobs item's child command as a torchrun job.

    - ``system`` with one node: torchrun on this machine.
    - several nodes: the ``launch`` subcommand (the main node ssh-es into the others), or, with
      ``launcher: slurm`` in the system file, ``srun`` with one ``node`` launcher per node.
      ``launcher: slurm`` with one node or none listed takes the node count from the
      allocation (``SLURM_JOB_NUM_NODES``) and hosts the rendezvous on this machine.

    ``env`` is what the child command needs on top of the inherited environment (the parent's
    ``child_env``): it is sent to the other nodes explicitly, since ssh does not forward it.
    """
    env = dict(env or {})
    launcher = str(system.options.get("launcher", "ssh")).lower()
    if launcher not in ("ssh", "slurm"):
        raise ValueError(f"system 'launcher' must be 'ssh' or 'slurm', got {launcher!r}")
    if launcher == "slurm":
        slurm_env = os.environ if slurm_env is None else slurm_env
        if len(system.nodes) > 1:
            nnodes, endpoint = len(system.nodes), rendezvous_endpoint(system)
        else:
            count = slurm_env.get("SLURM_JOB_NUM_NODES") or slurm_env.get("SLURM_NNODES") or "1"
            nnodes = int(count)
            # The batch script runs on the allocation's first node (SLURM_NODEID 0): this one.
            main_port = system.main_node.port
            endpoint = f"{socket.gethostname()}:{main_port or free_port('0.0.0.0')}"
        if nnodes > 1:
            argv = node_command(child_cmd, nnodes=nnodes, nproc=nproc, endpoint=endpoint,
                                run_id=run_id, python=python)
            return Launch(srun_command(argv, nnodes=nnodes), {**env, **launch_env()}, nnodes,
                          "slurm")
    elif len(system.nodes) > 1:
        if system.path is None:
            raise ValueError("launching over ssh reads the nodes from a system file; this "
                             "SystemConfig has no path")
        argv = [python, "-m", "pytest_dlbench.run.launch.torchrun", "launch",
                f"--system={Path(system.path).resolve()}", f"--nproc={nproc}",
                f"--run-id={run_id}"]
        if cwd is not None:
            argv.append(f"--cwd={cwd}")
        argv += [f"--env={k}={v}" for k, v in env.items()]
        return Launch([*argv, "--", *child_cmd], {**env, **launch_env()}, len(system.nodes),
                      "ssh")
    cmd = torchrun_command(child_cmd, nproc=nproc, run_id=run_id, python=python)
    return Launch(cmd, {**env, **launch_env()}, 1, "local")


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
        prog="python -m pytest_dlbench.run.launch.torchrun",
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


# -- inside a rank (torch imported lazily) -----------------------------------------------------


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    value = env.get(key)
    return int(value) if value not in (None, "") else default


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a torchrun job, from torchrun's environment."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    nnodes: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    run_id: str | None = None
    role: str | None = None
    launched: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankInfo:
        env = os.environ if env is None else env
        launched = "RANK" in env and "WORLD_SIZE" in env
        if not launched:
            return cls(role=env.get(ROLE_ENV) or None)
        world = _int(env, "WORLD_SIZE", 1)
        local_world = _int(env, "LOCAL_WORLD_SIZE", world)
        return cls(
            rank=_int(env, "RANK", 0),
            local_rank=_int(env, "LOCAL_RANK", 0),
            world_size=world,
            local_world_size=local_world,
            node_rank=_int(env, "GROUP_RANK", 0),
            nnodes=_int(env, "GROUP_WORLD_SIZE", max(1, world // max(1, local_world))),
            master_addr=env.get("MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT", 0) or None,
            run_id=env.get("TORCHELASTIC_RUN_ID"),
            role=env.get(ROLE_ENV) or None,
            launched=True,
        )

    @property
    def is_distributed(self) -> bool:
        """Started by torchrun (even with one rank): the rank needs a process group."""
        return self.launched

    @property
    def is_main(self) -> bool:
        """The rank that writes the run stream (see the module's docstring)."""
        if not self.launched:
            return True
        if self.role is not None:
            return self.role == "main" and self.local_rank == 0
        return self.rank == 0

    @property
    def items_scale(self) -> int:
        """Items per step of the job over those of one rank (ranks step together)."""
        return self.world_size if self.launched else 1

    def describe(self) -> dict[str, Any]:
        """Fields for the ``config`` record: empty outside torchrun."""
        if not self.launched:
            return {}
        return {"distributed": {"world_size": self.world_size, "nnodes": self.nnodes,
                                "nproc_per_node": self.local_world_size, "rank": self.rank}}


def open_rank_stream(path: str | Path, rank: RankInfo | None = None) -> Stream:
    """The run stream on the reporting rank; a :class:`NullStream` on every other rank.

    Other ranks write nothing: in DDP every step ends in an all-reduce, so all ranks' step times
    agree and one rank's stream, scaled by the world size, is the job's throughput (seed 002,
    "Timing Distributed Training"). Per-rank files would be picked up as benchmarks of their
    own by ``*.data`` readers, and on other nodes they land on disks the parent never reads.
    """
    rank = RankInfo.from_env() if rank is None else rank
    return StreamWriter(path) if rank.is_main else NullStream()


def cpu_share(index: int, count: int, allowed: Sequence[int]) -> list[int]:
    """Cores of slot ``index`` out of ``count``: ``[index*c, (index+1)*c)`` of ``allowed``
    (sorted), ``c = len(allowed) // count``. With more slots than cores, one core each,
    round-robin."""
    cores = sorted(allowed)
    if not cores or count < 1 or not 0 <= index < count:
        raise ValueError(f"no cores for slot {index} of {count} among {cores}")
    per = len(cores) // count
    if per == 0:
        return [cores[index % len(cores)]]
    return cores[index * per : (index + 1) * per]


def pin_cpu_share(index: int, count: int) -> list[int]:
    """Pin this process (all its threads) to its share of the allowed cores and size torch's
    thread pool to it. Returns the cores; ``[]`` where affinity is not supported."""
    import torch

    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return []
    cores = cpu_share(index, count, list(allowed))
    # sched_setaffinity(0) pins the calling thread only; threads already running (gloo, OpenMP,
    # pytest's) keep the old mask unless each is set. New threads inherit the caller's mask.
    tasks = Path("/proc/self/task")
    tids = [int(t) for t in os.listdir(tasks)] if tasks.is_dir() else [0]
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cores)
    torch.set_num_threads(len(cores))
    return cores


@functools.lru_cache(maxsize=1)
def _rank_device(rank: RankInfo) -> torch.device:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        if not rank.launched:
            return torch.device("cuda", torch.cuda.current_device())
        # torchrun leaves every GPU visible to every rank: the local rank picks one.
        index = rank.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if rank.launched:
        pin_cpu_share(rank.local_rank, rank.local_world_size)
    return torch.device("cpu")


def rank_device(rank: RankInfo | None = None) -> torch.device:
    """This process's device: ``cuda:LOCAL_RANK`` under torchrun with GPUs, the current GPU
    outside torchrun, else the CPU (under torchrun pinned to the rank's share of the cores).
    Computed once per process."""
    return _rank_device(RankInfo.from_env() if rank is None else rank)


def init_process_group(device: Any, *, timeout_s: float | None = None) -> Any:
    """The default process group from torchrun's environment: ``nccl`` for a CUDA device,
    ``gloo`` otherwise. Returns the group (``WORLD``); reuses one already initialised."""
    import datetime

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.group.WORLD
    device = torch.device(device)
    timeout = datetime.timedelta(
        seconds=timeout_s if timeout_s is not None
        else float(os.environ.get("DLBENCH_PG_TIMEOUT_S", PG_TIMEOUT_S))
    )
    if device.type == "cuda":
        # device_id binds the group to this rank's GPU: NCCL connects now, not in the first
        # timed step, and the barrier at teardown knows its device.
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return dist.group.WORLD


def destroy_process_group() -> None:
    """Destroy the default group if there is one (idempotent)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
