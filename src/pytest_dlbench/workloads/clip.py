"""Contrastive image-text training with open_clip (optional: needs `open-clip-torch`).

Any open_clip architecture name, built with random weights (`pretrained=None`), plus a tiny
built-in config, `dlbench-tiny`, that trains in milliseconds on a CPU. Units: items/s
(image-text pairs per second). The training step is OpenCLIP's own (open_clip_train's
`train_one_epoch`, MMoCLIP): AdamW with OpenCLIP's parameter groups and cosine schedule
(fused here: the fp16 scaler's inf check then never syncs the device),
`ClipLoss` (`--local-loss`, `--gather-with-grad`), the logit scale clamped after each update,
optional gradient checkpointing, DistributedDataParallel under torchrun (`plan: njobs`).

Two kinds of data:

- `--train-num-samples N` (time-to-train, docs/time-to-train.md): an epoch of N distinct
  synthetic pairs (`data.ImageTextDataset`: images and captions made from the sample's index)
  read through a DataLoader with OpenCLIP's training transform and tokenizer, `--workers`
  processes, a DistributedSampler under torchrun: the input pipeline OpenCLIP's
  `--dataset-type synthetic` runs, with distinct pairs instead of one blank image. `--epochs`
  epochs of `ceil(N / world size) // batch size` steps each, as OpenCLIP; the run ends with
  them (or with `skip + stop` observations, whichever comes first) and records how much of
  them it did (`progress`).
- otherwise: `--num-samples` random pairs held on the device as tensors and cycled (no input
  pipeline: the model's own throughput), until `skip + stop` observations.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.data import ImageTextDataset, image_text_pairs
from pytest_dlbench.run.launch.rank import RankInfo, destroy_process_group, init_process_group
from pytest_dlbench.suite import presets
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int, skip
from pytest_dlbench.workloads.batches import tensor_batches
from pytest_dlbench.workloads.precision import (
    Precision,
    backend_flags,
    cpu_runs_fp16,
    optimizer_options,
    resolve_precision,
)

# Imported once by the warm launcher's server (run/forkserver.py), not by each child.
WARM_IMPORTS = ("open_clip",)

if TYPE_CHECKING:
    import torch

__all__ = [
    "TINY_CONFIG",
    "TINY_NAME",
    "make_parser",
    "prepare_tiny",
    "prepare_training",
    "tiny_model_dir",
    "train",
]

#: A 2-layer ViT and a 2-layer text transformer at width 64: a set-up check, not a benchmark.
#: The vocabulary is OpenCLIP's tokenizer's (49408), so its tokens fit, in this workload and in
#: `open_clip_train.main --model local-dir:...` alike (see :func:`prepare_tiny`).
TINY_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16,
                   "head_width": 32},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 64, "heads": 2,
                 "layers": 2},
}
TINY_NAME = "dlbench-tiny"

PRECISIONS = (*presets.PRECISIONS, "amp")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clip", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-32",
                        help=f"open_clip architecture, or {TINY_NAME} (default ViT-B-32)")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="pairs per rank and step (OpenCLIP's local batch size)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="amp is OpenCLIP's default: fp16 autocast and a gradient scaler "
                             "(bf16 autocast on a CPU)")
    parser.add_argument("--allow-emulated-precision", action="store_true",
                        help="fp16 on a CPU without fp16 arithmetic runs as fp16, emulated, "
                             "with a gradient scaler (default: as bf16)")
    presets.add_compile_arguments(parser)
    parser.add_argument("--image-size", type=positive_int, default=None,
                        help="override the architecture's image size")
    parser.add_argument("--train-num-samples", type=positive_int, default=None,
                        help="pairs per epoch, read through a DataLoader (time-to-train)")
    parser.add_argument("--epochs", type=positive_int, default=1)
    parser.add_argument("--workers", type=int, default=0,
                        help="DataLoader worker processes with --train-num-samples (default 0)")
    parser.add_argument("--num-samples", type=positive_int, default=256,
                        help="pairs held on the device and cycled without "
                             "--train-num-samples (default 256)")
    parser.add_argument("--local-loss", action="store_true",
                        help="each rank's logits against all features (OpenCLIP)")
    parser.add_argument("--gather-with-grad", action="store_true",
                        help="all-gather the features with their gradients (OpenCLIP)")
    parser.add_argument("--grad-checkpointing", action="store_true",
                        help="recompute activations in the backward pass")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--wd", type=float, default=0.2)
    parser.add_argument("--warmup", type=int, default=10000, help="warm-up steps of the LR")
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.98)
    parser.add_argument("--eps", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def _open_clip() -> Any:
    """open_clip, or a skip: the benchmark cannot run without the optional package."""
    try:
        import open_clip
    except ImportError as exc:
        import pytest

        raise pytest.skip.Exception(
            f"needs open-clip-torch (pip install open-clip-torch): {exc}"
        ) from None
    return open_clip


def _register_tiny_config(open_clip: Any) -> None:
    if TINY_NAME in open_clip.list_models():
        return
    # add_model_config reads the file at once; the folder need not outlive the call.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{TINY_NAME}.json"
        path.write_text(json.dumps(TINY_CONFIG))
        open_clip.add_model_config(path)


def tiny_model_dir(data_dir: str | os.PathLike[str]) -> Path:
    """``<data>/open_clip/dlbench-tiny``: the tiny config as an OpenCLIP ``local-dir:`` model
    folder (``open_clip_config.json``), written once (atomically: replicas may race)."""
    folder = Path(data_dir) / "open_clip" / TINY_NAME
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "open_clip_config.json"
    text = json.dumps({"model_cfg": TINY_CONFIG, "preprocess_cfg": {}}, indent=2) + "\n"
    if not path.is_file() or path.read_text() != text:
        tmp = folder / f".open_clip_config.{os.getpid()}.tmp"
        tmp.write_text(text)
        tmp.replace(path)
    return folder


def prepare_training(bench: Any) -> None:
    """The ``prepare`` of an external ``open_clip_train.main`` run: skips the benchmark when
    OpenCLIP's training script or its dependencies are missing (rather than failing it)."""
    import importlib.util

    _open_clip()
    missing = [m for m in ("open_clip_train", "webdataset", "pandas")
               if importlib.util.find_spec(m) is None]
    if missing:
        import pytest

        raise pytest.skip.Exception(
            f"open_clip_train.main needs {', '.join(missing)} (pip install "
            "'pytest-dlbench[dev]' or 'open-clip-torch[training]')"
        )


