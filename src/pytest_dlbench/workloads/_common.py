"""Pieces shared by the workloads: precision presets, compilation, backend flags, batches, the
train step.

Private to the workloads package. torch is imported inside functions only. The arguments that
choose precision and compilation are defined once, in :mod:`.presets`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.measure.stream import Event
from pytest_dlbench.suite.presets import (
    COMPILE_MODES,
    DEFAULT_BACKEND,
    EAGER,
    PRECISIONS,
)
from pytest_dlbench.suite.presets import add_arguments as add_training_args

if TYPE_CHECKING:
    import torch

__all__ = [
    "COMPILE_MODES",
    "PRECISIONS",
    "CompileError",
    "CompileOptions",
    "Precision",
    "add_training_args",
    "cpu_runs_fp16",
    "optimizer_options",
    "precision_unsupported",
    "resolve_precision",
    "setup_precision",
    "train_steps",
]


@dataclass(frozen=True)
class Precision:
    """How a precision name is run on one device."""

    name: str
    autocast_dtype: torch.dtype | None  # None: no autocast (fp32 / tf32)
    tf32: bool
    device_type: str

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def grad_scaler(self) -> Any:
        """A GradScaler for fp16 autocast (fp16 gradients underflow without one), else None.

        On every device, the CPU included (fp16 on a CPU with fp16 arithmetic, or emulated):
        the CPU then runs the code path a GPU runs, which is what the tests check (no host sync
        in a step, tests/test_sync_free.py). bf16 has fp32's range and needs no scaler.
        """
        import torch

        if self.autocast_dtype is torch.float16:
            return torch.amp.GradScaler(self.device_type)
        return None


def resolve_precision(name: str, device: torch.device, *, cpu_fp16: bool = False) -> Precision:
    """The autocast dtype and TF32 switch of ``name`` on ``device``.

    fp16 on a CPU runs as bf16 with a warning, unless ``cpu_fp16`` (the CPU has fp16
    arithmetic, or emulation was asked for): :func:`setup_precision` decides that.
    """
    import torch

    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; expected one of {', '.join(PRECISIONS)}")
    dtype = {"fp16": torch.float16, "tf32-fp16": torch.float16, "bf16": torch.bfloat16}.get(name)
    if dtype is torch.float16 and device.type == "cpu" and not cpu_fp16:
        # CPU fp16 autocast works but runs ~15x slower than bf16 (measured on torch 2.14):
        # it would benchmark an emulation, not the hardware.
        warnings.warn(f"precision {name}: fp16 autocast is emulated on CPU; using bf16 instead",
                      RuntimeWarning, stacklevel=2)
        dtype = torch.bfloat16
    return Precision(name=name, autocast_dtype=dtype, tf32="tf32" in name,
                     device_type=device.type)


def _cpu_flags() -> set[str]:
    """The CPU's feature flags (``flags`` on x86, ``Features`` on Arm); empty if unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        pass
    return set()


def _cpu_has(kind: str) -> bool:
    """Whether oneDNN (torch's CPU kernels) does ``kind`` ("bf16" or "fp16") on this CPU:
    torch's own check, else the CPU flags that provide it."""
    import torch

    check = getattr(torch.ops.mkldnn, f"_is_mkldnn_{kind}_supported", None)
    if check is not None:
        with contextlib.suppress(Exception):
            return bool(check())
    flags = _cpu_flags()
    wanted = {"bf16": {"avx512_bf16", "amx_bf16", "bf16"},
              "fp16": {"avx512_fp16", "amx_fp16", "fphp"}}[kind]
    return bool(flags & wanted)


def _cpu_capability() -> str:
    import torch

    with contextlib.suppress(Exception):
        return str(torch.backends.cpu.get_cpu_capability())
    return "unknown"


