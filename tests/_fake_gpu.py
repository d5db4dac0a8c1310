"""A fake GPU machine for the tests: NVML as nvidia-ml-py answers, and the /proc, /sys and /dev
files a GPU node has, so that device discovery and slot planning can be tested on a CPU.

:class:`FakeMachine` describes a node (sockets, cores, SMT threads, GPUs per socket) the way
Linux numbers it: the first thread of every core first (socket 0's cores, then socket 1's),
then the second threads in the same order; so on two sockets of 16 cores, CPU 0 and CPU 32 are
the two threads of one core. With ``siblings_adjacent`` a core's threads have consecutive
numbers instead (CPUs 0 and 1 are one core), as on some AMD and ARM nodes.
:meth:`FakeMachine.write` lays out its files under a root folder; :meth:`FakeMachine.nvml` is
an NVML that knows its GPUs' PCI bus ids and CPU affinity.

:class:`FakeNvml` opens, counts, names and places GPUs (``FakeNvml(count)``, ``init_error``,
handles are the indices); test_monitor.py's fake adds the telemetry on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """pynvml's base error: ``value`` is NVML's return code."""

    def __init__(self, value: int = 999) -> None:
        self.value = value
        super().__init__(f"NVML error {value}")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's naming
    """What a query raises on a GPU that does not report it (NVML_ERROR_NOT_SUPPORTED)."""

    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's naming
    """What ``nvmlInit`` raises where libnvidia-ml.so is missing (a container without the
    ``utility`` driver capability, or no driver)."""

    def __init__(self) -> None:
        super().__init__(12)

    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


def cpulist(cpus: list[int] | set[int] | frozenset[int]) -> str:
    """CPUs as the kernel writes them: ``0-15,32-47``."""
    ordered, ranges = sorted(cpus), []
    for cpu in ordered:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


@dataclass(frozen=True)
class FakeMachine:
    """A GPU node: ``sockets`` x ``cores_per_socket`` cores of ``threads_per_core`` threads,
    ``gpus_per_socket`` GPUs on each socket's PCI root (GPUs 0..k-1 on socket 0, and so on)."""

    sockets: int = 2
    cores_per_socket: int = 16
    threads_per_core: int = 2
    gpus_per_socket: int = 4
    siblings_adjacent: bool = False

    # -- CPUs --------------------------------------------------------------------------------
    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    def cpus(self) -> list[int]:
        return list(range(self.cores * self.threads_per_core))

    def thread_of(self, cpu: int) -> int:
        """0 for the first thread of its core, 1 for its sibling, ..."""
        if self.siblings_adjacent:
            return cpu % self.threads_per_core
        return cpu // self.cores

    def core_of(self, cpu: int) -> int:
        """The physical core (0 .. cores-1, unique over sockets) that ``cpu`` is a thread of."""
        if self.siblings_adjacent:
            return cpu // self.threads_per_core
        return cpu % self.cores

    def socket_of(self, cpu: int) -> int:
        return self.core_of(cpu) // self.cores_per_socket

    def siblings(self, cpu: int) -> list[int]:
        core = self.core_of(cpu)
        if self.siblings_adjacent:
            return [core * self.threads_per_core + t for t in range(self.threads_per_core)]
        return [core + t * self.cores for t in range(self.threads_per_core)]

    def socket_cpus(self, socket: int) -> list[int]:
        return [c for c in self.cpus() if self.socket_of(c) == socket]

    # -- GPUs --------------------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return self.sockets * self.gpus_per_socket

    def gpu_socket(self, gpu: int) -> int:
        return gpu // self.gpus_per_socket

    def bus_id(self, gpu: int) -> str:
        """The GPU's PCI bus id as sysfs and /proc/driver/nvidia write it (``0000:1b:00.0``);
        increasing with the GPU index, as NVML's PCI order is."""
        return f"0000:{0x1B + 0x10 * gpu:02x}:00.0"

    def nvml_bus_id(self, gpu: int) -> str:
        """The same as NVML's ``busId`` writes it (``00000000:1B:00.0``)."""
        return f"00000000:{0x1B + 0x10 * gpu:02X}:00.0"

    def gpu_cpus(self, gpu: int) -> list[int]:
        """The CPUs near a GPU: every thread of its socket."""
        return self.socket_cpus(self.gpu_socket(gpu))

    # -- the files ---------------------------------------------------------------------------
    def write(self, root: Path, *, cpus: bool = True, pci: bool = True, proc: bool = True,
              dev: bool = True) -> Path:
        """Lay the machine's files out under ``root``: CPU topology in sysfs, each GPU's
        ``local_cpulist`` and ``numa_node``, ``/proc/driver/nvidia/gpus/<bus id>``, and the
        device nodes ``/dev/nvidiactl`` and ``/dev/nvidia<N>`` (plain files). Returns root."""
        if cpus:
            for cpu in self.cpus():
                topo = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
                topo.mkdir(parents=True, exist_ok=True)
                (topo / "thread_siblings_list").write_text(cpulist(self.siblings(cpu)) + "\n")
                (topo / "core_id").write_text(f"{self.core_of(cpu) % self.cores_per_socket}\n")
                (topo / "physical_package_id").write_text(f"{self.socket_of(cpu)}\n")
        for gpu in range(self.gpus):
            bus = self.bus_id(gpu)
            if pci:
                device = root / "sys/bus/pci/devices" / bus
                device.mkdir(parents=True, exist_ok=True)
                (device / "local_cpulist").write_text(cpulist(self.gpu_cpus(gpu)) + "\n")
                (device / "numa_node").write_text(f"{self.gpu_socket(gpu)}\n")
            if proc:
                info = root / "proc/driver/nvidia/gpus" / bus
                info.mkdir(parents=True, exist_ok=True)
                (info / "information").write_text(f"Model: Fake H100\nBus Location: {bus}\n")
            if dev:
                (root / "dev").mkdir(parents=True, exist_ok=True)
                (root / "dev" / f"nvidia{gpu}").touch()
        if dev:
            (root / "dev").mkdir(parents=True, exist_ok=True)
            (root / "dev/nvidiactl").touch()
        return root

    def nvml(self, **kwargs: Any) -> FakeNvml:
        """An NVML that sees this machine's GPUs, their bus ids and their CPU affinity."""
        return FakeNvml(
            self.gpus,
            bus_ids=[self.nvml_bus_id(g) for g in range(self.gpus)],
            affinity=[self.gpu_cpus(g) for g in range(self.gpus)],
            **kwargs,
        )


