"""Fake xdist nodes that record what the scheduler sends them (plugin/xdist.py's
WaveScheduling driven by hand, no processes): what the scheduling tests share."""

from __future__ import annotations

from types import SimpleNamespace


class FakeNode:
    def __init__(self, name: str, log: list) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.log = log
        self.held: list[int] = []
        self.is_shut = False

    def send_runtest_some(self, indices):
        self.held.extend(indices)
        self.log.append((self.gateway.id, "send", tuple(indices)))

    def shutdown(self):
        self.is_shut = True
        self.log.append((self.gateway.id, "shutdown"))

    def runnable(self) -> list[int]:
        """What an xdist worker would run now: every held item that has a successor."""
        return self.held[:-1] if not self.is_shut else list(self.held)

    def __repr__(self) -> str:
        return self.gateway.id


def complete(sched, node, index):
    assert index in node.runnable(), (node, index, node.held)
    node.held.remove(index)
    sched.mark_test_complete(node, index)
