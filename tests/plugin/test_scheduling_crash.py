"""WaveScheduling when a worker dies (issue 16.2), with fake xdist nodes."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from _xdist_nodes import FakeNode, complete

from pytest_dlbench.plugin.xdist import WaveScheduling
from pytest_dlbench.run.barrier import BarrierServer, wait

COLLECTION = [f"s.yaml::{b}[D{d}]" for b in "abc" for d in (0, 1)]


def make(max_restart: int | None, lost: list | None = None):
    dsession = SimpleNamespace(_max_worker_restart=max_restart, _failed_nodes_count=0,
                               shuttingdown=False)
    config = SimpleNamespace(pluginmanager=SimpleNamespace(
        getplugin=lambda name: dsession if name == "dsession" else None))
    on_lost = (lambda ids, why: lost.append((ids, why))) if lost is not None else None
    sched = WaveScheduling(config=config, numnodes=2, on_lost=on_lost)
    log: list = []
    nodes = [FakeNode(f"gw{k}", log) for k in range(2)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    return sched, nodes, log


def test_the_worker_started_in_place_of_a_dead_one_runs_its_items():
    sched, (gw0, gw1), log = make(max_restart=8)
    assert sched.remove_node(gw1) == "s.yaml::a[D1]"  # xdist reports it crashed
    complete(sched, gw0, 0)
    assert gw0.runnable() == [2]
    assert not sched.tests_finished and sched.has_pending  # b[D1] and c[D1] wait for gw2
    gw2 = FakeNode("gw2", log)
    sched.add_node(gw2)
    sched.add_node_collection(gw2, COLLECTION)
    assert gw2.held == [3, 5] and gw2.runnable() == [3]  # wave b is released already
    complete(sched, gw0, 2)
    assert gw0.runnable() == [] and gw2.runnable() == [3]  # wave c waits for b[D1]
    complete(sched, gw2, 3)
    assert gw0.runnable() == [4] and gw2.runnable() == [5]
    complete(sched, gw0, 4)
    complete(sched, gw2, 5)
    assert sched.tests_finished and gw0.is_shut and gw2.is_shut
    assert sched.crashed == ["gw1"] and sched.unfinished() == []


def test_without_a_replacement_the_dead_workers_items_are_reported_lost():
    lost: list = []
    sched, (gw0, gw1), _ = make(max_restart=0, lost=lost)
    assert sched.remove_node(gw1) == "s.yaml::a[D1]"
    assert lost == [(["s.yaml::b[D1]", "s.yaml::c[D1]"],
                     "not run: xdist worker gw1 died and was not replaced")]
    for index in (0, 2, 4):
        complete(sched, gw0, index)
    assert sched.tests_finished and gw0.is_shut
    assert sched.unfinished() == []


def test_items_never_sent_when_xdist_stops_the_run_are_unfinished():
    lost: list = []
    sched, (gw0, gw1), _ = make(max_restart=0, lost=lost)
    sched.node_down(gw1, "Not properly terminated")
    sched.remove_node(gw1)
    sched._dsession().shuttingdown = True  # xdist: "worker gw1 crashed and restarting disabled"
    complete(sched, gw0, 0)
    assert gw0.held == [2]  # nothing more is sent to a worker told to stop
    gw0.held.remove(2)
    sched.mark_test_complete(gw0, 2)
    sched.node_down(gw0, None)  # it finished: not a crash
    assert sched.remove_node(gw0) is None
    assert sched.crashed == ["gw1"]
    assert sched.unfinished() == ["s.yaml::c[D0]"]


def test_a_replica_that_will_never_come_is_released_by_the_server():
    server = BarrierServer()
    try:
        result: list[dict] = []
        waiter = threading.Thread(
            target=lambda: result.append(wait(server.address, "a.R0", 2, timeout=30))
        )
        waiter.start()
        # A negative (not released too early) cannot be polled for: time for a wrong release.
        time.sleep(0.3)
        assert waiter.is_alive()
        server.release("a.R0", 2)  # its worker died
        waiter.join(5)
        assert result and result[0]["released"] == "some left" and result[0]["waited"] < 5
    finally:
        server.close()
