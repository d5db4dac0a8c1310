"""WaveScheduling with fake xdist nodes: no processes, the protocol driven by hand."""

from __future__ import annotations

from _xdist_nodes import FakeNode, complete

from pytest_dlbench.plugin.xdist import WaveScheduling, wave_of

COLLECTION = [
    "s.yaml::resnet[D0]",
    "s.yaml::resnet[D1]",
    "s.yaml::ddp[D0]",  # an njobs benchmark: one item
    "s.yaml::vit[D0]",
    "s.yaml::vit[D1]",
]


def make(collection=COLLECTION, n=2):
    log: list = []
    sched = WaveScheduling(config=None, numnodes=n)
    nodes = [FakeNode(f"gw{k}", log) for k in range(n)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    assert sched.collection_is_completed
    sched.schedule()
    return sched, nodes, log


def test_wave_of_parses_devices_and_repeats():
    assert wave_of("a.yaml::resnet[D3]") == (("a.yaml::resnet", ""), 3)
    assert wave_of("a.yaml::resnet[D0-R2]") == (("a.yaml::resnet", "2"), 0)
    assert wave_of("tests/test_x.py::test_y[1]") == (("", "tests/test_x.py::test_y[1]"), None)


def test_replicas_run_together_and_device_k_on_worker_k():
    sched, (gw0, gw1), _ = make()
    # Wave 1 (resnet): D0 on gw0 and D1 on gw1 are both runnable, nothing else is.
    assert gw0.runnable() == [0] and gw1.runnable() == [1]
    complete(sched, gw0, 0)
    # gw0 finished resnet but the njobs job must wait for resnet[D1] on gw1.
    assert gw0.runnable() == []
    complete(sched, gw1, 1)
    # Wave 2: the njobs item alone, on gw0; gw1 holds vit[D1] without running it.
    assert gw0.runnable() == [2] and gw1.runnable() == []
    complete(sched, gw0, 2)
    assert gw0.runnable() == [3] and gw1.runnable() == [4]
    assert gw0.is_shut and gw1.is_shut
    complete(sched, gw0, 3)
    assert not sched.tests_finished
    complete(sched, gw1, 4)
    assert sched.tests_finished and not sched.has_pending


def test_repeats_are_separate_waves():
    collection = ["s::a[D0-R0]", "s::a[D1-R0]", "s::a[D0-R1]", "s::a[D1-R1]"]
    sched, (gw0, gw1), _ = make(collection)
    assert gw0.runnable() == [0] and gw1.runnable() == [1]
    complete(sched, gw0, 0)
    assert gw0.runnable() == []  # R1 waits for R0 on every device
    complete(sched, gw1, 1)
    assert gw0.runnable() == [2] and gw1.runnable() == [3]


def test_worker_without_items_is_shut_down_at_once():
    sched, (gw0, gw1), log = make(["s::ddp[D0]"])
    assert gw1.is_shut and gw1.held == []
    assert gw0.runnable() == [0]
    complete(sched, gw0, 0)
    assert sched.tests_finished


def test_plain_tests_are_spread_over_workers():
    sched, (gw0, gw1), _ = make(["t.py::test_a", "t.py::test_b", "t.py::test_c"])
    assert gw0.held[0] == 0 and gw1.held[0] == 1


def test_dead_worker_releases_the_waves_behind_it():
    sched, (gw0, gw1), _ = make()
    complete(sched, gw0, 0)
    crashed = sched.remove_node(gw1)
    assert crashed == "s.yaml::resnet[D1]"
    # The rest goes on without gw1: the njobs item runs, then vit[D0].
    assert gw0.runnable() == [2]
    complete(sched, gw0, 2)
    complete(sched, gw0, 3)
    assert sched.tests_finished