def precision_unsupported(name: str, device: torch.device) -> str | None:
    """Why the hardware of ``device`` cannot run precision ``name`` (one line), or None.

    - TF32 is a tensor-core format of NVIDIA GPUs from Ampere (compute capability 8.0) on; a
      CPU would run fp32 and call it tf32.
    - bf16 / fp16 on a CPU: only where oneDNN has the arithmetic (AVX-512 or AMX for bf16,
      AVX512-FP16 or AMX-FP16 for fp16; Arm's bf16 and fp16 extensions); elsewhere autocast
      emulates them, much slower than fp32, which measures the emulation.
    - bf16 on a GPU needs Ampere or newer (an older GPU emulates it).
    """
    import torch

    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; expected one of {', '.join(PRECISIONS)}")
    half = {"fp16": "fp16", "tf32-fp16": "fp16", "bf16": "bf16"}.get(name)
    tf32 = "tf32" in name
    if device.type == "cpu":
        where = f"this CPU ({_cpu_capability()})"
        if tf32:
            return (f"precision {name}: TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or "
                    f"newer); {where} would run fp32")
        if half is not None and not _cpu_has(half):
            need = ("AVX-512 or AMX" if half == "bf16" else "AVX512-FP16 or AMX-FP16")
            return (f"precision {name}: {where} has no {half} arithmetic (needs {need}); "
                    "autocast would measure an emulation")
    elif device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if tf32 and major < 8:
            return (f"precision {name}: TF32 needs compute capability 8.0 or newer, this GPU "
                    f"has {major}.{minor}")
        if half == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            return f"precision {name}: this GPU ({major}.{minor}) has no bf16 arithmetic"
    return None


def skip(reason: str) -> None:
    """End the benchmark as skipped (not failed): pytest's skip, the harness's ``skipped``."""
    import pytest

    raise pytest.skip.Exception(reason)


def cpu_runs_fp16(args: argparse.Namespace, device: torch.device) -> bool:
    """Whether fp16 on ``device`` is run as fp16 on a CPU: the CPU has fp16 arithmetic, or
    ``--allow-emulated-precision`` asked for the emulation (else the CPU runs bf16)."""
    emulate = bool(getattr(args, "allow_emulated_precision", False))
    return device.type == "cpu" and (emulate or _cpu_has("fp16"))


def setup_precision(args: argparse.Namespace, device: torch.device) -> Precision:
    """The precision of a training workload's ``--precision``: a skip with the reason when the
    hardware cannot do it (unless ``--allow-emulated-precision``)."""
    emulate = bool(getattr(args, "allow_emulated_precision", False))
    reason = precision_unsupported(args.precision, device)
    if reason is not None and not emulate:
        skip(reason + " (--allow-emulated-precision runs it anyway)")
    return resolve_precision(args.precision, device, cpu_fp16=cpu_runs_fp16(args, device))


#: Device types with fused optimizer kernels, when torch does not say (torch 2.4 to 2.14).
_FUSED_DEVICES = ("cuda", "cpu", "mps", "xpu", "hpu")


def optimizer_options(device: torch.device) -> dict[str, Any]:
    """Keyword arguments of the workloads' optimizers (SGD, Adam, AdamW) on ``device``:
    ``fused=True`` where torch has fused kernels for the device type.

    Why fused: ``GradScaler.step`` reads ``found_inf`` on the host (``.item()``, a device sync
    every fp16 step) unless the optimizer skips a step with infs itself, which only fused
    optimizers do (``_step_supports_amp_scaling``). One implementation for every precision, so
    presets compare precisions, not optimizers. The CPU has fused kernels too (torch >= 2.4):
    a CPU run takes the GPU's code path and the tests see its syncs.
    """
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        supported = tuple(_get_fused_kernels_supported_devices())
    except (ImportError, AttributeError):  # a private helper: fall back to the known list
        supported = _FUSED_DEVICES
    return {"fused": True} if device.type in supported else {}


# -- compilation ---------------------------------------------------------------------------------
#: Compiled steps run before the timed loop: at least this many (graphs compiled by a second
#: call are common), until a step compiles nothing new, at most ``COMPILE_MAX_STEPS``.
COMPILE_MIN_STEPS = 2
COMPILE_MAX_STEPS = 10
_CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class CompileOptions:
    """``torch.compile`` settings of a run; ``mode`` None is eager."""

    mode: str | None = None
    backend: str = DEFAULT_BACKEND

    @property
    def enabled(self) -> bool:
        return self.mode is not None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CompileOptions:
        mode = getattr(args, "compile", EAGER)
        backend = getattr(args, "compile_backend", DEFAULT_BACKEND)
        return cls(None if mode in (None, EAGER) else mode, backend)

    def describe(self) -> str:
        return f"mode {self.mode}, backend {self.backend}"


