"""Device slots: GPUs (faked NVML counts), CPU core groups, and the errors of bad -n values;
the cores of GPU slots on a two-socket SMT node, GPUs counted without NVML, a GPU slot where
torch cannot use CUDA, and inline isolation with several GPUs (a fake machine, _fake_gpu.py)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from _fake_gpu import FakeMachine, FakeNvml, no_nvml

from pytest_dlbench.core.errors import DeviceError
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.run import devices
from pytest_dlbench.run.devices import Slot, SlotError, placeholder_context, plan_slots


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty fake root for /proc, /sys and /dev (no driver files, no topology), so that no
    test reads this machine's. ``raising=False``: the test still runs (and fails) on code
    without the setting."""
    root = tmp_path / "host"
    root.mkdir()
    monkeypatch.setattr(devices, "HOST_ROOT", root, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in (Env.SLOTS, Env.SLOT):
        monkeypatch.delenv(name, raising=False)
    return root


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


@pytest.mark.parametrize(
    ("visible", "count", "expected"),
    [
        (None, 4, ["0", "1", "2", "3"]),
        ("2,3", 4, ["2", "3"]),
        ("1,-1,2", 4, ["1"]),  # CUDA stops at the first invalid id
        ("0,1", 0, []),  # no driver: no GPU whatever the variable says
    ],
)
def test_visible_gpus_honour_cuda_visible_devices(monkeypatch, host, visible, count, expected):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(count))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert devices.visible_gpus() == expected


def test_nvml_without_a_driver_counts_no_gpu(monkeypatch, host):
    monkeypatch.setitem(sys.modules, "pynvml", no_nvml())
    assert devices.gpu_count() == 0
    assert devices.discover_gpus().note == ""  # nothing to announce on a CPU machine


def test_placeholders():
    context = placeholder_context(gpus=0, cpus=8, slots=2, run_name="r", bench_name="b")
    assert context["cpu_per_gpu"] == 4 and context["n_worker"] == 4
    assert (context["device_name"], context["ccl"], context["arch"]) == ("cpu", "gloo", "cpu")
    gpu = placeholder_context(gpus=8, cpus=64)
    assert (gpu["cpu_per_gpu"], gpu["n_worker"], gpu["ccl"]) == (8, 8, "nccl")
    assert placeholder_context(gpus=1, cpus=64)["n_worker"] == 16  # clamped to 2..16


# -- the cores of GPU slots on a two-socket SMT node (issue 21, defect 5) ----------------------
NODE = FakeMachine(sockets=2, cores_per_socket=16, threads_per_core=2, gpus_per_socket=4)


def on_node(monkeypatch: pytest.MonkeyPatch, root: Path, *, allowed: list[int] | None = None,
            nvml: FakeNvml | None = None, node: FakeMachine = NODE,
            **files: bool) -> FakeMachine:
    """This process on ``node``: its NVML, its files under ``root``, ``allowed`` CPUs."""
    node.write(root, **files)
    monkeypatch.setitem(sys.modules, "pynvml", nvml or node.nvml())
    monkeypatch.setattr(devices, "allowed_cpus", lambda: allowed or node.cpus())
    return node


def assert_local_whole_cores(node: FakeMachine, slots: list[Slot]) -> None:
    """Each slot's CPUs on its GPU's socket; no physical core in two slots."""
    owner: dict[int, int] = {}
    for slot in slots:
        assert slot.gpu is not None and slot.cpus
        socket = node.gpu_socket(int(slot.gpu))
        assert {node.socket_of(c) for c in slot.cpus} == {socket}, (slot, socket)
        for cpu in slot.cpus:
            core = node.core_of(cpu)
            assert owner.setdefault(core, slot.index) == slot.index, (
                f"core {core} (CPU {cpu}) in slots {owner[core]} and {slot.index}")


def test_gpu_slots_get_whole_cores_of_their_gpus_socket(monkeypatch, host):
    node = on_node(monkeypatch, host)
    slots = plan_slots()
    assert [s.gpu for s in slots] == [str(g) for g in range(8)]
    assert_local_whole_cores(node, slots)
    # 64 threads for 8 GPUs: 4 cores each, both threads of each.
    assert all(len(s.cpus) == 8 and len({node.core_of(c) for c in s.cpus}) == 4 for s in slots)
    assert slots[0].cpus == (0, 1, 2, 3, 32, 33, 34, 35)
    assert slots[4].cpus == (16, 17, 18, 19, 48, 49, 50, 51)  # socket 1, not slot 0's siblings


@pytest.mark.parametrize("adjacent", [False, True], ids=["siblings-apart", "siblings-adjacent"])
def test_first_threads_of_cores_before_their_siblings(monkeypatch, host, adjacent):
    node = on_node(monkeypatch, host, node=FakeMachine(siblings_adjacent=adjacent))
    slots = plan_slots(cpus_per_slot=4)
    assert_local_whole_cores(node, slots)
    for slot in slots:  # four cores, one thread of each
        assert [node.thread_of(c) for c in slot.cpus] == [0, 0, 0, 0], slot
    assert len({c for s in slots for c in s.cpus}) == 32


