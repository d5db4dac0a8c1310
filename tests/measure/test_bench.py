"""Bench: windows, warm-up, stop, items, losses and rates, on fake clocks."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.measure.bench import Bench, NonFiniteLoss, count_items
from pytest_dlbench.measure.fakecuda import FakeCuda
from pytest_dlbench.measure.stream import NullStream, StreamWriter, read_stream
from pytest_dlbench.measure.timing import CpuBackend, FakeClock, FakeCudaBackend, Timer


class Batch:
    """A tensor stand-in: only ``shape`` matters for counting items."""

    def __init__(self, n: int) -> None:
        self.shape = (n, 3)


def make(**kwargs: Any) -> tuple[Bench, FakeCudaBackend, NullStream]:
    device = FakeCudaBackend()
    stream = NullStream()
    timer = Timer(device, wall_clock=lambda: 100.0)
    kwargs.setdefault("skip", 2)
    kwargs.setdefault("stop", 6)
    kwargs.setdefault("window", 3)
    return Bench(stream=stream, timer=timer, **kwargs), device, stream


def events(stream: NullStream, event: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if r["event"] == event]


def test_windows_are_read_every_window_steps_without_sync_in_between():
    bench, device, stream = make(skip=2, stop=8, window=4)
    seen = []
    for i, _batch in enumerate(bench.iterate([Batch(8)] * 100)):
        # Inside the loop body: one sync before the first step, then one per completed window.
        assert device.synchronizations == 1 + i // 4
        assert len(events(stream, "rate")) == (i // 4) * 4
        device.advance(0.5)
        seen.append(i)
    assert seen == list(range(10))  # stopped after skip + stop
    assert bench.done and bench.observations == 10
    # before the loop, 2 full windows inside it + the partial one when the call ends
    assert device.synchronizations == 4
    assert len(events(stream, "rate")) == 10


def test_rate_records_carry_rate_warmup_step_and_wall_time():
    bench, device, stream = make(skip=2, stop=3, window=10)
    durations = [1.0, 0.5, 0.25, 2.0, 4.0]
    for _, d in zip(bench.iterate([Batch(4)] * 10), durations, strict=True):
        device.advance(d)
    rates = events(stream, "rate")
    assert [r["step"] for r in rates] == [0, 1, 2, 3, 4]
    assert [r["warmup"] for r in rates] == [True, True, False, False, False]
    assert [r["seconds"] for r in rates] == durations
    assert [r["items"] for r in rates] == [4] * 5
    assert [r["value"] for r in rates] == [4 / d for d in durations]
    assert [r["units"] for r in rates] == ["items/s"] * 5
    assert [r["time"] for r in rates] == [101.0, 101.5, 101.75, 103.75, 107.75]
    # The first observation of the iterate call says so (results/figures/plausibility.py).
    assert [set(r) for r in rates] == [
        {"event", "value", "units", "step", "warmup", "time", "items", "seconds",
         *(["loop_start"] if r["step"] == 0 else [])} for r in rates]
    assert rates[0]["loop_start"] is True


def test_iterate_counts_across_calls_and_excludes_the_gap_between_epochs():
    bench, device, stream = make(skip=1, stop=6, window=100)
    epochs = 0
    while not bench.done:
        device.advance(50.0)  # creating the epoch's loader: in no step
        for _ in bench.iterate([Batch(2)] * 3):
            device.advance(1.0)
        epochs += 1
    assert epochs == 3
    assert bench.observations == 7
    rates = events(stream, "rate")
    assert [r["step"] for r in rates] == list(range(7))
    assert all(r["seconds"] == 1.0 for r in rates)
    assert device.synchronizations == 6  # one before each call's loop, one read at its end
    assert list(bench.iterate([Batch(2)] * 3)) == []  # done: yields nothing


def test_short_iterable_ends_the_run_with_fewer_observations():
    bench, device, stream = make(skip=2, stop=60)
    for _ in bench.iterate([Batch(1)] * 4):
        device.advance(1.0)
    assert not bench.done
    assert bench.observations == 4
    assert len(events(stream, "rate")) == 4


def test_window_read_time_is_in_no_step():
    # A slow stream write (I/O during the read) must not leak into the next step's interval.
    clock = FakeClock()

    class SlowStream(NullStream):
        def write(self, event: str, **fields: Any) -> dict[str, Any]:
            clock.advance(10.0)
            return super().write(event, **fields)

    stream = SlowStream()
    bench = Bench(stream=stream, timer=Timer(CpuBackend(clock)), skip=0, stop=9, window=2)
    for _ in bench.iterate([Batch(1)] * 20):
        clock.advance(1.0)
    assert [r["seconds"] for r in events(stream, "rate")] == [1.0] * 9


def test_close_reads_the_partial_window_when_the_loop_is_left_early():
    bench, device, stream = make(skip=0, stop=50, window=4)
    for i, _ in enumerate(bench.iterate([Batch(3)] * 50)):
        device.advance(1.0)
        if i == 5:
            break  # the step in progress (i == 5) never completed
    assert len(events(stream, "rate")) == 4
    bench.close()
    assert len(events(stream, "rate")) == 5
    bench.close()  # idempotent
    assert len(events(stream, "rate")) == 5
    assert device.synchronizations == 3  # before the loop, a window read, close
    with pytest.raises(RuntimeError, match="closed"):
        next(iter(bench.iterate([Batch(1)])))


def test_items_from_batch_size_override_inference():
    bench, device, stream = make(skip=0, stop=2)
    for _ in bench.iterate([[1, 2, 3], [4, 5, 6]], batch_size=32):
        device.advance(1.0)
    assert [r["items"] for r in events(stream, "rate")] == [32, 32]


@pytest.mark.parametrize(
    ("batch", "items"),
    [
        (Batch(7), 7),
        ((Batch(5), Batch(5)), 5),  # collated (x, y)
        ([Batch(6), [0] * 6], 6),
        ([[1, 2], [3, 4], [5, 6]], 2),  # (x, y) of lists: len(batch[0])
        ([1, 2, 3, 4], 4),  # a list of samples
        (["a", "b", "c"], 3),
        ({"input_ids": Batch(9), "mask": Batch(9)}, 9),
        ([], 0),
    ],
)
def test_count_items(batch: Any, items: int):
    assert count_items(batch) == items


def test_count_items_refuses_what_it_cannot_count():
    with pytest.raises(TypeError, match="batch_size="):
        count_items(object())


def test_count_items_on_real_tensors():
    torch = pytest.importorskip("torch")
    x, y = torch.zeros(16, 3), torch.zeros(16)
    assert count_items(x) == 16
    assert count_items([x, y]) == 16
    with pytest.raises(TypeError):
        count_items(torch.tensor(1.0))


def test_region_totals_are_written_with_each_window():
    bench, device, stream = make(skip=0, stop=4, window=2)
    for _ in bench.iterate([Batch(1)] * 4):
        with bench.region("forward"):
            device.advance(0.25)
        with bench.timer.region("backward"):
            device.advance(0.5)
    regions = events(stream, "region")
    assert regions == [
        {"event": "region", "key": "forward", "count": 2, "seconds": 0.5, "step": 1},
        {"event": "region", "key": "backward", "count": 2, "seconds": 1.0, "step": 1},
        {"event": "region", "key": "forward", "count": 2, "seconds": 0.5, "step": 3},
        {"event": "region", "key": "backward", "count": 2, "seconds": 1.0, "step": 3},
    ]


def test_losses_are_written_at_window_reads():
    bench, device, stream = make(skip=0, stop=4, window=2)
    for i, _ in enumerate(bench.iterate([Batch(1)] * 4)):
        device.advance(1.0)
        bench.log_loss(1.0 / (i + 1))
        if i == 0:
            assert events(stream, "loss") == []  # kept, not converted, inside the window
    assert events(stream, "loss") == [
        {"event": "loss", "value": 1.0, "step": 0},
        {"event": "loss", "value": 0.5, "step": 1},
        {"event": "loss", "value": 1 / 3, "step": 2},
        {"event": "loss", "value": 0.25, "step": 3},
    ]


def test_nan_loss_raises_at_the_window_read_after_writing_the_window():
    bench, device, stream = make(skip=2, stop=30, window=5)
    steps_run = []
    with pytest.raises(NonFiniteLoss, match=r"^loss is nan at step 12$") as info:
        for i, _ in enumerate(bench.iterate([Batch(1)] * 40)):
            steps_run.append(i)
            device.advance(1.0)
            bench.log_loss(math.nan if i == 12 else 1.0)
    assert isinstance(info.value, RuntimeError)
    assert info.value.step == 12
    assert steps_run[-1] == 14  # detected at the read after step 14, not before
    losses = events(stream, "loss")
    assert [r["step"] for r in losses] == list(range(15))
    assert math.isnan(losses[12]["value"])
    assert len(events(stream, "rate")) == 15
    bench.close()  # nothing pending: does not raise again


def test_infinite_loss_in_the_last_partial_window_raises_at_close():
    bench, device, stream = make(skip=0, stop=10, window=5)
    for i, _ in enumerate(bench.iterate([Batch(1)] * 10)):
        device.advance(1.0)
        if i == 7:
            bench.log_loss(-math.inf)
            break
    with pytest.raises(NonFiniteLoss, match="loss is -inf at step 7"):
        bench.close()
    assert events(stream, "loss")[-1]["step"] == 7


def test_tensor_losses_are_converted_together():
    torch = pytest.importorskip("torch")
    bench, device, stream = make(skip=0, stop=3, window=10)
    w = torch.ones(2, requires_grad=True)
    for i, _ in enumerate(bench.iterate([Batch(1)] * 3)):
        device.advance(1.0)
        bench.log_loss((w * (i + 1)).sum())
    bench.log_loss(torch.tensor([1.0, 3.0]))  # per-sample losses: their mean
    bench.close()
    assert [r["value"] for r in events(stream, "loss")] == [2.0, 4.0, 6.0, 2.0]


def test_losses_are_detached_when_logged():
    # Keeping the loss itself would keep its autograd graph alive until the window is read.
    class Loss:
        detached = False

        def detach(self) -> float:
            Loss.detached = True
            return 0.5

    bench, device, stream = make(skip=0, stop=3)
    bench.log_loss(Loss())
    assert Loss.detached
    bench.close()
    assert events(stream, "loss") == [{"event": "loss", "value": 0.5, "step": 0}]


def test_iterator_creation_is_in_no_step():
    clock = FakeClock()

    class SlowToStart:
        def __iter__(self):
            clock.advance(30.0)  # DataLoader workers starting up
            return iter([Batch(1)] * 3)

    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(CpuBackend(clock)), skip=0, stop=3)
    for _ in bench.iterate(SlowToStart()):
        clock.advance(1.0)
    assert [r["seconds"] for r in events(stream, "rate")] == [1.0] * 3


def test_log_rate_writes_immediately_and_counts_toward_skip_and_stop():
    bench, _, stream = make(skip=1, stop=2, units="TFLOP/s")
    while not bench.done:
        bench.log_rate(12.5)
    bench.log_rate(99.0)  # after done: ignored
    bench.log_rate(1.0, units="x")
    rates = events(stream, "rate")
    assert [(r["value"], r["step"], r["warmup"], r["units"]) for r in rates] == [
        (12.5, 0, True, "TFLOP/s"),
        (12.5, 1, False, "TFLOP/s"),
        (12.5, 2, False, "TFLOP/s"),
    ]
    assert all(r["time"] == 100.0 for r in rates)
    assert bench.observations == 3


def test_set_units_applies_to_records_written_afterwards():
    bench, device, stream = make(skip=0, stop=2, window=10)
    bench.set_units("tokens/s")
    for _ in bench.iterate([Batch(1)] * 2):
        device.advance(1.0)
    bench.log_rate(1.0, units="other")
    assert [r["units"] for r in events(stream, "rate")] == ["tokens/s", "tokens/s"]


def test_writes_to_a_real_stream_file(tmp_path: Path):
    path = tmp_path / "runs" / "b.D0.data"
    device = FakeCudaBackend()
    with StreamWriter(path) as stream:
        bench = Bench(stream=stream, timer=Timer(device), skip=1, stop=3, window=2)
        for _ in bench.iterate([Batch(2)] * 10):
            device.advance(0.5)
            bench.log_loss(0.5)
        bench.close()
    records = read_stream(path)
    assert [r["event"] for r in records].count("rate") == 4
    assert {r["value"] for r in records if r["event"] == "rate"} == {4.0}


def test_constructor_defaults_and_validation(tmp_path: Path):
    bench = Bench(args=("--lr", "0.1"), data_dir=str(tmp_path))
    assert bench.args == ["--lr", "0.1"]
    assert bench.data_dir == tmp_path
    assert (bench.skip, bench.stop, bench.units, bench.name) == (5, 60, "items/s", "bench")
    assert isinstance(bench.stream, NullStream)
    assert str(bench.device) == "cpu"
    assert isinstance(bench.timer.backend, CpuBackend)
    for bad in ({"skip": -1}, {"stop": 0}, {"window": 0}):
        with pytest.raises(ValueError):
            Bench(**bad)


@pytest.mark.slow
def test_real_torch_training_loop_on_cpu():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(12)]
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    stream = NullStream()
    with Bench(device="cpu", stream=stream, skip=2, stop=6, window=4) as bench:
        assert bench.device == torch.device("cpu")
        for x, y in bench.iterate(data):
            with bench.region("forward"):
                loss = torch.nn.functional.mse_loss(model(x.to(bench.device)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            bench.log_loss(loss)
    rates = events(stream, "rate")
    assert len(rates) == 8
    assert all(r["items"] == 16 and r["seconds"] > 0 and r["value"] > 0 for r in rates)
    assert [r["warmup"] for r in rates] == [True] * 2 + [False] * 6
    assert sorted(r["time"] for r in rates) == [r["time"] for r in rates]
    losses = events(stream, "loss")
    assert len(losses) == 8 and all(math.isfinite(r["value"]) for r in losses)
    assert sum(r["count"] for r in events(stream, "region")) == 8


# -- on the queue-model fake CUDA device: the host runs ahead, events run when the device does --
def gpu_bench(gpu: FakeCuda, **kwargs: Any) -> tuple[Bench, NullStream]:
    stream = NullStream()
    timer = Timer(gpu.backend(), wall_clock=gpu.wall)
    return Bench(stream=stream, timer=timer, **kwargs), stream


def test_first_window_times_are_when_the_device_finished_each_step():
    # Issue 21 (12): work queued before the loop (model setup, copies to the device,
    # compilation, cudnn autotuning) delayed the begin event: every `time` of the first window
    # was early by that backlog, and the first step's host work was hidden behind it.
    gpu = FakeCuda(launch_overhead=0.0)
    bench, stream = gpu_bench(gpu, skip=1, stop=5, window=3)
    gpu.launch(30.0)  # still running when the loop starts
    done = []
    for _ in bench.iterate([Batch(8)] * 10):
        gpu.host(0.25)  # the step's host work (fetching the batch)
        gpu.launch(1.0)
        done.append(gpu.device_done())  # when the device will have finished this step
    rates = events(stream, "rate")
    assert [r["time"] for r in rates] == done
    # Each window starts on an idle device: its first step includes the host work.
    assert [r["seconds"] for r in rates] == [1.25, 1.0, 1.0, 1.25, 1.0, 1.0]
    assert done[0] == gpu.wall_origin + 30.0 + 1.25


def test_iterate_syncs_once_per_call_and_per_window_read_never_in_a_step():
    gpu = FakeCuda()
    barrier_depth = []

    def barrier() -> dict[str, Any]:
        barrier_depth.append(gpu.depth)  # replicas start together on an idle device
        return {}

    bench, stream = gpu_bench(gpu, skip=0, stop=7, window=3, start_barrier=barrier)
    gpu.launch(5.0)
    for i, _ in enumerate(bench.iterate([Batch(2)] * 10)):
        syncs = (gpu.synchronize_calls, gpu.event_syncs, gpu.hidden_syncs)
        # one before the loop, then one per window read (the end events of its 3 steps and 3
        # regions are waited for after it, at once); nothing else blocked the host
        assert syncs == (1 + i // 3, 6 * (i // 3), 0)
        with bench.region("forward"):
            gpu.launch(0.5)
        gpu.launch(0.5)
    assert barrier_depth == [0]
    assert gpu.synchronize_calls == 1 + 3  # 2 full windows + the partial one at the end
    assert [r["seconds"] for r in events(stream, "rate")][1:3] == pytest.approx([1.0, 1.0])


def test_profiled_window_times_are_when_the_device_finished_each_step():
    # The profiled window restarts the chain at every step (the profiler's bookkeeping is in no
    # step) without a sync: a restart's time must follow the device, not the host that is ahead.
    from pytest_dlbench.profile import ProfileConfig
    from pytest_dlbench.profile.capture import Capture
    from pytest_dlbench.profile.window import ProfiledWindow

    config = ProfileConfig.from_mapping({"time": {"enabled": True, "warmup": 1, "steps": 4}})
    gpu = FakeCuda(launch_overhead=0.0)
    stream = NullStream()
    bench = Bench(stream=stream, timer=Timer(gpu.backend(), wall_clock=gpu.wall), skip=0,
                  stop=2, window=10,
                  profiled=ProfiledWindow(config, capture=Capture(config, device="cpu", rank=0)))
    done = []
    for _ in bench.iterate([Batch(8)] * 20):
        gpu.host(0.25)
        gpu.launch(1.0)
        done.append(gpu.device_done())
    assert bench.done
    steps = events(stream, "profile_step")
    assert len(steps) == 5
    assert [r["time"] for r in steps] == done[2:]
    assert [r["seconds"] for r in steps][1:] == [1.0] * 4
