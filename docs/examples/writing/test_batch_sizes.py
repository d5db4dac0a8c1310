"""A parametrized test: one benchmark, one stream and one row per parameter."""

import pytest
import torch


@pytest.mark.parametrize("batch", [16, 64])
def test_mlp_batch(bench, batch):
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 64), torch.randint(0, 10, (batch,))
    for _ in bench.iterate(range(30), batch_size=batch):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        bench.log_loss(loss)
