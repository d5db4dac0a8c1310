"""Precision presets on one device: the autocast dtype, TF32, the fp16 loss scaler, whether
the hardware has the arithmetic (else the benchmark is skipped), the fused optimizers, and the
process-wide backend switches restored after each run.

What a ``--precision`` name means to the suite is in :mod:`pytest_dlbench.suite.presets`; this
is how a workload runs it. torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.suite.presets import PRECISIONS
from pytest_dlbench.workloads.arguments import skip

if TYPE_CHECKING:
    import torch

__all__ = [
    "Precision",
    "backend_flags",
    "cpu_runs_fp16",
    "optimizer_options",
    "precision_unsupported",
    "resolve_precision",
    "setup_precision",
    "sgd",
    "tf32_switches",
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
        in a step, tests/workloads/test_sync_free.py). bf16 has fp32's range and needs no scaler.
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
        raise ValueError(
            f"unknown precision {quoted(name)}; expected one of {', '.join(PRECISIONS)}")
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
        raise ValueError(
            f"unknown precision {quoted(name)}; expected one of {', '.join(PRECISIONS)}")
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


def tf32_switches(backends: Any, tf32: bool) -> list[tuple[Any, str, object]]:
    """The (object, attribute, value) settings that turn TF32 on or off for matmuls and cuDNN
    through ``backends`` (``torch.backends``).

    torch >= 2.9 has ``fp32_precision`` ("tf32" or "ieee") on ``cuda.matmul`` and
    ``cudnn.conv`` (and ``cudnn.rnn``), and reading the legacy ``allow_tf32`` raises once
    anything set the new one: the new API where it exists, the legacy flags elsewhere.
    """
    matmul, cudnn = backends.cuda.matmul, backends.cudnn
    conv = getattr(cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
        value = "tf32" if tf32 else "ieee"
        rnn = getattr(cudnn, "rnn", None)
        targets = [matmul, conv, *([rnn] if hasattr(rnn, "fp32_precision") else [])]
        return [(target, "fp32_precision", value) for target in targets]
    return [(matmul, "allow_tf32", tf32), (cudnn, "allow_tf32", tf32)]


@contextlib.contextmanager
def backend_flags(*, tf32: bool, cudnn_benchmark: bool = False,
                  backends: Any = None) -> Iterator[None]:
    """Set TF32 and cuDNN autotuning for the duration of one benchmark, then restore them.

    These are process-wide switches: restoring them keeps in-process runs independent of order.
    "fp32" turns TF32 off explicitly (cuDNN allows it by default) so fp32 means fp32.
    ``backends`` is ``torch.backends`` unless given (the tests' fakes).
    """
    if backends is None:
        import torch

        backends = torch.backends
    switches = tf32_switches(backends, tf32)
    cudnn = backends.cudnn
    saved = [(target, name, getattr(target, name)) for target, name, _ in switches]
    saved.append((cudnn, "benchmark", cudnn.benchmark))
    for target, name, value in switches:
        setattr(target, name, value)
    cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        for target, name, value in saved:
            setattr(target, name, value)


def sgd(params: Any, *, lr: float, momentum: float, device: torch.device,
        precision: Precision, fused: bool = True) -> torch.optim.SGD:
    """The workloads' SGD: fused where torch has the kernels (no host sync in a step, see
    :func:`optimizer_options`), its momentum buffers made before the first step.

    ``fused=False`` gives torch's own default implementation (``torch.optim.SGD(params, lr,
    momentum=...)`` with no implementation keyword), the optimizer milabench's torchvision
    benchmark builds.

    Why made first: fused SGD's first step allocates the buffers with ``empty_like`` and, when
    the gradient scaler reports an overflow (the usual fp16 start: a scale of 65536), skips the
    step without writing them; the next step then adds uninitialised memory to the weights and
    the loss is NaN a few steps in (resnet50 tf32-fp16 on an H200, 2026-11-27). Zeros give the
    first step torch's own update (buffer = gradient, with no dampening). With a scaler, a
    fused kernel that still moves its state on a skipped step (:func:`fused_sgd_skips_cleanly`)
    is not used: stock SGD, whose scaler reads the overflow flag on the host each step.
    """
    import torch

    options = optimizer_options(device) if fused else {}
    if options and precision.grad_scaler() is not None and momentum \
            and not fused_sgd_skips_cleanly(device):
        options = {}
    optimizer = torch.optim.SGD(params, lr=lr, momentum=momentum, **options)
    if options.get("fused") and momentum:
        prime_momentum(optimizer)
    return optimizer


def prime_momentum(optimizer: torch.optim.SGD) -> None:
    """Zero momentum buffers for every parameter of ``optimizer`` that has none yet."""
    import torch

    for group in optimizer.param_groups:
        if group["momentum"] and group["dampening"]:
            continue  # torch's first step ignores dampening: zeros would not match it
        for param in group["params"]:
            state = optimizer.state[param]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(param,
                                                            memory_format=torch.preserve_format)


_SKIPS_CLEANLY: dict[str, bool] = {}


def fused_sgd_skips_cleanly(device: torch.device) -> bool:
    """Whether fused SGD with momentum leaves its weights and buffers untouched on a step the
    gradient scaler skips, on this device type: tried once, on two numbers, before any timed
    step (one host read at set-up)."""
    import torch

    if device.type in _SKIPS_CLEANLY:
        return _SKIPS_CLEANLY[device.type]
    weight = torch.nn.Parameter(torch.ones(2, device=device))
    optimizer = torch.optim.SGD([weight], lr=0.1, momentum=0.9, fused=True)
    prime_momentum(optimizer)
    scaler = torch.amp.GradScaler(device.type)
    finite = (weight * torch.ones(2, device=device)).sum()
    scaler.scale(finite).backward()
    scaler.step(optimizer)
    scaler.update()  # one real step: the buffers now hold a gradient
    before = (weight.detach().clone(), optimizer.state[weight]["momentum_buffer"].clone())
    optimizer.zero_grad(set_to_none=True)
    overflow = (weight * torch.tensor([float("inf"), 1.0], device=device)).sum()
    scaler.scale(overflow).backward()
    scaler.step(optimizer)
    clean = bool(torch.equal(weight.detach(), before[0])
                 and torch.equal(optimizer.state[weight]["momentum_buffer"], before[1]))
    _SKIPS_CLEANLY[device.type] = clean
    return clean
