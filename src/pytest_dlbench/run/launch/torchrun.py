"""Command lines that start an ``njobs`` benchmark (parent side, no torch).

The parent pytest process runs the item's child command (``python -m pytest <nodeid> ...``)
under torch.distributed's elastic launcher instead of plain python, so every rank runs the very
same item with the same fixtures (design.md, "Execution"):

- one node: :func:`torchrun_command` (c10d rendezvous on ``127.0.0.1:0``: torchrun binds a free
  port itself, so concurrent jobs never clash; ``--local-addr=127.0.0.1``, so the ranks' master
  address is the loopback, not the hostname, which may not resolve);
- several nodes (``--bench-system`` lists them): the main node hosts the c10d rendezvous at its
  ``ip:port`` and the other nodes join it. :func:`njobs_launch` picks how they are started: over
  ``ssh`` from the main node as milabench does (``python -m pytest_dlbench.run.launch launch``,
  :mod:`.nodes`), or one launcher per node under Slurm's ``srun`` (``... node``).

Inside a rank, :mod:`.rank` reads torchrun's environment and picks the device.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.suite.system import Node, SshOptions, SystemConfig

__all__ = [
    "DEFAULT_RDZV_PORT",
    "MAX_HOSTS",
    "ROLE_ENV",
    "Launch",
    "NodeLaunch",
    "allocation_nodes",
    "expand_hostlist",
    "free_port",
    "job_nodes",
    "launch_env",
    "njobs_launch",
    "node_launches",
    "plan_nodes_reason",
    "rendezvous_endpoint",
    "slurm_node_rank",
    "srun_command",
    "ssh_command",
    "ssh_options",
    "ssh_target",
    "torchrun_command",
]

#: What a one-node job advertises (``--local-addr``), so that no rank resolves the hostname.
LOOPBACK = "127.0.0.1"
#: The c10d rendezvous port when the main node has no ``port`` (torchrun's own default).
DEFAULT_RDZV_PORT = 29400
#: A variable name, which a remote shell takes as it is (ssh_command).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: ``main`` on the node whose local rank 0 writes the stream, ``worker`` on the others.
ROLE_ENV = Env.NODE_ROLE
#: Seconds torchrun waits for its workers after SIGTERM before SIGKILL (its default is 30). Less
#: than the runner's KILL_GRACE_S, so on a timeout torchrun kills its workers before it is
#: killed itself: they run in sessions of their own, which killing torchrun's group misses.
#: (Those a SIGKILLed torchrun leaves, the parent finds by their DLBENCH_STREAM: run/child.py.)
SHUTDOWN_TIMEOUT_S = 2


# -- command lines (parent side, no torch) ------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"rendezvous endpoint must be HOST:PORT, got {quoted(endpoint)}")
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
    this node advertises to the others (its IP from the system file; torchrun's default is its
    FQDN, which other nodes may not resolve). One node advertises the loopback, ``127.0.0.1``:
    the ranks get it as ``MASTER_ADDR``, and the FQDN may not resolve even here (a VM without
    DNS), where every job would fail or hang to its deadline.
    """
    if nproc < 1 or nnodes < 1:
        raise ValueError(f"nproc and nnodes must be >= 1, got {nproc} and {nnodes}")
    _, port = _split_endpoint(endpoint)
    if nnodes > 1 and port == 0:
        raise ValueError("a multi-node rendezvous needs a fixed port, not 0")
    if nnodes == 1 and local_addr is None:
        local_addr = LOOPBACK
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
    addrs: Mapping[str, str] | None = None,
) -> list[str]:
    """``python -m pytest_dlbench.run.launch node ...``: one node's launcher.

    Without ``node_rank`` it is read from Slurm on that node (``SLURM_NODEID``). ``addrs``
    (node name -> ip, from a system file) lets a node under srun find its own address by its
    Slurm name.
    """
    cmd = [
        python, "-m", "pytest_dlbench.run.launch", "node",
        f"--nnodes={nnodes}", f"--nproc={nproc}", f"--endpoint={endpoint}", f"--run-id={run_id}",
    ]
    if node_rank is not None:
        cmd.append(f"--node-rank={node_rank}")
    if local_addr:
        cmd.append(f"--local-addr={local_addr}")
    for key, value in (rdzv_conf or {}).items():
        cmd.append(f"--rdzv-conf={key}={_conf_value(value)}")
    cmd += [f"--addr={name}={ip}" for name, ip in (addrs or {}).items()]
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


