"""The FLOPs count (issue 37, items 1, 2 and 7): FLOPs per item in the rate's unit (an LM's
tokens), model FLOPs with gradient checkpointing on, and a count on two examples that gives the
per-item figure of the full batch (a bare FlopCounterMode count is the reference)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.flops import (  # noqa: E402
    COUNTED_EXAMPLES,
    count_step_flops,
    cpu_attention_formulas,
)
from pytest_dlbench.measure.stream import Event, NullStream  # noqa: E402
from pytest_dlbench.run.harness import RunContext  # noqa: E402


def bare_count(model: Any, example: Any) -> int:
    """FLOPs of one forward and backward at the whole batch, counted without the slicing under
    test: the reference the two-example count must agree with, per item (the same formulas:
    torch's, and the CPU attention's)."""
    with FlopCounterMode(display=False, custom_mapping=cpu_attention_formulas()) as counter:
        out = model(*example) if isinstance(example, tuple) else model(example)
        tensors = list(out.values()) if isinstance(out, dict) else [out]
        sum(t.float().sum() for t in tensors if t.requires_grad).backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def lm(seq: int = 16) -> Any:
    from pytest_dlbench.workloads.lm import build_model

    torch.manual_seed(0)
    return build_model(vocab_size=97, seq_len=seq, d_model=32, n_layers=2, n_heads=4)


def tiny_clip(checkpointing: bool = False) -> Any:
    open_clip = pytest.importorskip("open_clip")
    from pytest_dlbench.workloads.clip import TINY_NAME, _register_tiny_config

    _register_tiny_config(open_clip)
    torch.manual_seed(0)
    model = open_clip.create_model(TINY_NAME, pretrained=None, output_dict=True)
    if checkpointing:
        model.set_grad_checkpointing()
    return model


def lm_args(*, vocab: int, seq: int, d: int, heads: int, batch: int) -> list[str]:
    """The lm workload's arguments: one layer, two batches of sequences."""
    return ["--vocab-size", str(vocab), "--seq-len", str(seq), "--d-model", str(d),
            "--n-layers", "1", "--n-heads", str(heads), "--batch-size", str(batch),
            "--num-sequences", str(2 * batch)]


def clip_example(batch: int) -> tuple[Any, Any]:
    return torch.randn(batch, 3, 64, 64), torch.randint(0, 49408, (batch, 32))


def models() -> dict[str, tuple[Any, Any]]:
    """The built-in workloads' models at tiny sizes, each with an example batch of 8."""
    torchvision = pytest.importorskip("torchvision")
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    toy = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    return {
        "toy": (toy, torch.randn(8, 32)),
        "resnet18": (torchvision.models.resnet18(num_classes=10), torch.randn(8, 3, 32, 32)),
        "vit": (timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32,
                                  num_classes=10), torch.randn(8, 3, 32, 32)),
        "lm": (lm(), torch.randint(0, 97, (8, 16))),
        "clip": (tiny_clip(), clip_example(8)),
    }


@pytest.mark.slow
def test_the_per_item_count_on_two_examples_is_the_full_batchs():
    for name, (model, example) in models().items():
        count = count_step_flops(model, example)
        assert count.examples == COUNTED_EXAMPLES and count.batch_examples == 8, name
        assert count.per_item == pytest.approx(bare_count(model, example) / 8, rel=1e-6), name


def test_the_count_runs_the_model_on_two_examples_only():
    model = lm()
    seen: list[int] = []
    model.register_forward_pre_hook(lambda _, args: seen.append(args[0].shape[0]))
    count = count_step_flops(model, lambda: torch.randint(0, 97, (64, 16)))
    assert seen == [2]  # one forward, on two sequences, never the 64 of the batch
    assert count.record()["counted_examples"] == 2 and count.record()["batch_examples"] == 64


def test_a_tensor_that_is_not_batched_is_handed_whole():
    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: Any, mask: Any) -> Any:
            assert mask.shape == (5, 5)  # not sliced: its leading dimension is no batch
            return self.lin(x)

    count = count_step_flops(Masked(), (torch.randn(6, 4), torch.ones(5, 5)))
    assert count.examples == 2 and count.flops == 2 * (2 * 2 * 4 * 4)  # forward + weight grad


