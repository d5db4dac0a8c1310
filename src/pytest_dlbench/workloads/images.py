"""Training images read from disk: a JPEG ImageFolder (generated once, or the user's) through a
shuffling DataLoader that decodes and augments, and the arguments that choose it.

torch and torchvision are imported inside functions only.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from typing import Any

from pytest_dlbench.data import jpeg_folder
from pytest_dlbench.workloads.arguments import positive_int

__all__ = ["FAKE_IMAGENET_CLASSES", "FAKE_IMAGENET_IMAGES", "FAKE_IMAGENET_SIZE",
           "PREFETCH_FACTOR", "SHARD_BATCHES", "add_image_data_args", "epoch_samples",
           "jpeg_loader", "sharded_epochs"]

#: Batches each DataLoader worker keeps in flight (torch's default, passed explicitly so that
#: the epoch's size below and the loader agree).
PREFETCH_FACTOR = 2
#: Full batches each rank reads an epoch from a generated folder that a DDP job shards.
SHARD_BATCHES = 4
#: milabench's FakeImageNet (benchmate's datagen.py): 384 px noise, 1,000 classes. Its 30,720
#: images a GPU are fewer here: the same images to decode, a folder quicker to generate.
FAKE_IMAGENET_SIZE = 384
FAKE_IMAGENET_CLASSES = 1000
FAKE_IMAGENET_IMAGES = 4096


def add_image_data_args(parser: argparse.ArgumentParser) -> None:
    """Arguments that choose where training images come from (shared by vision, timm, loader)."""
    parser.add_argument("--image-size", type=positive_int, default=224,
                        help="side of the square training crop (default 224)")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="DataLoader worker processes for the JPEG folder (default 2)")
    parser.add_argument("--num-images", type=positive_int, default=None,
                        help="images in the generated data set (default 1024 on disk, "
                             "256 on the device with --synthetic-data; at least one batch)")
    parser.add_argument("--data", default=None,
                        help="an existing ImageFolder to read instead of the generated one")
    parser.add_argument("--fake-imagenet", action="store_true",
                        help="generate the folder as milabench's FakeImageNet: uniform-noise "
                             f"JPEGs of {FAKE_IMAGENET_SIZE} px, {FAKE_IMAGENET_CLASSES} "
                             f"classes, {FAKE_IMAGENET_IMAGES} images by default")
    parser.add_argument("--seed", type=int, default=0)


def epoch_samples(images: int, batch_size: int, num_workers: int,
                  prefetch_factor: int = PREFETCH_FACTOR) -> int:
    """Samples in one epoch of the training loader: the folder's `images`, or more (drawn with
    replacement) so that an epoch holds at least 2 x prefetch_factor x workers batches.

    An epoch shorter than prefetch_factor x workers batches leaves workers idle (a worker gets
    work only while the epoch has batches to hand out), and every epoch's end drains the
    pipeline: bs 256 over 1,024 images is 4 batches, so 4 of 16 workers decode. Twice that keeps
    every worker busy for a full round after the start of each epoch.
    """
    wanted_batches = 2 * prefetch_factor * max(num_workers, 0)
    return max(images, wanted_batches * batch_size)


def jpeg_loader(bench: Any, args: argparse.Namespace, *, num_classes: int, batch_size: int,
                pin_memory: bool, shard: tuple[int, int] | None = None) -> Any:
    """A shuffling DataLoader over a JPEG ImageFolder: decode, random crop, flip, normalise.

    `num_classes` bounds the labels (the model's output size). `shard` (rank, world size):
    each rank reads its own part of every epoch through a DistributedSampler, as a DDP job's
    loader does; the caller sets the sampler's epoch (:func:`sharded_epochs`).

    Without --data, the folder is generated once under bench.data_dir; its name carries the
    parameters so that benchmarks with different settings do not rebuild each other's copy.
    """
    from pathlib import Path

    import torch
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, Sampler
    from torchvision import datasets, transforms

    world = shard[1] if shard is not None else 1
    if args.data is not None:
        root = Path(args.data)
    elif getattr(args, "fake_imagenet", False):
        n = args.num_images or max(FAKE_IMAGENET_IMAGES, batch_size * world * SHARD_BATCHES)
        classes = min(num_classes, FAKE_IMAGENET_CLASSES)
        name = f"fakeimagenet-{classes}c-{n}x{FAKE_IMAGENET_SIZE}px-s{args.seed}"
        root = jpeg_folder(Path(bench.data_dir) / name, n=n, image_size=FAKE_IMAGENET_SIZE,
                           num_classes=classes, seed=args.seed, style="noise")
    else:
        # Sharded: every rank gets SHARD_BATCHES full batches an epoch.
        n = args.num_images or max(1024, batch_size * world * SHARD_BATCHES if world > 1 else
                                   batch_size)
        # Stored larger than the crop, like ImageNet's resize-256 / crop-224.
        disk_size = round(args.image_size * 256 / 224)
        # At most 100 class folders: the class count does not change the cost of a step.
        classes = min(num_classes, 100)
        name = f"jpeg-{classes}c-{n}x{disk_size}px-s{args.seed}"
        root = jpeg_folder(Path(bench.data_dir) / name, n=n, image_size=disk_size,
                           num_classes=classes, seed=args.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(str(root), transform=transform)
    if len(dataset.classes) > num_classes:
        raise ValueError(f"{root} has {len(dataset.classes)} classes, more than {num_classes}")
    if len(dataset) < batch_size:
        raise ValueError(f"{root} has {len(dataset)} images, fewer than one batch of {batch_size}")
    workers = args.num_workers
    generator = torch.Generator().manual_seed(args.seed)
    sampler: Sampler[int]
    if shard is not None and world > 1:
        rank = shard[0]
        if len(dataset) // world < batch_size:
            raise ValueError(f"{root} has {len(dataset)} images: fewer than one batch of "
                             f"{batch_size} for each of {world} ranks")
        # Every rank a disjoint part of one shuffle (the same seed on every rank).
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                     seed=args.seed, drop_last=True)
    else:
        samples = epoch_samples(len(dataset), batch_size, workers)
        # Without replacement when the folder is large enough: a plain shuffle, every image
        # once; a small folder is drawn with replacement (as milabench's loader is), decoded
        # every time.
        sampler = RandomSampler(dataset, replacement=samples > len(dataset),
                                num_samples=samples, generator=generator)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        prefetch_factor=PREFETCH_FACTOR if workers > 0 else None,
        pin_memory=pin_memory,
        drop_last=True,  # every step has batch_size items
        # Workers survive epoch ends: forever() restarts the loader every epoch.
        persistent_workers=workers > 0,
        generator=generator,
    )


def sharded_epochs(loader: Any) -> Iterator[Any]:
    """A sharded loader's batches without end, the sampler told each new epoch (so that each
    epoch is another shuffle, the same on every rank)."""
    for epoch in itertools.count():
        loader.sampler.set_epoch(epoch)
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise ValueError("the sharded loader gave no batch in an epoch")
