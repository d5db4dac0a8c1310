"""This machine's network interfaces, as a node of a multi-node job sees them (psutil).

gloo and NCCL pick the address they listen on from the hostname unless told an interface
(``GLOO_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME``). Where the hostname resolves to a loopback
address (Debian's ``127.0.1.1 host`` line, many images' default), the other nodes are told to
connect to ``127.0.1.1`` and the job fails in ``connectFullMesh``. A node of the
system file has an ``ip``: the interface holding it is the one to use.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping

__all__ = ["IFNAME_VARIABLES", "interface_of", "is_this_machine", "route_source",
           "slurm_local_addr", "socket_ifname_env"]

#: The variables that tell gloo and NCCL which interface to use.
IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")

#: psutil's ``net_if_addrs()``: interface name -> its addresses (``.family``, ``.address``).
Interfaces = Mapping[str, list]


def _interfaces(interfaces: Interfaces | None) -> Interfaces:
    if interfaces is not None:
        return interfaces
    import psutil

    return psutil.net_if_addrs()


def _same(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a.split("%", 1)[0]) == ipaddress.ip_address(b)
    except ValueError:
        return False


def interface_of(ip: str, interfaces: Interfaces | None = None) -> str | None:
    """The name of the interface that holds ``ip``, or None where none does."""
    for name, addresses in _interfaces(interfaces).items():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6) and _same(address.address,
                                                                              ip):
                return str(name)
    return None


def is_this_machine(ip: str, interfaces: Interfaces | None = None) -> bool:
    """Whether ``ip`` is one of this machine's addresses (a loopback address always is)."""
    try:
        if ipaddress.ip_address(ip).is_loopback:
            return True
    except ValueError:
        return False  # a host name: not an address this machine holds
    return interface_of(ip, interfaces) is not None


def socket_ifname_env(ip: str | None, env: Mapping[str, str],
                      interfaces: Interfaces | None = None) -> dict[str, str]:
    """``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` for a node whose address is ``ip``:
    the interface holding it, for each of the two that ``env`` does not set already (a user's
    choice stands). Empty when ``ip`` is on no interface here."""
    if not ip:
        return {}
    name = interface_of(ip, interfaces)
    if name is None:
        return {}
    return {key: name for key in IFNAME_VARIABLES if not env.get(key)}


def route_source(ip: str) -> str | None:
    """The address this machine sends from to reach ``ip`` (the kernel's route): a UDP socket's
    ``connect()`` picks it and sends nothing. None where there is no route or ``ip`` is no
    address."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((ip, 9))  # the discard port; connect() on UDP sends no packet
            return str(sock.getsockname()[0])
    except (OSError, ValueError):
        return None


def slurm_local_addr(env: Mapping[str, str], listed: Mapping[str, str] | None = None,
                     route: Callable[[str], str | None] = route_source) -> str | None:
    """The address a node of a Slurm step advertises, and whose interface gloo and NCCL use:
    the system file's ``ip`` for this node (``listed``: name -> ip, by ``SLURMD_NODENAME``),
    else the source address of the route to the node srun ran on
    (``SLURM_LAUNCH_NODE_IPADDR``), which every node of the step reaches. Not the hostname's:
    on Debian it resolves to ``127.0.1.1``. None where neither is known."""
    name = env.get("SLURMD_NODENAME", "")
    if listed and name in listed:
        return listed[name]
    launch_ip = env.get("SLURM_LAUNCH_NODE_IPADDR", "").strip()
    if not launch_ip:
        return None
    source = route(launch_ip)
    try:
        if source is None or ipaddress.ip_address(source).is_loopback:
            return None  # a loopback route says nothing of the address others reach
    except ValueError:
        return None
    return source
