"""What the numbers were measured on: machine facts (with a fake NVML), versions, the git
commit, the ``meta`` record, and what differs between a run's machine and its baseline's."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.measure.machine import (
    cpu_model,
    current_machine,
    git_commit,
    machine_info,
    machine_meta,
)
from pytest_dlbench.results.figures import machine_differences


def test_git_commit_inside_and_outside_a_repository(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    commit = git_commit(tmp_path)
    assert commit is not None and len(commit) == 40


def test_machine_info_and_versions_never_import_torch() -> None:
    code = (
        "import sys\n"
        "from pytest_dlbench.measure.machine import machine_info, package_versions\n"
        "info = machine_info(); versions = package_versions()\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert isinstance(info['cores'], int) and isinstance(info['gpus'], list)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow  # a real pytest run and its child
def test_a_cpu_benchmark_starts_without_torch(tmp_path: Path) -> None:
    """No GPU driver, no torchrun: the bench fixture's device is the CPU without importing
    torch (seconds of a fresh child's start), and the meta record is complete anyway."""
    from pytest_dlbench.run.devices import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("this machine has a GPU driver: torch decides the device")
    code = (
        "import sys\n"
        "from pytest_dlbench.plugin.fixtures import default_device\n"
        "from pytest_dlbench.measure.bench import Bench\n"
        "from pytest_dlbench.measure.machine import machine_meta\n"
        "device = default_device(); meta = machine_meta(device); bench = Bench(device=device)\n"
        "assert device == 'cpu' and 'torch' not in sys.modules, 'torch imported'\n"
        "assert meta['device'] == 'cpu' and meta['device_name'] == meta['cpu']\n"
        "assert meta['torch'], meta\n"
        "assert str(bench.device) == 'cpu' and 'torch' in sys.modules  # on first use\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=tmp_path)


def test_gpu_driver_present_reads_the_driver_files(tmp_path: Path) -> None:
    from pytest_dlbench.run.devices import gpu_driver_present

    (tmp_path / "nvidiactl").touch()
    assert gpu_driver_present((str(tmp_path / "kfd"),)) is (platform.system() != "Linux")
    assert gpu_driver_present((str(tmp_path / "kfd"), str(tmp_path / "nvidiactl")))


def test_no_nvml_means_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    info = machine_info()
    assert (info["gpus"], info["driver"]) == ([], None)


def test_nvml_without_driver_means_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeNvml:
        class NVMLError(Exception):
            pass

        def nvmlInit(self) -> None:
            raise self.NVMLError("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    info = machine_info()
    assert (info["gpus"], info["driver"]) == ([], None)


def test_nvml_gpus_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Memory:
        total = 80 * 2**30

    class FakeNvml:
        def nvmlInit(self) -> None: ...
        def nvmlShutdown(self) -> None: ...
        def nvmlSystemGetDriverVersion(self) -> bytes:
            return b"550.54"
        def nvmlDeviceGetCount(self) -> int:
            return 2
        def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
            return i
        def nvmlDeviceGetName(self, handle: int) -> str:
            return "NVIDIA H100"
        def nvmlDeviceGetMemoryInfo(self, handle: int) -> Memory:
            return Memory()

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    info = machine_info()
    gpus, driver = info["gpus"], info["driver"]
    assert driver == "550.54"
    assert [g["name"] for g in gpus] == ["NVIDIA H100"] * 2
    assert gpus[1] == {"index": 1, "name": "NVIDIA H100", "memory": 80 * 2**30}


def test_meta_record_facts() -> None:
    meta = machine_meta()
    assert meta["cpu"] == cpu_model() and meta["pid"] == os.getpid()
    assert {"host", "platform", "python", "time", "slot", "cpus", "threads"} <= set(meta)


# -- two machines ------------------------------------------------------------------------------
def side(gpus: list[str], cpu: str = "Xeon 8480", torch: str | None = "2.11.0") -> dict[str, Any]:
    """A summary's provenance: ``machine`` and ``versions``."""
    return {
        "machine": {"cpu": cpu, "gpus": [{"index": i, "name": n} for i, n in enumerate(gpus)]},
        "versions": {"torch": torch},
    }


def test_the_same_machine_differs_in_nothing() -> None:
    assert machine_differences(side(["NVIDIA H100"] * 8), side(["NVIDIA H100"] * 8)) == []
    here = current_machine()
    assert machine_differences(here, here) == []


@pytest.mark.parametrize(
    ("current", "baseline", "phrases"),
    [
        (side(["NVIDIA H100"]), side(["NVIDIA A100-SXM4-80GB"]), ["GPU H100 vs A100-SXM4-80GB"]),
        (side(["NVIDIA H100"] * 4), side(["NVIDIA H100"] * 8), ["4 GPUs vs 8"]),
        (side([]), side(["NVIDIA H100"]), ["0 GPUs vs 1"]),  # a CPU run against a GPU baseline
        (side([], cpu="EPYC 9654"), side([]), ["CPU EPYC 9654 vs Xeon 8480"]),
        (side([], torch="2.11.0"), side([], torch="2.14.1"), ["torch 2.11.0 vs 2.14.1"]),
        (side(["NVIDIA H100"], torch="2.11.0"), side(["NVIDIA A100"] * 2, torch="2.14.1"),
         ["GPU H100 vs A100", "1 GPU vs 2", "torch 2.11.0 vs 2.14.1"]),
    ],
)
def test_differences_one_phrase_each(current, baseline, phrases) -> None:
    assert machine_differences(current, baseline) == phrases


def test_unrecorded_facts_are_not_compared() -> None:
    assert machine_differences({}, side(["NVIDIA H100"])) == []
    assert machine_differences(side(["NVIDIA H100"], torch=None), side(["NVIDIA H100"])) == []
