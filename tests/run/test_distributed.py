"""njobs: torchrun command lines, multi-node launchers, rank environment, the DDP workload, and
real torchrun jobs on the CPU (gloo): two ranks on one node, and two "nodes" on the loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.layout import write_spec
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream, StreamWriter, read_stream
from pytest_dlbench.measure.timing import CpuBackend, FakeClock, Timer
from pytest_dlbench.run.launch.nodes import launch_nodes
from pytest_dlbench.run.launch.rank import RankInfo, cpu_share, open_rank_stream
from pytest_dlbench.run.launch.torchrun import (
    DEFAULT_RDZV_PORT,
    ROLE_ENV,
    free_port,
    launch_env,
    njobs_launch,
    node_launches,
    rendezvous_endpoint,
    slurm_node_rank,
    srun_command,
    ssh_command,
    torchrun_command,
)
from pytest_dlbench.suite import resolve_suite
from pytest_dlbench.suite.system import Node, SystemConfig

PY = sys.executable
CHILD = [PY, "-m", "pytest", "s.yaml::ddp[D0]", "--bench-isolation", "inline"]


def two_nodes(port: int | None = 5000, **options: Any) -> SystemConfig:
    return SystemConfig(
        arch="cuda",
        nodes=(
            Node("node1", "192.168.11.12", user="username"),
            Node("manager", "192.168.11.11", port=port, user="manager", main=True),
        ),
        options=options,
        path="/etc/system.yaml",
    )


# -- command lines -------------------------------------------------------------------------------


def test_torchrun_command_for_one_node_lets_torchrun_pick_the_port():
    cmd = torchrun_command(CHILD, nproc=4, run_id="job1")
    assert cmd == [
        PY, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=4",
        "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", "--rdzv-id=job1",
        "--max-restarts=0", "--local-addr=127.0.0.1", "--no-python", "--", *CHILD,
    ]


def test_one_node_hands_the_ranks_the_loopback_not_the_hostname():
    """torchrun's rendezvous hands rank 0's address to every rank as MASTER_ADDR: the
    ``--local-addr`` given, else ``socket.getfqdn()`` (torch.distributed.elastic.rendezvous.api
    RendezvousStoreInfo.build), which a VM without DNS cannot resolve."""
    from torch.distributed.run import get_args_parser

    launch = njobs_launch(CHILD, system=SystemConfig(None, (Node("local", "127.0.0.1"),)),
                          nproc=2, run_id="j")
    args = get_args_parser().parse_args(launch.argv[3:])  # after `python -m torch.distributed.run`
    assert args.local_addr == "127.0.0.1"
    assert args.rdzv_endpoint == "127.0.0.1:0"
    # A node of several keeps the address it was given (its IP from the system file).
    other = torchrun_command(CHILD, nproc=1, nnodes=2, node_rank=1, endpoint="10.0.0.1:29400",
                             run_id="j", local_addr="10.0.0.2")
    assert get_args_parser().parse_args(other[3:]).local_addr == "10.0.0.2"


def test_torchrun_command_for_a_node_of_several():
    main = torchrun_command(CHILD, nproc=8, nnodes=2, node_rank=0, endpoint="10.0.0.1:29400",
                            run_id="j", local_addr="10.0.0.1", python="/venv/bin/python")
    other = torchrun_command(CHILD, nproc=8, nnodes=2, node_rank=1, endpoint="10.0.0.1:29400",
                             run_id="j", rdzv_conf={"join_timeout": 60})
    assert main[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    assert "--rdzv-conf=is_host=true" in main and "--local-addr=10.0.0.1" in main
    assert "--rdzv-conf=join_timeout=60,is_host=false" in other
    # c10d ignores --node-rank (and warns): the host is chosen with is_host instead.
    assert not any(a.startswith("--node-rank") for a in main + other)
    assert other[other.index("--") + 1 :] == CHILD


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nnodes": 2, "endpoint": "10.0.0.1:0"}, "fixed port"),
        ({"endpoint": "10.0.0.1"}, "HOST:PORT"),
        ({"nproc": 0}, "nproc"),
    ],
)
def test_torchrun_command_rejects(kwargs: dict[str, Any], message: str):
    kwargs = {"nproc": 2, "run_id": "j", **kwargs}
    with pytest.raises(ValueError, match=message):
        torchrun_command(CHILD, **kwargs)


def test_rendezvous_endpoint_is_the_main_nodes_ip_and_port():
    assert rendezvous_endpoint(two_nodes()) == "192.168.11.11:5000"
    assert rendezvous_endpoint(two_nodes(port=None)) == f"192.168.11.11:{DEFAULT_RDZV_PORT}"
    no_main = SystemConfig(arch=None, nodes=(Node("a", "10.0.0.5"), Node("b", "10.0.0.6")))
    assert rendezvous_endpoint(no_main) == "10.0.0.5:29400"  # the first node, as SystemConfig


def test_node_launches_put_the_main_node_first():
    first, second = node_launches(two_nodes(), CHILD, nproc=8, run_id="j", python="/py")
    assert (first.node.name, first.node_rank, first.is_main) == ("manager", 0, True)
    assert (second.node.name, second.node_rank, second.is_main) == ("node1", 1, False)
    assert second.argv == [
        "/py", "-m", "pytest_dlbench.run.launch", "node", "--nnodes=2", "--nproc=8",
        "--endpoint=192.168.11.11:5000", "--run-id=j", "--node-rank=1",
        "--local-addr=192.168.11.12", "--", *CHILD,
    ]


def test_ssh_command_runs_the_launcher_in_the_same_directory_with_the_environment():
    node = Node("node1", "192.168.11.12", user="username")
    cmd = ssh_command(node, ["/py", "-m", "x", "--arg=a b"], cwd="/work/my repo",
                      env={"DLBENCH_CHILD": "1", "NOTE": "it's"}, sshkey="~/.ssh/id_ed25519")
    assert cmd[:6] == ["ssh", "-tt", "-o", "BatchMode=yes", "-o",
                       "StrictHostKeyChecking=accept-new"]
    assert cmd[6:8] == ["-i", os.path.expanduser("~/.ssh/id_ed25519")]
    assert cmd[-2] == "username@192.168.11.12"
    assert cmd[-1] == (
        "cd '/work/my repo' && env DLBENCH_CHILD=1 NOTE='it'\"'\"'s' /py -m x '--arg=a b'"
    )
    assert ssh_command(Node("n", "10.0.0.2"), ["true"])[-2:] == ["10.0.0.2", "true"]


def test_srun_runs_one_launcher_per_node_and_slurm_gives_the_node_rank():
    assert srun_command(["/py", "-m", "x"], nnodes=4) == [
        "srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
        "/py", "-m", "x",
    ]
    assert slurm_node_rank({"SLURM_NODEID": "3", "SLURM_PROCID": "7"}) == 3
    assert slurm_node_rank({"SLURM_PROCID": "2"}) == 2
    assert slurm_node_rank({}) is None


def test_njobs_launch_one_node_is_torchrun_here():
    launch = njobs_launch(CHILD, system=SystemConfig(None, (Node("local", "127.0.0.1"),)),
                          nproc=2, run_id="j", env={"DLBENCH_CHILD": "1"})
    assert (launch.launcher, launch.nnodes) == ("local", 1)
    assert launch.argv == torchrun_command(CHILD, nproc=2, run_id="j")
    assert launch.env == {"DLBENCH_CHILD": "1", **launch_env()}
    assert ROLE_ENV not in launch.env  # one node: global rank 0 reports


def test_njobs_launch_several_nodes_over_ssh():
    launch = njobs_launch(CHILD, system=two_nodes(), nproc=8, run_id="j", cwd="/repo",
                          env={"DLBENCH_CHILD": "1"}, python="/py")
    assert (launch.launcher, launch.nnodes) == ("ssh", 2)
    assert launch.argv == [
        "/py", "-m", "pytest_dlbench.run.launch", "launch", "--system=/etc/system.yaml",
        "--nproc=8", "--run-id=j", "--cwd=/repo", "--env=DLBENCH_CHILD=1", "--", *CHILD,
    ]


def test_the_cli_parses_the_child_command_after_the_separator():
    from pytest_dlbench.run.launch.nodes import _parser

    args = _parser().parse_args(["node", "--nnodes=2", "--nproc=1", "--endpoint=h:1",
                                 "--run-id=j", "--", *CHILD])
    assert args.child in (CHILD, ["--", *CHILD])


def test_importing_the_module_does_not_import_torch():
    code = "import sys, pytest_dlbench.run.launch.torchrun; print('torch' in sys.modules)"
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- launch_nodes: one launcher per node, the first failure stops the others ---------------------


def test_launch_nodes_waits_for_all():
    assert launch_nodes([[PY, "-c", "pass"], [PY, "-c", "import time; time.sleep(0.3)"]]) == 0


def test_launch_nodes_stops_the_others_when_one_fails():
    start = time.monotonic()
    code = launch_nodes([[PY, "-c", "import time; time.sleep(60)"],
                         [PY, "-c", "import sys; sys.exit(3)"]])
    assert code == 3
    assert time.monotonic() - start < 30


# -- inside a rank -------------------------------------------------------------------------------


TORCHRUN_ENV = {
    "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "41000", "TORCHELASTIC_RUN_ID": "j",
}


def test_rank_info_outside_torchrun():
    rank = RankInfo.from_env({})
    assert not rank.is_distributed and rank.is_main
    assert rank.items_scale == 1 and rank.describe() == {}


def test_rank_info_from_torchrun():
    rank = RankInfo.from_env(TORCHRUN_ENV)
    assert (rank.rank, rank.local_rank, rank.world_size, rank.local_world_size) == (3, 1, 4, 2)
    assert (rank.node_rank, rank.nnodes, rank.master_addr, rank.master_port) == (
        1, 2, "10.0.0.1", 41000)
    assert rank.is_distributed and not rank.is_main and rank.items_scale == 4
    assert rank.describe() == {"distributed": {"world_size": 4, "nnodes": 2,
                                               "nproc_per_node": 2, "rank": 3}}
    assert RankInfo.from_env({**TORCHRUN_ENV, "RANK": "0", "LOCAL_RANK": "0"}).is_main


def test_the_main_node_reports_even_when_rank_0_is_elsewhere():
    # c10d numbers nodes by sorting their addresses: the main node may get ranks 2 and 3.
    main_node = {**TORCHRUN_ENV, ROLE_ENV: "main"}
    assert RankInfo.from_env({**main_node, "LOCAL_RANK": "0", "RANK": "2"}).is_main
    assert not RankInfo.from_env({**main_node, "LOCAL_RANK": "1"}).is_main
    other = {**TORCHRUN_ENV, ROLE_ENV: "worker", "RANK": "0", "LOCAL_RANK": "0"}
    assert not RankInfo.from_env(other).is_main


def test_only_the_reporting_rank_opens_the_stream(tmp_path: Path):
    path = tmp_path / "b.D0.data"
    other = open_rank_stream(path, RankInfo.from_env(TORCHRUN_ENV))
    assert isinstance(other, NullStream) and not path.exists()
    main = open_rank_stream(path, RankInfo.from_env({}))
    assert isinstance(main, StreamWriter) and path.exists()
    main.close()


@pytest.mark.parametrize(
    ("index", "count", "allowed", "cores"),
    [
        (0, 2, [0, 1, 2, 3], [0, 1]),
        (1, 2, [3, 2, 1, 0], [2, 3]),
        (1, 3, [4, 5, 6, 7, 8, 9, 10], [6, 7]),  # the remainder core is left out
        (2, 4, [0, 1], [0]),  # more ranks than cores: one each, round-robin
        (0, 1, [5, 7], [5, 7]),
    ],
)
def test_cpu_share(index: int, count: int, allowed: list[int], cores: list[int]):
    assert cpu_share(index, count, allowed) == cores


def test_cpu_share_rejects_a_slot_out_of_range():
    with pytest.raises(ValueError):
        cpu_share(2, 2, [0, 1])


def test_rank_device_is_the_local_ranks_gpu(monkeypatch: pytest.MonkeyPatch):
    import torch

    from pytest_dlbench.run.launch import rank as distributed

    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cores: None)  # pinned: not here
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    distributed._rank_device.cache_clear()
    try:
        device = distributed.rank_device(RankInfo.from_env(TORCHRUN_ENV))
    finally:
        distributed._rank_device.cache_clear()
    assert device == torch.device("cuda", 1) and chosen == [1]


def test_rank_device_on_cpu_pins_the_rank_to_its_share(monkeypatch: pytest.MonkeyPatch):
    import torch

    from pytest_dlbench.run.launch import rank as distributed

    pinned: dict[int, set[int]] = {}
    threads: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cores: pinned.update({tid: cores}))
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    distributed._rank_device.cache_clear()
    try:
        device = distributed.rank_device(RankInfo.from_env(TORCHRUN_ENV))  # local rank 1 of 2
    finally:
        distributed._rank_device.cache_clear()
    assert device == torch.device("cpu")
    assert pinned and all(list(cores) == [3, 4, 5] for cores in pinned.values())
    # Each thread by its id (the main thread's is the pid), not only the calling thread (0).
    assert os.getpid() in pinned or not Path("/proc/self/task").is_dir()
    assert threads == [3]


@pytest.mark.parametrize(("device", "backend"), [("cpu", "gloo"), ("cuda:1", "nccl")])
def test_init_process_group_picks_the_backend(monkeypatch: pytest.MonkeyPatch, device: str,
                                              backend: str):
    import torch.distributed as dist

    from pytest_dlbench.run.launch.rank import init_process_group

    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group",
                        lambda backend, **kwargs: calls.append((backend, kwargs)))
    init_process_group(device, timeout_s=12)
    ((used, kwargs),) = calls
    assert used == backend and kwargs["timeout"].total_seconds() == 12
    assert ("device_id" in kwargs) == (backend == "nccl")


def test_bench_items_scale_reports_the_jobs_throughput():
    clock = FakeClock()
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(CpuBackend(clock)), skip=0, stop=2, window=5,
                  items_scale=3)
    for _ in bench.iterate(range(10), batch_size=4):
        clock.advance(0.5)
    bench.log_rate(10.0)  # ignored: done
    rates = [r for r in stream.records if r["event"] == "rate"]
    assert [(r["items"], r["value"]) for r in rates] == [(12, 24.0), (12, 24.0)]
    logged = Bench(stream=NullStream(), items_scale=3, stop=1)
    logged.log_rate(2.5)
    assert logged.stream.records[-1]["value"] == 7.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="items_scale"):
        Bench(items_scale=0)


# -- the DDP workload in this process ------------------------------------------------------------

TINY = ["--model", "resnet18", "--batch-size", "4", "--image-size", "32", "--num-classes", "10",
        "--num-images", "16", "--lr", "0.01"]


def run_ddp(process_group: Any) -> list[dict[str, Any]]:
    import torch

    from pytest_dlbench.workloads import ddp

    stream = NullStream()
    bench = Bench(args=TINY, device="cpu", stream=stream, skip=1, stop=3, window=2)
    threads = torch.get_num_threads()
    # One thread: on a small shared machine two OpenMP threads make these steps 8x slower.
    torch.set_num_threads(1)
    try:
        ddp.train(bench, process_group)
    finally:
        torch.set_num_threads(threads)
    bench.close()
    return stream.records


@pytest.mark.slow
def test_ddp_workload_without_a_group_trains_one_process():
    records = run_ddp(None)
    assert [r["items"] for r in records if r["event"] == "rate"] == [4] * 4
    keys = {r["key"] for r in records if r["event"] == "region"}
    assert {"forward", "backward", "optimizer"} <= keys and "comm" not in keys


@pytest.mark.slow
def test_ddp_workload_times_the_allreduce_in_a_one_process_group():
    import torch.distributed as dist

    from pytest_dlbench.run.launch.rank import destroy_process_group

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        records = run_ddp(dist.group.WORLD)
    finally:
        destroy_process_group()
    comm = [r for r in records if r["event"] == "region" and r["key"] == "comm"]
    assert sum(r["count"] for r in comm) == 4  # one per step: first bucket to last reduced
    assert all(r["seconds"] > 0 for r in comm)


# -- real torchrun jobs (CPU, gloo) --------------------------------------------------------------


SUITE = textwrap.dedent(
    """
    ddp:
      definition: pytest_dlbench.workloads.ddp:train
      plan: {method: njobs, n: 1}
      max_duration: 120
      voir: {options: {skip: 1, stop: 4}}
      argv:
        --model: resnet18
        --batch-size: 4
        --image-size: 32
        --num-classes: 10
        --num-images: 16
        --lr: 0.01
    """
)
BATCH = 4


def child_command(root: Path) -> tuple[list[str], Path]:
    """What the launcher gives an njobs item: one item, inline, from its resolved spec."""
    (root / "s.yaml").write_text(SUITE)
    (root / "pytest.ini").write_text("[pytest]\n")
    run_dir = root / "base" / "runs" / "r"
    run_dir.mkdir(parents=True)
    stream = run_dir / "ddp.D0.data"
    spec_file = write_spec(run_dir, resolve_suite(root / "s.yaml")["ddp"])
    cmd = [
        PY, "-m", "pytest", "s.yaml::ddp[D0]", "-p", "no:cacheprovider", "-q", "-s",
        "--no-header", "--rootdir", str(root), "-c", str(root / "pytest.ini"),
        "--bench-suite", str(root / "s.yaml"), "--bench-isolation", "inline",
        "--bench-child-stream", str(stream), "--bench-child-run-dir", str(run_dir),
        "--bench-child-spec", str(spec_file),
        "--bench-base", str(root / "base"), "-n", "0", "-p", "no:hypothesispytest",
    ]
    return cmd, stream


def job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", ROLE_ENV)}
    return {**env, "PYTHONUNBUFFERED": "1", **launch_env()}


def check_one_stream(stream: Path, *, world_size: int, nnodes: int) -> None:
    assert sorted(p.name for p in stream.parent.glob("*.data")) == [stream.name]
    records = read_stream(stream)
    events = [r["event"] for r in records]
    assert events.count("config") == 1 and events.count("meta") == 1
    config = records[0]
    assert config["distributed"]["world_size"] == world_size
    assert config["distributed"]["nnodes"] == nnodes
    rates = [r for r in records if r["event"] == "rate"]
    assert len(rates) == 5  # skip + stop, once: no other rank wrote here
    assert {r["items"] for r in rates} == {BATCH * world_size}
    comm = [r for r in records if r["event"] == "region" and r["key"] == "comm"]
    assert comm and sum(r["count"] for r in comm) == 5
    ends = [r for r in records if r["event"] == "end"]
    assert [(e["status"], e["reason"]) for e in ends] == [("ok", "")]


@pytest.mark.slow
def test_two_ranks_on_one_node_report_the_global_throughput_once(tmp_path: Path):
    child, stream = child_command(tmp_path)
    cmd = torchrun_command(child, nproc=2, run_id=f"t{os.getpid()}-{time.time_ns()}")
    proc = subprocess.run(cmd, cwd=tmp_path, env=job_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check_one_stream(stream, world_size=2, nnodes=1)


@pytest.mark.slow
def test_two_nodes_on_the_loopback_run_one_job(tmp_path: Path):
    child, stream = child_command(tmp_path)
    system = SystemConfig(arch=None, nodes=(
        Node("manager", "127.0.0.1", port=free_port(), main=True),
        Node("worker", "127.0.0.1"),
    ))
    launches = node_launches(system, child, nproc=1, run_id=f"t{os.getpid()}-{time.time_ns()}",
                             rdzv_conf={"join_timeout": 120})
    commands = [launch.argv for launch in launches]
    if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2:
        # Each "node" gets a core of its own, as real nodes would: otherwise both would use
        # every core of this machine and the job would crawl.
        cores = sorted(os.sched_getaffinity(0))
        commands = [["taskset", "-c", str(cores[i]), *c] for i, c in enumerate(commands)]
    start = time.monotonic()
    code = launch_nodes(commands, env=job_env(), cwd=tmp_path)
    assert code == 0
    assert time.monotonic() - start < 170
    check_one_stream(stream, world_size=2, nnodes=2)


# -- the job's GPUs (a scaling step on a node of 8) -----------------------------------------------
class EightGpuNvml:
    """NVML of a node of 8 GPUs, as much as the telemetry sampler asks (handles are indices)."""

    def nvmlInit(self) -> None: ...  # noqa: N802
    def nvmlShutdown(self) -> None: ...  # noqa: N802
    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 8
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i
    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> float:  # noqa: N802
        return 1_000_000.0


def eight_gpu_launcher(tmp_path: Path) -> Any:
    """A Launcher over a fake session of 8 GPU slots (2 cores each), on one node."""
    from types import SimpleNamespace

    from pytest_dlbench.plugin.launcher import Launcher
    from pytest_dlbench.run.devices import Slot

    session = SimpleNamespace(
        config=SimpleNamespace(rootpath=tmp_path),
        slots=[Slot(k, str(k), (2 * k, 2 * k + 1)) for k in range(8)],
        run_dir=lambda: tmp_path,
        system=SystemConfig(None, (Node("local", "127.0.0.1"),)),
    )
    return Launcher(session)  # type: ignore[arg-type]


@pytest.mark.parametrize(("slots", "visible", "sampled"),
                         [(1, "0", [0]), (2, "0,1", [0, 1]), (None, "0,1,2,3,4,5,6,7",
                                                              list(range(8)))])
def test_an_njobs_job_sees_and_samples_only_its_gpus(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       slots: int | None, visible: str,
                                                       sampled: list[int]):
    from pytest_dlbench.measure.monitor.gpu_sampler import GpuSampler
    from pytest_dlbench.suite import BenchSpec

    plan = {"method": "njobs", **({"slots": slots} if slots else {})}
    spec = BenchSpec("ddp.scaling", "m:f", "test", plan=plan)
    launcher = eight_gpu_launcher(tmp_path)
    launch = launcher.njobs_launch(spec, CHILD)
    assert launch.env["CUDA_VISIBLE_DEVICES"] == visible
    assert f"--nproc-per-node={slots or 8}" in launch.argv
    # CUDA numbers the visible GPUs as NVML does (PCI bus), else the indices name other GPUs.
    assert launch.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    # Rank 0's monitor maps its CUDA_VISIBLE_DEVICES: the job's GPUs, not the idle others.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", launch.env["CUDA_VISIBLE_DEVICES"])
    sampler = GpuSampler(EightGpuNvml(), None)
    assert sampler.open() == ""
    assert [gpu.index for gpu in sampler.gpus] == sampled
    assert [info["index"] for info in sampler.info] == sampled
    # The job's cores are its slots' (a 1-rank step keeps to GPU 0's share).
    assert {c for s in launcher.job_slots(spec) for c in s.cpus} == set(range(2 * (slots or 8)))


def _gpu_rank_device(monkeypatch: pytest.MonkeyPatch, gpus: int,
                     env: dict[str, str] | None = None) -> tuple[Any, list[int]]:
    """``rank_device`` of local rank 1 of 2 (TORCHRUN_ENV) with ``gpus`` fake GPUs visible:
    its device, or the exception it raised, and the devices it made current."""
    import torch

    from pytest_dlbench.run.launch import rank as distributed

    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cores: None)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    monkeypatch.delenv("DLBENCH_STREAM", raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    distributed._rank_device.cache_clear()
    try:
        return distributed.rank_device(RankInfo.from_env(TORCHRUN_ENV)), chosen
    except Exception as exc:  # noqa: BLE001 - the test reads it
        return exc, chosen
    finally:
        distributed._rank_device.cache_clear()


def test_a_rank_beyond_the_nodes_gpus_fails_instead_of_sharing_one(
        monkeypatch: pytest.MonkeyPatch):
    """Local rank 1 with one GPU visible used to take GPU 1 % 1 = 0, rank 0's: NCCL then
    failed with "Duplicate GPU detected"."""
    from pytest_dlbench.core.errors import DeviceError

    error, chosen = _gpu_rank_device(monkeypatch, gpus=1)
    assert isinstance(error, DeviceError)
    assert str(error) == "local rank 1 has no GPU of its own: 1 GPU visible to 2 ranks on this node"
    assert chosen == []


def test_an_external_commands_rank_makes_no_cuda_context(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path):
    """The command makes its own context on the rank's GPU; set_device in the rank would add a
    second one (per rank)."""
    import torch

    (tmp_path / "s.yaml").write_text(
        "ext: {definition: {command: [python, train.py], parser: open_clip},"
        " plan: {method: njobs, n: 2}}\n"
        "py: {definition: 'pytest_dlbench.workloads.ddp:main', plan: {method: njobs, n: 2}}\n")
    specs = {s.name: s for s in resolve_suite(tmp_path / "s.yaml").specs}
    run_dir = tmp_path / "run"
    for spec in specs.values():
        write_spec(run_dir, spec)
    device, chosen = _gpu_rank_device(
        monkeypatch, gpus=2, env={"DLBENCH_STREAM": str(run_dir / "ext.D0.data")})
    assert device == torch.device("cuda", 1) and chosen == []
    device, chosen = _gpu_rank_device(
        monkeypatch, gpus=2, env={"DLBENCH_STREAM": str(run_dir / "py.D0.data")})
    assert device == torch.device("cuda", 1) and chosen == [1]
