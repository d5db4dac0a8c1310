"""Agreement of the plugin's rate with ``torch.utils.benchmark`` on the same training step.

A: ``Bench.iterate`` over a timm model's training step (fixed batch), steady-state rate
   = sum(items) / sum(seconds) over the window, as scoring.md defines it.
B: ``torch.utils.benchmark.Timer(stmt=step).blocked_autorange()``, items / median time.
Interleaved A B A B; prints each pair's ratio and the median. Target: within 3 %.

    python benchmarks/agreement.py [--model resnet18] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics


def make_step(model_name: str, batch: int, image_size: int):
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model(model_name, pretrained=False, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, image_size, image_size)
    y = torch.randint(0, 10, (batch,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def plugin_rate(step, batch: int, skip: int, stop: int) -> float:
    from pytest_dlbench.measure.bench import Bench

    bench = Bench(name="agreement", skip=skip, stop=stop)
    for _ in bench.iterate(range(skip + stop), batch_size=batch):
        bench.log_loss(step())
    bench.close()
    rates = [r for r in bench.stream.records if r["event"] == "rate" and not r["warmup"]]
    return sum(r["items"] for r in rates) / sum(r["seconds"] for r in rates)


def reference_rate(step, batch: int, min_run_time: float) -> float:
    import torch
    from torch.utils import benchmark

    # torch.utils.benchmark.Timer runs single-threaded unless told otherwise.
    timer = benchmark.Timer(
        stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads()
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return batch / measurement.median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--skip", type=int, default=5)
    parser.add_argument("--stop", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    step = make_step(args.model, args.batch, args.image_size)
    for _ in range(5):
        step()
    ratios = []
    for round_index in range(args.rounds):
        a = plugin_rate(step, args.batch, args.skip, args.stop)
        b = reference_rate(step, args.batch, min_run_time=2.0)
        ratios.append(a / b)
        print(f"round {round_index}  plugin {a:8.1f} items/s  torch.utils.benchmark {b:8.1f} "
              f"items/s  ratio {a / b:.4f}")
    median = statistics.median(ratios)
    print(f"median ratio plugin/reference: {median:.4f}  (|1 - ratio| = {abs(1 - median):.2%}, "
          f"target <= 3%)")


if __name__ == "__main__":
    main()
