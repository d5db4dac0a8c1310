"""A ``bench`` fixture test that calls ``bench.watch`` has TFLOP/s, and MFU where its device's
peak is known, as a suite benchmark has (docs/reports.md): its teardown counts one step's FLOPs
after the timed steps and writes the ``flops`` record a suite's child writes (run/harness.py)."""

from __future__ import annotations

import json
import textwrap

import pytest

# Each runs pytest in a subprocess: a test that trains imports parts of torch that cannot be
# imported twice by pytester's in-process runs.
pytestmark = pytest.mark.slow

WATCHED = textwrap.dedent(
    """
    import pytest
    import torch


    @pytest.mark.bench_steps(warmup=1, steps=8)
    def test_mlp(bench):
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
        bench.watch(model, x)
        for _ in bench.iterate(range(100), batch_size=32):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    """
)
# The device's name in the meta record, as an H100's: a datasheet peak (results/figures/peaks.py).
H100 = textwrap.dedent(
    """
    import pytest
    from pytest_dlbench.measure import machine


    @pytest.fixture(autouse=True)
    def _an_h100(monkeypatch):
        real = machine.machine_meta
        monkeypatch.setattr(machine, "machine_meta", lambda device: {
            **real(device), "device_name": "NVIDIA H100 80GB HBM3"})
    """
)
#: FLOPs of one example through the MLP: forward and the weights' gradients (2 x 2 x its MACs),
#: and the input gradient of the second layer only (the batch itself needs none).
PER_ITEM = 2 * 2 * (64 * 256 + 256 * 10) + 2 * 256 * 10


def _flops_record(pytester: pytest.Pytester) -> dict:
    (stream,) = (pytester.path / "out" / "runs").glob("*/test_mlp.D0.data")
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    (flops,) = [r for r in records if r["event"] == "flops"]
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"
    return flops


def test_a_watched_model_has_tflops(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mlp=WATCHED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["bench *TFLOP/s*MFU*", "test_mlp *0.0*"])
    flops = _flops_record(pytester)
    assert flops["flops"] / flops["items"] == pytest.approx(PER_ITEM, rel=0.05)


def test_mfu_where_the_peak_is_known(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mlp=WATCHED)
    pytester.makeconftest(H100)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out",
                                           "--bench-save=out/s.json")
    assert result.ret == 0, result.stdout.str()
    assert "MFU not shown" not in result.stdout.str()
    result.stdout.fnmatch_lines(["bench *TFLOP/s*MFU*", "test_mlp *0.0* *0.0%*"])
    saved = json.loads((pytester.path / "out" / "s.json").read_text())
    bench = saved["benchmarks"]["test_mlp"]
    assert bench["tflops"] > 0
    assert bench["mfu"] == pytest.approx(bench["tflops"] / 66.9)  # H100 SXM's fp32 peak
    assert "H100" in bench["peak_source"]
    assert _flops_record(pytester)["flops"] > 0
