"""xdist scheduling for suites: one worker per device slot, benchmarks in waves.

A *wave* is every item of one benchmark and repeat: the per_gpu replicas ``name[D0]`` …
``name[Dn-1]`` (item ``Dk`` always runs on worker ``gwk``, the one pinned to slot k), or the
single item of an njobs benchmark. A wave starts only when the previous one has finished on every
worker, so the replicas of a benchmark run at the same time (milarun: N users at once) and an
njobs job never shares the machine with replicas of another benchmark.

xdist workers run an item only once they hold the next one (or the order to shut down), because
pytest's teardown needs to know the next item. So every worker is sent its items one ahead, and a
wave is *released* by sending each of its workers the item after it (or shutdown).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.layout import parse_item_id

__all__ = ["WaveScheduling", "wave_of"]


def _node_id(node: Any) -> str:
    return str(getattr(getattr(node, "gateway", None), "id", node))


def _spec_slot(node: Any, default: int = -1) -> int:
    """The slot a worker is pinned to: DLBENCH_SLOT in the start-up environment of its spec."""
    env = getattr(getattr(getattr(node, "gateway", None), "spec", None), "env", None) or {}
    try:
        return int(env.get(Env.SLOT, default))
    except (TypeError, ValueError):
        return default

def wave_of(nodeid: str) -> tuple[tuple[str, str], int | None]:
    """(wave key, device) of a node id; items that are not benchmarks get a wave of their own."""
    parsed = parse_item_id(nodeid)
    if parsed is None or "::" not in nodeid:
        return ("", nodeid), None
    path = nodeid.rsplit("::", 1)[0]
    repeat = "" if parsed.repeat is None else str(parsed.repeat)
    return (f"{path}::{parsed.bench}", repeat), parsed.device


class WaveScheduling:
    """Implements xdist's ``Scheduling`` protocol (see ``xdist.scheduler.protocol``)."""

    def __init__(
        self,
        config: Any,
        log: Any = None,
        *,
        numnodes: int | None = None,
        on_lost: Callable[[list[str], str], None] | None = None,
    ) -> None:
        self.config = config
        self.log = log
        #: Called with the node ids of items that will never run (their worker died and xdist
        #: does not replace it) and why: the controller reports them.
        self.on_lost = on_lost
        self.numnodes = numnodes if numnodes is not None else len(config.option.tx)
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.collection_is_completed = False
        self._queues: dict[Any, list[int]] = {}  # per node: its items in run order
        self._sent: dict[Any, int] = {}  # per node: how many of its queue were sent
        self._shutdown: set[Any] = set()
        self._waves: list[list[tuple[Any, int]]] = []  # (node, item index) per wave
        self._done: set[int] = set()
        self._released = 0  # waves released so far
        self._remaining: list[int] = []  # items not yet done, per wave
        self._wave_of_item: dict[int, int] = {}
        self._scheduled = False
        self._slot_of: dict[Any, int] = {}  # per node: the device slot it is pinned to
        # Per slot whose worker died: its items not run yet, for the worker xdist starts in its
        # place (same start-up environment, so pinned to the same slot).
        self._orphans: dict[int, list[int]] = {}
        self._dead: dict[int, Any] = {}  # per orphaned slot: the worker that died
        #: The workers that died, in order (gateway ids).
        self.crashed: list[str] = []
        self._dying: set[Any] = set()

    # -- the protocol ---------------------------------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or not self._scheduled or self._orphans:
            return False
        return all(not pending for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return any(self.node2pending.values()) or bool(self._orphans)

    def add_node(self, node: Any) -> None:
        self.node2pending[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.node2collection[node] = list(collection)
        if len(self.node2collection) >= self.numnodes:
            self.collection_is_completed = True
        if self._scheduled and self._orphans:
            self._adopt(node)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._finish(item_index)
        self._release_finished_waves()

    def _finish(self, item_index: int) -> None:
        if item_index not in self._done:
            self._done.add(item_index)
            self._remaining[self._wave_of_item[item_index]] -= 1

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError("dlbench's wave scheduling does not re-queue items")

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError("dlbench's wave scheduling does not steal work")

    def remove_node(self, node: Any) -> str | None:
        """A worker died (benchmarks run in child processes, so this should be rare): its
        running item is the crash item (xdist reports it failed). Its other items go to the
        worker xdist starts in its place, pinned to the same slot; without one (its restarts
        are used up, or ``--max-worker-restart=0``) they are reported lost, and waves go on."""
        pending = self.node2pending.pop(node, [])
        self._shutdown.discard(node)
        if node not in self._dying and not pending:
            # A worker that finished (xdist calls this for those too); told to stop early
            # (xdist stopping the run), it may leave items never sent: see unfinished().
            self._slot_of.pop(node, None)
            return None
        self._dying.discard(node)
        self.crashed.append(_node_id(node))
        queue, sent = self._queues.get(node, []), self._sent.get(node, 0)
        self._queues[node] = queue[:sent]
        crashed = pending[:1]
        left = [*pending[1:], *queue[sent:]]  # sent ahead but not started, and never sent
        for index in crashed:
            self._finish(index)
        slot = self._slot_of.pop(node, None)
        if left and slot is not None and self._replacement_coming():
            self._orphans[slot] = left
            self._dead[slot] = node
        elif left:
            self._lose(left, f"not run: xdist worker {_node_id(node)} died and was not replaced")
        self._release_finished_waves()
        if crashed:
            return self.node2collection[node][crashed[0]]
        return None

    def node_down(self, node: Any, error: object) -> None:
        """xdist's ``pytest_testnodedown``, called just before :meth:`remove_node`: whether the
        worker died (an error) or finished."""
        if error is not None:
            self._dying.add(node)

    def unfinished(self) -> list[str]:
        """Node ids of the items that neither ran nor were reported lost (xdist stopped the run
        after too many workers died)."""
        if not self._scheduled or not self.node2collection:
            return []
        collection = next(iter(self.node2collection.values()))
        return [nodeid for i, nodeid in enumerate(collection) if i not in self._done]

    def _dsession(self) -> Any:
        plugins = getattr(self.config, "pluginmanager", None)
        return plugins.getplugin("dsession") if plugins is not None else None

    def _stopping(self) -> bool:
        """xdist is shutting its workers down (too many died): a worker told to stop would
        never run an item sent now; what is left is reported at the end (controller)."""
        return bool(getattr(self._dsession(), "shuttingdown", False))

    def _replacement_coming(self) -> bool:
        """Whether xdist will start a worker in place of the one that just died (it decides
        after calling :meth:`remove_node`, from its count of crashed workers)."""
        dsession = self._dsession()
        if dsession is None:
            return False
        maximum = getattr(dsession, "_max_worker_restart", None)
        crashed = getattr(dsession, "_failed_nodes_count", 0)
        return maximum is None or crashed + 1 <= maximum

    def _lose(self, indices: list[int], reason: str) -> None:
        for index in indices:
            self._finish(index)
        if self.on_lost is not None and indices:
            collection = next(iter(self.node2collection.values()))
            self.on_lost([collection[i] for i in indices], reason)

    def _adopt(self, node: Any) -> None:
        """A worker started in place of a dead one takes over its slot and the items left."""
        slot = _spec_slot(node)
        if slot not in self._orphans:
            slot = next(iter(self._orphans))
        queue = self._orphans.pop(slot)
        dead = self._dead.pop(slot)
        # The waves of its items wait for (and are released through) the new worker.
        adopted = set(queue)
        self._waves = [[(node if n is dead and i in adopted else n, i) for n, i in wave]
                       for wave in self._waves]
        self._slot_of[node] = slot
        self._queues[node], self._sent[node] = queue, 0
        self._send_next(node)  # held: it runs once the next one is sent (its wave released)
        for index in queue:
            if self._wave_of_item[index] >= self._released:
                break
            self._send_next(node)
        self._release_finished_waves()

    def schedule(self) -> None:
        if self._scheduled:
            return
        self._scheduled = True
        self._plan()
        for node in self.nodes:
            self._send_next(node)  # each worker holds its first item, which does not run yet
        self._release_finished_waves()

    # -- waves ----------------------------------------------------------------------------------

    def _by_gateway(self) -> dict[str, Any]:
        return {getattr(getattr(n, "gateway", None), "id", str(i)): n
                for i, n in enumerate(self.nodes)}

    def _plan(self) -> None:
        nodes = self.nodes
        collection = self.node2collection[nodes[0]]
        by_id = self._by_gateway()
        order: dict[tuple[str, str], list[tuple[Any, int]]] = {}
        spread = 0
        for index, nodeid in enumerate(collection):
            key, device = wave_of(nodeid)
            if device is None:
                node = nodes[spread % len(nodes)]  # plain tests: any worker, in turn
                spread += 1
            else:
                node = by_id.get(f"gw{device}", nodes[device % len(nodes)])
                self._slot_of.setdefault(node, device)
            order.setdefault(key, []).append((node, index))
        self._waves = list(order.values())
        self._remaining = [len(wave) for wave in self._waves]
        self._wave_of_item = {index: w for w, wave in enumerate(self._waves) for _, index in wave}
        self._queues = {node: [] for node in nodes}
        for wave in self._waves:
            for node, index in wave:
                self._queues[node].append(index)
        self._sent = {node: 0 for node in nodes}
        for k, node in enumerate(nodes):
            self._slot_of.setdefault(node, _spec_slot(node, default=k))

    def _send_next(self, node: Any) -> None:
        """Send the node its next item, or shut it down when it has none left."""
        if node not in self.node2pending or node in self._shutdown or self._stopping():
            return
        queue, sent = self._queues[node], self._sent[node]
        if sent < len(queue):
            index = queue[sent]
            self._sent[node] = sent + 1
            self.node2pending[node].append(index)
            node.send_runtest_some([index])
        else:
            self._shutdown.add(node)
            node.shutdown()

    def _release_finished_waves(self) -> None:
        # Release wave w once every earlier wave is done: each of its items gets its successor
        # sent (or shutdown), which lets the worker run it.
        while self._released < len(self._waves):
            if self._released > 0 and self._remaining[self._released - 1] > 0:
                return
            for node, _ in self._waves[self._released]:
                self._send_next(node)
            self._released += 1
