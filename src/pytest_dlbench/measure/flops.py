"""FLOPs of one training step, counted once after the run (outside every timed window).

The model a benchmark handed to ``bench.watch(model, example, items_per_example=...)`` is run
forward and backward under ``torch.utils.flop_counter.FlopCounterMode``. The optimizer's update is
left out (a few FLOPs per parameter, next to thousands per parameter for forward and backward).
Every rank of an njobs job counts at the same point, so a DDP model's collectives stay matched.

Three choices make the count the figure MFU needs:

- **Per rate item.** FLOPs per item are in the rate's unit: an example of a language model is a
  sequence of ``seq_len`` tokens, and its rate is in tokens/s, so the workload says
  ``items_per_example=seq_len`` and the count is divided by the tokens, not the sequences.
- **Two examples, scaled.** The count runs on the first :data:`COUNTED_EXAMPLES` examples of the
  example batch (every tensor sliced on its leading dimension), not the training batch: a second
  fp32 forward and backward at full batch, on top of the training's cache, could run out of
  memory. FLOPs per item are linear in the batch for every built-in model, so the per-item
  figure is the same (tests/measure/test_flops_batch.py holds that).
- **Model FLOPs, not hardware FLOPs.** Gradient checkpointing recomputes the forward in the
  backward pass (about a third more work); MFU counts the model's FLOPs only (PaLM, appendix B),
  so checkpointing is switched off for the count and back on after (:func:`no_checkpointing`).
- **Attention on a CPU.** torch's counter has no formula for the CPU's fused attention kernel
  (it counted 0); :func:`cpu_attention_formulas` gives it the CUDA kernels' one.

The example is moved to the model's device first: workloads build it on the CPU while the model
runs on ``cuda:k``, and a device mismatch would leave every GPU run without FLOPs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.core.errors import one_line, quoted
from pytest_dlbench.core.numbers import is_finite
from pytest_dlbench.measure.batches import count_items

__all__ = [
    "CHECKPOINT_FLAGS",
    "COUNTED_EXAMPLES",
    "ITEMS_PER_EXAMPLE_RANGE",
    "FlopCount",
    "checked_items_per_example",
    "count_step_flops",
    "cpu_attention_formulas",
    "first_examples",
    "model_device",
    "no_checkpointing",
    "to_device",
]

#: The sizes ``items_per_example`` may take: rate items in one example (a language model's
#: sequence length, in tokens); beyond them a typo, and the count's ``items`` would reach
#: the stream as a figure no report can use (``Infinity`` is no JSON).
ITEMS_PER_EXAMPLE_RANGE = (1e-6, 1e12)


def checked_items_per_example(value: Any) -> float:
    """``value`` when it is a finite number within :data:`ITEMS_PER_EXAMPLE_RANGE` (the
    ``bench.watch`` argument), else ``ValueError`` with one line saying so."""
    low, high = ITEMS_PER_EXAMPLE_RANGE
    if not (is_finite(value) and low <= value <= high):
        raise ValueError(f"items_per_example must be a finite number from {low:g} to {high:g} "
                         f"(the rate items one example holds), not {quoted(value)}")
    return value


#: Examples the count runs on (2, not 1: a BatchNorm in training mode needs two values a channel).
COUNTED_EXAMPLES = 2
#: The module attributes that switch gradient checkpointing on: OpenCLIP's and timm's
#: ``grad_checkpointing``, Hugging Face's ``gradient_checkpointing``.
CHECKPOINT_FLAGS = ("grad_checkpointing", "gradient_checkpointing")


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of a forward and backward pass over ``items`` rate items, or why they are unknown.

    ``items`` is in the rate's unit (``examples`` x items per example); ``examples`` is how many
    examples the count ran on, ``batch_examples`` how many the example batch held.
    """

    flops: int | None
    items: float | None
    reason: str = ""
    examples: int | None = None
    batch_examples: int | None = None

    @property
    def per_item(self) -> float | None:
        if not self.flops or not self.items:
            return None
        return self.flops / self.items

    def record(self) -> dict[str, Any]:
        """The fields of the stream's ``flops`` record (measure/stream.py: ``Event.FLOPS``)."""
        return {"flops": self.flops, "items": self.items, "reason": self.reason,
                "counted_examples": self.examples, "batch_examples": self.batch_examples}


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


