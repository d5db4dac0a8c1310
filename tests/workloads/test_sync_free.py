"""No host sync inside a timed step, and no host data in one (issue 21, defects 3 and 4).

A GPU runs ahead of the host only while the host never waits for it: one ``.item()`` in a step
(GradScaler's found-inf check with an unfused optimizer), one blocking copy, and every step
serialises host and device. On a CPU nothing waits, so these tests model the GPU:

- every built-in training workload runs in this process, tiny, with every precision preset
  (emulated where the CPU lacks the arithmetic: the code path is what is checked; fp16 runs
  through the same GradScaler path as on a GPU), under a ``TorchDispatchMode`` that records each
  operator reading a device value on the host (``.item()``, ``bool(t)``, ``torch.equal``,
  ``nonzero``, a boolean mask, a copy to the CPU...) and a ``TorchFunctionMode`` for the tensor
  methods that copy to the host (``.tolist()``, ``.cpu()``, ``.numpy()``), between the Timer's
  ``begin`` and the window's ``read``: the Bench's timed steps. Nothing may be recorded.
- synthetic data sets are made of :class:`HostTensor`s, CPU tensors that stand for host memory:
  moving one to the device (``.to(device)``) gives a plain tensor. A timed step may not touch a
  host tensor: no gather on the host, no per-step copy of the batch to the device.

On a CPU every tensor is on the host, so the watch is stricter than a GPU needs: a read of a
scalar that lives on the host even on a GPU (an unfused Adam's step count) counts too.

Not covered: compiled steps (``--compile``; a dispatch mode does not see into compiled graphs),
the ``loader`` workload (its steps are the host's data pipeline by design) and the DataLoader
paths (a JPEG folder, clip's ``--train-num-samples``): a new epoch's iterator draws its seed and
order from a host generator (``.item()``, ``.tolist()`` on host tensors: no device sync, but the
watch cannot tell them from one on a CPU).
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO_ROOT

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.stream import NullStream  # noqa: E402
from pytest_dlbench.measure.timing import Timer  # noqa: E402
from pytest_dlbench.suite import presets  # noqa: E402
from pytest_dlbench.workloads.batches import tensor_batches  # noqa: E402
from pytest_dlbench.workloads.precision import optimizer_options, resolve_precision  # noqa: E402

# -- the watch: what happens between a window's begin and its read ------------------------------

#: Operators that read a device value on the host: on a GPU, each waits for the device.
HOST_READS = {
    "aten::_local_scalar_dense": ".item(), float(t), int(t), bool(t)",
    "aten::item": ".item()",
    "aten::is_nonzero": "bool(t), if t:",
    "aten::equal": "torch.equal",
    "aten::nonzero": "nonzero (its output size)",
    "aten::masked_select": "a boolean mask (its output size)",
    "aten::_unique": "unique", "aten::_unique2": "unique", "aten::unique_dim": "unique",
    "aten::unique_consecutive": "unique_consecutive",
    "aten::unique_dim_consecutive": "unique_consecutive",
    "aten::bincount": "bincount (its output size)",
    "aten::_nested_tensor_from_mask_left_aligned": "a nested-tensor mask check",
    # Not aten::_assert_async: on a GPU it asserts in a kernel, asynchronously (its point).
}
#: Operators that read their output size from a device tensor unless it is given.
SIZED_BY_DATA = {"aten::repeat_interleave": "output_size"}
#: Indexing operators: with a boolean (or uint8) index they run nonzero first.
INDEXING = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}
#: Tensor methods that copy to the host (on a CPU they do nothing visible to a dispatch mode).
HOST_COPIES = {"tolist", "numpy", "cpu"}


@dataclass
class Watch:
    """What the timed steps did: ``in_step`` is set by :class:`WatchedTimer`."""

    in_step: bool = False
    host_reads: list[str] = field(default_factory=list)
    host_data: list[str] = field(default_factory=list)  # ops on HostTensors in a step
    moves_before: int = 0  # HostTensors moved to the device outside the steps
    scaler_steps: int = 0  # GradScaler.step calls in a step
    steps: int = 0


class WatchedTimer(Timer):
    """The Bench's timer: a window's steps run from :meth:`begin` to :meth:`read` (the read
    synchronises, between windows, on purpose)."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self._watch = watch

    def begin(self) -> None:
        super().begin()
        self._watch.in_step = True

    def step(self, items: int) -> None:
        super().step(items)
        self._watch.steps += 1

    def read(self, *, intervals: bool = False) -> Any:
        self._watch.in_step = False
        return super().read(intervals=intervals)