def ssh_options(ssh: SshOptions | None = None, sshkey: str | None = None) -> list[str]:
    """ssh's options for reaching a node: no prompt, the system file's port, identity and
    known-hosts file, and timeouts that make an unreachable or silent node fail in seconds
    (``ConnectTimeout``; ``ServerAliveInterval`` x ``ServerAliveCountMax`` once connected)."""
    ssh = ssh or SshOptions()
    opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"]
    identity = sshkey or ssh.identity
    if identity:
        opts += ["-i", os.path.expanduser(identity)]
    if ssh.port:
        opts += ["-p", str(ssh.port)]
    if ssh.known_hosts:
        opts += ["-o", f"UserKnownHostsFile={os.path.expanduser(ssh.known_hosts)}"]
    return [*opts, "-o", f"ConnectTimeout={ssh.connect_timeout}",
            "-o", f"ServerAliveInterval={ssh.alive_interval}",
            "-o", f"ServerAliveCountMax={ssh.alive_count}"]


def ssh_target(node: Node) -> str:
    """``user@ip`` (or ``ip``), refused where ssh would read it as an option."""
    target = f"{node.user}@{node.ip}" if node.user else node.ip
    if target.startswith("-"):
        raise ValueError(
            f"node {quoted(node.name)}: {quoted(target)} would be read by ssh as an option")
    return target


def ssh_command(
    node: Node,
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    sshkey: str | None = None,
    ssh: SshOptions | None = None,
) -> list[str]:
    """``ssh [-i KEY] user@ip 'cd CWD && env K=V ... ARGV'``: ``argv`` run on ``node``.

    ssh does not forward the environment, hence ``env``. ``-tt`` gives the remote command a
    terminal: when this ssh is killed (the benchmark timed out), the remote torchrun gets SIGHUP
    and stops its workers, instead of running on unattended. ``BatchMode`` fails rather than
    prompting for a password nobody will type.
    """
    target = ssh_target(node)
    cmd = ["ssh", "-tt", *ssh_options(ssh, sshkey)]
    remote = shlex.join(argv)
    if env:
        # Everything in the remote shell's command line is a variable name (checked here too:
        # the suite's are checked when it is resolved) or quoted.
        bad = [k for k in env if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"environment variable name {quoted(bad[0])} is not a variable name")
        remote = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + remote
    if cwd is not None:
        remote = f"cd {shlex.quote(str(cwd))} && {remote}"
    return [*cmd, target, remote]


def srun_command(node_argv: Sequence[str], *, nnodes: int, label: bool = False) -> list[str]:
    """``srun`` starting one node launcher per node of the allocation (node rank from Slurm).
    ``label`` puts each task's number in front of its lines (``1: ...``): the ``slurm``
    launcher reads them to name each node's lines and its failure."""
    return [
        "srun", f"--nodes={nnodes}", f"--ntasks={nnodes}", "--ntasks-per-node=1",
        # One failed node ends the step instead of leaving the others waiting in a collective.
        "--kill-on-bad-exit=1",
        *(["--label"] if label else []),
        *node_argv,
    ]


#: The most hosts a Slurm host list may name (the largest machines have tens of thousands): the
#: list comes from an environment variable, and ``node[1-100000000]`` is not expanded.
MAX_HOSTS = 100_000
#: The most digits of a number in a host list's range.
_MAX_DIGITS = 18


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (``node[1-3,5],gpu[01-02]-ib``) as names, in order. The
    same as ``scontrol show hostnames``, without needing it (see :func:`allocation_nodes`).
    Raises ValueError (one line) on a malformed list, or one of more than :data:`MAX_HOSTS`
    hosts, counted before any is expanded."""
    items = _split_top(text.strip())
    total = sum(_count_one(item) for item in items)
    if total > MAX_HOSTS:
        raise ValueError(f"Slurm host list {_shown(text)} names {total:,} hosts, more than "
                         f"{MAX_HOSTS:,}")
    names: list[str] = []
    for item in items:
        names += _expand_one(item)
    return names


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            raise ValueError(f"bad Slurm host list {_shown(text)}")
        if char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"bad Slurm host list {_shown(text)}: a '[' is not closed")
    items.append(text[start:])
    return [item for item in items if item]


def _ranges(item: str) -> tuple[str, list[tuple[int, int, int]], str]:
    """``head[ranges]rest``: the head, each range as (first, last, width), the rest."""
    open_at = item.find("[")
    close_at = item.find("]", open_at)
    if close_at < 0:
        raise ValueError(f"bad Slurm host list {_shown(item)}: a '[' is not closed")
    ranges = []
    for part in item[open_at + 1:close_at].split(","):
        low, sep, high = part.partition("-")
        if (not low.isdigit() or (sep and not high.isdigit())
                or max(len(low), len(high)) > _MAX_DIGITS):
            raise ValueError(f"bad Slurm host list range {_shown(part)} in {_shown(item)}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"bad Slurm host list range {_shown(part)} in {_shown(item)}: "
                             "it ends before it starts")
        ranges.append((first, last, len(low)))  # node[01-10]: the zeros of the first kept
    return item[:open_at], ranges, item[close_at + 1:]


def _count_one(item: str) -> int:
    if "[" not in item:
        if "]" in item:
            raise ValueError(f"bad Slurm host list {_shown(item)}")
        return 1
    _, ranges, rest = _ranges(item)
    return sum(last - first + 1 for first, last, _ in ranges) * _count_one(rest)


def _expand_one(item: str) -> list[str]:
    if "[" not in item:
        return [item]
    head, ranges, rest = _ranges(item)
    values = [str(n).zfill(width) for first, last, width in ranges
              for n in range(first, last + 1)]
    return [head + value + tail for value in values for tail in _expand_one(rest)]


def allocation_nodes(env: Mapping[str, str] | None = None,
                     scontrol: str | None = "scontrol") -> list[str]:
    """The allocation's nodes in Slurm's order (its first node first), from
    ``SLURM_JOB_NODELIST`` (else ``SLURM_NODELIST``): ``scontrol show hostnames`` where it
    runs, else :func:`expand_hostlist`. Empty outside an allocation."""
    env = os.environ if env is None else env
    text = (env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "").strip()
    if not text:
        return []
    if scontrol and shutil.which(scontrol):
        try:
            done = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True,
                                  text=True, timeout=10, check=False)
            if done.returncode == 0 and done.stdout.split():
                return done.stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            pass  # the parser below says the same
    return expand_hostlist(text)


def slurm_node_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This node's rank in a one-task-per-node ``srun`` step: SLURM_NODEID, else SLURM_PROCID."""
    env = os.environ if env is None else env
    for key in ("SLURM_NODEID", "SLURM_PROCID"):
        value = env.get(key)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def job_nodes(system: SystemConfig, slurm_env: Mapping[str, str] | None = None) -> int:
    """How many nodes an njobs job spans on ``system`` (what :func:`njobs_launch` launches):
    every node of the system file, or, with ``launcher: slurm`` and one node or none listed,
    the allocation's node count."""
    launcher = str(system.options.get("launcher", "ssh")).lower()
    if launcher == "slurm" and len(system.nodes) <= 1:
        env = os.environ if slurm_env is None else slurm_env
        count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
        return int(count) if count.isdigit() else 1
    return max(1, len(system.nodes))