def test_the_gpus_place_from_nvml_without_pci_files(monkeypatch, host):
    """No ``local_cpulist`` in sysfs: NVML's CPU affinity says which socket a GPU is near."""
    nvml = NODE.nvml()
    node = on_node(monkeypatch, host, nvml=nvml, pci=False)
    slots = plan_slots()
    assert_local_whole_cores(node, slots)
    assert nvml.calls.get("affinity")


def test_only_the_cpus_this_process_may_use(monkeypatch, host):
    """A cpuset of 8 cores per socket (both threads): slots stay in it and on their socket."""
    allowed = [c for c in NODE.cpus() if NODE.core_of(c) % 16 < 8]
    node = on_node(monkeypatch, host, allowed=allowed)
    slots = plan_slots()
    assert_local_whole_cores(node, slots)
    assert {c for s in slots for c in s.cpus} <= set(allowed)
    assert all(len(s.cpus) == 4 for s in slots)  # 2 cores x 2 threads each


def test_visible_gpus_keep_their_sockets(monkeypatch, host):
    node = on_node(monkeypatch, host)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,1")
    slots = plan_slots()
    assert [s.gpu for s in slots] == ["5", "1"]
    assert_local_whole_cores(node, slots)


def test_without_topology_the_cores_are_split_in_order(monkeypatch, host):
    """No sysfs, an NVML that cannot place its GPUs: today's split."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(2))
    monkeypatch.setattr(devices, "allowed_cpus", lambda: list(range(8)))
    assert [(s.gpu, s.cpus) for s in plan_slots()] == [("0", (0, 1, 2, 3)), ("1", (4, 5, 6, 7))]


def test_parse_cpulist():
    assert devices.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert devices.parse_cpulist("") == [] and devices.parse_cpulist(None) == []


# -- NVML missing while the driver shows GPUs (issue 21, 12) ----------------------------------
@pytest.mark.parametrize("files", [dict(dev=False), dict(proc=False)], ids=["proc", "dev"])
def test_gpus_are_counted_without_nvml(monkeypatch, host, files):
    """A container without the ``utility`` capability: no libnvidia-ml, while CUDA sees the
    GPUs. Each still gets its slot (not every replica on cuda:0), and that is said."""
    node = FakeMachine(sockets=2, cores_per_socket=2, threads_per_core=2, gpus_per_socket=1)
    node.write(host, **files)
    monkeypatch.setitem(sys.modules, "pynvml", no_nvml())
    monkeypatch.setattr(devices, "allowed_cpus", lambda: node.cpus())
    assert devices.visible_gpus() == ["0", "1"]
    note = devices.discover_gpus().note
    assert "NVML Shared Library Not Found" in note and "2 GPU(s)" in note
    assert "no GPU telemetry" in note and "\n" not in note
    slots = plan_slots()
    assert [s.env()["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "1"]
    if "proc" not in files:  # bus ids from /proc: each slot on its GPU's socket
        assert_local_whole_cores(node, slots)


def test_a_container_counts_its_own_device_nodes(monkeypatch, host):
    """/proc lists more GPUs than /dev holds: CUDA opens the device nodes, they count."""
    FakeMachine(sockets=1, cores_per_socket=4, gpus_per_socket=4).write(host, dev=False)
    (host / "dev").mkdir()
    for n in (2, 5):  # the host's GPUs 2 and 5 given to this container
        (host / "dev" / f"nvidia{n}").touch()
    monkeypatch.setitem(sys.modules, "pynvml", no_nvml())
    found = devices.discover_gpus()
    assert found.ids == ("0", "1") and found.bus_ids == (None, None)


def test_the_controller_announces_gpus_without_nvml(pytester: pytest.Pytester, monkeypatch, host):
    FakeMachine(sockets=1, cores_per_socket=2, gpus_per_socket=2).write(host)
    monkeypatch.setitem(sys.modules, "pynvml", no_nvml())
    pytester.makepyfile(defs="def noop(bench):\n    pass\n")
    pytester.makefile(".yaml", s="one: {definition: defs.py:noop}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*one?D0?*", "*one?D1?*",
                                 "*dlbench: NVML unavailable*2 GPU(s) found in*no GPU telemetry*"])


# -- a GPU slot where torch cannot use CUDA (issue 21, defect 6) -------------------------------
def gpu_slot_env(monkeypatch: pytest.MonkeyPatch, gpu: str = "0") -> None:
    """What the controller gives the child of a GPU slot."""
    for key, value in Slot(0, gpu, (0,)).env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(Env.SLOTS, json.dumps([Slot(0, gpu, (0,)).to_dict()]))


@pytest.fixture
def fresh_device():
    from pytest_dlbench.run.launch import rank

    rank._rank_device.cache_clear()
    yield rank
    rank._rank_device.cache_clear()


def test_a_gpu_slot_without_cuda_fails_with_torchs_reason(monkeypatch, host, fresh_device):
    import torch

    from pytest_dlbench.plugin.fixtures import default_device

    def init() -> None:
        raise RuntimeError("The NVIDIA driver on your system is too old (found version 10010)."
                           "\nPlease update your GPU driver.")

    gpu_slot_env(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "init", init)
    with pytest.raises(DeviceError) as failure:
        default_device()
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("its device slot names GPU 0 (CUDA_VISIBLE_DEVICES=0)")
    assert message.endswith("torch cannot use CUDA: The NVIDIA driver on your system is too old "
                            "(found version 10010). (CUDA_VISIBLE_DEVICES=-1 runs on the CPU on "
                            "purpose)")


def test_a_gpu_slot_without_cuda_fails_with_this_torchs_reason(monkeypatch, host, fresh_device):
    """No fake: this machine's torch, which has no GPU to use."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch can use CUDA here")
    gpu_slot_env(monkeypatch)
    with pytest.raises(DeviceError, match="GPU 0 .*, but torch cannot use CUDA: .+"):
        fresh_device.rank_device()