class CompileError(DlbenchError, RuntimeError):
    """``torch.compile`` failed: the compiler's reason, in one line."""

    def __init__(self, options: CompileOptions, exc: BaseException) -> None:
        self.options = options
        super().__init__(f"torch.compile failed ({options.describe()}): {compile_reason(exc)}")


def compile_reason(exc: BaseException) -> str:
    """The innermost error of a dynamo/inductor failure as ``Type: first line``.

    ``BackendCompilerFailed`` says only "backend='inductor' raised:"; the backend's own error
    (a C++ compiler message, an unsupported operator) is its ``inner_exception``.
    """
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _is_compile_failure(exc: BaseException) -> bool:
    """An error of dynamo, AOTAutograd or inductor (not an out-of-memory or a data error)."""
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor", "torch._functorch"))


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def _snapshot() -> dict[str, dict[str, int]]:
    return {k: dict(v) for k, v in _counters().items()}


def _delta(before: dict[str, dict[str, int]], group: str) -> dict[str, int]:
    now = _counters().get(group) or {}
    old = before.get(group) or {}
    return {k: v - old.get(k, 0) for k, v in now.items() if v - old.get(k, 0)}


def _graphs() -> int:
    return int(_counters()["stats"]["unique_graphs"])


def _break_reason(text: str) -> str:
    """A graph break's reason: the first line of dynamo's message."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def compile_stats(before: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What dynamo and inductor did since ``before`` (a :func:`_snapshot`)."""
    breaks = _delta(before, "graph_break")
    reasons: dict[str, int] = {}
    for text, n in breaks.items():
        reason = _break_reason(text)
        reasons[reason] = reasons.get(reason, 0) + n
    inductor = _delta(before, "inductor")
    aot = _delta(before, "aot_autograd")
    return {
        "graphs": _delta(before, "stats").get("unique_graphs", 0),
        "graph_breaks": sum(breaks.values()),
        "break_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5]),
        "frames": _delta(before, "frames").get("ok", 0),
        "cache_hits": inductor.get("fxgraph_cache_hit", 0) + aot.get("autograd_cache_hit", 0),
        "cache_misses": inductor.get("fxgraph_cache_miss", 0) + aot.get("autograd_cache_miss", 0),
    }