def prepare_tiny(bench: Any) -> None:
    """The ``prepare`` of the external tiny run (``open_clip_train.main --model
    local-dir:{data}/open_clip/dlbench-tiny``): writes that folder. Skips the benchmark when
    open_clip_train is missing or predates ``local-dir:`` models (open-clip-torch 3.0)."""
    prepare_training(bench)
    open_clip = _open_clip()
    factory = getattr(open_clip, "factory", None)
    if not hasattr(factory, "LOCAL_DIR_PREFIX"):
        import pytest

        version = getattr(open_clip, "__version__", "?")
        raise pytest.skip.Exception(
            f"open-clip-torch {version} has no 'local-dir:' models (3.0 or later needed)"
        )
    tiny_model_dir(bench.data_dir)


def _param_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    """OpenCLIP's: no weight decay on gains, biases, norms and the logit scale."""

    def exclude(name: str, p: Any) -> bool:
        return p.ndim < 2 or "bn" in name or "ln" in name or "bias" in name or \
            "logit_scale" in name

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in named if exclude(n, p)], "weight_decay": 0.0},
        {"params": [p for n, p in named if not exclude(n, p)], "weight_decay": weight_decay},
    ]


def _cosine_lr(base: float, warmup: int, total: int, step: int) -> float:
    """OpenCLIP's ``cosine_lr``: linear warm-up, then a cosine down to 0 at ``total``."""
    if step < warmup:
        return base * (step + 1) / warmup
    e, es = step - warmup, max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * e / es)) * base


