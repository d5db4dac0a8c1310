"""Contrastive image-text training with open_clip (optional: needs `open-clip-torch`).

Any open_clip architecture name, built with random weights (`pretrained=None`), plus a tiny
built-in config, `dlbench-tiny`, that trains in milliseconds on a CPU. Random in-memory image and
token pairs; `ClipLoss`. Units: items/s (image-text pairs per second).
"""

from __future__ import annotations

import argparse
import inspect
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.workloads import _common

if TYPE_CHECKING:
    import torch

__all__ = ["TINY_CONFIG", "TINY_NAME", "make_parser", "train"]

#: A 2-layer ViT and a 2-layer text transformer at width 64: a set-up check, not a benchmark.
TINY_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16,
                   "head_width": 32},
    "text_cfg": {"context_length": 32, "vocab_size": 1000, "width": 64, "heads": 2,
                 "layers": 2},
}
TINY_NAME = "dlbench-tiny"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clip", description=__doc__)
    parser.add_argument("--model", default="ViT-B-32",
                        help=f"open_clip architecture, or {TINY_NAME} (default ViT-B-32)")
    parser.add_argument("--batch-size", type=_common.positive_int, default=64)
    _common.add_training_args(parser)
    parser.add_argument("--image-size", type=_common.positive_int, default=None,
                        help="override the architecture's image size")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--num-samples", type=_common.positive_int, default=256,
                        help="random image-text pairs cycled through (default 256)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def _register_tiny_config(open_clip: Any) -> None:
    if TINY_NAME in open_clip.list_models():
        return
    # add_model_config reads the file at once; the folder need not outlive the call.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{TINY_NAME}.json"
        path.write_text(json.dumps(TINY_CONFIG))
        open_clip.add_model_config(path)


def train(bench: Any) -> None:
    """CLIP training steps on random pairs (AdamW, symmetric contrastive loss)."""
    import open_clip
    import torch

    from pytest_dlbench.data import image_text_pairs

    args = _common.parse(make_parser(), bench)
    device = _common.device_of(bench)
    precision = _common.setup_precision(args, device)
    torch.manual_seed(args.seed)
    bench.set_units("items/s")

    _register_tiny_config(open_clip)
    config = open_clip.get_model_config(args.model)
    if config is None:
        raise ValueError(f"unknown open_clip model {args.model!r}")
    # No download of any kind: text towers from Hugging Face would fetch weights by default
    # (the flag is `pretrained_hf` before open_clip 3, `pretrained_text` since).
    params = inspect.signature(open_clip.create_model).parameters
    offline = {k: False for k in ("pretrained_hf", "pretrained_text") if k in params}
    model = open_clip.create_model(
        args.model, pretrained=None, device=device, output_dict=True,
        force_image_size=args.image_size, **offline,
    )
    image_size = args.image_size or config["vision_cfg"]["image_size"]
    text_cfg = config["text_cfg"]
    data = image_text_pairs(args.num_samples, image_size=image_size,
                            context_length=text_cfg.get("context_length", 77),
                            vocab_size=text_cfg.get("vocab_size", 49408), seed=args.seed)
    batches = _common.tensor_batches(data.tensors, args.batch_size, seed=args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loss_fn = open_clip.ClipLoss()
    bench.watch(model, lambda: tuple(t[: args.batch_size].to(device) for t in data.tensors))

    def compute_loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        images, texts = batch
        out = model(images, texts)
        return loss_fn(out["image_features"], out["text_features"], out["logit_scale"])

    model.train()
    with _common.backend_flags(tf32=precision.tf32, cudnn_benchmark=device.type == "cuda"):
        _common.train_steps(
            bench, batches, compute_loss=compute_loss, optimizer=optimizer,
            precision=precision, device=device, items_per_step=args.batch_size,
            compile=_common.CompileOptions.from_args(args),
        )

