"""The shipped workloads, run at tiny sizes on the CPU through the real Bench."""

from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.stream import NullStream  # noqa: E402
from pytest_dlbench.workloads import WORKLOADS  # noqa: E402
from pytest_dlbench.workloads.batches import tensor_batches  # noqa: E402
from pytest_dlbench.workloads.models import build_sized, logits_of  # noqa: E402
from pytest_dlbench.workloads.precision import (  # noqa: E402
    Precision,
    backend_flags,
    resolve_precision,
    tf32_switches,
)
from pytest_dlbench.workloads.train import train_steps  # noqa: E402

SKIP, STOP = 2, 6


def of(stream: NullStream, event: str) -> list[dict[str, Any]]:
    """The records of one kind that the Bench wrote."""
    return [r for r in stream.records if r["event"] == event]


def run(definition: str, args: str, data_dir: Path) -> NullStream:
    module, function = definition.split(":")
    fn = getattr(importlib.import_module(module), function)
    stream = NullStream()
    with Bench(name=function, args=args.split(), device="cpu", stream=stream, skip=SKIP,
               stop=STOP, data_dir=data_dir) as bench:
        fn(bench)
    return stream


def assert_ran(stream: NullStream, units: str, *, losses: bool = True) -> None:
    rates = of(stream, "rate")
    assert len(rates) == SKIP + STOP
    assert [r["warmup"] for r in rates] == [True] * SKIP + [False] * STOP
    assert {r["units"] for r in rates} == {units}
    assert all(r["value"] > 0 and math.isfinite(r["value"]) for r in rates)
    if losses:
        values = [r["value"] for r in of(stream, "loss")]
        assert len(values) == SKIP + STOP
        assert all(math.isfinite(v) for v in values)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Shared, so the JPEG folder is generated once for the module, as on a real node.
    return tmp_path_factory.mktemp("data")


def test_importing_workloads_does_not_import_torch() -> None:
    modules = ", ".join(d.split(":")[0] for d in WORKLOADS.values())
    code = f"import sys, {modules}; assert 'torch' not in sys.modules, 'torch imported'"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_registry_entries_resolve_and_parse_defaults(name: str) -> None:
    module_name, function = WORKLOADS[name].split(":")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, function))
    parser = module.make_parser()
    parser.parse_args([])  # every argument has a default
    assert parser.format_help()



@pytest.mark.parametrize(("old", "new"), [
    ("pytest_dlbench.workloads.flops:main", "pytest_dlbench.workloads.matmul:main"),
    ("pytest_dlbench.workloads.loader:main", "pytest_dlbench.workloads.dataloader:main"),
])
def test_the_old_workload_paths_run_the_renamed_workloads(tmp_path: Path, old: str,
                                                          new: str) -> None:
    """Users' suites name the workloads by their old modules: a suite naming one resolves to
    the new name (suite/definitions.RENAMED_WORKLOADS, the only place the old names live), so
    it runs the same benchmark; no module is left under the old name."""
    from pytest_dlbench.run.definition import load_definition
    from pytest_dlbench.suite import resolve_suite

    suite = tmp_path / "suite.yaml"
    suite.write_text(f"old:\n  definition: {old}\nbare:\n  definition: {old.split(':')[0]}\n")
    specs = {s.name: s for s in resolve_suite(suite).specs}
    assert specs["old"].definition == new
    assert specs["bare"].definition == new.split(":")[0]  # the function stays unnamed (main)
    assert callable(load_definition(specs["old"].definition))
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old.split(":")[0])

