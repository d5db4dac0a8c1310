"""The ``--bench-system`` file: the machines a suite runs on (milabench, "System Configuration")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.suite.auto import check_options
from pytest_dlbench.suite.loader import load_yaml

__all__ = ["Node", "SshOptions", "SystemConfig", "load_system", "local_system"]


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    port: int | None = None
    user: str | None = None
    main: bool = False


@dataclass(frozen=True)
class SshOptions:
    """How the main node reaches the others (``system.ssh`` of the system file,
    docs/multinode.md). The timeouts make an unreachable or silent node fail in seconds."""

    port: int | None = None
    identity: str | None = None  # also ``system.sshkey``
    known_hosts: str | None = None
    connect_timeout: int = 5  # seconds to connect (ssh's ConnectTimeout)
    alive_interval: int = 5  # seconds between keep-alives (ServerAliveInterval) ...
    alive_count: int = 3  # ... and how many may go unanswered (ServerAliveCountMax)

    @property
    def silence_s(self) -> int:
        """How long a silent node goes unnoticed at most, once connected."""
        return self.alive_interval * self.alive_count


_SSH_INTS = ("port", "connect_timeout", "alive_interval", "alive_count")
_SSH_PATHS = ("identity", "known_hosts")


def _ssh_options(system: dict[str, Any], path: Path) -> SshOptions:
    raw = system.get("ssh") or {}
    if not isinstance(raw, dict):
        raise SuiteError("'system.ssh' must be a mapping", file=path)
    unknown = sorted(set(raw) - set(_SSH_INTS) - set(_SSH_PATHS))
    if unknown:
        known = ", ".join((*_SSH_INTS, *_SSH_PATHS))
        raise SuiteError(f"'system.ssh' has no option {quoted(unknown[0])} (known: {known})",
                         file=path)
    for key in _SSH_INTS:
        value = raw.get(key)
        if value is not None and (not is_integer(value) or value < 1):
            raise SuiteError(f"'system.ssh.{key}' must be a positive integer", file=path)
    for key in _SSH_PATHS:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise SuiteError(f"'system.ssh.{key}' must be a path", file=path)
    identity = raw.get("identity") or system.get("sshkey")
    values = {k: raw[k] for k in (*_SSH_INTS, "known_hosts") if raw.get(k) is not None}
    return SshOptions(identity=str(identity) if identity else None, **values)


@dataclass(frozen=True)
class SystemConfig:
    arch: str | None
    nodes: tuple[Node, ...]
    options: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    ssh: SshOptions = field(default_factory=SshOptions)

    @property
    def main_node(self) -> Node:
        return next((n for n in self.nodes if n.main), self.nodes[0])

    def placeholders(self) -> dict[str, Any]:
        """Every top-level key of the ``system:`` mapping, usable as ``{key}`` in argv."""
        return dict(self.options)


def local_system() -> SystemConfig:
    return SystemConfig(arch=None, nodes=(Node(name="local", ip="127.0.0.1", main=True),))


def load_system(path: str | Path) -> SystemConfig:
    path = Path(path)
    if not path.is_file():
        raise SuiteError("system file not found", file=path)
    data = load_yaml(path)
    system = data.get("system") if isinstance(data, dict) else None
    if not isinstance(system, dict):
        raise SuiteError("a system file needs a top-level 'system:' mapping", file=path)
    raw_nodes = system.get("nodes") or [{"name": "local", "ip": "127.0.0.1", "main": True}]
    if not isinstance(raw_nodes, list):
        raise SuiteError("'system.nodes' must be a list", file=path)
    nodes = []
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict) or "ip" not in raw:
            raise SuiteError(f"node #{index + 1} needs at least 'ip' (and a 'name')", file=path)
        port = raw.get("port")
        if port is not None and not is_integer(port):
            raise SuiteError(f"node #{index + 1}: 'port' must be an integer", file=path)
        nodes.append(
            Node(
                name=str(raw.get("name", raw["ip"])),
                ip=str(raw["ip"]),
                port=port,
                user=raw.get("user"),
                main=bool(raw.get("main", False)),
            )
        )
    if sum(n.main for n in nodes) > 1:
        raise SuiteError("more than one node has 'main: true'", file=path)
    check_options(system.get("options"), file=path)  # milabench's cpu/sizer options (auto.py)
    arch = system.get("arch")
    return SystemConfig(
        arch=str(arch) if arch is not None else None,
        nodes=tuple(nodes),
        options=dict(system),
        path=str(path),
        ssh=_ssh_options(system, path),
    )
