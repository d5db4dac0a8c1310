"""The workload flags the milabench suite needs to run milabench's configuration: plain SGD
(``--momentum 0 --no-fused``), soft labels on the fixed batch (``--soft-labels``) and the
identity-chain matmul (``--identity-chain``). Each does what its help says."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.stream import NullStream  # noqa: E402
from pytest_dlbench.workloads import vision  # noqa: E402
from pytest_dlbench.workloads.precision import resolve_precision, sgd  # noqa: E402

SKIP, STOP = 1, 3


def of(stream: NullStream, event: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if r["event"] == event]


def run(definition: str, args: str, data_dir: Path) -> NullStream:
    module, function = definition.split(":")
    fn = getattr(importlib.import_module(module), function)
    stream = NullStream()
    with Bench(name=function, args=args.split(), device="cpu", stream=stream, skip=SKIP,
               stop=STOP, data_dir=data_dir) as bench:
        fn(bench)
    return stream


def assert_ran(stream: NullStream, units: str) -> None:
    rates = of(stream, "rate")
    assert len(rates) == SKIP + STOP
    assert {r["units"] for r in rates} == {units}
    assert all(r["value"] > 0 and math.isfinite(r["value"]) for r in rates)


def _params() -> list[Any]:
    return list(torch.nn.Linear(3, 2).parameters())


def test_no_fused_gives_torchs_default_sgd() -> None:
    device = torch.device("cpu")
    precision = resolve_precision("fp32", device)
    plain = sgd(_params(), lr=0.01, momentum=0.0, device=device, precision=precision,
                fused=False)
    assert not plain.defaults.get("fused")
    assert plain.defaults["momentum"] == 0.0
    # the same defaults as milabench's torch.optim.SGD(params, lr)
    reference = torch.optim.SGD(_params(), 0.01)
    assert plain.defaults == reference.defaults


def test_the_vision_parser_takes_plain_sgd() -> None:
    args = vision.make_parser().parse_args(["--momentum", "0", "--no-fused"])
    assert (args.momentum, args.fused) == (0.0, False)
    default = vision.make_parser().parse_args([])
    assert (default.momentum, default.fused, default.soft_labels) == (0.9, True, False)


def test_vision_builds_plain_sgd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: list[Any] = []
    real = vision.sgd

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(vision, "sgd", spy)
    run("pytest_dlbench.workloads.vision:train",
        "--model resnet18 --batch-size 2 --image-size 32 --num-classes 4 --fixed-batch "
        "--momentum 0 --no-fused", tmp_path)
    assert len(made) == 1
    assert not made[0].defaults.get("fused")
    assert made[0].defaults["momentum"] == 0.0


def test_soft_labels_are_a_float_target_per_class(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    batches: list[tuple[Any, ...]] = []
    real = vision.to_device

    def spy(batch: Any, device: Any, **kwargs: Any) -> Any:
        batches.append(real(batch, device, **kwargs))
        return batches[-1]

    monkeypatch.setattr(vision, "to_device", spy)
    stream = run("pytest_dlbench.workloads.vision:train",
                 "--model resnet18 --batch-size 2 --image-size 32 --num-classes 4 "
                 "--fixed-batch --soft-labels", tmp_path)
    assert_ran(stream, "items/s")
    (images, labels), = batches
    assert images.shape == (2, 3, 32, 32)
    assert labels.dtype == torch.float32 and labels.shape == (2, 4)
    assert bool(((labels >= 0) & (labels < 1)).all())


def test_soft_labels_need_the_fixed_batch(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--fixed-batch"):
        run("pytest_dlbench.workloads.vision:train",
            "--model resnet18 --batch-size 2 --image-size 32 --synthetic-data --soft-labels",
            tmp_path)


def test_identity_chain_counts_two_products_per_number(tmp_path: Path) -> None:
    stream = run("pytest_dlbench.workloads.matmul:main",
                 "--m 16 --n 8 --number 3 --dtype fp32 --identity-chain", tmp_path)
    assert_ran(stream, "TFLOP/s")
    for r in of(stream, "rate"):
        assert r["items"] == pytest.approx(2 * 2 * 16 * 8 * 8 * 3 / 1e12)


def test_identity_chain_multiplies_by_the_identity(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    seen: list[tuple[Any, Any]] = []
    real = torch.mm

    def spy(a: Any, b: Any, *, out: Any) -> Any:
        seen.append((a.clone(), b.clone()))
        return real(a, b, out=out)

    monkeypatch.setattr(torch, "mm", spy)
    run("pytest_dlbench.workloads.matmul:main",
        "--m 4 --n 3 --number 1 --dtype bf16 --identity-chain", tmp_path)
    assert seen
    first, identity = seen[0]
    assert torch.equal(identity, torch.eye(3, dtype=torch.bfloat16))
    assert all(torch.equal(a, first) for a, _ in seen)  # x @ I = x: the values never drift


def test_identity_chain_refuses_k(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--k"):
        run("pytest_dlbench.workloads.matmul:main", "--m 4 --n 4 --k 4 --identity-chain",
            tmp_path)


def test_fp8_skips_itself_where_the_device_has_no_fp8(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="fp8 matmul: the cpu has no fp8 arithmetic"):
        run("pytest_dlbench.workloads.matmul:main",
            "--m 16 --n 16 --number 1 --dtype fp8 --identity-chain", tmp_path)


def test_fp8_identity_chain_keeps_its_values(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    """milabench's fp8 step: x @ I in float8 through torch._scaled_mm at unit scales (torch
    emulates it on a CPU, as --allow-emulated-precision asks)."""
    seen: list[Any] = []
    real = torch._scaled_mm

    def spy(a: Any, b: Any, **kw: Any) -> Any:
        seen.append((a.dtype, b.is_contiguous(), kw["out"].dtype))
        return real(a, b, **kw)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    stream = run("pytest_dlbench.workloads.matmul:main",
                 "--m 32 --n 16 --number 2 --dtype fp8 --identity-chain "
                 "--allow-emulated-precision", tmp_path)
    assert_ran(stream, "TFLOP/s")
    # Both products in fp8, the identity's transpose column-major (not contiguous).
    assert set(seen) == {(torch.float8_e4m3fn, False, torch.float8_e4m3fn)}
    for r in of(stream, "rate"):
        assert r["items"] == pytest.approx(2 * 2 * 32 * 16 * 16 * 2 / 1e12)


def test_fp8_plain_product_writes_bf16(tmp_path: Path) -> None:
    stream = run("pytest_dlbench.workloads.matmul:main",
                 "--m 32 --n 16 --k 48 --number 1 --dtype fp8 --allow-emulated-precision",
                 tmp_path)
    assert_ran(stream, "TFLOP/s")
    for r in of(stream, "rate"):
        assert r["items"] == pytest.approx(2 * 32 * 16 * 48 / 1e12)
