"""Two real nodes on one machine (issue 28): two network namespaces joined by a veth pair, an
sshd on the second, each node's hostname its own and resolving to a loopback address as
Debian's ``127.0.1.1`` line does; pytest runs on the first and spans both with one njobs job.

Needs root, ``ip netns``, ``unshare`` and sshd (``.ci/run`` installs Debian's openssh-server);
skipped with its reason elsewhere. Every namespace, link and daemon is removed on every exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _netns import (
    bring_up,
    in_namespace,
    missing,
    remote_rank,
    remove_namespace,
    set_link,
    sh,
    wait_for_steps,
    wait_until_gone,
    write_hosts,
)
from _polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.release]

SSHD = "/usr/sbin/sshd"
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


def _missing() -> str | None:
    if not os.path.exists(SSHD):
        return f"needs an sshd ({SSHD}: Debian's openssh-server)"
    return missing(("ip", "unshare", "ssh", "ssh-keygen"))


@dataclass
class Cluster:
    root: Path
    ns: tuple[str, str]
    ips: tuple[str, str]
    links: tuple[str, str]
    sshd: subprocess.Popen[bytes] | None = None

    def on_node(self, index: int, hostname: str, cmd: list[str]) -> list[str]:
        """``cmd`` on node ``index``: its namespace, its hostname, its hosts file."""
        hosts = self.root / f"hosts{index}"
        script = (f"hostname {hostname} && mount --bind {hosts} /etc/hosts && exec "
                  + " ".join(f"'{c}'" for c in cmd))
        return ["ip", "netns", "exec", self.ns[index], "unshare", "--uts", "--mount",
                "sh", "-c", script]

    def start_sshd(self) -> None:
        cmd = self.on_node(1, "node2", [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")])
        self.sshd = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def listening() -> bool:
            ports = in_namespace(self.ns[1], "ss", "-ltn", check=False).stdout
            return f"{self.ips[1]}:22" in ports

        if not wait_until(listening, 5, step=0.1):
            raise RuntimeError("sshd did not start")

    def stop_sshd(self) -> None:
        if self.sshd is not None and self.sshd.poll() is None:
            self.sshd.kill()
            self.sshd.wait()

    def link(self, up: bool) -> None:
        set_link(self.ns[1], self.links[1], up)

    def remove(self) -> None:
        self.stop_sshd()
        for ns in self.ns:  # whatever is left in the namespaces: sessions, ranks
            remove_namespace(ns)
        sh("ip", "link", "del", self.links[0], check=False)


def _build(root: Path, cluster: Cluster) -> None:
    ns1, ns2 = cluster.ns
    (ip1, ip2), (l1, l2) = cluster.ips, cluster.links
    sh("ip", "netns", "add", ns1)
    sh("ip", "netns", "add", ns2)
    sh("ip", "link", "add", l1, "type", "veth", "peer", "name", l2)
    for ns, link, ip in ((ns1, l1, ip1), (ns2, l2, ip2)):
        sh("ip", "link", "set", link, "netns", ns)
        bring_up(ns, link, ip)
    for index, name in enumerate(("node1", "node2")):
        write_hosts(root / f"hosts{index}", name)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "id"))
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host"))
    (root / "authorized_keys").write_text((root / "id.pub").read_text())
    (root / "known_hosts").write_text(f"{ip2} {(root / 'host.pub').read_text()}")
    (root / "sshd_config").write_text(
        f"ListenAddress {ip2}\nHostKey {root / 'host'}\nAuthorizedKeysFile "
        f"{root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\nStrictModes no\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n")
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation
    cluster.start_sshd()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("nodes")
    net = 20 + os.getpid() % 200
    tag = f"{os.getpid() % 100000}"
    made = Cluster(root, (f"dlb{tag}a", f"dlb{tag}b"), (f"10.77.{net}.1", f"10.77.{net}.2"),
                   (f"dlv{tag}a", f"dlv{tag}b"))
    try:
        _build(root, made)
        yield made
    finally:
        made.remove()


def write_project(path: Path, cluster: Cluster, *, max_duration: int, stop: int) -> Path:
    path.mkdir()
    (path / "step.py").write_text(STEP)
    (path / "suite.yaml").write_text(SUITE.format(max_duration=max_duration, stop=stop))
    (path / "pytest.ini").write_text("[pytest]\n")
    root = cluster.root
    (path / "cluster.yaml").write_text(
        "system:\n  arch: cpu\n"
        f"  ssh: {{identity: {root / 'id'}, known_hosts: {root / 'known_hosts'}, "
        "connect_timeout: 3, alive_interval: 2, alive_count: 3}\n"
        f"  nodes:\n    - {{name: node1, ip: {cluster.ips[0]}, port: 29555, main: true}}\n"
        f"    - {{name: node2, ip: {cluster.ips[1]}, user: root}}\n")
    return path


def run_pytest(cluster: Cluster, project: Path, timeout: float,
               during: object = None) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GLOO_", "NCCL_", "PYTEST_", "DLBENCH_"))}
    cmd = cluster.on_node(0, "node1", [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
        "--bench-suite=suite.yaml", "--bench-system=cluster.yaml", f"--rootdir={project}",
        f"--bench-base={project / 'base'}", "-n", "0"])
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if callable(during):
        threading.Thread(target=during, daemon=True).start()
    out, _ = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, ""), time.monotonic() - start


def the_stream(project: Path) -> list[dict]:
    (stream,) = (project / "base").rglob("allreduce.D0.data")
    return [json.loads(line) for line in stream.read_text().splitlines()]


def end_of(project: Path) -> dict:
    return [r for r in the_stream(project) if r["event"] == "end"][-1]


def test_one_job_spans_two_nodes_whose_hostnames_are_loopback(cluster: Cluster,
                                                              tmp_path: Path):
    project = write_project(tmp_path / "p", cluster, max_duration=120, stop=4)
    proc, _ = run_pytest(cluster, project, timeout=200)
    assert end_of(project)["status"] == "ok", proc.stdout[-3000:]
    config = next(r for r in the_stream(project) if r["event"] == "config")
    assert config["distributed"]["nnodes"] == 2 and config["distributed"]["world_size"] == 2
    log = next((project / "base").rglob("allreduce.D0.log")).read_text()
    assert "[node2] " in log and "\r" not in log and "\x1b[" not in log
    # The summary (run quietly here: `dlbench report` prints the table pytest would) and the
    # manifest say the job spanned both machines.
    manifest_path = next((project / "base").rglob("manifest.json"))
    report = subprocess.run([sys.executable, "-m", "pytest_dlbench.cli", "report",
                             str(manifest_path.parent)], capture_output=True, text=True,
                            check=False)
    assert "nodes: allreduce spanned 2 nodes (world size 2)" in report.stdout, report.stdout
    assert json.loads(manifest_path.read_text())["benchmarks"]["allreduce"]["nodes"] == 2


def test_a_killed_remote_rank_is_the_reason(cluster: Cluster, tmp_path: Path):
    project = write_project(tmp_path / "p", cluster, max_duration=120, stop=400)

    def kill() -> None:
        pid = remote_rank(project)
        wait_for_steps(project / "base", "allreduce", steps=3)  # killed in its steps
        os.kill(pid, signal.SIGKILL)

    proc, _ = run_pytest(cluster, project, timeout=200, during=kill)
    assert proc.returncode != 0
    end = end_of(project)
    assert end["reason"] == f"node2 ({cluster.ips[1]}): its rank was killed by SIGKILL", end


def test_an_unreachable_node_fails_in_seconds(cluster: Cluster, tmp_path: Path):
    project = write_project(tmp_path / "p", cluster, max_duration=120, stop=4)
    cluster.stop_sshd()
    try:
        proc, took = run_pytest(cluster, project, timeout=120)
    finally:
        cluster.start_sshd()
    assert proc.returncode != 0
    assert end_of(project)["reason"].startswith(f"node2 ({cluster.ips[1]}): ssh: connect to")
    assert took < 30


def test_a_silent_node_is_named_in_seconds_and_nothing_outlives_the_deadline(
        cluster: Cluster, tmp_path: Path):
    max_duration = 60  # room for a loaded 2-core machine to start both nodes
    project = write_project(tmp_path / "p", cluster, max_duration=max_duration, stop=400)

    split_at: list[float] = []

    def split() -> None:
        remote_rank(project)
        wait_for_steps(project / "base", "allreduce", steps=3)  # split in its steps
        cluster.link(up=False)  # packets to and from node2 vanish: a silent node, a split
        split_at.append(time.monotonic())

    try:
        proc, took = run_pytest(cluster, project, timeout=120, during=split)
        assert proc.returncode != 0
        end = end_of(project)
        assert end["reason"].startswith(f"node2 ({cluster.ips[1]}): ssh: Timeout"), end
        # Named by ssh's keep-alives (6 s here), not at max_duration.
        assert split_at and time.monotonic() - split_at[0] < 30
        # node2 cannot be told: its launcher ends what is left at the run's deadline.
        deadline = time.monotonic() + max_duration + 8 + 10 - took  # + run/child's margin
        assert wait_until_gone(project, deadline) == []
    finally:
        cluster.link(up=True)
