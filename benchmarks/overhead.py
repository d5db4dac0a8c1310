"""Overhead of timing a training loop with ``bench.iterate`` versus a bare loop.

A: the bare loop, wall clock around N steps after warm-up.
B: the same steps through ``Bench.iterate`` (CPU timer, windows read and streamed to a file).
Many short blocks, A and B interleaved in random order so drift and bursts of load from other
processes hit both; the ratio of the median block throughputs is printed. Target: >= 0.99 on CPU.

    python benchmarks/overhead.py [--steps 20] [--pairs 150]
    python benchmarks/overhead.py --regions-only   # the region marks alone, below

Regions (issue 37, item 10): the host cost of a training step's marks, the step mark alone and
with the 4 regions of workloads/train.py (9 marks a step), through the CPU backend and through
the CUDA-event backend on the queue-model fake device (measure/fakecuda.py: the real backend
code; torch's Event is costlier than the fake's, so this is a floor for a GPU), side by side in
one run, as a fraction of the small CNN's step.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path


def make_step(batch: int, width: int):
    """A small CNN training step on 32x32 images: a few milliseconds on one CPU core."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def bare(step, steps: int, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - start)


def through_bench(step, steps: int, batch: int, out: Path) -> float:
    """Wall clock around the whole loop, the window reads and the stream writes included."""
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.stream import StreamWriter

    with StreamWriter(out) as stream:
        bench = Bench(name="overhead", stream=stream, skip=0, stop=steps)
        start = time.perf_counter()
        for _ in bench.iterate(range(steps), batch_size=batch):
            bench.log_loss(step())
        bench.close()
        return steps * batch / (time.perf_counter() - start)


REGIONS = ("io", "forward", "backward", "optimizer")  # workloads/train.py's, one each a step


def _timer(backend: str):
    """A Timer on `backend`: cpu, fake-cuda (the real CUDA-event backend on the fake device),
    or fake-cuda-per-mark (the same, looking the stream up at every mark, as before item 10)."""
    from pytest_dlbench.measure.fakecuda import FakeCuda
    from pytest_dlbench.measure.timing import CpuBackend, CudaEventBackend, Timer

    if backend == "cpu":
        return Timer(CpuBackend())
    gpu = FakeCuda(launch_overhead=0.0)
    cuda_backend = gpu.backend()
    if backend == "fake-cuda-per-mark":
        class PerMark(CudaEventBackend):
            def record(self):
                event = self._event(enable_timing=True)
                event.record(self._cuda.current_stream(self.device))
                return event

        cuda_backend = PerMark("cuda:0", cuda=gpu)
    return Timer(cuda_backend, wall_clock=gpu.wall)


def _marks_per_step(backend: str, regions: bool, steps: int) -> float:
    """Host seconds per empty step of a Timer's marks (one read per block, as a window)."""
    timer = _timer(backend)
    region = timer.region
    start = time.perf_counter()
    timer.begin()
    for _ in range(steps):
        if regions:
            for key in REGIONS:
                with region(key):
                    pass
        timer.step(1)
    timer.read()
    return (time.perf_counter() - start) / steps