# -- each workload, tiny -------------------------------------------------------------------------
def test_toy(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.toy:main", "--batch-size 16", data_dir)
    assert_ran(stream, "items/s")
    assert {r["items"] for r in of(stream, "rate")} == {16}
    regions = {r["key"] for r in of(stream, "region")}
    assert {"forward", "backward", "optimizer"} <= regions


@pytest.mark.slow
def test_vision_synthetic(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.vision:train",
                 "--model resnet18 --batch-size 4 --image-size 32 --num-classes 10 "
                 "--synthetic-data --num-images 16", data_dir)
    assert_ran(stream, "items/s")
    assert {r["items"] for r in of(stream, "rate")} == {4}


@pytest.mark.slow
def test_vision_fixed_batch_bf16_channels_last(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.vision:train",
                 "--model resnet18 --batch-size 4 --image-size 32 --num-classes 10 "
                 "--fixed-batch --precision bf16 --channels-last --lr 0.01 "
                 "--allow-emulated-precision", data_dir)  # runs on CPUs without bf16 too
    assert_ran(stream, "items/s")
    losses = [r["value"] for r in of(stream, "loss")]
    assert losses[-1] < losses[0]  # one batch, memorised: training does train


@pytest.mark.slow
def test_vision_jpeg_folder_in_process(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.vision:train",
                 "--model resnet18 --batch-size 4 --image-size 32 --num-classes 10 "
                 "--num-workers 0 --num-images 12", data_dir)
    assert_ran(stream, "items/s")
    assert list(data_dir.glob("jpeg-*"))  # generated under bench.data_dir


@pytest.mark.slow
def test_vision_is_deterministic(data_dir: Path) -> None:
    args = "--model resnet18 --batch-size 2 --image-size 32 --num-classes 10 --synthetic-data " \
           "--num-images 8 --lr 0.01"
    a = run("pytest_dlbench.workloads.vision:train", args, data_dir)
    b = run("pytest_dlbench.workloads.vision:train", args, data_dir)
    assert [r["value"] for r in of(a, "loss")] == [r["value"] for r in of(b, "loss")]


def test_vision_rejects_unknown_arguments(data_dir: Path) -> None:
    with pytest.raises(SystemExit):
        run("pytest_dlbench.workloads.vision:train", "--modle resnet18", data_dir)


@pytest.mark.slow
def test_vision_jpeg_folder_with_workers(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.vision:train",
                 "--model resnet18 --batch-size 4 --image-size 32 --num-classes 10 "
                 "--num-workers 1 --num-images 12", data_dir)
    assert_ran(stream, "items/s")


@pytest.mark.slow
def test_timm_vit_at_another_image_size(data_dir: Path) -> None:
    pytest.importorskip("timm")
    # A ViT's position embeddings fix its input size: built for --image-size, not 224.
    stream = run("pytest_dlbench.workloads.timm_train:train",
                 "--model vit_tiny_patch16_224 --batch-size 4 --image-size 32 --num-classes 10 "
                 "--fixed-batch", data_dir)
    assert_ran(stream, "items/s")


def test_timm_synthetic(data_dir: Path) -> None:
    pytest.importorskip("timm")
    stream = run("pytest_dlbench.workloads.timm_train:train",
                 "--model test_resnet --batch-size 4 --image-size 32 --num-classes 10 "
                 "--synthetic-data --num-images 8", data_dir)
    assert_ran(stream, "items/s")


def test_matmul(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.matmul:main",
                 "--m 64 --n 32 --k 16 --number 3 --dtype fp32", data_dir)
    assert_ran(stream, "TFLOP/s", losses=False)
    # each step's "items" is its work in TFLOP, so value = TFLOP / seconds
    for r in of(stream, "rate"):
        assert r["items"] == pytest.approx(2 * 64 * 32 * 16 * 3 / 1e12)
        assert r["value"] == pytest.approx(r["items"] / r["seconds"])


@pytest.mark.parametrize("dtype", ["tf32", "bf16"])
def test_matmul_dtypes(data_dir: Path, dtype: str) -> None:
    stream = run("pytest_dlbench.workloads.matmul:main", f"--m 32 --n 32 --dtype {dtype}",
                 data_dir)
    assert_ran(stream, "TFLOP/s", losses=False)


def test_dataloader(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.dataloader:main",
                 "--batch-size 4 --image-size 32 --num-workers 0 --num-images 12", data_dir)
    assert_ran(stream, "items/s", losses=False)
    assert {r["items"] for r in of(stream, "rate")} == {4}


def test_dataloader_rejects_a_folder_smaller_than_a_batch(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="fewer than one batch"):
        run("pytest_dlbench.workloads.dataloader:main",
            "--batch-size 16 --image-size 32 --num-workers 0 --num-images 12", data_dir)


def test_lm(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.lm:train",
                 "--vocab-size 97 --seq-len 16 --d-model 32 --n-layers 2 --n-heads 4 "
                 "--batch-size 4 --num-sequences 16", data_dir)
    assert_ran(stream, "tokens/s")
    assert {r["items"] for r in of(stream, "rate")} == {4 * 16}
    first = of(stream, "loss")[0]["value"]
    assert abs(first - math.log(97)) < 1.0  # sane init: near-uniform predictions


def test_lm_bf16(data_dir: Path) -> None:
    stream = run("pytest_dlbench.workloads.lm:train",
                 "--vocab-size 97 --seq-len 16 --d-model 32 --n-layers 1 --n-heads 2 "
                 "--batch-size 2 --precision bf16 --num-sequences 8 "
                 "--allow-emulated-precision", data_dir)  # runs on CPUs without bf16 too
    assert_ran(stream, "tokens/s")


def test_lm_is_causal() -> None:
    from pytest_dlbench.workloads.lm import build_model

    torch.manual_seed(0)
    model = build_model(50, 8, 16, 2, 2).eval()
    idx = torch.randint(0, 50, (1, 8))
    changed = idx.clone()
    changed[0, 5] = (idx[0, 5] + 1) % 50
    with torch.no_grad():
        a, b = model(idx), model(changed)
    assert torch.allclose(a[0, :5], b[0, :5], atol=1e-5)  # the past ignores the future
    assert not torch.allclose(a[0, 5:], b[0, 5:])


def test_lm_rejects_heads_that_do_not_divide(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="divisible"):
        run("pytest_dlbench.workloads.lm:train", "--d-model 30 --n-heads 4", data_dir)


# -- shared pieces ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "dtype", "tf32"),
    [("fp32", None, False), ("tf32", None, True), ("bf16", "bfloat16", False),
     ("fp16", "float16", False), ("tf32-fp16", "float16", True)],
)
def test_precision_on_cuda(name: str, dtype: str | None, tf32: bool) -> None:
    p = resolve_precision(name, torch.device("cuda"))
    assert p.autocast_dtype == (getattr(torch, dtype) if dtype else None)
    assert p.tf32 is tf32 and p.device_type == "cuda"


