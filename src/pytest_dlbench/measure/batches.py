"""What a benchmark's steps hold: the items of a batch (:func:`count_items`) and the logged
losses as numbers (:func:`losses_to_floats`), for :class:`~pytest_dlbench.measure.bench.Bench`
and the FLOPs count."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["count_items", "losses_to_floats"]


def _leading(value: Any) -> int | None:
    """Length of the first dimension of a tensor/array/sequence, None for a scalar-like."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 0 else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def count_items(batch: Any) -> int:
    """Number of samples in a batch, for when ``iterate`` is not given ``batch_size``.

    - a tensor or array: its first dimension;
    - a tuple/list whose first element is a tensor, array or sequence (a collated ``(x, y)``
      batch): that element's first dimension;
    - a mapping (``{"input_ids": ..., ...}``): the first value's first dimension;
    - another sequence (a list of samples): its length.

    A list of unstacked sample tensors looks like an ``(x, y)`` batch: pass ``batch_size``.
    """
    n = _leading(batch) if hasattr(batch, "shape") else None
    if n is not None:
        return n
    if isinstance(batch, (tuple, list)):
        if not batch:
            return 0
        n = _leading(batch[0])
        return n if n is not None else len(batch)
    if isinstance(batch, Mapping) and batch:
        n = _leading(next(iter(batch.values())))
        if n is not None:
            return n
    try:
        return len(batch)
    except TypeError:
        raise TypeError(
            f"cannot count the items of a {type(batch).__name__} batch; "
            "pass batch_size= to bench.iterate()"
        ) from None


def losses_to_floats(values: list[Any]) -> list[float]:
    """Convert logged losses with one device-to-host copy for all tensors, not one per loss."""
    out: list[Any] = [None] * len(values)  # each one set below: a float, or a tolist() number
    tensors: list[tuple[int, Any]] = []
    for i, v in enumerate(values):
        if hasattr(v, "detach") and hasattr(v, "reshape"):
            tensors.append((i, v))
        else:
            out[i] = float(v)
    if tensors:
        import torch

        # A non-scalar loss (per-sample losses) is summarised by its mean; scalars (the usual
        # case) go to the host as they are, so the window read stays cheap.
        flat = [t if t.dim() == 0 else t.detach().reshape(-1).float().mean() for _, t in tensors]
        try:
            converted = torch.stack(flat).tolist()
        except RuntimeError:  # losses on different devices: convert one by one
            converted = [float(t) for t in flat]
        for (i, _), f in zip(tensors, converted, strict=True):
            out[i] = f
    return [float(x) for x in out]
