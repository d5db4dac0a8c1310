"""This machine's network interfaces, as a node of a multi-node job sees them (psutil).

gloo and NCCL pick the address they listen on from the hostname unless told an interface
(``GLOO_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME``). Where the hostname resolves to a loopback
address (Debian's ``127.0.1.1 host`` line, many images' default), the other nodes are told to
connect to ``127.0.1.1`` and the job fails in ``connectFullMesh`` (issue 28). A node of the
system file has an ``ip``: the interface holding it is the one to use.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

__all__ = ["IFNAME_VARIABLES", "interface_of", "is_this_machine", "socket_ifname_env"]

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