def compile_function(
    fn: Callable[..., Any], options: CompileOptions, device: torch.device
) -> Callable[..., Any]:
    """``torch.compile(fn)`` with ``options``; a bad mode or backend is a :class:`CompileError`.

    With CUDA graphs (reduce-overhead, max-autotune on a GPU) each call starts a new graph step
    and its output is copied: a replay overwrites the previous outputs, and the loss is kept
    until the window is read.
    """
    import torch

    try:
        compiled = torch.compile(fn, mode=options.mode, backend=options.backend)
    except Exception as exc:  # noqa: BLE001 - InvalidBackend, a bad mode: the compiler's reason
        raise CompileError(options, exc) from exc
    if device.type != "cuda" or options.mode not in _CUDAGRAPH_MODES:
        return compiled

    def step(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        out = compiled(*args, **kwargs)
        return out.clone() if isinstance(out, torch.Tensor) else out

    return step


def compile_warmup(
    bench: Any,
    batches: Iterator[Any],
    run_step: Callable[[Any], None],
    options: CompileOptions,
) -> dict[str, Any]:
    """Run compiled steps before the timed loop until nothing new compiles; write the
    ``compile`` record (its ``start``/``end`` wall times bound every compilation of the warm-up;
    the timed loop's observations all come after ``end``) and return it.

    A dynamo or inductor failure is a :class:`CompileError` with the compiler's one-line reason.
    """
    before = _snapshot()
    timer = bench.timer
    sync = timer.backend.synchronize
    sync()
    start_wall, t0 = timer.wall_clock(), time.perf_counter()
    steps = 0
    try:
        while steps < COMPILE_MAX_STEPS:
            graphs = _graphs()
            try:
                batch = next(batches)
            except StopIteration:
                raise ValueError("the data ran out while compiling") from None
            run_step(batch)
            sync()
            steps += 1
            if steps >= COMPILE_MIN_STEPS and _graphs() == graphs:
                break
    except CompileError:
        raise
    except Exception as exc:
        if _is_compile_failure(exc):
            raise CompileError(options, exc) from exc
        raise
    seconds = time.perf_counter() - t0
    record = {
        "phase": "warmup",
        "mode": options.mode,
        "backend": options.backend,
        "seconds": seconds,
        "start": start_wall,
        "end": start_wall + seconds,
        "steps": steps,
        **compile_stats(before),
    }
    bench.stream.write(Event.COMPILE, **record)
    return record


def note_late_compiles(bench: Any, since: dict[str, dict[str, int]]) -> None:
    """A ``compile`` record (phase ``loop``) when graphs were compiled during the timed loop
    (a recompile: a shape or a guard changed), so the report can say so."""
    stats = compile_stats(since)
    if stats["graphs"] or stats["graph_breaks"]:
        bench.stream.write(Event.COMPILE, phase="loop", time=bench.timer.wall_clock(), **stats)


@contextlib.contextmanager
def backend_flags(*, tf32: bool, cudnn_benchmark: bool = False) -> Iterator[None]:
    """Set TF32 and cuDNN autotuning for the duration of one benchmark, then restore them.

    These are process-wide switches: restoring them keeps in-process runs independent of order.
    "fp32" turns TF32 off explicitly (cuDNN allows it by default) so fp32 means fp32.
    """
    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark)
    matmul.allow_tf32 = tf32
    cudnn.allow_tf32 = tf32
    cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark = saved


def device_of(bench: Any) -> torch.device:
    import torch

    return torch.device(bench.device)


