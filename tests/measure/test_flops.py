"""FLOPs per step counted outside the timed window, achieved TFLOP/s and MFU against a peak."""

from __future__ import annotations

from pathlib import Path

import pytest
from _runs import write_run

from pytest_dlbench.measure.flops import count_step_flops, model_device, to_device
from pytest_dlbench.measure.stream import Event
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results.figures import dtype_of, summarize_dir, table_peak


@pytest.mark.slow
def test_resnet18_flops_agree_with_torchvisions_documented_count():
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    count = count_step_flops(torchvision.models.resnet18(), torch.randn(2, 3, 224, 224))
    # torchvision documents 1.814 GFLOPS for resnet18 at 224: multiply-adds of the forward pass.
    # Forward + backward = 3 forward passes, 2 FLOPs per multiply-add.
    expected = 1.814e9 * 2 * 3
    assert count.items == 2
    assert count.per_item == pytest.approx(expected, rel=0.10)


def test_a_model_that_cannot_be_counted_says_why():
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(4, 2)
    assert count_step_flops(model, None).reason == "no example batch was handed to bench.watch"
    broken = count_step_flops(model, torch.randn(3, 5))  # wrong shape
    assert broken.flops is None and broken.reason.startswith("RuntimeError")
    assert broken.items == 2 and broken.batch_examples == 3  # counted on two of the three
    assert all(p.grad is None for p in model.parameters())  # the count leaves no gradients


def _linear_on(device: str):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2).to(device)


def test_the_example_moves_to_the_models_device():
    # A model on ``meta`` with a CPU example fails as a model on cuda:k with a CPU example does
    # ("... is not on the expected device"): the workloads hand over CPU examples.
    torch = pytest.importorskip("torch")
    model = _linear_on("meta")
    count = count_step_flops(model, torch.randn(3, 4))
    assert count.reason == ""
    # forward 2·2·4·2 on two of the three examples, backward the weight's gradient as much
    # (the input needs none)
    assert count.flops == 64 and count.items == 2


def test_nested_examples_move_to_the_models_device():
    torch = pytest.importorskip("torch")

    class TwoInputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x, rest):  # rest: {"y": tensor} or [tensor]
            y = rest["y"] if isinstance(rest, dict) else rest[0]
            return self.lin(x) + self.lin(y)

    model = TwoInputs().to("meta")
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    by_name = count_step_flops(model, {"x": x, "rest": {"y": y}})
    by_position = count_step_flops(model, (x, [y]))
    assert by_name.reason == "" and by_position.reason == ""
    assert by_name.flops == by_position.flops == 2 * 64 and by_name.items == 2


def test_the_models_device_is_its_first_parameter_or_buffer():
    torch = pytest.importorskip("torch")
    assert model_device(_linear_on("meta")) == torch.device("meta")
    norm = torch.nn.BatchNorm1d(4, affine=False).to("meta")  # buffers, no parameters
    assert model_device(norm) == torch.device("meta")
    assert model_device(torch.nn.ReLU()) is None and model_device(object()) is None
    moved = to_device({"a": (torch.ones(1), [torch.ones(1)]), "n": 3}, "meta")
    assert moved["a"][0].is_meta and moved["a"][1][0].is_meta and moved["n"] == 3


