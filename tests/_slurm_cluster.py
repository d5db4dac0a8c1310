"""A real Slurm on one machine, for tests/run/test_slurm_netns.py (issue 39): a munged, a
slurmctld and one slurmd per node, each node a set of network, UTS, mount and PID namespaces
(its hostname its own and resolving to ``127.0.1.1``, as Debian's installer writes it), the
nodes joined by a bridge in a namespace of its own (so that cutting a node off leaves the
others and the controller reachable).

Debian's ``slurmctld slurmd slurm-client munge`` (``.ci/run`` installs them); root. Nothing
here is started by systemd: every daemon is started by hand and stopped by :meth:`remove`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import _netns
from _netns import bring_up, remove_namespace, sh, write_hosts
from _polling import wait_until

TOOLS = ("ip", "unshare", "nsenter", "mount", "munged", "slurmctld", "slurmd", "srun",
         "sbatch", "salloc", "sinfo", "scontrol")

#: Each node's PID 1: it names the node, gives it its hosts file, starts its daemons and reaps
#: every orphan (slurmd and slurmstepd daemonise); when it ends, the kernel ends the rest.
INIT = r'''
import os, signal, socket, subprocess, sys
name, hosts, *cmds = sys.argv[1:]
socket.sethostname(name)
subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
children = {subprocess.Popen(cmd.split("\x1f")).pid for cmd in cmds}
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        os._exit(0)
    if pid in children:
        os._exit(1)  # a daemon died: the node is down
'''


def missing() -> str | None:
    """Why this machine cannot run the cluster (None: it can)."""
    return _netns.missing(TOOLS, "Debian's slurmctld slurmd slurm-client munge iproute2 "
                                 "util-linux")


@dataclass
class SlurmCluster:
    root: Path
    names: tuple[str, ...] = ("node1", "node2")
    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000}")
    net: int = field(default_factory=lambda: 20 + os.getpid() % 200)
    inits: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    munged: subprocess.Popen[bytes] | None = None

    # -- names ---------------------------------------------------------------------------------

    @property
    def bridge_ns(self) -> str:
        return f"dls{self.tag}br"

    def ns(self, name: str) -> str:
        return f"dls{self.tag}{name}"

    def ip(self, name: str) -> str:
        return f"10.79.{self.net}.{self.names.index(name) + 1}"

    def link(self, name: str) -> str:
        return f"dls{self.tag}v{self.names.index(name) + 1}"

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's commands: this cluster's configuration, none of a
        surrounding run's variables."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM", "GLOO_", "NCCL_", "PYTEST_", "DLBENCH_"))}
        return {**env, "SLURM_CONF": str(self.conf)}

    # -- up ------------------------------------------------------------------------------------

    def build(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._network()
        self._munge()
        self._config()
        (self.root / "init.py").write_text(INIT)
        for name in self.names:
            daemons = []
            if name == self.names[0]:
                daemons.append(["slurmctld", "-D", "-i"])
            daemons.append(["slurmd", "-D", "-N", name])
            self._start_node(name, daemons)
        self.wait_idle()

    def _network(self) -> None:
        sh("ip", "netns", "add", self.bridge_ns)
        sh("ip", "netns", "exec", self.bridge_ns, "ip", "link", "add", "br0", "type", "bridge")
        sh("ip", "netns", "exec", self.bridge_ns, "ip", "link", "set", "br0", "up")
        for name in self.names:
            ns, link, peer = self.ns(name), self.link(name), self.link(name) + "b"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", link, "netns", ns)
            sh("ip", "link", "set", peer, "netns", self.bridge_ns)
            sh("ip", "netns", "exec", self.bridge_ns, "ip", "link", "set", peer, "master", "br0")
            sh("ip", "netns", "exec", self.bridge_ns, "ip", "link", "set", peer, "up")
            bring_up(ns, link, self.ip(name))
            write_hosts(self.root / f"hosts.{name}", name,
                        {o: self.ip(o) for o in self.names if o != name})

    def _munge(self) -> None:
        munge = self.root / "munge"
        munge.mkdir(mode=0o755)
        munge.chmod(0o755)  # munged refuses a socket folder that is not 0755
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munged = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}",
             f"--socket={munge / 'munge.socket'}", f"--pid-file={munge / 'munged.pid'}",
             f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_until((munge / "munge.socket").exists, 5):
            raise RuntimeError("munged did not start")

    def _config(self) -> None:
        root = self.root
        (root / "ctld").mkdir()
        for name in self.names:
            (root / f"spool-{name}").mkdir()
        nodes = "".join(f"NodeName={n} NodeAddr={self.ip(n)} CPUs={os.cpu_count() or 1} "
                        "State=UNKNOWN\n" for n in self.names)
        self.conf.write_text(f"""ClusterName=dlb
