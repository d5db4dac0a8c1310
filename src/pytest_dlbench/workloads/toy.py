"""A tiny MLP on random data: the sanity check that runs first (milarun's "toy examples").

If this fails, the set-up is broken (device, timer, stream), not a model. Units: items/s.
Takes the shared training arguments (``--precision``, ``--compile``): the smallest model to
compile, the smoke suite's eager/compiled pair.
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.data import regression_pairs
from pytest_dlbench.suite.presets import add_arguments as add_training_args
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int
from pytest_dlbench.workloads.batches import tensor_batches
from pytest_dlbench.workloads.compilation import CompileOptions
from pytest_dlbench.workloads.precision import backend_flags, optimizer_options, setup_precision
from pytest_dlbench.workloads.train import train_steps

__all__ = ["main", "make_parser"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", description=__doc__)
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--features", type=positive_int, default=32)
    parser.add_argument("--hidden", type=positive_int, default=64)
    parser.add_argument("--num-batches", type=positive_int, default=8,
                        help="distinct random batches cycled through (default 8)")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    add_training_args(parser)
    return parser


def main(bench: Any) -> None:
    """Regress a random linear target with a 2-layer MLP (SGD, MSE)."""
    import torch


    args = parse(make_parser(), bench)
    device = device_of(bench)
    precision = setup_precision(args, device)
    torch.manual_seed(args.seed)
    bench.set_units(DEFAULT_UNITS)

    model = torch.nn.Sequential(
        torch.nn.Linear(args.features, args.hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, 1),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr,
                                **optimizer_options(device))
    # Learnable data (a noisy linear function), so a falling loss also shows training works.
    data = regression_pairs(args.num_batches * args.batch_size, args.features, seed=args.seed)
    inputs, targets = data.tensors
    bench.watch(model, inputs[: args.batch_size])
    batches = tensor_batches((inputs, targets), args.batch_size, device=device,
                             seed=args.seed)

    model.train()
    with backend_flags(tf32=precision.tf32):
        train_steps(
            bench, batches,
            compute_loss=lambda batch: torch.nn.functional.mse_loss(model(batch[0]), batch[1]),
            optimizer=optimizer, precision=precision, device=device,
            items_per_step=args.batch_size, compile=CompileOptions.from_args(args),
        )
