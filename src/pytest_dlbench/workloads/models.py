"""Models of the classifier workloads: built for the input size, and their main logits.

torch is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["build_sized", "logits_of"]


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
