"""Data loading alone: JPEG folder -> DataLoader workers (decode, crop, flip, to tensor).

milabench's `loader` bench: mostly measures storage, JPEG decoding and worker throughput; by
default each batch is also copied to the device, as training would. Units: items/s (images).
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.data import forever
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int
from pytest_dlbench.workloads.batches import to_device
from pytest_dlbench.workloads.images import add_image_data_args, jpeg_loader

__all__ = ["main", "make_parser"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dataloader", description=__doc__)
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--num-classes", type=positive_int, default=1000)
    parser.add_argument("--to-device", action=argparse.BooleanOptionalAction, default=True,
                        help="copy each batch to the device (default: yes)")
    add_image_data_args(parser)
    return parser


def main(bench: Any) -> None:
    """Iterate the JPEG folder as fast as the loader allows."""
    import torch


    args = parse(make_parser(), bench)
    device = device_of(bench)
    torch.manual_seed(args.seed)
    bench.set_units(DEFAULT_UNITS)
    copy = args.to_device and device.type != "cpu"  # a copy to the CPU is a no-op
    loader = jpeg_loader(bench, args, num_classes=args.num_classes,
                         batch_size=args.batch_size, pin_memory=copy)
    timer = bench.timer
    for batch in bench.iterate(forever(loader), batch_size=args.batch_size):
        if copy:
            with timer.region("io"):
                to_device(batch, device)