def _caller() -> str:
    """The innermost frame outside torch's mode machinery and this file: where a read was."""
    import traceback

    skip = ("_python_dispatch", "overrides.py", "test_sync_free.py", "_ops.py", "_dynamo/",
            "torch/_compile.py")
    for frame in reversed(traceback.extract_stack()):
        if not any(s in frame.filename for s in skip):
            path = Path(frame.filename)
            return f"{path.parent.name}/{path.name}:{frame.lineno} {frame.name}"
    return "?"


def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


def host_read(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why the operator ``func(*args, **kwargs)`` reads a device value on the host, or None."""
    name = func._schema.name
    if name in HOST_READS:
        return f"{name} ({HOST_READS[name]})"
    if name in SIZED_BY_DATA and kwargs.get(SIZED_BY_DATA[name]) is None and \
            any(isinstance(a, torch.Tensor) for a in args):
        return f"{name} without {SIZED_BY_DATA[name]}"
    if name in INDEXING and len(args) > 1 and isinstance(args[1], (list, tuple)) and \
            any(_is_mask(i) for i in args[1]):
        return f"{name} with a boolean mask (nonzero)"
    if name in ("aten::_to_copy", "aten::copy_"):
        src, dst = (args[0], kwargs.get("device")) if name == "aten::_to_copy" else \
            (args[1], args[0].device)
        dst = torch.device(dst) if dst is not None else src.device
        if src.device.type != "cpu" and dst.type == "cpu":
            return f"{name} from {src.device} to the host"
    return None


class HostReads(TorchDispatchMode):
    """Records :func:`host_read` operators run while ``watch.in_step``."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.watch.in_step:
            why = host_read(func, args, kwargs)
            if why is not None:
                self.watch.host_reads.append(f"{why} at {_caller()}")
        return func(*args, **kwargs)


class HostCopies(TorchFunctionMode):
    """Records ``.tolist()``, ``.numpy()`` and ``.cpu()`` called while ``watch.in_step``."""

    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if self.watch.in_step and name in HOST_COPIES:
            self.watch.host_reads.append(f"Tensor.{name}() at {_caller()}")
        return func(*args, **(kwargs or {}))


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    """A fresh :class:`Watch`; GradScaler.step calls in a step are counted; one thread (a
    small shared machine runs these steps several times faster so)."""
    w = Watch()
    real_step = torch.amp.GradScaler.step

    def counted_step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if w.in_step and self.is_enabled():
            w.scaler_steps += 1
        return real_step(self, optimizer, *args, **kwargs)

    monkeypatch.setattr(torch.amp.GradScaler, "step", counted_step)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield w
    finally:
        torch.set_num_threads(threads)


def run_watched(watch: Watch, fn: Callable[..., None], args: list[str], data_dir: Path,
                *extra: Any) -> None:
    """``fn(bench, *extra)`` on the CPU with a :class:`WatchedTimer`, under both modes: three
    timed steps in two windows (a read, then a new ``begin``, in between)."""
    bench = Bench(name="watched", args=args, device="cpu", stream=NullStream(), skip=1, stop=2,
                  window=2, data_dir=data_dir, timer=WatchedTimer(watch))
    with bench, HostReads(watch), HostCopies(watch):
        fn(bench, *extra)
    assert watch.steps == 3, "the benchmark ran no timed steps: nothing was checked"


def function(definition: str) -> Callable[..., None]:
    module, name = definition.split(":")
    return getattr(importlib.import_module(module), name)


# -- the watch itself --------------------------------------------------------------------------

SYNCING_STEPS: dict[str, Callable[[Any], Any]] = {
    "item": lambda t: t.sum().item(),
    "float": lambda t: float(t.sum()),
    "if": lambda t: bool(t.sum() > 0),
    "equal": lambda t: torch.equal(t, t),
    "nonzero": lambda t: t.nonzero(),
    "mask": lambda t: t[t > 0],
    "masked-assign": lambda t: t.clone().__setitem__(t > 0, 0.0),
    "unique": lambda t: t.unique(),
    "repeat_interleave": lambda t: torch.repeat_interleave(torch.tensor([1, 2])),
    "tolist": lambda t: t.tolist(),
    "cpu": lambda t: t.cpu(),
}


@pytest.mark.parametrize("kind", sorted(SYNCING_STEPS))
def test_the_watch_sees_a_host_read_in_a_step_and_only_there(
    watch: Watch, tmp_path: Path, kind: str
) -> None:
    x = torch.randn(8)

    def outside_steps(bench: Any) -> None:
        SYNCING_STEPS[kind](x)
        for _ in bench.iterate(itertools.count(), batch_size=1):
            bench.log_loss((x * 2).sum())
        SYNCING_STEPS[kind](x)

    def inside_steps(bench: Any) -> None:
        for _ in bench.iterate(itertools.count(), batch_size=1):
            SYNCING_STEPS[kind](x)

    run_watched(watch, outside_steps, [], tmp_path)
    assert watch.host_reads == []
    watch.steps = 0
    run_watched(watch, inside_steps, [], tmp_path)
    assert len(watch.host_reads) >= 3, f"{kind} in a step was not seen"


# -- every training workload x every precision preset ------------------------------------------

TOY = "--batch-size 4 --features 8 --hidden 8 --num-batches 2"
VISION = "--model resnet18 --batch-size 2 --image-size 32 --num-classes 10 --num-images 4"
TIMM = "--model test_resnet --batch-size 2 --image-size 32 --num-classes 10 --num-images 4"
LM = ("--vocab-size 64 --seq-len 8 --d-model 16 --n-layers 1 --n-heads 2 --batch-size 2 "
      "--num-sequences 4")
CLIP = "--model dlbench-tiny --batch-size 2 --num-samples 4"
DDP = "--model resnet18 --batch-size 2 --image-size 32 --num-classes 10 --num-images 4"

#: (id, definition, arguments, package it needs, slow): the data sets are smaller than the three
#: steps, so a new epoch (a new shuffle order) starts inside a timed step.
TRAINING = [
    ("toy", "pytest_dlbench.workloads.toy:main", TOY, None, False),
    ("lm", "pytest_dlbench.workloads.lm:train", LM, None, False),
    ("vision", "pytest_dlbench.workloads.vision:train", VISION + " --synthetic-data", None, True),
    ("vision-fixed-nhwc", "pytest_dlbench.workloads.vision:train",
     VISION + " --fixed-batch --channels-last", None, True),
    ("timm", "pytest_dlbench.workloads.timm_train:train", TIMM + " --synthetic-data", "timm",
     True),
    ("clip", "pytest_dlbench.workloads.clip:train", CLIP, "open_clip", True),
    ("ddp", "pytest_dlbench.workloads.ddp:train", DDP, None, True),
]
#: The presets each workload takes; clip also has OpenCLIP's amp.
PRESETS = {"clip": (*presets.PRECISIONS, "amp")}


def _cases() -> list[Any]:
    cases = []
    for name, definition, args, needs, slow in TRAINING:
        for preset in PRESETS.get(name, presets.PRECISIONS):
            marks = [pytest.mark.slow] if slow else []
            cases.append(pytest.param(definition, args, needs, preset, id=f"{name}-{preset}",
                                      marks=marks))
    return cases


def test_every_training_workload_is_checked() -> None:
    checked = {definition for _, definition, *_ in TRAINING}
    assert checked == set(presets.TRAINING_DEFINITIONS)


@pytest.mark.parametrize(("definition", "args", "needs", "preset"), _cases())
def test_no_host_sync_inside_a_timed_step(watch: Watch, tmp_path: Path, definition: str,
                                          args: str, needs: str | None, preset: str) -> None:
    if needs is not None:
        pytest.importorskip(needs)
    argv = [*args.split(), "--precision", preset, "--allow-emulated-precision"]
    extra = (None,) if definition.endswith("ddp:train") else ()  # no process group
    run_watched(watch, function(definition), argv, tmp_path, *extra)
    assert watch.host_reads == [], f"host reads inside timed steps: {watch.host_reads}"
    if preset in ("fp16", "tf32-fp16"):
        # The GPU's fp16 path, GradScaler and all, is what was checked.
        assert watch.scaler_steps == 3, "fp16 did not step through a GradScaler"


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["fp32", "fp16"])
def test_ddp_in_a_one_process_group_has_no_host_sync_in_a_step(
    watch: Watch, tmp_path: Path, preset: str
) -> None:
    """DDP's path (the comm hook, the gradient all-reduce, the bucket views) with gloo."""
    import torch.distributed as dist

    from pytest_dlbench.run.launch.rank import destroy_process_group

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        argv = [*DDP.split(), "--precision", preset, "--allow-emulated-precision"]
        run_watched(watch, function("pytest_dlbench.workloads.ddp:train"), argv, tmp_path,
                    dist.group.WORLD)
    finally:
        destroy_process_group()
    assert watch.host_reads == [], f"host reads inside timed steps: {watch.host_reads}"


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_the_matmul_workload_has_no_host_sync_in_a_step(
    watch: Watch, tmp_path: Path, dtype: str
) -> None:
    argv = ["--m", "16", "--n", "8", "--k", "8", "--number", "2", "--dtype", dtype]
    run_watched(watch, function("pytest_dlbench.workloads.matmul:main"), argv, tmp_path)
    assert watch.host_reads == []


