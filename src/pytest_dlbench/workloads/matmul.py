"""Matrix-multiply throughput (milabench's `flops` bench). Units: TFLOP/s.

Each step (one observation) runs `--number` matmuls of (m, k) @ (k, n). The step goes through
`bench.iterate` with its work, 2·m·n·k·number / 1e12 TFLOP, as the step's item count, so the
observation is TFLOP/s and the timing is the framework's own: CUDA events with one synchronisation
per window of steps on a GPU (never one per matmul), host clock on a CPU. A window's rate is then
Σ TFLOP / Σ seconds, like every other benchmark.

With ``--identity-chain`` a step is milabench's instead: an (m, n) matrix multiplied by the
(n, n) identity, ``--number`` times two products (x → y, then y → x, into the same two buffers),
so the values never grow or vanish in any precision; its work is 2 · 2·m·n·n · number.

``--dtype fp8`` multiplies float8 (e4m3) matrices with ``torch._scaled_mm`` at unit scales, as
milabench's ``fp8`` does: the chain's products stay in fp8, a plain product is written in bf16
(a sum of k fp8 products outgrows fp8's range). It needs a GPU with fp8 tensor cores (compute
capability 8.9 or newer); elsewhere the benchmark skips itself, saying why
(``--allow-emulated-precision`` runs it anyway, as torch emulates it on a CPU).
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from pytest_dlbench.workloads.arguments import device_of, parse, positive_int, skip
from pytest_dlbench.workloads.precision import backend_flags

__all__ = ["DTYPES", "main", "make_parser"]

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
#: fp8 tensor cores: Ada (8.9) and Hopper (9.0) on.
FP8_CAPABILITY = (8, 9)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="matmul", description=__doc__)
    parser.add_argument("--m", type=positive_int, default=8192)
    parser.add_argument("--n", type=positive_int, default=8192)
    parser.add_argument("--k", type=positive_int, default=None,
                        help="inner dimension (default: same as --m)")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32",
                        help="tf32: fp32 tensors with TF32 tensor cores allowed")
    parser.add_argument("--number", type=positive_int, default=30,
                        help="matmuls per observation (default 30)")
    parser.add_argument("--identity-chain", action="store_true",
                        help="milabench's step: (m, n) @ eye(n) into y, then y @ eye(n) back "
                             "into x, --number times (two products each); --k does not apply")
    parser.add_argument("--allow-emulated-precision", action="store_true",
                        help="run fp8 where the device has no fp8 arithmetic (torch emulates it)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def fp8_unsupported(device: Any) -> str | None:
    """Why fp8 matmuls cannot run natively on ``device``; None when they can."""
    import torch

    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"fp8 matmul: torch {torch.__version__} has no float8 matmul (torch._scaled_mm)"
    if device.type != "cuda":
        return (f"fp8 matmul: the {device.type} has no fp8 arithmetic (a GPU of compute "
                f"capability {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]} or newer has)")
    capability = torch.cuda.get_device_capability(device)
    if tuple(capability) < FP8_CAPABILITY:
        return (f"fp8 matmul: this GPU ({capability[0]}.{capability[1]}) has no fp8 tensor "
                f"cores ({FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]} or newer)")
    return None


def main(bench: Any) -> None:
    """Multiply two random matrices `--number` times per observation."""
    import torch

    args = parse(make_parser(), bench)
    if args.identity_chain and args.k is not None:
        raise SystemExit("matmul: --k does not apply to --identity-chain (the identity is n x n)")
    device = device_of(bench)
    k = args.k if args.k is not None else args.m
    if args.dtype == "fp8":
        reason = fp8_unsupported(device)
        if reason is not None and not args.allow_emulated_precision:
            skip(reason + " (--allow-emulated-precision runs it anyway)")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.dtype, torch.float32)
    torch.manual_seed(args.seed)
    bench.set_units("TFLOP/s")

    if args.identity_chain:
        _identity_chain(bench, args, device, dtype)
        return
    if args.dtype == "fp8":
        _fp8_product(bench, args, device, k)
        return
    a = torch.randn(args.m, k, device=device, dtype=dtype)
    b = torch.randn(k, args.n, device=device, dtype=dtype)
    out = torch.empty(args.m, args.n, device=device, dtype=dtype)  # reused: no allocation
    tflop_per_step = 2.0 * args.m * args.n * k * args.number / 1e12
    with backend_flags(tf32=args.dtype == "tf32"):
        for _ in bench.iterate(itertools.count(), batch_size=tflop_per_step):
            with bench.timer.region("matmul"):
                for _ in range(args.number):
                    torch.matmul(a, b, out=out)


def _identity_chain(bench: Any, args: argparse.Namespace, device: Any, dtype: Any) -> None:
    """milabench's flops step: x @ I into y, y @ I into x, `--number` times, no allocation."""
    import torch

    if args.dtype == "fp8":
        dtype = torch.float8_e4m3fn
    # Made in fp32 and cast to the dtype, as milabench's flops/main.py does.
    identity = torch.eye(args.n, dtype=torch.float32, device=device).to(dtype)
    x = torch.randn(args.m, args.n, dtype=torch.float32, device=device).to(dtype)
    y = torch.zeros_like(x)
    if args.dtype == "fp8":
        _fp8_chain(bench, args, device, identity, x, y)
        return
    tflop_per_step = 2 * (2.0 * args.m * args.n * args.n) * args.number / 1e12
    with backend_flags(tf32=args.dtype == "tf32"):
        for _ in bench.iterate(itertools.count(), batch_size=tflop_per_step):
            with bench.timer.region("matmul"):
                for _ in range(args.number):
                    torch.mm(x, identity, out=y)
                    torch.mm(y, identity, out=x)


def _fp8_chain(bench: Any, args: argparse.Namespace, device: Any, identity: Any, x: Any,
               y: Any) -> None:
    """The identity chain in fp8: ``torch._scaled_mm`` wants its second matrix column-major,
    which the identity's transpose is, and unit scales keep x @ I = x exact."""
    import torch

    one = torch.tensor(1.0, device=device)
    column_major = identity.t()
    tflop_per_step = 2 * (2.0 * args.m * args.n * args.n) * args.number / 1e12
    for _ in bench.iterate(itertools.count(), batch_size=tflop_per_step):
        with bench.timer.region("matmul"):
            for _ in range(args.number):
                torch._scaled_mm(x, column_major, scale_a=one, scale_b=one, out=y)
                torch._scaled_mm(y, column_major, scale_a=one, scale_b=one, out=x)


def _fp8_product(bench: Any, args: argparse.Namespace, device: Any, k: int) -> None:
    """(m, k) @ (k, n) in fp8, written in bf16."""
    import torch

    fp8 = torch.float8_e4m3fn
    a = torch.randn(args.m, k, device=device).to(fp8)
    b = torch.randn(args.n, k, device=device).to(fp8).t()  # column-major, as _scaled_mm wants
    out = torch.empty(args.m, args.n, device=device, dtype=torch.bfloat16)
    one = torch.tensor(1.0, device=device)
    tflop_per_step = 2.0 * args.m * args.n * k * args.number / 1e12
    for _ in bench.iterate(itertools.count(), batch_size=tflop_per_step):
        with bench.timer.region("matmul"):
            for _ in range(args.number):
                torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                 out=out)