def test_a_gpu_machine_needs_cuda_unless_the_gpus_are_hidden(monkeypatch, host):
    FakeMachine(sockets=1, cores_per_socket=2, gpus_per_socket=2).write(host)
    (host / "dev/kfd").touch()
    assert devices.gpu_required() == "this machine has 2 NVIDIA GPU(s) (/proc/driver/nvidia/gpus)"
    for hidden in ("-1", "", "none"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert devices.gpu_required() == ""  # the user asked for the CPU


def test_a_cpu_machine_and_a_cpu_slot_need_no_cuda(monkeypatch, host, fresh_device):
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a variable left in a shell profile
    monkeypatch.setenv(Env.SLOTS, json.dumps([Slot(0, None, (0,)).to_dict()]))
    (host / "dev").mkdir()
    (host / "dev/kfd").touch()  # an AMD APU: no GPU to require
    assert devices.gpu_required() == ""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert fresh_device.rank_device() == torch.device("cpu")


@pytest.mark.slow  # a real run: the controller, and a child with this machine's torch
def test_a_gpu_slot_child_records_the_failure(pytester: pytest.Pytester):
    """The controller sees one GPU (a fake pynvml on the path of both processes); the child's
    torch cannot use CUDA (no GPU here): the run fails in one line, not on the CPU."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch can use CUDA here")
    pytester.makepyfile(pynvml=textwrap.dedent(
        """
        def nvmlInit(): pass
        def nvmlShutdown(): pass
        def nvmlDeviceGetCount(): return 1
        def nvmlDeviceGetHandleByIndex(i): return i
        """))
    pytester.makepyfile(defs="def noop(bench):\n    assert bench.device\n")
    pytester.makefile(".yaml", s="one: {definition: defs.py:noop}\n")
    result = pytester.runpytest_subprocess(
        "--bench-suite=s.yaml", "--bench-base=out", "--bench-launcher=fresh", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*DeviceError: its device slot names GPU 0 "
                                 "(CUDA_VISIBLE_DEVICES=0), but torch cannot use CUDA: *"])
    (stream,) = (pytester.path / "out" / "runs").glob("*/one.D0.data")
    end = [json.loads(line) for line in stream.read_text().splitlines()][-1]
    assert end["event"] == "end" and end["status"] == "fail"
    assert "torch cannot use CUDA" in end["reason"] and "\n" not in end["reason"]


# -- inline isolation with several GPUs (issue 21, defect 10) ---------------------------------
def test_inline_refuses_several_gpu_slots():
    with pytest.raises(SlotError, match="--bench-isolation=inline .* sees 2 GPUs"):
        devices.check_inline_slots([Slot(0, "0", (0,)), Slot(1, "1", (1,))])
    devices.check_inline_slots([Slot(0, "1", (0, 1))])
    devices.check_inline_slots([Slot(0, None, (0,)), Slot(1, None, (1,))])


SUITE = "one: {definition: defs.py:noop}\n"


@pytest.mark.parametrize(
    ("args", "visible", "ret", "items"),
    [
        (["--bench-isolation=inline"], None, pytest.ExitCode.USAGE_ERROR, 0),
        (["--bench-isolation=inline"], "1", pytest.ExitCode.OK, 1),  # one GPU: inline is fine
        (["--bench-isolation=process"], None, pytest.ExitCode.OK, 2),
    ],
)
def test_inline_on_a_two_gpu_host(pytester: pytest.Pytester, monkeypatch, host, args, visible,
                                  ret, items):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(2))
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    pytester.makepyfile(defs="def noop(bench):\n    pass\n")
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest("--bench-suite=s.yaml", "--collect-only", "-q", *args)
    assert result.ret == ret
    if ret == pytest.ExitCode.USAGE_ERROR:
        result.stderr.fnmatch_lines(["ERROR: --bench-isolation=inline runs every benchmark in "
                                     "this one process, which sees 2 GPUs: *-n 2*"])
    else:
        assert len([line for line in result.stdout.lines if "one[D" in line]) == items