SlurmctldHost={self.names[0]}({self.ip(self.names[0])})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root / 'munge' / 'munge.socket'}
CredType=cred/munge
StateSaveLocation={root / 'ctld'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdPidFile={root / 'slurmd-%n.pid'}
SlurmdSpoolDir={root / 'spool-%n'}
SlurmdLogFile={root / 'slurmd-%n.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
JobRequeue=0
MinJobAge=5
SlurmdTimeout=30
ReturnToService=2
{nodes}PartitionName=debug Nodes={','.join(self.names)} Default=YES MaxTime=INFINITE State=UP
""")

    def _start_node(self, name: str, daemons: Sequence[Sequence[str]]) -> None:
        cmds = ["\x1f".join(d) for d in daemons]
        self.inits[name] = subprocess.Popen(
            # nsenter, not `ip netns exec`: that remounts /sys and hides /sys/fs/cgroup, without
            # which slurmd does not start.
            ["nsenter", f"--net=/run/netns/{self.ns(name)}", "unshare", "--uts", "--mount", "--pid",
             "--fork", "--mount-proc", sys.executable, str(self.root / "init.py"), name,
             str(self.root / f"hosts.{name}"), *cmds],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.root)

    def init_pid(self, name: str) -> int:
        proc = self.inits[name]
        # unshare --fork's child: the node's PID 1
        if not wait_until(lambda: _children(proc.pid), 5):
            raise RuntimeError(f"{name}: no init")
        return _children(proc.pid)[0]

    def wait_idle(self, timeout: float = 60) -> None:
        """Until every node is idle in sinfo."""
        end = time.monotonic() + timeout
        states = ""
        while time.monotonic() < end:
            done = self.run(self.names[0], ["sinfo", "-h", "-N", "-o", "%N %t"], check=False,
                            timeout=10)
            states = done.stdout
            lines = [line.split() for line in states.splitlines() if line.strip()]
            if len(lines) == len(self.names) and all(s[1] == "idle" for s in lines):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes are not idle after {timeout} s: {states!r}; "
                           + self.logs())

    def logs(self) -> str:
        out = []
        for log in sorted(self.root.glob("*.log")) + sorted(self.root.glob("munge/*.log")):
            out.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-15:]))
        return "\n".join(out)

    # -- on a node -----------------------------------------------------------------------------

    def on_node(self, name: str, cmd: Sequence[str], cwd: str | Path | None = None) -> list[str]:
        """``cmd`` inside ``name``'s namespaces."""
        return ["nsenter", f"--target={self.init_pid(name)}", "--net", "--uts", "--mount",
                "--pid", f"--wd={cwd or self.root}", *cmd]

    def run(self, name: str, cmd: Sequence[str], *, cwd: str | Path | None = None,
            check: bool = True, timeout: float = 120,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.on_node(name, cmd, cwd), env={**self.env, **(env or {})},
                              capture_output=True, text=True, check=check, timeout=timeout)

    def set_link(self, name: str, up: bool) -> None:
        _netns.set_link(self.ns(name), self.link(name), up)

    # -- down ----------------------------------------------------------------------------------

    def remove(self) -> None:
        """Every daemon, namespace and link, whatever state the cluster is in."""
        for proc in self.inits.values():  # the end of a node's PID 1 ends its every process
            for child in _children(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for name in self.names:  # what was entered with nsenter and outlived its node's init
            remove_namespace(self.ns(name))
        remove_namespace(self.bridge_ns)
        for name in self.names:  # a veth goes with its namespace; this is for a half-built one
            sh("ip", "link", "del", self.link(name), check=False)
        if self.munged is not None and self.munged.poll() is None:
            self.munged.kill()
            self.munged.wait()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]