def test_peaks_by_device_name_and_precision():
    assert table_peak("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert table_peak("NVIDIA H100 PCIe", "bf16") == 756.0
    assert table_peak("NVIDIA A100-SXM4-80GB", "tf32") == 156.0
    assert table_peak("AMD Instinct MI300X", "fp16") == 1307.4
    assert table_peak("Intel Xeon", "fp32") is None and table_peak(None, "fp32") is None
    assert dtype_of({"argv": {"--precision": "tf32-fp16"}}) == "fp16"
    assert dtype_of({"argv": {"--dtype": "bf16"}}) == "bf16"
    assert dtype_of({"argv": ["--whatever"]}) == "fp32"


def flops_run(tmp_path: Path, name: str, *, device_name: str, rate: float,
              per_item: float | None, argv: dict | None = None, units: str = "items/s") -> None:
    path = write_run(tmp_path, name, [(rate, 1.0)] * 10, units=units)
    *records, end = path.read_text().splitlines(keepends=True)
    extra = [
        {"event": Event.META.value, "device_name": device_name},
        {"event": Event.FLOPS.value, "flops": per_item * 4 if per_item else None, "items": 4,
         "reason": "" if per_item else "no example batch was handed to bench.watch"},
    ]
    # Before the end record, as the harness writes them.
    path.write_text("".join(records) + "".join(_json(r) + "\n" for r in extra) + end)
    if argv is not None:
        text = path.read_text().replace('"spec": {', f'"spec": {{"argv": {_json(argv)}, ', 1)
        path.write_text(text)


def _json(value: object) -> str:
    import json

    return json.dumps(value)


def test_mfu_against_a_datasheet_peak(tmp_path: Path):
    flops_run(tmp_path, "resnet", device_name="NVIDIA H100 80GB HBM3", rate=2000.0,
              per_item=30e9, argv={"--precision": "bf16"})
    bench = summarize_dir(tmp_path).get("resnet")
    assert bench.tflops == pytest.approx(60.0)
    assert bench.mfu == pytest.approx(60.0 / 989.4)
    assert bench.peak_source == "NVIDIA H100 80GB HBM3 datasheet, bf16"


def test_on_a_cpu_the_peak_is_this_runs_matmul(tmp_path: Path):
    flops_run(tmp_path, "mlp", device_name="x86_64", rate=100.0, per_item=1e9)
    flops_run(tmp_path, "matmul", device_name="x86_64", rate=0.4, per_item=None,
              units="TFLOP/s")
    flops_run(tmp_path, "loader", device_name="x86_64", rate=50.0, per_item=None)
    summary = summarize_dir(tmp_path)
    mlp = summary.get("mlp")
    assert mlp.tflops == pytest.approx(0.1) and mlp.mfu == pytest.approx(0.25)
    assert mlp.peak_source == "matmul in this run (median of its fastest 3 of 10 steps)"
    assert summary.get("matmul").mfu is None  # its own reference
    text = render_summary(summary, width=200)
    details = text.split("\n\n")[1].splitlines()[0]  # the second table's header
    assert "TFLOP/s" in details and "MFU" in details
    assert "FLOPs not counted: loader (no example batch was handed to bench.watch)" in text


def test_a_measured_peak_that_the_model_outruns_gives_no_mfu(tmp_path: Path):
    flops_run(tmp_path, "lm", device_name="x86_64", rate=500.0, per_item=1e9)  # 0.5 TFLOP/s
    flops_run(tmp_path, "matmul", device_name="x86_64", rate=0.4, per_item=None,
              units="TFLOP/s")
    lm = summarize_dir(tmp_path).get("lm")
    assert lm.tflops == pytest.approx(0.5) and lm.mfu is None and lm.mfu_error is None
    assert lm.peak_source == "matmul in this run is slower than this model: no MFU"


class _Flagged:
    """A module with gradient checkpointing on."""

    def __init__(self) -> None:
        self.grad_checkpointing = True


class _Unreadable:
    """A module whose checkpointing flag raises when it is read."""

    @property
    def gradient_checkpointing(self) -> bool:
        raise RuntimeError("flag unreadable")


class _Stuck(_Flagged):
    """A module whose flag can be switched off but not back on."""

    def __setattr__(self, name: str, value: object) -> None:
        if value is True and name in self.__dict__:
            raise RuntimeError("cannot switch back")
        super().__setattr__(name, value)


class _Model:
    def __init__(self, *modules: object) -> None:
        self._modules = modules

    def modules(self) -> tuple[object, ...]:
        return self._modules


def test_no_checkpointing_restores_every_flag_whatever_fails() -> None:
    """The flags were switched off before the try/finally: a module that failed partway left
    the ones before it off for the rest of the run."""
    from pytest_dlbench.measure.flops import no_checkpointing

    a, b = _Flagged(), _Flagged()
    with pytest.raises(RuntimeError, match="flag unreadable"), \
            no_checkpointing(_Model(a, b, _Unreadable())):
        pass  # pragma: no cover - never entered
    assert a.grad_checkpointing is True and b.grad_checkpointing is True
    a, b = _Flagged(), _Flagged()
    with pytest.raises(ValueError, match="the count failed"), \
            no_checkpointing(_Model(a, b)) as switched:
        assert switched == 2 and a.grad_checkpointing is False
        raise ValueError("the count failed")
    assert a.grad_checkpointing is True and b.grad_checkpointing is True
    a, stuck, b = _Flagged(), _Stuck(), _Flagged()
    with pytest.raises(RuntimeError, match="cannot switch back"), \
            no_checkpointing(_Model(a, stuck, b)):
        pass
    assert a.grad_checkpointing is True and b.grad_checkpointing is True