def test_fp16_on_cpu_falls_back_to_bf16_with_a_warning() -> None:
    with pytest.warns(RuntimeWarning, match="bf16"):
        p = resolve_precision("fp16", torch.device("cpu"))
    assert p.autocast_dtype == torch.bfloat16
    assert p.grad_scaler() is None  # no scaler off CUDA, none needed for bf16


def test_no_warning_for_bf16_on_cpu() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = resolve_precision("bf16", torch.device("cpu"))
    with p.autocast():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16


def test_unknown_precision() -> None:
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8", torch.device("cpu"))


def test_backend_flags_are_restored() -> None:
    backends = torch.backends
    switches = tf32_switches(backends, True)
    before = [getattr(target, name) for target, name, _ in switches]
    bench = backends.cudnn.benchmark
    with backend_flags(tf32=True, cudnn_benchmark=not bench):
        assert [getattr(t, n) for t, n, _ in switches] == [v for _, _, v in switches]
        assert backends.cudnn.benchmark is (not bench)
    assert [getattr(target, name) for target, name, _ in switches] == before
    assert backends.cudnn.benchmark is bench


class _LegacyTf32Read(Exception):
    pass


class _Node(SimpleNamespace):
    """A torch.backends namespace of torch >= 2.9: reading ``allow_tf32`` raises once
    ``fp32_precision`` was set (torch's "mix of the legacy and new APIs")."""

    def __getattribute__(self, name: str) -> Any:
        if name == "allow_tf32" and object.__getattribute__(self, "__dict__").get("new_set"):
            raise _LegacyTf32Read(name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "fp32_precision":
            object.__setattr__(self, "new_set", True)
        object.__setattr__(self, name, value)


def _new_backends() -> SimpleNamespace:
    return SimpleNamespace(
        cuda=SimpleNamespace(matmul=_Node(allow_tf32=False, fp32_precision="none")),
        cudnn=SimpleNamespace(benchmark=False, allow_tf32=True,
                              conv=_Node(allow_tf32=True, fp32_precision="tf32"),
                              rnn=_Node(allow_tf32=True, fp32_precision="tf32")))


@pytest.mark.parametrize("tf32", [True, False])
def test_backend_flags_use_the_new_tf32_api_where_it_exists(tf32: bool) -> None:
    backends = _new_backends()
    backends.cuda.matmul.fp32_precision = "none"  # something set the new API already
    want = "tf32" if tf32 else "ieee"
    with backend_flags(tf32=tf32, cudnn_benchmark=True, backends=backends):
        assert backends.cuda.matmul.fp32_precision == want
        assert backends.cudnn.conv.fp32_precision == want
        assert backends.cudnn.rnn.fp32_precision == want
        assert backends.cudnn.benchmark is True
    assert backends.cuda.matmul.fp32_precision == "none"
    assert backends.cudnn.conv.fp32_precision == "tf32"
    assert backends.cudnn.benchmark is False


@pytest.mark.parametrize("tf32", [True, False])
def test_backend_flags_use_the_legacy_flags_on_an_older_torch(tf32: bool) -> None:
    backends = SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False)),
                               cudnn=SimpleNamespace(benchmark=False, allow_tf32=True))
    with backend_flags(tf32=tf32, backends=backends):
        assert backends.cuda.matmul.allow_tf32 is tf32
        assert backends.cudnn.allow_tf32 is tf32
    assert backends.cuda.matmul.allow_tf32 is False and backends.cudnn.allow_tf32 is True