def test_the_fp16_optimizers_are_fused_where_torch_has_fused_kernels() -> None:
    # Why the fp16 path is sync-free: GradScaler.step leaves the inf check to a fused optimizer.
    cpu = torch.device("cpu")
    assert optimizer_options(cpu) == {"fused": True}
    for cls in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
        opt = cls([torch.nn.Parameter(torch.zeros(2))], lr=0.1, **optimizer_options(cpu))
        assert getattr(opt, "_step_supports_amp_scaling", False), cls.__name__
    assert optimizer_options(torch.device("meta")) == {}


def test_fp16_takes_the_grad_scaler_path_on_every_device() -> None:
    import warnings

    for device in ("cpu", "cuda"):
        p = resolve_precision("fp16", torch.device(device), cpu_fp16=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "CUDA is not available": it disables itself
            scaler = p.grad_scaler()
        assert isinstance(scaler, torch.amp.GradScaler)
        if device == "cpu":
            assert scaler.is_enabled()
    bf16 = resolve_precision("bf16", torch.device("cpu"))
    assert bf16.grad_scaler() is None


# -- synthetic data: on the device before the loop ---------------------------------------------

def host_tensor_type(watch: Watch) -> type:
    """A CPU tensor class standing for host memory: ``.to(device)`` (or ``.cuda()``) gives a
    plain tensor, the device's copy; any other operator on it inside a step is recorded."""

    def is_move(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        name = getattr(func, "__name__", "")
        if name == "cuda":
            return True
        if name != "to":
            return False
        targets = [*args[1:], kwargs.get("device")]
        return any(isinstance(a, (str, torch.device)) for a in targets)

    class HostTensor(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", str(func))
            if is_move(func, args, kwargs):
                if watch.in_step:
                    watch.host_data.append(f"a host-to-device copy ({name})")
                else:
                    watch.moves_before += 1
                plain = args[0].as_subclass(torch.Tensor)
                return func(plain, *args[1:], **kwargs)
            if watch.in_step and name not in ("__get__", "__len__"):
                watch.host_data.append(f"{name} on host data")
            return super().__torch_function__(func, types, args, kwargs)

    return HostTensor


@pytest.fixture
def host_data(watch: Watch, monkeypatch: pytest.MonkeyPatch) -> Watch:
    """The synthetic data sets of pytest_dlbench.data made of host tensors."""
    import importlib
    import pkgutil
    import sys

    from torch.utils.data import TensorDataset

    from pytest_dlbench import data, workloads

    # Every workload imported first: each binds the real functions, patched below and
    # restored after (one imported during the test would keep the patched one).
    for info in pkgutil.iter_modules(workloads.__path__, "pytest_dlbench.workloads."):
        importlib.import_module(info.name)
    host = host_tensor_type(watch)
    for name in ("synthetic_images", "image_text_pairs", "token_sequences", "regression_pairs"):
        real = getattr(data, name)

        def on_host(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            made = _real(*args, **kwargs)
            return TensorDataset(*(t.as_subclass(host) for t in made.tensors))

        monkeypatch.setattr(data, name, on_host)
        # The workloads import these at their top: their own names are patched too.
        for module in [m for key, m in sys.modules.items()
                       if key.startswith("pytest_dlbench.workloads.")]:
            if getattr(module, name, None) is real:
                monkeypatch.setattr(module, name, on_host)
    return watch


SYNTHETIC = [
    pytest.param("pytest_dlbench.workloads.toy:main", TOY, None, id="toy"),
    pytest.param("pytest_dlbench.workloads.lm:train", LM, None, id="lm"),
    pytest.param("pytest_dlbench.workloads.vision:train", VISION + " --synthetic-data", None,
                 id="vision", marks=pytest.mark.slow),
    pytest.param("pytest_dlbench.workloads.timm_train:train", TIMM + " --synthetic-data", "timm",
                 id="timm", marks=pytest.mark.slow),
    pytest.param("pytest_dlbench.workloads.clip:train", CLIP, "open_clip", id="clip",
                 marks=pytest.mark.slow),
    pytest.param("pytest_dlbench.workloads.ddp:train", DDP, None, id="ddp",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("definition", "args", "needs"), SYNTHETIC)
def test_synthetic_batches_come_from_the_device_not_the_host(
    host_data: Watch, tmp_path: Path, definition: str, args: str, needs: str | None
) -> None:
    if needs is not None:
        pytest.importorskip(needs)
    extra = (None,) if definition.endswith("ddp:train") else ()
    run_watched(host_data, function(definition), args.split(), tmp_path, *extra)
    assert host_data.host_data == [], f"timed steps used host data: {host_data.host_data[:5]}"
    assert host_data.moves_before >= 2  # the data set, moved to the device before the loop


def test_tensor_batches_gather_on_the_device_they_were_moved_to_once() -> None:
    # "meta" is a second device on a CPU-only machine: batches come from there.
    x = torch.arange(10.0)
    batches = tensor_batches((x, x * 2), 3, device="meta", seed=0)
    first = [next(batches) for _ in range(4)]  # 3 per epoch: a new order on the 4th
    assert all(t.device.type == "meta" and t.shape == (3,) for b in first for t in b)


def test_tensor_batches_on_the_cpu_keep_their_order() -> None:
    # The CPU order is the one a CPU generator seeded so draws (unchanged by the device move).
    x = torch.arange(6)
    got = [b[0].tolist() for b in itertools.islice(tensor_batches((x,), 2, seed=5), 6)]
    g = torch.Generator().manual_seed(5)
    want = []
    for _ in range(2):
        order = torch.randperm(6, generator=g).tolist()
        want += [order[i:i + 2] for i in range(0, 6, 2)]
    assert got == want


def test_the_documented_sync_check_tells_a_fused_fp16_step_from_an_unfused_one() -> None:
    import importlib.util

    path = REPO_ROOT / "docs/examples/writing/sync_check.py"
    spec = importlib.util.spec_from_file_location("sync_check", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert "aten::_local_scalar_dense" in example.host_reads(example.fp16_step(fused=False))
    assert example.host_reads(example.fp16_step(fused=True)) == []
