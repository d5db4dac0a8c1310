"""Inside an njobs rank (torch imported lazily): who this rank is, its device, its group.

:class:`RankInfo` reads torchrun's environment, :func:`rank_device` picks and pins the rank's
device, :func:`init_process_group` makes the group, and :func:`open_rank_stream` gives the
reporting rank the run stream and the others a :class:`~pytest_dlbench.measure.stream.NullStream`.

The reporting rank is local rank 0 of the main node (``DLBENCH_NODE_ROLE=main``, set by the
launchers), else global rank 0. Not always global rank 0: c10d numbers the nodes by sorting
their addresses, so rank 0 may live on another node, whose disk the parent never reads.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import DeviceError
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.stream import NullStream, Stream, StreamWriter
from pytest_dlbench.run.devices import gpu_required
from pytest_dlbench.run.process import pin_running_process

if TYPE_CHECKING:
    import torch

__all__ = [
    "RankInfo",
    "cpu_share",
    "cuda_unavailable_reason",
    "destroy_process_group",
    "init_process_group",
    "open_rank_stream",
    "pin_cores",
    "pin_cpu_share",
    "pin_gpu_rank",
    "rank_device",
    "runs_a_command",
    "slot_cores",
]

#: Default timeout of a collective (a peer that died or never came).
PG_TIMEOUT_S = 300.0


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
            return cls(role=env.get(Env.NODE_ROLE) or None)
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
            role=env.get(Env.NODE_ROLE) or None,
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
    agree and one rank's stream, scaled by the world size, is the job's throughput (Deep500,
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
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return []
    return pin_cores(cpu_share(index, count, list(allowed)))


def pin_cores(cores: Sequence[int]) -> list[int]:
    """Pin this process (all its threads) to ``cores`` and size torch's thread pool to them,
    as a per_gpu child is (its slot's cores, ``OMP_NUM_THREADS``). Returns the cores."""
    import torch

    pinned = pin_running_process(cores)
    if pinned:
        torch.set_num_threads(len(pinned))
    return pinned


def slot_cores(local_rank: int, env: Mapping[str, str] | None = None) -> list[int] | None:
    """The cores of the device slot of ``local_rank`` (rank k runs on the job's k-th slot:
    plugin/launcher.py), from the slots the controller planned (``DLBENCH_SLOTS``: whole cores
    near each GPU, run/topology.py); None when they are unknown or not this process's to take
    (another node's plan, naming cores this machine did not give the job)."""
    import json

    env = os.environ if env is None else env
    try:
        slots = json.loads(env.get(Env.SLOTS) or "[]")
        cores = sorted({int(c) for c in slots[local_rank]["cpus"]})
        allowed = os.sched_getaffinity(0)
    except (ValueError, LookupError, TypeError, AttributeError):
        return None
    return cores if cores and set(cores) <= allowed else None


def pin_gpu_rank(rank: RankInfo) -> list[int]:
    """Pin a GPU rank to its slot's cores (near its GPU), as a per_gpu child is pinned; without
    a usable plan, to an equal share of the cores it was given, as a CPU rank is."""
    cores = slot_cores(rank.local_rank)
    if cores is None:
        return pin_cpu_share(rank.local_rank, rank.local_world_size)
    return pin_cores(cores)


def cuda_unavailable_reason() -> str:
    """Why torch cannot use CUDA here, in one line: ``torch.cuda.init()`` raises with torch's
    reason (an old driver, no driver, no GPU behind ``CUDA_VISIBLE_DEVICES``, a torch built
    without CUDA), which ``torch.cuda.is_available()`` only gives as a warning."""
    import torch

    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - its message is the reason
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return lines[0] if lines else type(exc).__name__
    if torch.cuda.device_count() == 0:
        return "torch.cuda.device_count() is 0"
    return "torch.cuda.is_available() is False"


def runs_a_command(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs an external command's benchmark (``definition: {command:
    ...}``, :data:`~pytest_dlbench.suite.definitions.EXTERNAL_RUNNER`), read from the spec
    beside its stream (``DLBENCH_STREAM``, which the child's ranks inherit). Such a rank only
    starts the command, which makes its own CUDA context: setting the device here would add a
    second one on the same GPU. False when the spec cannot be read (another node's disk)."""
    from pytest_dlbench.core.errors import DlbenchError
    from pytest_dlbench.layout import parse_stream_name, read_spec, spec_path
    from pytest_dlbench.suite.definitions import EXTERNAL_RUNNER

    env = os.environ if env is None else env
    stream = env.get(Env.STREAM)
    if not stream:
        return False
    try:
        path = spec_path(Path(stream).parent, parse_stream_name(stream).bench)
        return path.is_file() and read_spec(path).definition == EXTERNAL_RUNNER
    except (DlbenchError, OSError, ValueError):
        return False


@functools.lru_cache(maxsize=1)
def _rank_device(rank: RankInfo) -> torch.device:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        if not rank.launched:
            return torch.device("cuda", torch.cuda.current_device())
        # torchrun leaves every GPU visible to every rank: the local rank picks one, its own.
        index, count = rank.local_rank, torch.cuda.device_count()
        if index >= count:  # sharing one, NCCL would fail later with "Duplicate GPU"
            raise DeviceError(f"local rank {index} has no GPU of its own: {count} GPU"
                              f"{'' if count == 1 else 's'} visible to "
                              f"{rank.local_world_size} ranks on this node")
        if not runs_a_command():
            # An external command makes its own context on the GPU: none here besides it.
            torch.cuda.set_device(index)
        pin_gpu_rank(rank)
        return torch.device("cuda", index)
    required = gpu_required()
    if required:  # CPU numbers would pass for the GPU's
        raise DeviceError(f"{required}, but torch cannot use CUDA: {cuda_unavailable_reason()} "
                          "(CUDA_VISIBLE_DEVICES=-1 runs on the CPU on purpose)")
    if rank.launched:
        pin_cpu_share(rank.local_rank, rank.local_world_size)
    return torch.device("cpu")


def rank_device(rank: RankInfo | None = None) -> torch.device:
    """This process's device: ``cuda:LOCAL_RANK`` under torchrun with GPUs, the current GPU
    outside torchrun, else the CPU. Under torchrun the rank is pinned: a GPU rank to its slot's
    cores near its GPU (:func:`pin_gpu_rank`), a CPU rank to its share of the cores; a local
    rank beyond the node's visible GPUs is a
    :class:`~pytest_dlbench.core.errors.DeviceError` (two ranks on one GPU: NCCL's "Duplicate
    GPU"); an external command's rank (:func:`runs_a_command`) names its GPU without making it
    current (no CUDA context beside the command's).
    Computed once per process. Raises :class:`~pytest_dlbench.core.errors.DeviceError` when a GPU
    is expected (:func:`~pytest_dlbench.run.devices.gpu_required`) and torch cannot use CUDA."""
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
        else float(os.environ.get(Env.PG_TIMEOUT_S, PG_TIMEOUT_S))
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
