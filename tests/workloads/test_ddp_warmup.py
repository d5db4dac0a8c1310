"""DDP's reducer samples its runtime stats in iterations 1 to 10 (and every 100th), and the
forward after a sampled iteration reads its timers: on a GPU a cudaEventSynchronize (issue 37,
item 3). The CPU sync counter of test_sync_free.py cannot see it (gloo's timer is the CPU's), so
the DDP module's forwards are counted before the timer's first window starts.

The reference is torch's own rule, read from its source (Reducer::should_collect_runtime_stats:
``num_iterations_ > 0 && (num_iterations_ <= 10 || num_iterations_ % 100 == 0)``, checked in
``Logger::set_runtime_stats_and_log`` at the next forward): forward 11 reads iteration 10's
stats, so at least 11 forwards come before the first timed step.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.measure.timing import Timer

#: Torch's first sampled iterations (1..10) plus the forward that reads the last of them.
SAMPLED_FORWARDS = 10 + 1

TINY = ["--model", "resnet18", "--batch-size", "2", "--image-size", "32", "--num-classes", "4",
        "--num-images", "8", "--lr", "0.01"]


class ForwardSpy:
    """Counts the DDP module's forwards, and how many had run when ``Timer.begin`` (the start
    of the first timed window) was first called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from torch.nn.parallel import DistributedDataParallel

        self.forwards = 0
        self.at_begin: int | None = None
        forward, begin = DistributedDataParallel.forward, Timer.begin

        def counted_forward(module: Any, *args: Any, **kwargs: Any) -> Any:
            self.forwards += 1
            return forward(module, *args, **kwargs)

        def spied_begin(timer: Timer, *args: Any, **kwargs: Any) -> None:
            if self.at_begin is None:
                self.at_begin = self.forwards
            begin(timer, *args, **kwargs)

        monkeypatch.setattr(DistributedDataParallel, "forward", counted_forward)
        monkeypatch.setattr(Timer, "begin", spied_begin)


@pytest.mark.slow
def test_the_reducers_sampled_iterations_run_before_the_first_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    import torch.distributed as dist

    from pytest_dlbench.run.launch.rank import destroy_process_group
    from pytest_dlbench.workloads import ddp

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    spy = ForwardSpy(monkeypatch)
    stream = NullStream()
    bench = Bench(args=TINY, device="cpu", stream=stream, skip=1, stop=2, window=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small shared machine: one thread is faster
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp.train(bench, dist.group.WORLD)
    finally:
        destroy_process_group()
        torch.set_num_threads(threads)
    bench.close()
    assert spy.at_begin is not None and spy.at_begin >= SAMPLED_FORWARDS
    # The timed loop itself ran its 3 steps (skip 1 + stop 2), one forward each, and no comm
    # interval of the warm-up was counted in a window: one per timed step.
    assert spy.forwards == spy.at_begin + 3
    comm = [r for r in stream.records if r["event"] == "region" and r["key"] == "comm"]
    assert sum(r["count"] for r in comm) == 3


class FakeTimer:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.backend = self

    def read(self) -> None:
        self.calls.append("read")

    def synchronize(self) -> None:
        self.calls.append("sync")


def test_the_warm_up_runs_its_steps_then_drops_their_intervals_and_waits() -> None:
    from types import SimpleNamespace

    from pytest_dlbench.workloads.ddp import WARMUP_STEPS, warm_up_reducer

    assert WARMUP_STEPS >= SAMPLED_FORWARDS
    timer = FakeTimer()
    ran: list[int] = []
    batches = iter(range(100))
    warm_up_reducer(SimpleNamespace(timer=timer), batches, ran.append)
    assert ran == list(range(WARMUP_STEPS)) and next(batches) == WARMUP_STEPS
    assert timer.calls == ["read", "sync"]
    with pytest.raises(ValueError, match="ran out during the DDP warm-up"):
        warm_up_reducer(SimpleNamespace(timer=timer), iter(range(3)), ran.append)


@pytest.mark.slow  # imports open_clip
def test_clips_reducer_is_warmed_up_before_the_first_window(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:
    """The CLIP workload under DDP: the same untimed warm-up as workloads/ddp.py."""
    pytest.importorskip("open_clip")
    import torch
    import torch.distributed as dist

    from pytest_dlbench.run.launch.rank import destroy_process_group
    from pytest_dlbench.workloads import clip

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    spy = ForwardSpy(monkeypatch)
    monkeypatch.setattr(clip, "_process_group", lambda device: (dist.group.WORLD, 0, 1))
    stream = NullStream()
    bench = Bench(args=["--model", "dlbench-tiny", "--batch-size", "4", "--num-samples", "8"],
                  device="cpu", stream=stream, skip=1, stop=2, window=1, data_dir=tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        clip.train(bench)
    finally:
        destroy_process_group()
        torch.set_num_threads(threads)
    bench.close()
    assert spy.at_begin is not None and spy.at_begin >= SAMPLED_FORWARDS
    assert spy.forwards == spy.at_begin + 3