def test_tensor_batches_move_the_data_to_the_device_once_before_any_batch() -> None:
    moved = []

    class Spy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if getattr(func, "__name__", "") == "to":
                moved.append(str(args[1]))
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.arange(8.0).as_subclass(Spy)
    batches = tensor_batches((x,), 2, device="cpu")
    assert moved == ["cpu"]  # at the call, before the first batch is asked for
    next(batches)
    assert moved == ["cpu"]


def test_tensor_batches_cover_each_epoch_once() -> None:
    x = torch.arange(10)
    it = tensor_batches((x, x * 2), 3, seed=0)
    epoch = [next(it) for _ in range(3)]  # 10 // 3 full batches, last partial one dropped
    seen = torch.cat([b[0] for b in epoch])
    assert len(set(seen.tolist())) == 9
    assert all(torch.equal(b[1], b[0] * 2) for b in epoch)
    with pytest.raises(ValueError, match="cannot fill"):
        next(tensor_batches((x,), 11))


def test_logits_of_model_outputs() -> None:
    t = torch.zeros(2, 3)
    assert logits_of(t) is t
    assert logits_of((t, torch.ones(2, 3))) is t  # inception/googlenet aux outputs
    assert logits_of({"out": t}) is t


def test_clip_tiny(data_dir: Path) -> None:
    pytest.importorskip("open_clip")
    stream = run("pytest_dlbench.workloads.clip:train",
                 "--model dlbench-tiny --batch-size 4 --num-samples 8", data_dir)
    assert_ran(stream, "items/s")
    first = of(stream, "loss")[0]["value"]
    assert abs(first - math.log(4)) < 1.0  # contrastive loss of random features ~ ln(batch)


def test_clip_unknown_model(data_dir: Path) -> None:
    pytest.importorskip("open_clip")
    with pytest.raises(ValueError, match="unknown open_clip model"):
        run("pytest_dlbench.workloads.clip:train", "--model no-such-model", data_dir)


def test_grad_scaler_only_for_fp16() -> None:
    cuda_fp16 = Precision("fp16", torch.float16, tf32=False, device_type="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available": the scaler disables itself
        assert isinstance(cuda_fp16.grad_scaler(), torch.amp.GradScaler)
    # fp16 on a CPU (fp16 arithmetic, or emulated) takes the GPU's path: an enabled scaler.
    cpu_fp16 = Precision("fp16", torch.float16, tf32=False, device_type="cpu")
    assert cpu_fp16.grad_scaler().is_enabled()
    for p in (Precision("bf16", torch.bfloat16, tf32=False, device_type="cuda"),
              Precision("fp32", None, tf32=False, device_type="cuda")):
        assert p.grad_scaler() is None


def test_train_steps_with_a_grad_scaler(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CUDA fp16 path (scale, step, update) exercised with an enabled CPU scaler.
    precision = Precision("fp16", torch.bfloat16, tf32=False, device_type="cpu")
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    assert scaler.is_enabled()
    monkeypatch.setattr(Precision, "grad_scaler", lambda self: scaler)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    before = model.weight.detach().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    stream = NullStream()
    with Bench(args=[], device="cpu", stream=stream, skip=1, stop=3) as bench:
        steps = train_steps(
            bench, iter([(x, y)] * 10),
            compute_loss=lambda b: torch.nn.functional.mse_loss(model(b[0]).float(), b[1]),
            optimizer=optimizer, precision=precision, device=torch.device("cpu"),
            items_per_step=8,
        )
    assert steps == 4
    assert not torch.equal(model.weight, before)  # unscaled steps were applied
    losses = [r["value"] for r in of(stream, "loss")]
    assert losses[-1] < losses[0] < 1e3  # the logged loss is the unscaled one


def test_build_sized_passes_the_size_only_where_accepted() -> None:
    def vit(*, num_classes: int, img_size: int = 224) -> Any:
        return ("vit", num_classes, img_size)

    def convnet(*, num_classes: int) -> Any:
        return ("convnet", num_classes)

    def broken(*, num_classes: int, img_size: int = 224) -> Any:
        raise TypeError("something else")

    assert build_sized(vit, "img_size", 64, num_classes=3) == ("vit", 3, 64)
    assert build_sized(convnet, "img_size", 64, num_classes=3) == ("convnet", 3)
    with pytest.raises(TypeError, match="something else"):
        build_sized(broken, "img_size", 64, num_classes=3)
