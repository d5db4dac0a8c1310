"""What the numbers were measured on, probed on this machine: host, CPU, GPUs, package versions,
git commit, and the machine's state (docs/machine.md).

Gathered for a run's stream (:func:`machine_meta`, the ``meta`` record the harness writes) and
for a saved summary (:func:`current_machine` and :func:`git_commit`, its provenance). What the
facts mean (readiness, two machines' differences, ``dlbench machine``'s text) is judged in
:mod:`pytest_dlbench.results.figures.machine`.

The state (:func:`machine_state`) is what changes numbers on the same hardware: CPU frequency
governor and turbo, ASLR, load, and per GPU the clocks, their slowdowns, persistence mode, power
limit, ECC and other processes, with the driver and CUDA versions. Every fact is read from
/proc, /sys or NVML with a fallback: a file that is not there is ``None`` ("unknown"), never an
error. GPUs come from NVML (``measure/monitor/nvml.py``), never from torch: no CUDA context, no
import cost. torch is only read when the process has already imported it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
import socket
import subprocess
import sys
import time
from importlib import metadata
from os import PathLike
from typing import Any

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.monitor.nvml import gpu_inventory, gpu_state

__all__ = [
    "PACKAGES",
    "aslr",
    "cpu_governor",
    "cpu_model",
    "cpu_turbo",
    "current_machine",
    "git_commit",
    "load_average",
    "machine_info",
    "machine_meta",
    "machine_state",
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
    """Host name, CPU model and cores, GPUs and driver, and the machine's ``state``
    (:func:`machine_state`). Never imports torch."""
    inventory = gpu_inventory()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpus": [{"index": g.index, "name": g.name, "memory": g.memory} for g in inventory.gpus],
        "driver": inventory.driver,
        "state": machine_state(),
    }


# -- the machine's state -----------------------------------------------------------------------
#: /sys and /proc, as module attributes so that tests can point them at a fake tree.
SYS_CPU = "/sys/devices/system/cpu"
PROC = "/proc"


def _read(path: str) -> str | None:
    """A small /proc or /sys file's stripped text; None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def cpu_governor() -> str | None:
    """The CPU frequency governor of every CPU (``"performance"``), ``"mixed: a, b"`` when they
    differ, None without cpufreq (many VMs and containers)."""
    found = sorted({g for path in glob.glob(f"{SYS_CPU}/cpu[0-9]*/cpufreq/scaling_governor")
                    if (g := _read(path))})
    if not found:
        return None
    return found[0] if len(found) == 1 else f"mixed: {', '.join(found)}"


def cpu_turbo() -> bool | None:
    """Turbo boost on (True) or off, from intel_pstate's ``no_turbo`` or cpufreq's ``boost``;
    None when neither is there."""
    no_turbo = _read(f"{SYS_CPU}/intel_pstate/no_turbo")
    if no_turbo in ("0", "1"):
        return no_turbo == "0"
    boost = _read(f"{SYS_CPU}/cpufreq/boost")
    if boost in ("0", "1"):
        return boost == "1"
    return None


def aslr() -> int | None:
    """``/proc/sys/kernel/randomize_va_space``: 0 off, 1 partial, 2 full; None if unknown."""
    value = _read(f"{PROC}/sys/kernel/randomize_va_space")
    return int(value) if value is not None and value.isdigit() else None


def load_average() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def _related_pids() -> list[int]:
    """This process, its parents and its children: their use of a GPU is not "other"."""
    pids = [os.getpid()]
    with contextlib.suppress(Exception):
        import psutil

        me = psutil.Process()
        pids += [p.pid for p in me.parents()] + [p.pid for p in me.children(recursive=True)]
    return pids


def machine_state() -> dict[str, Any]:
    """The state that changes benchmark numbers on the same hardware (see the module
    docstring); every fact None when it cannot be read. Never imports torch."""
    return {
        "governor": cpu_governor(),
        "turbo": cpu_turbo(),
        "aslr": aslr(),
        "load": load_average(),
        "cores": os.cpu_count(),
        **gpu_state(ignore_pids=_related_pids()),
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
        "state": machine_state(),
    }
    meta["device"] = str(device) if device is not None else "cpu"
    meta["device_name"] = meta["cpu"]
    torch = sys.modules.get("torch")
    if torch is not None:
        meta["torch"] = torch.__version__
        meta["cuda"] = torch.version.cuda
        if device is not None and getattr(device, "type", None) == "cuda":
            meta["device_name"] = torch.cuda.get_device_name(device)
    else:  # not imported (a CPU run that has not needed it yet): its version, not its state
        meta["torch"] = package_versions().get("torch")
    return meta
