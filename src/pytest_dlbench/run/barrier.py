"""A small TCP barrier: the replicas of one per_gpu benchmark start their timed windows together.

The controller serves it on loopback; each replica's process calls :func:`wait` just before its
first timed step. A replica that fails before getting there must not hold the others: its worker
calls :func:`leave` when the replica's process ends, and that counts as an arrival. Waiting also
has a timeout, after which a replica goes on alone (and says so in its stream).
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BarrierServer", "leave", "wait"]


@dataclass
class _Gate:
    parties: int
    arrived: int = 0
    left: int = 0
    released: str | None = None
    condition: threading.Condition = field(default_factory=threading.Condition)


class BarrierServer:
    """Serves any number of named barriers; ``address`` is ``host:port``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        gates: dict[str, _Gate] = {}
        lock = threading.Lock()
        self._gates = gates

        def gate_for(key: str, parties: int) -> _Gate:
            with lock:
                if key not in gates:
                    gates[key] = _Gate(parties=parties)
                return gates[key]

        self._gate_for = gate_for

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    request = json.loads(self.rfile.readline() or b"{}")
                    key, parties = str(request["key"]), int(request["parties"])
                except (ValueError, KeyError, TypeError):
                    return
                gate = gate_for(key, parties)
                with gate.condition:
                    if request.get("op") == "leave":
                        gate.left += 1
                    else:
                        gate.arrived += 1
                    if gate.released is None and gate.arrived + gate.left >= gate.parties:
                        gate.released = "all" if gate.left == 0 else "some left"
                        gate.condition.notify_all()
                    if request.get("op") != "leave":
                        while gate.released is None and not server_closing.is_set():
                            gate.condition.wait(timeout=0.5)
                answer = {"released": gate.released or "server closed"}
                with contextlib.suppress(OSError):
                    self.wfile.write((json.dumps(answer) + "\n").encode())

        server_closing = threading.Event()
        self._closing = server_closing
        self._server = socketserver.ThreadingTCPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="dlbench-barrier", daemon=True
        )
        self._thread.start()
        self.address = f"{host}:{self._server.server_address[1]}"

    def release(self, key: str, parties: int) -> None:
        """A replica that will never come (its worker died): counted as one that left, here in
        the server, so the others go on at once instead of waiting for the timeout."""
        gate = self._gate_for(key, parties)
        with gate.condition:
            gate.left += 1
            if gate.released is None and gate.arrived + gate.left >= gate.parties:
                gate.released = "some left"
                gate.condition.notify_all()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


def _request(address: str, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall((json.dumps(message) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return json.loads(data or b"{}")


def wait(address: str, key: str, parties: int, timeout: float = 120.0) -> dict[str, Any]:
    """Block until ``parties`` replicas reached (or left) barrier ``key``, or ``timeout`` s.

    Returns ``{"released": "all" | "some left" | "timeout" | "unreachable", "waited": s}``;
    never raises: a broken barrier must not fail a benchmark.
    """
    start = time.monotonic()
    try:
        answer = _request(address, {"op": "wait", "key": key, "parties": parties}, timeout)
        released = answer.get("released", "unreachable")
    except TimeoutError:
        released = "timeout"
    except (OSError, ValueError):
        released = "unreachable"
    return {"released": released, "waited": time.monotonic() - start, "key": key,
            "parties": parties}


def leave(address: str, key: str, parties: int, timeout: float = 10.0) -> None:
    """This replica will not (or no longer needs to) wait: count it as arrived."""
    with contextlib.suppress(OSError, ValueError):
        _request(address, {"op": "leave", "key": key, "parties": parties}, timeout)
