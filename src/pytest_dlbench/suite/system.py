"""The ``--bench-system`` file: the machines a suite runs on (seed 000, "System Configuration")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.errors import SuiteError
from pytest_dlbench.suite.auto import check_options
from pytest_dlbench.suite.loader import load_yaml

__all__ = ["Node", "SystemConfig", "load_system", "local_system"]


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    port: int | None = None
    user: str | None = None
    main: bool = False


@dataclass(frozen=True)
class SystemConfig:
    arch: str | None
    nodes: tuple[Node, ...]
    options: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

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
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
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
    )
