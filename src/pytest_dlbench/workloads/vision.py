"""Image classification training with torchvision models (milabench's `torchvision` bench).

Units: items/s (images per second).
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.data import forever, synthetic_images
from pytest_dlbench.suite.presets import add_arguments as add_training_args
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int
from pytest_dlbench.workloads.batches import tensor_batches, to_device
from pytest_dlbench.workloads.compilation import CompileOptions
from pytest_dlbench.workloads.images import add_image_data_args, jpeg_loader
from pytest_dlbench.workloads.models import build_sized, logits_of
from pytest_dlbench.workloads.precision import backend_flags, setup_precision, sgd
from pytest_dlbench.workloads.train import train_steps

# Imported once by the warm launcher's server (run/forkserver.py), not by each child.
WARM_IMPORTS = ("torchvision",)

if TYPE_CHECKING:
    import torch

__all__ = ["check_arguments", "make_parser", "train", "train_classifier"]


def make_parser(prog: str = "vision", default_model: str = "resnet50") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--model", default=default_model,
                        help=f"classifier name (default {default_model})")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    add_training_args(parser)
    parser.add_argument("--channels-last", action="store_true",
                        help="NHWC memory layout for the model and its inputs")
    parser.add_argument("--synthetic-data", action="store_true",
                        help="random images held on the device instead of the JPEG folder "
                             "(batches gathered there: no copy from the host per step)")
    parser.add_argument("--fixed-batch", action="store_true",
                        help="reuse one synthetic batch already on the device (pure compute)")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9,
                        help="SGD momentum (default 0.9; 0: plain SGD)")
    parser.add_argument("--no-fused", dest="fused", action="store_false",
                        help="torch's default SGD implementation instead of the fused kernels "
                             "(milabench's optimizer: torch.optim.SGD(params, lr))")
    parser.add_argument("--soft-labels", action="store_true",
                        help="with --fixed-batch: targets drawn uniformly in [0, 1) per class, "
                             "a (batch, classes) float tensor for the cross-entropy, instead "
                             "of class indices (milabench's synthetic loaders)")
    parser.add_argument("--num-classes", type=positive_int, default=1000)
    add_image_data_args(parser)
    return parser


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse the combinations the parser cannot: --soft-labels needs --fixed-batch."""
    if args.soft_labels and not args.fixed_batch:
        raise SystemExit("vision: --soft-labels needs --fixed-batch (the only synthetic batch "
                         "with soft targets)")


def train(bench: Any) -> None:
    """Train a torchvision classifier with random weights (SGD, cross-entropy)."""
    args = parse(make_parser(), bench)

    def build(name: str, num_classes: int, image_size: int) -> torch.nn.Module:
        import torchvision

        return build_sized(torchvision.models.get_model, "image_size", image_size,
                           name=name, weights=None, num_classes=num_classes)

    train_classifier(bench, args, build)


def train_classifier(
    bench: Any,
    args: argparse.Namespace,
    build: Callable[[str, int, int], torch.nn.Module],
) -> None:
    """The classification benchmark shared by the torchvision and timm workloads.

    `build(name, num_classes, image_size)` makes the model with random weights.
    """
    import torch

    check_arguments(args)
    device = device_of(bench)
    precision = setup_precision(args, device)
    torch.manual_seed(args.seed)
    bench.set_units(DEFAULT_UNITS)

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = build(args.model, args.num_classes, args.image_size)
    # torch's stubs omit Module.to(device, memory_format=...), which it takes (one copy).
    model = model.to(device, memory_format=memory_format)  # type: ignore[call-overload]
    bench.watch(model, lambda: torch.zeros(args.batch_size, 3, args.image_size, args.image_size))
    optimizer = sgd(model.parameters(), lr=args.lr, momentum=args.momentum, device=device,
                    precision=precision, fused=args.fused)
    loss_fn = torch.nn.CrossEntropyLoss()

    if args.fixed_batch:
        # One batch, moved once: the loop measures the model alone.
        images, labels = synthetic_images(args.batch_size, args.image_size, args.num_classes,
                                          seed=args.seed).tensors
        if args.soft_labels:
            generator = torch.Generator().manual_seed(args.seed)
            labels = torch.rand(args.batch_size, args.num_classes, generator=generator)
        batch = to_device((images, labels), device, channels_last=args.channels_last)
        batches: Any = itertools.repeat(batch)
    elif args.synthetic_data:
        n = args.num_images or max(256, args.batch_size)  # at least one batch
        dataset = synthetic_images(n, args.image_size, args.num_classes,
                                   seed=args.seed)
        batches = tensor_batches(dataset.tensors, args.batch_size, device=device,
                                 seed=args.seed)
    else:
        loader = jpeg_loader(bench, args, num_classes=args.num_classes,
                             batch_size=args.batch_size,
                             pin_memory=device.type == "cuda")
        batches = forever(loader)

    def compute_loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        images, labels = batch
        return loss_fn(logits_of(model(images)), labels)

    model.train()
    with backend_flags(tf32=precision.tf32, cudnn_benchmark=device.type == "cuda"):
        train_steps(
            bench, batches, compute_loss=compute_loss, optimizer=optimizer,
            precision=precision, device=device, items_per_step=args.batch_size,
            channels_last=args.channels_last, compile=CompileOptions.from_args(args),
        )
