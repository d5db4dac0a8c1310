"""Image classification training with timm models (milabench's `timm` bench).

Same arguments and loop as `vision`; the model comes from `timm.create_model(name,
pretrained=False)`. Units: items/s (images per second).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_dlbench.workloads.arguments import parse
from pytest_dlbench.workloads.models import build_sized
from pytest_dlbench.workloads.vision import make_parser, train_classifier

# Imported once by the warm launcher's server (run/forkserver.py), not by each child.
WARM_IMPORTS = ("timm",)

if TYPE_CHECKING:
    import torch

__all__ = ["train"]


def train(bench: Any) -> None:
    """Train a timm model with random weights (SGD, cross-entropy)."""
    args = parse(make_parser(prog="timm_train", default_model="convnext_tiny"), bench)

    def build(name: str, num_classes: int, image_size: int) -> torch.nn.Module:
        import timm

        return build_sized(timm.create_model, "img_size", image_size,
                           model_name=name, pretrained=False, num_classes=num_classes)

    train_classifier(bench, args, build)