def test_an_lm_counts_its_flops_per_token(tmp_path: Path):
    # The rate is in tokens/s: the flops record's items are tokens, so FLOPs per item are the
    # bare count of a batch over its tokens, not over its sequences (2.38 "TFLOP/s" at d023ee7).
    from pytest_dlbench.workloads import lm as workload

    stream = NullStream()
    args = lm_args(vocab=97, seq=16, d=32, heads=4, batch=4)
    bench = Bench(name="lm", args=args, device="cpu", stream=stream, skip=0, stop=2,
                  data_dir=tmp_path)
    context = RunContext(spec=None, device_index=0, repeat=None,  # type: ignore[arg-type]
                         path=tmp_path / "lm.D0.data", stream=stream, args=args,
                         data_dir=tmp_path, run_name="run", bench=bench)
    workload.train(bench)
    context.finish_bench()
    record = next(r for r in stream.records if r["event"] == Event.FLOPS.value)
    tokens_per_step = {r["items"] for r in stream.records if r["event"] == Event.RATE.value}
    assert tokens_per_step == {4 * 16}
    assert record["items"] == 2 * 16 and record["counted_examples"] == 2
    model, example = bench.watched
    per_token = bare_count(model, example()) / (4 * 16)
    assert record["flops"] / record["items"] == pytest.approx(per_token, rel=1e-6)


def test_the_lms_watch_says_a_sequence_holds_seq_len_tokens(tmp_path: Path):
    from pytest_dlbench.workloads import lm as workload

    bench = Bench(name="lm", args=lm_args(vocab=50, seq=8, d=16, heads=2, batch=2), device="cpu",
                  stream=NullStream(), skip=0, stop=1, data_dir=tmp_path)
    workload.train(bench)
    assert bench.items_per_example == 8


def test_a_non_positive_items_per_example_is_refused(tmp_path: Path):
    bench = Bench(name="x", args=[], device="cpu", stream=NullStream(), skip=0, stop=1,
                  data_dir=tmp_path)
    with pytest.raises(ValueError, match="items_per_example"):
        bench.watch(torch.nn.Linear(2, 2), torch.randn(2, 2), items_per_example=0)


def test_checkpointing_does_not_change_the_model_flops():
    # Recomputing the forward in the backward is hardware work, not model work (MFU's FLOPs).
    plain = count_step_flops(tiny_clip(), clip_example(4))
    model = tiny_clip(checkpointing=True)
    hardware = bare_count(model, clip_example(2)) / 2
    checkpointed = count_step_flops(model, clip_example(4))
    assert plain.per_item is not None and hardware > 1.1 * plain.per_item  # it does recompute
    assert checkpointed.per_item == pytest.approx(plain.per_item, rel=1e-9)
    # ... and the training goes on checkpointed.
    flags = [m.grad_checkpointing for m in model.modules() if hasattr(m, "grad_checkpointing")]
    assert flags and all(flags)


def test_attention_on_a_cpu_is_counted():
    # torch registers its attention formulas for the CUDA kernels only: on a CPU a transformer's
    # attention counted 0 FLOPs. Reference: the two products of the forward (Q K^T, P V), 2 b h
    # s^2 d FLOPs each, by hand; the backward is torch's own formula for the GPU kernels.
    from torch.utils.flop_counter import sdpa_backward_flop_count

    b, h, s, d = 2, 3, 17, 8
    width = h * d
    q = torch.randn(1, h, s, d)
    attention = torch.nn.MultiheadAttention(width, h, batch_first=True)
    x = torch.randn(b, s, width, requires_grad=True)  # every input gradient is computed
    count = count_step_flops(lambda t: attention(t, t, t, need_weights=False)[0], x)
    projections = 3 * 2 * s * 4 * width ** 2  # q, k, v and out: forward, two gradients
    forward = 2 * (2 * h * s * s * d)
    backward = sdpa_backward_flop_count(q.shape, q.shape, q.shape, q.shape)
    assert count.per_item == pytest.approx(projections + forward + backward, rel=1e-6)
