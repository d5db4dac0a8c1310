"""The workloads' SGD under the fp16 gradient scaler (a GPU defect seen on an H200, 2026-11-27:
resnet50 tf32-fp16 NaN at step 3). Fused SGD's first step makes its momentum buffers with
``empty_like`` and, when the scaler reports an overflow, skips without writing them: the next
step adds uninitialised memory. The reference is torch's stock SGD on the same steps."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_dlbench.workloads import precision as precision_module  # noqa: E402
from pytest_dlbench.workloads.precision import (  # noqa: E402
    fused_sgd_skips_cleanly,
    resolve_precision,
    sgd,
)

CPU = torch.device("cpu")
FP16 = resolve_precision("fp16", CPU, cpu_fp16=True)


def _train(make_optimizer, steps: list[float]) -> list[torch.Tensor]:
    """Steps on a tiny linear model through a GradScaler; a step of ``inf`` overflows."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = make_optimizer(model.parameters())
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    inputs = torch.randn(8, 4)
    for factor in steps:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(model(inputs).sum() * factor).backward()
        scaler.step(optimizer)
        scaler.update()
    return [p.detach().clone() for p in model.parameters()]


def _stock(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)


def _project(params):
    return sgd(params, lr=0.1, momentum=0.9, device=CPU, precision=FP16)


@pytest.mark.parametrize("steps", [[float("inf"), 1.0, 1.0], [1.0, float("inf"), 1.0],
                                   [float("inf"), float("inf"), 1.0, 1.0]])
def test_an_overflowing_step_leaves_the_same_weights_as_stock_sgd(
    steps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Uninitialised memory, made visible: what empty_like hands out is NaN here (on a GPU it
    # is whatever the allocator's block held).
    full_like = torch.full_like
    monkeypatch.setattr(torch, "empty_like",
                        lambda t, **kw: full_like(t, float("nan"), **kw))
    expected = _train(_stock, steps)
    for got, want in zip(_train(_project, steps), expected, strict=True):
        assert torch.allclose(got, want, rtol=1e-6, atol=1e-7), (got, want)


def test_the_workloads_sgd_is_fused_and_primed_where_torch_has_fused_kernels() -> None:
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = sgd([weight], lr=0.1, momentum=0.9, device=CPU, precision=FP16)
    assert optimizer.defaults["fused"] is True  # no host read in a step (test_sync_free.py)
    assert torch.equal(optimizer.state[weight]["momentum_buffer"], torch.zeros(3))


def test_fused_sgd_on_this_cpu_skips_an_overflowing_step_cleanly() -> None:
    assert fused_sgd_skips_cleanly(CPU) is True


def test_a_fused_kernel_that_moves_on_a_skipped_step_is_not_used(monkeypatch) -> None:
    monkeypatch.setattr(precision_module, "fused_sgd_skips_cleanly", lambda device: False)
    weight = torch.nn.Parameter(torch.ones(3))
    fp16 = sgd([weight], lr=0.1, momentum=0.9, device=CPU, precision=FP16)
    assert not fp16.defaults.get("fused")  # stock SGD: the scaler's own skip
    fp32 = sgd([weight], lr=0.1, momentum=0.9, device=CPU,
               precision=resolve_precision("fp32", CPU))
    assert fp32.defaults["fused"] is True  # no scaler, no skipped step
