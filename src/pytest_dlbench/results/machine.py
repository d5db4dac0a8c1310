"""What the numbers were measured on: host, CPU, GPUs, package versions, git commit.

Gathered for a run's stream (:func:`machine_meta`, the ``meta`` record of each run) and for a
saved summary (:func:`current_machine` and :func:`git_commit`, its provenance), and compared
between a run and its baseline (:func:`machine_differences`): a comparison across machines is
worth a warning. GPUs come from NVML (``measure/monitor/nvml.py``), never from torch: no CUDA
context, no import cost. torch is only read when the process has already imported it.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from os import PathLike
from typing import Any

from pytest_dlbench.measure.monitor.nvml import gpu_inventory
from pytest_dlbench.run.protocol import Env

__all__ = [
    "cpu_model",
    "current_machine",
    "git_commit",
    "machine_differences",
    "machine_info",
    "machine_meta",
    "package_versions",
]

#: The packages whose versions a summary records.
PACKAGES = ("pytest-dlbench", "pytest", "torch", "torchvision", "timm", "numpy")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """Host name, CPU model and cores, GPUs and driver. Never imports torch."""
    inventory = gpu_inventory()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpus": [{"index": g.index, "name": g.name, "memory": g.memory} for g in inventory.gpus],
        "driver": inventory.driver,
    }


def package_versions() -> dict[str, str | None]:
    """Installed versions from package metadata: importing torch here could initialise CUDA."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def current_machine() -> dict[str, Any]:
    """This machine as a saved summary records it: ``machine`` and ``versions``."""
    return {"machine": machine_info(), "versions": package_versions()}


def git_commit(cwd: str | PathLike[str] | None = None) -> str | None:
    """``git rev-parse HEAD`` of the working directory, or None outside a repository."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def machine_meta(device: Any = None) -> dict[str, Any]:
    """Host, Python, torch and device facts for the ``meta`` record (torch only if loaded)."""
    meta: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "pid": os.getpid(),
        "time": time.time(),
        "slot": os.environ.get(Env.SLOT),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        meta["torch"] = torch.__version__
        meta["cuda"] = torch.version.cuda
        meta["device"] = str(device) if device is not None else "cpu"
        if device is not None and getattr(device, "type", None) == "cuda":
            meta["device_name"] = torch.cuda.get_device_name(device)
        else:
            meta["device_name"] = meta["cpu"]
    return meta


# -- two machines ------------------------------------------------------------------------------
def _gpu_names(machine: Mapping[str, Any]) -> list[str] | None:
    """The GPU names of a ``machine`` section, without the vendor prefix; None if unrecorded."""
    gpus = machine.get("gpus")
    if not isinstance(gpus, list):
        return None
    names = [str(g.get("name") or "?") if isinstance(g, Mapping) else "?" for g in gpus]
    return [n.removeprefix("NVIDIA ") for n in names]


def _count(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def machine_differences(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """What differs between the machines of two summaries, one short phrase each, this run's
    side first: GPU model (``"GPU H100 vs A100"``), GPU count (``"4 GPUs vs 8"``), CPU model,
    torch version (``"torch 2.11.0 vs 2.14.1"``).

    Each side holds ``machine`` and ``versions`` as a saved summary does (a loaded summary, or
    :func:`current_machine`); a fact that one side does not record is not compared.
    """
    now, then = current.get("machine") or {}, baseline.get("machine") or {}
    out = []
    gpus_now, gpus_then = _gpu_names(now), _gpu_names(then)
    if gpus_now is not None and gpus_then is not None:
        models_now, models_then = sorted(set(gpus_now)), sorted(set(gpus_then))
        if models_now and models_then and models_now != models_then:
            out.append(f"GPU {'+'.join(models_now)} vs {'+'.join(models_then)}")
        if len(gpus_now) != len(gpus_then):
            out.append(f"{_count(len(gpus_now))} vs {len(gpus_then)}")
    cpu_now, cpu_then = now.get("cpu"), then.get("cpu")
    if cpu_now and cpu_then and cpu_now != cpu_then:
        out.append(f"CPU {cpu_now} vs {cpu_then}")
    torch_now = (current.get("versions") or {}).get("torch")
    torch_then = (baseline.get("versions") or {}).get("torch")
    if torch_now and torch_then and torch_now != torch_then:
        out.append(f"torch {torch_now} vs {torch_then}")
    return out