def _process_group(device: Any) -> tuple[Any, int, int]:
    """(group, rank, world size): a group of its own under torchrun (every rank runs this
    definition), else (None, 0, 1). Same set-up as the ``process_group`` fixture."""
    info = RankInfo.from_env()
    if not info.is_distributed:
        return None, 0, 1
    group = init_process_group(device)
    return group, info.rank, info.world_size


def train(bench: Any) -> None:
    """CLIP training steps (module docstring); one process, or one rank of an njobs job."""
    open_clip = _open_clip()


    args = parse(make_parser(), bench)
    device = device_of(bench)
    if args.compile != presets.EAGER:
        # OpenCLIP's training step is run as its script does: not compiled here yet.
        skip("the clip workload runs eager only (--compile is not supported here yet)")
    name = args.precision
    if name == "amp":  # OpenCLIP's: fp16 and a gradient scaler on a GPU, bf16 on a CPU
        name = "fp16" if device.type == "cuda" else "bf16"
    precision = resolve_precision(name, device,
                                  cpu_fp16=cpu_runs_fp16(args, device))
    bench.set_units(DEFAULT_UNITS)

    _register_tiny_config(open_clip)
    config = open_clip.get_model_config(args.model)
    if config is None:
        raise ValueError(f"unknown open_clip model {quoted(args.model)}")
    group, rank, world = _process_group(device)
    try:
        _train(bench, open_clip, args, config, device, precision, group, rank, world)
    finally:
        if group is not None:
            destroy_process_group()


def _train(bench: Any, open_clip: Any, args: argparse.Namespace, config: dict[str, Any],
           device: torch.device, precision: Precision, group: Any, rank: int,
           world: int) -> None:
    import torch

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    # No download of any kind: text towers from Hugging Face would fetch weights by default
    # (the flag is `pretrained_hf` before open_clip 3, `pretrained_text` since).
    params = inspect.signature(open_clip.create_model).parameters
    offline = {k: False for k in ("pretrained_hf", "pretrained_text") if k in params}
    model = open_clip.create_model(
        args.model, pretrained=None, device=device, output_dict=True,
        force_image_size=args.image_size, **offline,
    )
    if args.grad_checkpointing:
        model.set_grad_checkpointing()
    image_size = args.image_size or config["vision_cfg"]["image_size"]
    text_cfg = config["text_cfg"]
    context_length = text_cfg.get("context_length", 77)
    net: torch.nn.Module = model
    if group is not None:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            process_group=group,
        )
    loss_fn = open_clip.ClipLoss(local_loss=args.local_loss,
                                 gather_with_grad=args.gather_with_grad, cache_labels=True,
                                 rank=rank, world_size=world)
    # Fused (OpenCLIP's is not): with the fp16 scaler, any other AdamW makes
    # GradScaler.step read found_inf on the host, a device sync every step.
    optimizer = torch.optim.AdamW(_param_groups(model, args.wd), lr=args.lr,
                                  betas=(args.beta1, args.beta2), eps=args.eps,
                                  **optimizer_options(device))
    scaler = precision.grad_scaler()

    if args.train_num_samples is not None:
        loader, sampler = _pipeline(open_clip, args, image_size, device, rank, world)
        steps_per_epoch = len(loader)
        if steps_per_epoch == 0:
            raise ValueError(
                f"--train-num-samples {args.train_num_samples} over {world} rank(s) cannot fill "
                f"one batch of {args.batch_size}"
            )
        epochs, total = args.epochs, args.epochs * steps_per_epoch
    else:
        data = image_text_pairs(args.num_samples, image_size=image_size,
                                context_length=context_length,
                                vocab_size=text_cfg.get("vocab_size", 49408),
                                seed=args.seed + rank)
        loader = tensor_batches(data.tensors, args.batch_size, device=device,
                                seed=args.seed + rank)
        sampler, epochs, total = None, 1, bench.skip + bench.stop
    bench.watch(model, lambda: (torch.zeros(args.batch_size, 3, image_size, image_size),
                                torch.zeros(args.batch_size, context_length, dtype=torch.long)))

    timer = bench.timer
    unwrapped = model
    step = 0
    net.train()
    with backend_flags(tf32=precision.tf32, cudnn_benchmark=device.type == "cuda"):
        if group is not None:  # DDP: its reducer's sampled iterations before the first window
            _warm_up_ddp(bench, loader, net, loss_fn, optimizer, precision, scaler, device)
        for epoch in range(epochs):
            if sampler is not None:
                sampler.set_epoch(epoch)
            for images, texts in bench.iterate(loader, batch_size=args.batch_size):
                lr = _cosine_lr(args.lr, args.warmup, total, step)
                for param_group in optimizer.param_groups:
                    param_group["lr"] = lr
                with timer.region("io"):
                    images = images.to(device, non_blocking=True)
                    texts = texts.to(device, non_blocking=True)
                optimizer.zero_grad(set_to_none=True)
                with timer.region("forward"), precision.autocast():
                    out = net(images, texts)
                    loss = loss_fn(out["image_features"], out["text_features"],
                                   out["logit_scale"])
                with timer.region("backward"):
                    if scaler is not None:
                        scaler.scale(loss).backward()
                    else:
                        loss.backward()
                with timer.region("optimizer"):
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    with torch.no_grad():  # as OpenCLIP: the temperature stays in [1, 100]
                        unwrapped.logit_scale.clamp_(0, math.log(100))
                bench.log_loss(loss.detach())
                step += 1
            if bench.done:
                break
    if args.train_num_samples is not None:
        bench.log_progress(100.0 * step / total)


