"""An njobs rank on a GPU node is pinned like a per_gpu child (issue 37, item 8): rank k to the
cores of device slot k, near its GPU, and torch's thread pool sized to them.

No GPU here: the node is a fake one (tests/_fake_gpu.py: its sysfs topology and NVML), the slots
are planned from it as the controller plans them, and torch.cuda answers as on two GPUs. The
reference for "near" is the fake node's own description (which socket each GPU hangs off), not
the planner's output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _fake_gpu import FakeMachine

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.run import devices
from pytest_dlbench.run.launch import rank as rank_module
from pytest_dlbench.run.launch.rank import RankInfo, slot_cores

#: Two sockets of four cores (two threads each), one GPU on each socket.
NODE = FakeMachine(sockets=2, cores_per_socket=4, threads_per_core=2, gpus_per_socket=1)


def planned_slots(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[devices.Slot]:
    """The slots the controller plans on NODE (its files under ``root``, its NVML)."""
    NODE.write(root)
    monkeypatch.setattr(devices, "HOST_ROOT", root)
    monkeypatch.setitem(sys.modules, "pynvml", NODE.nvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return devices.plan_slots(cpus=NODE.cpus())


class Pinned:
    """What a rank did to its own process: the affinity of each thread, torch's threads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, allowed: list[int]) -> None:
        import torch

        self.affinity: dict[int, set[int]] = {}
        self.threads: list[int] = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
        monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(allowed))
        monkeypatch.setattr(os, "sched_setaffinity",
                            lambda tid, cores: self.affinity.update({tid: set(cores)}))
        monkeypatch.setattr(torch, "set_num_threads", self.threads.append)

    def cores(self) -> set[int]:
        masks = list(self.affinity.values())
        assert masks and all(mask == masks[0] for mask in masks), self.affinity
        return masks[0]


def run_rank(local_rank: int) -> None:
    env = {"RANK": str(local_rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2"}
    rank_module._rank_device.cache_clear()
    try:
        rank_module.rank_device(RankInfo.from_env(env))
    finally:
        rank_module._rank_device.cache_clear()


@pytest.mark.parametrize("local_rank", [0, 1])
def test_a_gpu_rank_is_pinned_to_its_slots_cores_near_its_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, local_rank: int
) -> None:
    slots = planned_slots(monkeypatch, tmp_path / "host")
    assert [s.gpu for s in slots] == ["0", "1"]
    monkeypatch.setenv(Env.SLOTS, json.dumps([s.to_dict() for s in slots]))
    # The torchrun job was pinned to its slots' cores (plugin/launcher.py): the ranks split them.
    pinned = Pinned(monkeypatch, sorted({c for s in slots for c in s.cpus}))
    run_rank(local_rank)
    cores = pinned.cores()
    assert cores == set(slots[local_rank].cpus)
    gpu = int(slots[local_rank].gpu or "")  # CUDA index k is CUDA_VISIBLE_DEVICES' k-th: slot k's
    assert cores <= set(NODE.gpu_cpus(gpu)), "cores away from the rank's GPU"
    # Every thread, not only the calling one; torch's pool one thread per core it has.
    assert os.getpid() in pinned.affinity or not Path("/proc/self/task").is_dir()
    assert pinned.threads == [len(cores)]


def test_the_two_ranks_share_no_core(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    slots = planned_slots(monkeypatch, tmp_path / "host")
    monkeypatch.setenv(Env.SLOTS, json.dumps([s.to_dict() for s in slots]))
    seen = []
    for local_rank in (0, 1):
        pinned = Pinned(monkeypatch, NODE.cpus())
        run_rank(local_rank)
        seen.append({NODE.core_of(c) for c in pinned.cores()})
    assert seen[0] and seen[1] and not seen[0] & seen[1]


def test_a_plan_naming_cores_this_machine_did_not_give_falls_back_to_an_equal_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another node's plan (forwarded over ssh) may name cores this launcher does not have."""
    monkeypatch.setenv(Env.SLOTS, json.dumps([{"index": 0, "gpu": "0", "cpus": [40, 41]},
                                              {"index": 1, "gpu": "1", "cpus": [42, 43]}]))
    pinned = Pinned(monkeypatch, [0, 1, 2, 3])
    assert slot_cores(1) is None
    run_rank(1)
    assert pinned.cores() == {2, 3}
    assert pinned.threads == [2]
