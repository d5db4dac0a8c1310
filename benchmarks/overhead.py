"""Overhead of timing a training loop with ``bench.iterate`` versus a bare loop.

A: the bare loop, wall clock around N steps after warm-up.
B: the same steps through ``Bench.iterate`` (CPU timer, windows read and streamed to a file).
Rounds are interleaved A B A B so drift and noise hit both; the throughput ratio B/A is printed
per pair and as the median. Target: >= 0.99 on CPU.

    python benchmarks/overhead.py [--steps 200] [--rounds 10]
"""

from __future__ import annotations

import argparse
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
    from pytest_dlbench.bench import Bench
    from pytest_dlbench.stream import StreamWriter

    with StreamWriter(out) as stream:
        bench = Bench(name="overhead", stream=stream, skip=0, stop=steps)
        start = time.perf_counter()
        for _ in bench.iterate(range(steps), batch_size=batch):
            bench.log_loss(step())
        bench.close()
        return steps * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()
    import torch

    step = make_step(args.batch, args.width)
    torch.set_num_threads(1)  # one core: less scheduler noise on a shared 2-core machine
    for _ in range(50):  # warm-up: allocator, thread pool
        step()
    ratios, bare_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            a = bare(step, args.steps, args.batch)
            b = through_bench(step, args.steps, args.batch, Path(tmp) / f"r{round_index}.data")
            ratios.append(b / a)
            bare_rates.append(a)
            print(f"round {round_index:2d}  bare {a:10.0f} items/s  bench {b:10.0f} items/s  "
                  f"ratio {b / a:.4f}")
    median = statistics.median(ratios)
    step_ms = 1000 * args.batch / statistics.median(bare_rates)
    print(f"bare step: {step_ms:.2f} ms; harness cost per step: "
          f"{(1 / median - 1) * step_ms * 1000:.1f} us")
    print(f"median throughput ratio bench/bare: {median:.4f} (target >= 0.99)")


if __name__ == "__main__":
    main()