class FakeNvml:
    """The NVML calls that open, count, name and place GPUs. Handles are the indices.

    ``init_error``: raised by ``nvmlInit`` (e.g. :class:`NVMLError_LibraryNotFound`).
    ``bus_ids``/``affinity``: per GPU, NVML's ``busId`` and the CPUs of
    ``nvmlDeviceGetCpuAffinity``; None leaves those functions out (an older binding)."""

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self, count: int = 1, *, init_error: Exception | None = None,
                 bus_ids: list[str] | None = None,
                 affinity: list[list[int]] | None = None) -> None:
        self.count = count
        self.init_error = init_error
        self.uuids = [f"GPU-{i:x}{i:x}{i:x}-0000" for i in range(count)]
        self.bus_ids = bus_ids
        self.affinity = affinity
        self.calls: dict[str, int] = {}
        self.shutdown = False
        if bus_ids is None:
            self.nvmlDeviceGetPciInfo = None  # type: ignore[assignment]
        if affinity is None:
            self.nvmlDeviceGetCpuAffinity = None  # type: ignore[assignment]

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self) -> None:  # noqa: N802
        self._count("init")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        if not 0 <= i < self.count:
            raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return self.uuids[h]

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:  # noqa: N802
        assert self.bus_ids is not None
        bus = self.bus_ids[h]
        # nvmlPciInfo_t: busId has an 8-digit domain, busIdLegacy a 4-digit one.
        return SimpleNamespace(busId=bus.encode(), busIdLegacy=bus[4:].encode())

    def nvmlDeviceGetCpuAffinity(self, h: int, size: int) -> list[int]:  # noqa: N802
        """pynvml's answer: ``size`` 64-bit words, bit ``c % 64`` of word ``c // 64`` is CPU c."""
        assert self.affinity is not None
        self._count("affinity")
        words = [0] * size
        for cpu in self.affinity[h]:
            if cpu // 64 < size:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words


def no_nvml() -> FakeNvml:
    """pynvml where libnvidia-ml.so cannot be loaded: ``nvmlInit`` raises LibraryNotFound."""
    return FakeNvml(0, init_error=NVMLError_LibraryNotFound())
