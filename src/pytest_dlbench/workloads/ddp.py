"""Data-parallel training of a torchvision classifier with DistributedDataParallel (``njobs``).

Every rank trains the same model on its own synthetic in-memory batches (with ``--jpeg``: its
own part of each epoch of a JPEG folder, decoded by its DataLoader workers, as milabench's
resnet152-ddp-gpus reads FakeImageNet); DDP averages the gradients with an all-reduce during
the backward pass. Units: items/s; under torchrun the
reporting rank's stream holds the job's global throughput (per-rank batch x world size).

The ``comm`` region is the gradient all-reduce of a step: from the moment DDP hands its first
gradient bucket to communication until every bucket is reduced. DDP overlaps the all-reduce
with the rest of the backward pass, so ``comm`` overlaps ``backward``; that is the point: a
communication hook times the real, overlapped all-reduce, where ``no_sync`` plus an explicit
all-reduce after ``backward`` would time a slower, serialised training step than the one whose
throughput is reported.

- Start: a communication hook (``register_comm_hook``) opens ``comm`` when the first bucket of
  the step is ready, then runs DDP's stock all-reduce (``default_hooks.allreduce_hook``).
- End: closed right after ``loss.backward()`` returns. DDP's backward ends by waiting for every
  bucket's all-reduce future: on the CPU (gloo) the host has waited for them, on a GPU the
  current stream waits for the NCCL work, so the end mark (a CUDA event on that stream) fires
  when the last bucket is reduced.

With one process (no torchrun, ``process_group`` is ``None``) the model is trained without DDP
and there is no ``comm`` region: nothing is communicated.

DDP's reducer samples its own runtime statistics (forward, backward and communication times) in
iterations 1 to 10 and every 100th (``should_collect_runtime_stats``, torch's
``kDDPRuntimeLoggingSampleRate``); the forward after a sampled iteration reads that iteration's
timers (``Logger::set_runtime_stats_and_log``): on a GPU an ``cudaEventSynchronize`` on its CUDA
events, a host sync. So :data:`WARMUP_STEPS` (11) untimed forward and backward passes (no
update: the weights stay) run before the first window (:func:`warm_up_reducer`), as the compile
warm-up does. Every 100th iteration stays in the timed
loop, as in any DDP training: one host wait in 100 steps, which costs the device the host's lead
of one step; the shipped suites (skip + stop <= 70 steps after the warm-up) never reach it.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.data import forever, synthetic_images
from pytest_dlbench.suite.presets import add_arguments as add_training_args
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int
from pytest_dlbench.workloads.batches import tensor_batches, to_device
from pytest_dlbench.workloads.compilation import CompileOptions
from pytest_dlbench.workloads.images import jpeg_loader, sharded_epochs
from pytest_dlbench.workloads.models import build_sized, logits_of
from pytest_dlbench.workloads.precision import (
    Precision,
    backend_flags,
    setup_precision,
    sgd,
)
from pytest_dlbench.workloads.train import train_steps

if TYPE_CHECKING:
    import torch

__all__ = ["STATS_ITERATIONS", "WARMUP_STEPS", "CommTiming", "make_parser", "train",
           "warm_up_reducer"]

#: The iterations in which DDP's reducer samples its runtime stats at first (1 to 10).
STATS_ITERATIONS = 10
#: Untimed DDP steps before the first window: the forward of iteration 11 still reads the
#: stats of iteration 10 (a host sync on a GPU); from iteration 12 on, none until the 101st.
WARMUP_STEPS = STATS_ITERATIONS + 1


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddp", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", help="torchvision classifier name")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="images per rank and step")
    parser.add_argument("--image-size", type=positive_int, default=224)
    parser.add_argument("--num-classes", type=positive_int, default=1000)
    add_training_args(parser)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--fixed-batch", action="store_true",
                        help="reuse one batch already on the device (pure compute)")
    parser.add_argument("--num-images", type=positive_int, default=None,
                        help="images per rank, held on the device (default max(256, batch "
                             "size))")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0,
                        help="DDP gradient bucket size (default 25, DDP's own)")
    parser.add_argument("--jpeg", action="store_true",
                        help="read a JPEG folder (--data, or one generated) through "
                             "--num-workers DataLoader workers, each rank its own part of "
                             "every epoch (a DistributedSampler), instead of device tensors")
    parser.add_argument("--data", default=None,
                        help="with --jpeg: an existing ImageFolder to read")
    parser.add_argument("--fake-imagenet", action="store_true",
                        help="with --jpeg: generate the folder as milabench's FakeImageNet "
                             "(uniform-noise JPEGs of 384 px, 1,000 classes)")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="with --jpeg: DataLoader workers per rank (default 2)")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--no-fused", dest="fused", action="store_false",
                        help="torch's default SGD implementation instead of the fused kernels")
    parser.add_argument("--seed", type=int, default=0)
    return parser


class CommTiming:
    """Opens the ``comm`` region at a step's first gradient bucket; :meth:`close` ends it.

    Only the hook touches the region while ``backward`` runs, and the training loop waits in
    ``backward`` meanwhile, so the Timer (not thread-safe) is used by one thread at a time: on a
    GPU the hook runs in autograd's device thread, on the CPU in the calling thread.
    """

    def __init__(self, timer: Any, group: Any) -> None:
        self.timer = timer
        self.group = group
        self.open = False
        self.buckets = 0  # buckets all-reduced, over the run

    # No annotations: DDP checks the hook's with inspect and rejects anything but the real
    # dist.GradBucket / Future classes, and this module's annotations are strings (PEP 563).
    def hook(self, state, bucket):
        """A DDP communication hook: DDP's own all-reduce (``state`` unused), its start
        marked; returns the all-reduce's future."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        if not self.open:
            self.timer.start("comm")
            self.open = True
        self.buckets += 1
        return default_hooks.allreduce_hook(self.group, bucket)

    def close(self) -> None:
        """After ``backward``: every bucket is reduced (or queued before the end mark)."""
        if self.open:
            self.timer.end("comm")
            self.open = False


