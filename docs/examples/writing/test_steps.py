"""A test's own warm-up and steady steps (docs/writing-benchmarks.md, "Steps of a test")."""

import pytest
import torch


@pytest.mark.bench_steps(warmup=3, steps=20)
def test_mlp_step(bench):
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for _ in bench.iterate(range(1000), batch_size=32):  # stops after 3 + 20 steps
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        bench.log_loss(loss)
    assert bench.observations == 23
