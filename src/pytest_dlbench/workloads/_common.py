"""Pieces shared by the workloads: precision modes, backend flags, batches, the train step.

Private to the workloads package. torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "tf32-fp16")


@dataclass(frozen=True)
class Precision:
    """How a precision name is run on one device."""

    name: str
    autocast_dtype: torch.dtype | None  # None: no autocast (fp32 / tf32)
    tf32: bool
    device_type: str

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def grad_scaler(self) -> Any:
        """A GradScaler for fp16 on CUDA (fp16 gradients underflow without one), else None."""
        import torch

        if self.autocast_dtype is torch.float16 and self.device_type == "cuda":
            return torch.amp.GradScaler(self.device_type)
        return None


def resolve_precision(name: str, device: torch.device) -> Precision:
    import torch

    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; expected one of {', '.join(PRECISIONS)}")
    dtype = {"fp16": torch.float16, "tf32-fp16": torch.float16, "bf16": torch.bfloat16}.get(name)
    if dtype is torch.float16 and device.type == "cpu":
        # CPU fp16 autocast works but runs ~15x slower than bf16 (measured on torch 2.14):
        # it would benchmark an emulation, not the hardware.
        warnings.warn(f"precision {name}: fp16 autocast is emulated on CPU; using bf16 instead",
                      RuntimeWarning, stacklevel=2)
        dtype = torch.bfloat16
    return Precision(name=name, autocast_dtype=dtype, tf32="tf32" in name,
                     device_type=device.type)


@contextlib.contextmanager
def backend_flags(*, tf32: bool, cudnn_benchmark: bool = False) -> Iterator[None]:
    """Set TF32 and cuDNN autotuning for the duration of one benchmark, then restore them.

    These are process-wide switches: restoring them keeps in-process runs independent of order.
    "fp32" turns TF32 off explicitly (cuDNN allows it by default) so fp32 means fp32.
    """
    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark)
    matmul.allow_tf32 = tf32
    cudnn.allow_tf32 = tf32
    cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark = saved


def device_of(bench: Any) -> torch.device:
    import torch

    return torch.device(bench.device)


def parse(parser: argparse.ArgumentParser, bench: Any) -> argparse.Namespace:
    return parser.parse_args(list(bench.args))


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def tensor_batches(
    tensors: Sequence[torch.Tensor],
    batch_size: int,
    *,
    seed: int = 0,
    shuffle: bool = True,
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled batches gathered from in-memory tensors (one index op per tensor).

    Cheaper than a DataLoader over a TensorDataset, which indexes and collates sample by sample:
    in-memory data should not make the host the bottleneck. Drops the last partial batch so every
    step has `batch_size` items.
    """
    import torch

    n = len(tensors[0])
    if n < batch_size:
        raise ValueError(f"{n} samples cannot fill one batch of {batch_size}")
    g = torch.Generator().manual_seed(seed)
    device = tensors[0].device
    for _ in itertools.count():
        order = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
        order = order.to(device)  # one small copy per epoch when the data lives on a device
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            yield tuple(t[idx] for t in tensors)


def to_device(
    batch: Sequence[torch.Tensor],
    device: torch.device,
    *,
    channels_last: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Move a batch to `device`; the first (image) tensor optionally in channels-last layout."""
    import torch

    # non_blocking only overlaps when the source is pinned; it is harmless otherwise.
    out = [t.to(device, non_blocking=True) for t in batch]
    if channels_last and out[0].dim() == 4:
        out[0] = out[0].contiguous(memory_format=torch.channels_last)
    return tuple(out)


def build_sized(factory: Callable[..., torch.nn.Module], size_kwarg: str, image_size: int,
                **kwargs: Any) -> torch.nn.Module:
    """`factory(**kwargs)` told the input size when the architecture takes one.

    Transformers with fixed position embeddings (torchvision `vit_*`, timm ViTs) reject other
    input sizes unless built for them; convnets take any size and refuse the argument, so they
    are built without it.
    """
    try:
        return factory(**kwargs, **{size_kwarg: image_size})
    except TypeError as e:
        if size_kwarg not in str(e):
            raise
    return factory(**kwargs)


def logits_of(output: Any) -> torch.Tensor:
    """The main logits of a classifier's output.

    Some torchvision models return namedtuples in training mode (inception_v3: logits and
    aux_logits; googlenet: logits and two aux heads); the first field is the main head.
    """
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        return output["out"]
    return output[0]


def train_steps(
    bench: Any,
    batches: Any,
    *,
    compute_loss: Callable[[tuple[torch.Tensor, ...]], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    device: torch.device,
    items_per_step: int,
    channels_last: bool = False,
    after_backward: Callable[[], None] | None = None,
) -> int:
    """The timed loop: batch -> device -> forward (loss) -> backward -> update, one step each.

    `compute_loss(batch)` gets the batch on the device and runs under the precision's autocast.
    `after_backward()` runs inside the backward region once gradients are ready (DDP closes its
    `comm` region there).
    Returns the number of steps run. The loss is handed over as a tensor (no .item(): that would
    synchronise the device every step).
    """
    scaler = precision.grad_scaler()
    timer = bench.timer
    steps = 0
    for batch in bench.iterate(batches, batch_size=items_per_step):
        with timer.region("io"):
            on_device = to_device(batch, device, channels_last=channels_last)
        with timer.region("forward"), precision.autocast():
            loss = compute_loss(on_device)
        with timer.region("backward"):
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if after_backward is not None:
                after_backward()
        with timer.region("optimizer"):
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        bench.log_loss(loss.detach())
        steps += 1
    return steps


def add_image_data_args(parser: argparse.ArgumentParser) -> None:
    """Arguments that choose where training images come from (shared by vision, timm, loader)."""
    parser.add_argument("--image-size", type=positive_int, default=224,
                        help="side of the square training crop (default 224)")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="DataLoader worker processes for the JPEG folder (default 2)")
    parser.add_argument("--num-images", type=positive_int, default=None,
                        help="images in the generated data set (default 1024 on disk, "
                             "256 in memory; at least one batch)")
    parser.add_argument("--data", default=None,
                        help="an existing ImageFolder to read instead of the generated one")
    parser.add_argument("--seed", type=int, default=0)


def jpeg_loader(bench: Any, args: argparse.Namespace, *, num_classes: int, batch_size: int,
                pin_memory: bool) -> Any:
    """A shuffling DataLoader over a JPEG ImageFolder: decode, random crop, flip, normalise.

    `num_classes` bounds the labels (the model's output size).

    Without --data, the folder is generated once under bench.data_dir; its name carries the
    parameters so that benchmarks with different settings do not rebuild each other's copy.
    """
    from pathlib import Path

    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    from pytest_dlbench.data import jpeg_folder

    if args.data is not None:
        root = Path(args.data)
    else:
        n = args.num_images or max(1024, batch_size)
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
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=pin_memory,
        drop_last=True,  # every step has batch_size items
        # Workers survive epoch ends: forever() restarts the loader every epoch.
        persistent_workers=args.num_workers > 0,
        generator=torch.Generator().manual_seed(args.seed),
    )
