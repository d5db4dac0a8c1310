"""The training workloads' timed loop: batch -> device -> forward (loss) -> backward -> update,
one step each, in the regions of ``bench.timer``, compiled first when ``--compile`` asks.

torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_dlbench.workloads.batches import to_device
from pytest_dlbench.workloads.compilation import (
    CompileOptions,
    compile_function,
    compile_warmup,
    counters_snapshot,
    note_late_compiles,
)
from pytest_dlbench.workloads.precision import Precision

if TYPE_CHECKING:
    import torch

__all__ = ["train_steps"]


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
    compile: CompileOptions | None = None,
) -> int:
    """The timed loop: batch -> device -> forward (loss) -> backward -> update, one step each.

    `compute_loss(batch)` gets the batch on the device and runs under the precision's autocast.
    `after_backward()` runs inside the backward region once gradients are ready (DDP closes its
    `comm` region there).
    With `compile` enabled, `compute_loss` is compiled (its backward through AOTAutograd) and
    the first steps run before the timed loop, outside `bench.iterate`, until nothing new
    compiles (:func:`compile_warmup`): compilation is never in an observation.
    Returns the number of timed steps run. The loss is handed over as a tensor (no .item(): that
    would synchronise the device every step).
    """
    scaler = precision.grad_scaler()
    untimed = contextlib.nullcontext()

    def step(batch: Any, region: Callable[[str], contextlib.AbstractContextManager[Any]]) -> Any:
        with region("io"):
            on_device = to_device(batch, device, channels_last=channels_last)
        with region("forward"), precision.autocast():
            loss = compute_loss(on_device)
        with region("backward"):
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if after_backward is not None:
                after_backward()
        with region("optimizer"):
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        return loss

    since: dict[str, dict[str, int]] | None = None
    if compile is not None and compile.enabled:
        compute_loss = compile_function(compute_loss, compile, device)
        batches = iter(batches)
        compile_warmup(bench, batches, lambda batch: step(batch, lambda _: untimed), compile)
        # Region intervals the compile steps recorded anyway (DDP's comm hook opens its own)
        # are read and dropped here: no window of the timed loop holds them.
        bench.timer.read()
        since = counters_snapshot()
    steps = 0
    region = bench.timer.region
    for batch in bench.iterate(batches, batch_size=items_per_step):
        loss = step(batch, region)
        bench.log_loss(loss.detach())
        steps += 1
    if since is not None:
        note_late_compiles(bench, since)
    return steps
