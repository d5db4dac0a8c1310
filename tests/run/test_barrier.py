"""The replicas' start barrier, with threads standing in for replica processes."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_dlbench.run.barrier import BarrierServer, leave, wait


@pytest.fixture
def server():
    barrier = BarrierServer()
    yield barrier
    barrier.close()


def run_waiters(server, key, parties, count, timeout=10.0):
    results: list[dict] = [{}] * count
    released_at: list[float] = [0.0] * count

    def one(i: int) -> None:
        results[i] = wait(server.address, key, parties, timeout=timeout)
        released_at[i] = time.monotonic()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for i, thread in enumerate(threads):
        thread.start()
        time.sleep(0.2 * (i == 0))  # the first replica arrives early and has to wait
    return threads, results, released_at


def test_all_parties_are_released_together(server):
    threads, results, released_at = run_waiters(server, "resnet", 3, 3)
    for thread in threads:
        thread.join(10)
    assert [r["released"] for r in results] == ["all"] * 3
    assert results[0]["waited"] >= 0.15  # it waited for the others
    assert max(released_at) - min(released_at) < 0.5


def test_a_replica_that_fails_releases_the_others(server):
    threads, results, _ = run_waiters(server, "vit", 2, 1)
    # A negative (not released too early) cannot be polled for: time for a wrong release.
    time.sleep(0.3)
    assert threads[0].is_alive()  # still waiting for the second replica
    leave(server.address, "vit", 2)
    threads[0].join(10)
    assert results[0]["released"] == "some left"


def test_timeout_goes_on_alone(server):
    result = wait(server.address, "lonely", 2, timeout=0.5)
    assert result["released"] == "timeout"


def test_unreachable_barrier_does_not_raise():
    result = wait("127.0.0.1:1", "x", 2, timeout=1)
    assert result["released"] == "unreachable"


def test_keys_are_independent(server):
    threads, results, _ = run_waiters(server, "a", 1, 1)
    threads[0].join(5)
    assert results[0]["released"] == "all"
    assert wait(server.address, "b", 2, timeout=0.3)["released"] == "timeout"
