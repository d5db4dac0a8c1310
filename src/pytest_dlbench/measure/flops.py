"""FLOPs of one training step, counted once after the run (outside every timed window).

The model a benchmark handed to ``bench.watch(model, example)`` is run forward and backward on
its example batch under ``torch.utils.flop_counter.FlopCounterMode``; FLOPs per item = that count
over the items in the example. The optimizer's update is left out (a few FLOPs per parameter,
next to thousands per parameter for forward and backward). Every rank of an njobs job counts at
the same point, so a DDP model's collectives stay matched.

The example is moved to the model's device first: workloads build it on the CPU while the model
runs on ``cuda:k``, and a device mismatch would leave every GPU run without FLOPs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.errors import one_line

__all__ = ["FlopCount", "count_step_flops", "model_device", "to_device"]


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of a forward and backward pass over ``items`` items, or why they are unknown."""

    flops: int | None
    items: int | None
    reason: str = ""

    @property
    def per_item(self) -> float | None:
        if not self.flops or not self.items:
            return None
        return self.flops / self.items


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [t for t in _tensors(getattr(value, "logits", None))] if hasattr(value, "logits") \
        else []


def model_device(model: Any) -> Any | None:
    """The device of the model's first parameter, else of its first buffer; None for a model
    with neither (or that is no ``nn.Module``): its example is then left where it is."""
    for tensors in ("parameters", "buffers"):
        try:
            first = next(iter(getattr(model, tensors)()), None)
        except (AttributeError, TypeError):
            return None
        if first is not None:
            return first.device
    return None


def to_device(value: Any, device: Any) -> Any:
    """``value`` with every tensor in it (a tensor, a tuple/list, a mapping, nested) on
    ``device``; anything else is kept as it is."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, Mapping):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(to_device(v, device) for v in value))
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(v, device) for v in value)
    return value


def _call(model: Any, example: Any) -> Any:
    if isinstance(example, Mapping):
        return model(**example)
    if isinstance(example, tuple):
        return model(*example)
    return model(example)


def count_step_flops(model: Any, example: Any) -> FlopCount:
    """Count forward + backward FLOPs of ``model`` on ``example`` (see the module docstring)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from pytest_dlbench.measure.batches import count_items

    if callable(example) and not isinstance(example, torch.Tensor) and not isinstance(
        example, torch.nn.Module
    ):
        example = example()
    if example is None:
        return FlopCount(None, None, "no example batch was handed to bench.watch")
    items = count_items(example)
    device = model_device(model)
    counter = FlopCounterMode(display=False)
    try:
        if device is not None:
            example = to_device(example, device)
        with counter:
            outputs = [t for t in _tensors(_call(model, example)) if t.requires_grad]
            if not outputs:
                return FlopCount(None, items, "the model's output has no gradient to count")
            sum(t.float().sum() for t in outputs).backward()
    except Exception as exc:  # noqa: BLE001 - an uncountable model says why, never fails a run
        return FlopCount(None, items, one_line(exc)[:200])
    finally:
        zero = getattr(model, "zero_grad", None)
        if zero is not None:
            zero(set_to_none=True)
    total = int(counter.get_total_flops())
    if total <= 0:
        return FlopCount(None, items, "FlopCounterMode counted no FLOPs")
    return FlopCount(total, items)