def parse(parser: argparse.ArgumentParser, bench: Any) -> argparse.Namespace:
    return parser.parse_args(list(bench.args))


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def tensor_batches(
    tensors: Sequence[torch.Tensor],
    batch_size: int,
    *,
    device: torch.device | str | None = None,
    seed: int = 0,
    shuffle: bool = True,
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled batches gathered from in-memory tensors (one index op per tensor).

    ``device`` (default: where the tensors are): the tensors are moved there once, now, before
    any step, and every batch is gathered there, from an order drawn there: a step copies
    nothing from the host and never waits for it. Gathering on the host and copying each batch
    from pageable memory instead (~38 MB per ResNet-50 step) would serialise host and GPU.

    Cheaper than a DataLoader over a TensorDataset, which indexes and collates sample by sample:
    in-memory data should not make the host the bottleneck. Drops the last partial batch so every
    step has `batch_size` items.
    """
    import torch

    n = len(tensors[0])
    if n < batch_size:
        raise ValueError(f"{n} samples cannot fill one batch of {batch_size}")
    where = torch.device(device) if device is not None else tensors[0].device
    # Eager (not in the generator, whose body would run in the first timed step).
    placed = tuple(t.to(where) for t in tensors)
    return _gather_batches(placed, batch_size, seed=seed, shuffle=shuffle)


def _order_generator(device: torch.device, seed: int) -> torch.Generator:
    """A generator on ``device`` (the shuffle order is drawn there, never copied from the
    host: a blocking copy would be a sync); the CPU's where the device has none."""
    import torch

    with contextlib.suppress(RuntimeError):
        return torch.Generator(device=device).manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def _gather_batches(
    tensors: tuple[torch.Tensor, ...], batch_size: int, *, seed: int, shuffle: bool
) -> Iterator[tuple[torch.Tensor, ...]]:
    import torch

    n = len(tensors[0])
    device = tensors[0].device
    g = _order_generator(device, seed)
    for _ in itertools.count():
        if shuffle:
            # On the generator's device; a CPU order (a device without generators) is copied
            # without blocking: small, once an epoch.
            order = torch.randperm(n, generator=g, device=g.device)
            order = order.to(device, non_blocking=True)
        else:
            order = torch.arange(n, device=device)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            yield tuple(t.index_select(0, idx) for t in tensors)


def to_device(
    batch: Sequence[torch.Tensor],
    device: torch.device,
    *,
    channels_last: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Move a batch to `device`; the first (image) tensor optionally in channels-last layout."""
    import torch

    # non_blocking only overlaps when the source is pinned; it is harmless otherwise.
    out = [t.to(device, non_blocking=True) for t in batch]
    if channels_last and out[0].dim() == 4:
        out[0] = out[0].contiguous(memory_format=torch.channels_last)
    return tuple(out)


def build_sized(factory: Callable[..., torch.nn.Module], size_kwarg: str, image_size: int,
                **kwargs: Any) -> torch.nn.Module:
    """`factory(**kwargs)` told the input size when the architecture takes one.

    Transformers with fixed position embeddings (torchvision `vit_*`, timm ViTs) reject other
    input sizes unless built for them; convnets take any size and refuse the argument, so they
    are built without it.
    """
    try:
        return factory(**kwargs, **{size_kwarg: image_size})
    except TypeError as e:
        if size_kwarg not in str(e):
            raise
    return factory(**kwargs)


def logits_of(output: Any) -> torch.Tensor:
    """The main logits of a classifier's output.

    Some torchvision models return namedtuples in training mode (inception_v3: logits and
    aux_logits; googlenet: logits and two aux heads); the first field is the main head.
    """
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        return output["out"]
    return output[0]


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
        since = _snapshot()
    steps = 0
    region = bench.timer.region
    for batch in bench.iterate(batches, batch_size=items_per_step):
        loss = step(batch, region)
        bench.log_loss(loss.detach())
        steps += 1
    if since is not None:
        note_late_compiles(bench, since)
    return steps


def add_image_data_args(parser: argparse.ArgumentParser) -> None:
    """Arguments that choose where training images come from (shared by vision, timm, loader)."""
    parser.add_argument("--image-size", type=positive_int, default=224,
                        help="side of the square training crop (default 224)")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="DataLoader worker processes for the JPEG folder (default 2)")
    parser.add_argument("--num-images", type=positive_int, default=None,
                        help="images in the generated data set (default 1024 on disk, "
                             "256 on the device with --synthetic-data; at least one batch)")
    parser.add_argument("--data", default=None,
                        help="an existing ImageFolder to read instead of the generated one")
    parser.add_argument("--seed", type=int, default=0)


def jpeg_loader(bench: Any, args: argparse.Namespace, *, num_classes: int, batch_size: int,
                pin_memory: bool) -> Any:
    """A shuffling DataLoader over a JPEG ImageFolder: decode, random crop, flip, normalise.

    `num_classes` bounds the labels (the model's output size).

    Without --data, the folder is generated once under bench.data_dir; its name carries the
    parameters so that benchmarks with different settings do not rebuild each other's copy.
    """
    from pathlib import Path

    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    from pytest_dlbench.data import jpeg_folder

    if args.data is not None:
        root = Path(args.data)
    else:
        n = args.num_images or max(1024, batch_size)
        # Stored larger than the crop, like ImageNet's resize-256 / crop-224.
        disk_size = round(args.image_size * 256 / 224)
        # At most 100 class folders: the class count does not change the cost of a step.
        classes = min(num_classes, 100)
        name = f"jpeg-{classes}c-{n}x{disk_size}px-s{args.seed}"
        root = jpeg_folder(Path(bench.data_dir) / name, n=n, image_size=disk_size,
                           num_classes=classes, seed=args.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(str(root), transform=transform)
    if len(dataset.classes) > num_classes:
        raise ValueError(f"{root} has {len(dataset.classes)} classes, more than {num_classes}")
    if len(dataset) < batch_size:
        raise ValueError(f"{root} has {len(dataset)} images, fewer than one batch of {batch_size}")
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=pin_memory,
        drop_last=True,  # every step has batch_size items
        # Workers survive epoch ends: forever() restarts the loader every epoch.
        persistent_workers=args.num_workers > 0,
        generator=torch.Generator().manual_seed(args.seed),
    )
