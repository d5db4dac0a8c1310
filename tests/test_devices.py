"""Device slots: GPUs (faked NVML counts), CPU core groups, and the errors of bad -n values."""

from __future__ import annotations

import sys

import pytest

from pytest_dlbench.run import devices
from pytest_dlbench.run.devices import Slot, SlotError, placeholder_context, plan_slots


def test_one_slot_of_all_cores_by_default():
    assert plan_slots(gpus=[], cpus=[0, 1, 2, 3]) == [Slot(0, None, (0, 1, 2, 3))]


def test_workers_split_the_cores():
    assert plan_slots(workers=2, gpus=[], cpus=[0, 1, 2, 3]) == [
        Slot(0, None, (0, 1)), Slot(1, None, (2, 3))
    ]


def test_cpus_per_slot_sets_the_number_of_slots():
    slots = plan_slots(cpus_per_slot=1, gpus=[], cpus=[4, 5, 6])
    assert [s.cpus for s in slots] == [(4,), (5,), (6,)]


def test_one_slot_per_gpu_with_a_share_of_the_cores():
    slots = plan_slots(gpus=["0", "1"], cpus=list(range(8)))
    assert [(s.gpu, s.cpus) for s in slots] == [("0", (0, 1, 2, 3)), ("1", (4, 5, 6, 7))]


def test_fewer_workers_than_gpus_use_the_first_gpus():
    slots = plan_slots(workers=1, gpus=["2", "3"], cpus=list(range(4)))
    assert [s.gpu for s in slots] == ["2"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(workers=2, gpus=["0"], cpus=[0, 1]), "-n 2: this machine has 1 GPU(s) visible"),
        (dict(workers=3, gpus=[], cpus=[0, 1]), "-n 3: needs 3 cores, 2 available"),
        (dict(workers=2, cpus_per_slot=2, gpus=[], cpus=[0, 1, 2]),
         "-n 2 with --bench-cpus-per-slot=2: needs 4 cores, 3 available"),
        (dict(cpus_per_slot=4, gpus=[], cpus=[0, 1]), "--bench-cpus-per-slot=4: only 2 core"),
        (dict(cpus_per_slot=0, gpus=[], cpus=[0, 1]), "at least 1"),
    ],
)
def test_oversubscription_is_an_error(kwargs, message):
    with pytest.raises(SlotError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_slots(**kwargs)


def test_slot_environment():
    assert Slot(1, "3", (2, 3)).env() == {
        "DLBENCH_SLOT": "1", "DLBENCH_CPUS": "2,3", "OMP_NUM_THREADS": "2",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "3",
    }
    assert "CUDA_VISIBLE_DEVICES" not in Slot(0, None, (0,)).env()
    assert Slot.from_dict(Slot(1, "3", (2, 3)).to_dict()) == Slot(1, "3", (2, 3))


class FakeNvml:
    """The NVML calls that count and name GPUs."""

    def __init__(self, count: int) -> None:
        self.count = count

    def nvmlInit(self):  # noqa: N802
        pass

    def nvmlShutdown(self):  # noqa: N802
        pass

    def nvmlDeviceGetCount(self):  # noqa: N802
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return i


@pytest.mark.parametrize(
    ("visible", "count", "expected"),
    [
        (None, 4, ["0", "1", "2", "3"]),
        ("2,3", 4, ["2", "3"]),
        ("1,-1,2", 4, ["1"]),  # CUDA stops at the first invalid id
        ("0,1", 0, []),  # no driver: no GPU whatever the variable says
    ],
)
def test_visible_gpus_honour_cuda_visible_devices(monkeypatch, visible, count, expected):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(count))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert devices.visible_gpus() == expected


def test_nvml_without_a_driver_counts_no_gpu(monkeypatch):
    class NoDriver:
        class NVMLError_LibraryNotFound(Exception):  # noqa: N801 - NVML's own name
            pass

        def nvmlInit(self):  # noqa: N802
            raise self.NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", NoDriver())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert devices.gpu_count() == 0


def test_placeholders():
    context = placeholder_context(gpus=0, cpus=8, slots=2, run_name="r", bench_name="b")
    assert context["cpu_per_gpu"] == 4 and context["n_worker"] == 4
    assert (context["device_name"], context["ccl"], context["arch"]) == ("cpu", "gloo", "cpu")
    gpu = placeholder_context(gpus=8, cpus=64)
    assert (gpu["cpu_per_gpu"], gpu["n_worker"], gpu["ccl"]) == (8, 8, "nccl")
    assert placeholder_context(gpus=1, cpus=64)["n_worker"] == 16  # clamped to 2..16
