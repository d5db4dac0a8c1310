"""Checking a training step for host syncs on a CPU, used by docs/writing-benchmarks.md (and run by
tests/workloads/test_sync_free.py)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Operators that read a tensor's value on the host: on a GPU, the host waits for the device.
HOST_READS = {"aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal", "aten::nonzero",
              "aten::masked_select"}


class HostReads(TorchDispatchMode):
    """Records the host reads of the operators run while it is active."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in HOST_READS:
            self.reads.append(func._schema.name)
        return func(*args, **(kwargs or {}))


def host_reads(step, *args):
    """The host reads of one call of ``step(*args)``."""
    with HostReads() as mode:
        step(*args)
    return mode.reads


def fp16_step(fused):
    """One fp16 training step with a gradient scaler, on the CPU as a GPU would run it."""
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(model.parameters(), fused=fused)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def step():
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # unfused: reads found_inf with .item() every step
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    step()  # the first step creates the optimizer's state
    return step


if __name__ == "__main__":
    print("unfused:", host_reads(fp16_step(fused=False)))  # ['aten::_local_scalar_dense', ...]
    print("fused:", host_reads(fp16_step(fused=True)))  # []
