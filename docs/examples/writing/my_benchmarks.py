"""Example benchmark functions used by docs/writing-benchmarks.md (and run by its tests)."""

import argparse

import torch
from torch.utils.data import DataLoader


def mlp(bench, synthetic_images):
    """A suite benchmark: arguments come from the suite's argv, data from a fixture."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=16)
    args = parser.parse_args(bench.args)

    data = synthetic_images(n=128, image_size=args.image_size, num_classes=10)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * args.image_size**2, 10)
    ).to(bench.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    while not bench.done:  # epochs, until the run has skip + stop observations
        for x, y in bench.iterate(loader):
            x, y = x.to(bench.device), y.to(bench.device)
            with bench.timer.region("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with bench.timer.region("backward"):
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            bench.log_loss(loss)  # kept on the device; read when the window is read