def plan_nodes_reason(wanted: int | None, system: SystemConfig) -> str | None:
    """Why an njobs benchmark with ``plan.nodes: wanted`` cannot run on ``system`` (None: it
    can). A job spans every node of the system, so a step of a sweep over nodes runs where the
    system (or allocation) has exactly its node count (docs/time-to-train.md)."""
    if not wanted:
        return None
    have = job_nodes(system)
    if wanted == have:
        return None
    return (f"needs {wanted} node{'s' if wanted != 1 else ''}, the system has {have} "
            f"(run it with a {wanted}-node --bench-system file or allocation)")


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
        raise ValueError(f"system 'launcher' must be 'ssh' or 'slurm', got {quoted(launcher)}")
    if launcher == "slurm":
        slurm_env = os.environ if slurm_env is None else slurm_env
        listed: dict[str, str] = {}
        main_addr = None
        if len(system.nodes) > 1:
            nnodes, endpoint = len(system.nodes), rendezvous_endpoint(system)
            listed = {node.name: node.ip for node in system.nodes}
            main_addr = system.main_node.ip
        else:
            count = slurm_env.get("SLURM_JOB_NUM_NODES") or slurm_env.get("SLURM_NNODES") or "1"
            nnodes = int(count)
            # The batch script runs on the allocation's first node (SLURM_NODEID 0): this one
            # (the `slurm` launcher refuses to run anywhere else).
            main_port = system.main_node.port
            endpoint = f"{socket.gethostname()}:{main_port or free_port('0.0.0.0')}"
        if nnodes > 1:
            # Not srun itself: the `slurm` launcher (nodes.py) checks this is the allocation's
            # first node, runs srun --label, names the failing node and stops the step.
            argv = [python, "-m", "pytest_dlbench.run.launch", "slurm", f"--nnodes={nnodes}",
                    f"--nproc={nproc}", f"--endpoint={endpoint}", f"--run-id={run_id}"]
            argv += [f"--addr={name}={ip}" for name, ip in listed.items()]
            if main_addr is not None:
                argv.append(f"--main-addr={main_addr}")
            return Launch([*argv, "--", *child_cmd], {**env, **launch_env()}, nnodes, "slurm")
    elif len(system.nodes) > 1:
        if system.path is None:
            raise ValueError("launching over ssh reads the nodes from a system file; this "
                             "SystemConfig has no path")
        argv = [python, "-m", "pytest_dlbench.run.launch", "launch",
                f"--system={Path(system.path).resolve()}", f"--nproc={nproc}",
                f"--run-id={run_id}"]
        if cwd is not None:
            argv.append(f"--cwd={cwd}")
        argv += [f"--env={k}={v}" for k, v in env.items()]
        return Launch([*argv, "--", *child_cmd], {**env, **launch_env()}, len(system.nodes),
                      "ssh")
    cmd = torchrun_command(child_cmd, nproc=nproc, run_id=run_id, python=python)
    return Launch(cmd, {**env, **launch_env()}, 1, "local")