def warm_up_reducer(bench: Any, batches: Iterator[Any], run_step: Callable[[Any], Any],
                    steps: int = WARMUP_STEPS) -> None:
    """Run ``steps`` untimed steps of the DDP model before the timed loop (the reducer's
    sampled iterations, module docstring), then drop the ``comm`` intervals its hook recorded
    meanwhile and wait for the device: the first window starts on an idle one."""
    for _ in range(steps):
        try:
            batch = next(batches)
        except StopIteration:
            raise ValueError("the data ran out during the DDP warm-up") from None
        run_step(batch)
    timer = bench.timer
    timer.read()  # the comm regions of the warm-up: in no window
    timer.backend.synchronize()


def _untimed_step(
    *,
    compute_loss: Callable[[tuple[torch.Tensor, ...]], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    device: torch.device,
    channels_last: bool,
    after_backward: Callable[[], None],
) -> Callable[[Any], Any]:
    """A warm-up step: forward and backward (with DDP's all-reduce) as the timed loop runs them
    (workloads/train.py), with no region and no update. The weights stay as they were, so the
    timed loop trains the same model from the same start as without the warm-up (eleven more
    updates at the suites' learning rates can make a small batch's fp16 loss NaN)."""

    def step(batch: Any) -> Any:
        on_device = to_device(batch, device, channels_last=channels_last)
        with precision.autocast():
            loss = compute_loss(on_device)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        after_backward()
        return loss

    return step


def _batches(bench: Any, args: argparse.Namespace, device: torch.device, rank: int,
             world: int) -> Any:
    if args.jpeg:
        if args.fixed_batch:
            raise SystemExit("ddp: --jpeg and --fixed-batch are two data sources; give one")
        loader = jpeg_loader(bench, args, num_classes=args.num_classes,
                             batch_size=args.batch_size, pin_memory=device.type == "cuda",
                             shard=(rank, world))
        return sharded_epochs(loader) if world > 1 else forever(loader)
    # Each rank its own samples, as a DistributedSampler would give it.
    seed = args.seed + 1000 * rank
    if args.fixed_batch:
        images, labels = synthetic_images(args.batch_size, args.image_size, args.num_classes,
                                          seed=seed).tensors
        batch = to_device((images, labels), device, channels_last=args.channels_last)
        return itertools.repeat(batch)
    n = args.num_images or max(256, args.batch_size)
    dataset = synthetic_images(n, args.image_size, args.num_classes, seed=seed)
    return tensor_batches(dataset.tensors, args.batch_size, device=device, seed=seed)


def train(bench: Any, process_group: Any) -> None:
    """Train a torchvision classifier with random weights under DDP (SGD, cross-entropy).

    ``process_group`` is the fixture (no default: pytest does not inject arguments that have
    one); ``None`` trains one process without DDP.
    """
    import torch
    import torchvision

    args = parse(make_parser(), bench)
    device = device_of(bench)
    precision = setup_precision(args, device)
    bench.set_units(DEFAULT_UNITS)
    # The same initial weights everywhere; DDP broadcasts rank 0's anyway.
    torch.manual_seed(args.seed)

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = build_sized(torchvision.models.get_model, "image_size", args.image_size,
                        name=args.model, weights=None, num_classes=args.num_classes)
    # torch's stubs omit Module.to(device, memory_format=...), which it takes (one copy).
    model = model.to(device, memory_format=memory_format)  # type: ignore[call-overload]
    bench.watch(model, lambda: torch.zeros(args.batch_size, 3, args.image_size, args.image_size))

    comm: CommTiming | None = None
    rank, world = 0, 1
    net: torch.nn.Module = model
    if process_group is not None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        rank, world = dist.get_rank(process_group), dist.get_world_size(process_group)
        net = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            process_group=process_group,
            bucket_cap_mb=args.bucket_cap_mb,
            # Gradients are views into the buckets: no copy back after the all-reduce.
            gradient_as_bucket_view=True,
        )
        comm = CommTiming(bench.timer, process_group)
        net.register_comm_hook(None, comm.hook)

    optimizer = sgd(net.parameters(), lr=args.lr, momentum=args.momentum, device=device,
                    precision=precision, fused=args.fused)
    loss_fn = torch.nn.CrossEntropyLoss()

    def compute_loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        images, labels = batch
        return loss_fn(logits_of(net(images)), labels)

    net.train()
    batches = iter(_batches(bench, args, device, rank, world))
    with backend_flags(tf32=precision.tf32, cudnn_benchmark=device.type == "cuda"):
        if comm is not None:  # DDP: its reducer's sampled iterations before the first window
            warm_up_reducer(bench, batches, _untimed_step(
                compute_loss=compute_loss, optimizer=optimizer, precision=precision,
                device=device, channels_last=args.channels_last, after_backward=comm.close))
        train_steps(
            bench,
            batches,
            compute_loss=compute_loss,
            optimizer=optimizer,
            precision=precision,
            device=device,
            items_per_step=args.batch_size,
            channels_last=args.channels_last,
            after_backward=comm.close if comm is not None else None,
            compile=CompileOptions.from_args(args),
        )