def region_costs(step_ms: float, steps: int = 2000, repeats: int = 7) -> None:
    """Print the marks' host cost per step for each backend, with and without regions: the
    configurations interleaved, best of `repeats` blocks each (a cost floor, noise removed)."""
    configs = [(b, r) for b in ("cpu", "fake-cuda", "fake-cuda-per-mark") for r in (False, True)]
    best = {c: float("inf") for c in configs}
    rng = random.Random(1)
    for _ in range(repeats):
        order = configs[:]
        rng.shuffle(order)
        for backend, regions in order:
            best[(backend, regions)] = min(best[(backend, regions)],
                                           _marks_per_step(backend, regions, steps))
    print(f"marks per step (empty step, best of {repeats} x {steps} steps), against a "
          f"{step_ms:.2f} ms step:")
    print(f"{'backend':<20}{'step mark':>11}{'+ 4 regions':>13}{'regions alone':>15}"
          f"{'of the step':>13}")
    for backend in ("cpu", "fake-cuda", "fake-cuda-per-mark"):
        alone, with_regions = best[(backend, False)], best[(backend, True)]
        cost = with_regions - alone
        print(f"{backend:<20}{alone * 1e6:9.2f}us{with_regions * 1e6:11.2f}us"
              f"{cost * 1e6:13.2f}us{cost * 1e3 / step_ms:12.2%}")
    threshold_ms = (best[("fake-cuda", True)] - best[("fake-cuda", False)]) * 1e3 / 0.005
    print(f"fake-cuda regions reach 0.5 % of a step shorter than {threshold_ms:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    parser.add_argument("--pairs", type=int, default=150, help="A/B block pairs")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--regions-only", action="store_true",
                        help="only the region marks' cost per backend (seconds, not minutes)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # one core: less scheduler noise on a shared 2-core machine
    step = make_step(args.batch, args.width)
    for _ in range(50):  # warm-up: allocator, caches
        step()
    if args.regions_only:
        step_ms = 1000 * min(_timed_steps(step, args.steps) for _ in range(20))
        region_costs(step_ms)
        return
    rng = random.Random(0)
    bare_rates, bench_rates, ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.pairs):
            out = Path(tmp) / f"b{index}.data"
            # Short blocks in random order: a burst of load from another process hits a few
            # blocks of either kind, and medians ignore them.
            if rng.random() < 0.5:
                a = bare(step, args.steps, args.batch)
                b = through_bench(step, args.steps, args.batch, out)
            else:
                b = through_bench(step, args.steps, args.batch, out)
                a = bare(step, args.steps, args.batch)
            bare_rates.append(a)
            bench_rates.append(b)
            ratios.append(b / a)
    ratio = statistics.median(bench_rates) / statistics.median(bare_rates)
    step_ms = 1000 * args.batch / statistics.median(bare_rates)
    print(f"blocks: {args.pairs} pairs x {args.steps} steps, batch {args.batch}, 1 thread")
    print(f"bare   median {statistics.median(bare_rates):9.1f} items/s  (step {step_ms:.2f} ms)")
    print(f"bench  median {statistics.median(bench_rates):9.1f} items/s")
    print(f"median of pair ratios bench/bare: {statistics.median(ratios):.4f}")
    print(f"ratio of medians bench/bare:      {ratio:.4f}  (target >= 0.99)")
    print(f"harness cost per step: {(1 / ratio - 1) * step_ms * 1000:.1f} us")
    # The harness alone, on an empty step: its cost per step is measured directly, without the
    # training step's noise, and gives the ratio this step would see on a quiet machine.
    with tempfile.TemporaryDirectory() as tmp:
        loss = torch.tensor(1.0)
        empty_bare = min(_empty_bare(5000) for _ in range(5))
        empty_bench = min(_empty_bench(5000, Path(tmp) / f"e{i}.data", loss) for i in range(5))
    cost_us = (empty_bench - empty_bare) * 1e6
    print(f"harness alone (empty step, best of 5): {cost_us:.1f} us per step -> expected "
          f"ratio for a {step_ms:.2f} ms step: {step_ms / (step_ms + cost_us / 1000):.4f}")
    region_costs(step_ms)


def _timed_steps(step, steps: int) -> float:
    """Seconds per step of a bare block."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def _empty_bare(steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        pass
    return (time.perf_counter() - start) / steps


def _empty_bench(steps: int, out: Path, loss) -> float:
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.stream import StreamWriter

    with StreamWriter(out) as stream:
        bench = Bench(name="empty", stream=stream, skip=0, stop=steps)
        start = time.perf_counter()
        for _ in bench.iterate(range(steps), batch_size=1):
            bench.log_loss(loss)
        bench.close()
        return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    main()
