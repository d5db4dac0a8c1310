"""Which cores go with which GPU: the machine's physical cores (SMT siblings) and each GPU's
nearby CPUs (its NUMA node), read from sysfs, and the split of the cores between GPU slots that
follows them (run/devices.py plans the slots).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_dlbench.run.devices import GpuDiscovery

__all__ = ["Topology", "parse_cpulist", "read_topology", "topology_split"]


def parse_cpulist(text: str | None) -> list[int]:
    """A kernel CPU list (``"0-3,8,10-11"``) as sorted CPU numbers; ``[]`` for None or junk."""
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        low, _, high = part.strip().partition("-")
        try:
            cpus.update(range(int(low), int(high or low) + 1))
        except ValueError:
            continue
    return sorted(cpus)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Topology:
    """Which physical core each CPU is a thread of, and which CPUs are near each GPU."""

    #: CPU -> a name of its physical core (CPUs with the same name are SMT siblings).
    core_of: Mapping[int, str] = field(default_factory=dict)
    #: GPU id (a ``CUDA_VISIBLE_DEVICES`` value) -> the CPUs of its NUMA node / socket.
    near: Mapping[str, frozenset[int]] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return bool(self.core_of or self.near)


def read_topology(found: GpuDiscovery, cpus: Iterable[int], *, root: Path) -> Topology:
    """The topology of ``cpus`` and of the GPUs ``found``, from sysfs under ``root`` (the
    machine's ``/``, a fake tree in tests): ``thread_siblings_list`` (else ``core_id`` and
    ``physical_package_id``) for the cores, each GPU's PCI ``local_cpulist`` (else NVML's CPU
    affinity) for what is near it. What cannot be read is left out."""
    core_of: dict[int, str] = {}
    for cpu in cpus:
        base = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
        siblings = parse_cpulist(_read(base / "thread_siblings_list"))
        if siblings:
            core_of[cpu] = f"cpu{siblings[0]}"
            continue
        package, core = _read(base / "physical_package_id"), _read(base / "core_id")
        if package is not None and core is not None:
            core_of[cpu] = f"package{package}.core{core}"
    near: dict[str, frozenset[int]] = {}
    for gpu, bus, nvml_cpus in zip(found.ids, found.bus_ids, found.nvml_cpus, strict=False):
        local = parse_cpulist(_read(root / "sys/bus/pci/devices" / bus / "local_cpulist")) \
            if bus else []
        if local:
            near[gpu] = frozenset(local)
        elif nvml_cpus:
            near[gpu] = nvml_cpus
    return Topology(core_of, near)


def _physical_cores(cpus: Sequence[int], core_of: Mapping[int, str]) -> list[tuple[int, ...]]:
    """``cpus`` grouped by physical core (a CPU of unknown core alone), in order of first CPU."""
    groups: dict[str, list[int]] = {}
    for cpu in cpus:
        groups.setdefault(core_of.get(cpu, f"alone{cpu}"), []).append(cpu)
    return sorted((tuple(sorted(group)) for group in groups.values()), key=lambda c: c[0])


def _threads_by_depth(cores: Sequence[tuple[int, ...]]) -> list[int]:
    """The first thread of every core, then the second of every core, and so on."""
    depth = max(map(len, cores), default=0)
    return [core[d] for d in range(depth) for core in cores if d < len(core)]


def topology_split(gpus: Sequence[str], share: int, cpus: Sequence[int],
                    topology: Topology) -> list[tuple[int, ...]] | None:
    """Each GPU slot's ``share`` CPUs: whole physical cores near its GPU that no other slot
    has, the first thread of each core before any sibling. None when the slots cannot each
    have cores of their own (the plain split then)."""
    cores = _physical_cores(cpus, topology.core_of)
    per_slot = min(share, len(cores) // len(gpus))
    if per_slot < 1 or share * len(gpus) > len(cpus):
        return None
    free = cores
    split = []
    for gpu in gpus:
        near = topology.near.get(gpu, frozenset())
        # Near cores first (sorted is stable: each group keeps the cores' order).
        mine = sorted(free, key=lambda core: not near.intersection(core))[:per_slot]
        free = [core for core in free if core not in mine]
        split.append(tuple(sorted(_threads_by_depth(mine)[:share])))
    return split