def _map_tensors(value: Any, fn: Any) -> Any:
    """``value`` with ``fn`` applied to every tensor in it (a tensor, a tuple/list, a mapping,
    a namedtuple, nested); anything else is kept as it is."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, Mapping):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_map_tensors(v, fn) for v in value))
    if isinstance(value, list):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_map_tensors(v, fn) for v in value)
    return value


def to_device(value: Any, device: Any) -> Any:
    """``value`` with every tensor in it (a tensor, a tuple/list, a mapping, nested) on
    ``device``; anything else is kept as it is."""
    return _map_tensors(value, lambda t: t.to(device))


def first_examples(example: Any, batch: int, keep: int) -> Any:
    """``example`` cut to its first ``keep`` examples: every tensor whose leading dimension is
    the batch's (``batch``) is sliced; the others (a mask, a table) are kept whole."""
    if keep >= batch:
        return example
    return _map_tensors(example, lambda t: t[:keep] if t.dim() > 0 and t.shape[0] == batch
                        else t)


@contextlib.contextmanager
def no_checkpointing(model: Any) -> Iterator[int]:
    """Gradient checkpointing off in every module of ``model`` that has it on (one of
    :data:`CHECKPOINT_FLAGS` true), back on after; yields how many modules were switched."""
    switched: list[tuple[Any, str]] = []
    # Switching is inside the try: a module whose flag cannot be read or set (a property that
    # raises) must not leave the ones switched before it off for the rest of the run; and
    # each is restored on its own, so one that cannot be set back keeps none of the others off.
    try:
        modules = getattr(model, "modules", None)
        for module in (modules() if callable(modules) else ()):
            for flag in CHECKPOINT_FLAGS:
                if getattr(module, flag, None) is True:
                    switched.append((module, flag))
                    setattr(module, flag, False)
        yield len(switched)
    finally:
        failed: BaseException | None = None
        for module, flag in switched:
            try:
                setattr(module, flag, True)
            except Exception as exc:  # noqa: BLE001 - the others are restored first
                failed = failed or exc
        if failed is not None:
            raise failed


def cpu_attention_formulas() -> dict[Any, Any]:
    """FlopCounterMode's formulas for the CPU's fused attention: torch registers them for the
    CUDA kernels (flash, efficient, cuDNN) only, so on a CPU every ``scaled_dot_product_attention``
    counted 0 FLOPs. The CPU ops take the same leading arguments (q, k, v; grad_out, q, k, v)."""
    import torch
    from torch.utils import flop_counter

    aten = torch.ops.aten
    pairs = (("_scaled_dot_product_flash_attention_for_cpu", flop_counter.sdpa_flop),
             ("_scaled_dot_product_flash_attention_for_cpu_backward",
              flop_counter.sdpa_backward_flop))
    out: dict[Any, Any] = {}
    for name, formula in pairs:
        try:
            op = getattr(aten, name)
        except AttributeError:  # a torch without the op: nothing to count
            continue
        out[op] = _raw(formula)
    return out


def _raw(formula: Any) -> Any:
    """``formula`` (registered: it takes the op's raw arguments and ``out_val``) marked raw, so
    that ``custom_mapping`` does not wrap it a second time."""

    def count(*args: Any, **kwargs: Any) -> int:
        return int(formula(*args, **kwargs))

    count._get_raw = True  # type: ignore[attr-defined]
    return count


def _call(model: Any, example: Any) -> Any:
    if isinstance(example, Mapping):
        return model(**example)
    if isinstance(example, tuple):
        return model(*example)
    return model(example)


def count_step_flops(model: Any, example: Any, items_per_example: float = 1) -> FlopCount:
    """Count forward + backward FLOPs of ``model`` on the first :data:`COUNTED_EXAMPLES`
    examples of ``example``, whose examples hold ``items_per_example`` rate items each (see the
    module docstring)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    items_per_example = checked_items_per_example(items_per_example)

    if callable(example) and not isinstance(example, torch.Tensor) and not isinstance(
        example, torch.nn.Module
    ):
        example = example()
    if example is None:
        return FlopCount(None, None, "no example batch was handed to bench.watch")
    batch = count_items(example)
    examples = min(batch, COUNTED_EXAMPLES)
    items = examples * items_per_example
    example = first_examples(example, batch, examples)
    device = model_device(model)
    counter = FlopCounterMode(display=False, custom_mapping=cpu_attention_formulas())
    try:
        if device is not None:
            example = to_device(example, device)
        with no_checkpointing(model), counter:
            outputs = [t for t in _tensors(_call(model, example)) if t.requires_grad]
            if not outputs:
                return FlopCount(None, items, "the model's output has no gradient to count",
                                 examples, batch)
            sum(t.float().sum() for t in outputs).backward()
    except Exception as exc:  # noqa: BLE001 - an uncountable model says why, never fails a run
        return FlopCount(None, items, one_line(exc)[:200], examples, batch)
    finally:
        zero = getattr(model, "zero_grad", None)
        if zero is not None:
            zero(set_to_none=True)
    total = int(counter.get_total_flops())
    if total <= 0:
        return FlopCount(None, items, "FlopCounterMode counted no FLOPs", examples, batch)
    return FlopCount(total, items, "", examples, batch)