def _warm_up_ddp(bench: Any, loader: Any, net: torch.nn.Module, loss_fn: Any,
                 optimizer: torch.optim.Optimizer, precision: Precision, scaler: Any,
                 device: torch.device) -> None:
    """The untimed DDP warm-up of workloads/ddp.py (:func:`warm_up_reducer`): forward and
    backward with the reducer's all-reduce, no update, for the iterations in which the reducer
    samples its runtime stats (a host sync at the next forward, on a GPU), so that no scored
    step holds one. Its batches come from a pass of their own over ``loader`` (again and again
    when an epoch is shorter than the warm-up)."""
    import itertools

    from pytest_dlbench.workloads.ddp import warm_up_reducer

    def step(batch: Any) -> Any:
        images, texts = batch
        images = images.to(device, non_blocking=True)
        texts = texts.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            out = net(images, texts)
            loss = loss_fn(out["image_features"], out["text_features"], out["logit_scale"])
        (scaler.scale(loss) if scaler is not None else loss).backward()
        return loss

    batches = itertools.chain.from_iterable(itertools.repeat(loader))
    warm_up_reducer(bench, batches, step)
    optimizer.zero_grad(set_to_none=True)  # the weights and the optimizer as they were


def _pipeline(open_clip: Any, args: argparse.Namespace, image_size: int, device: torch.device,
              rank: int, world: int) -> tuple[Any, Any]:
    """OpenCLIP's synthetic-data loader, over distinct pairs: (DataLoader, sampler or None)."""
    import torch
    from torch.utils.data import DataLoader, Dataset, DistributedSampler


    # Map-style by its len and indexing (data.py imports no torch to subclass Dataset), which is
    # all DataLoader and DistributedSampler use; torch's stubs ask for a Dataset.
    dataset = cast(Dataset[tuple[Any, Any]], ImageTextDataset(
        args.train_num_samples, image_size=image_size, seed=args.seed,
        transform=open_clip.image_transform(image_size, is_train=True),
        tokenizer=open_clip.get_tokenizer(args.model),
    ))
    sampler: DistributedSampler[tuple[Any, Any]] | None = (
        DistributedSampler(dataset, num_replicas=world, rank=rank, seed=args.seed)
        if world > 1 else None
    )
    generator = torch.Generator().manual_seed(args.seed)
    loader = DataLoader(
        dataset, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler,
        num_workers=args.workers, pin_memory=device.type == "cuda", drop_last=True,
        generator=generator,
    )
    return loader, sampler
