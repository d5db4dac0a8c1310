"""The benchmark dimensions every built-in training workload shares: precision and compilation.

One argparse definition (:func:`add_arguments`) used by every training workload, and one
reading of a command line (:func:`run_dimensions`) used by the harness to record them in the
stream's ``config`` record, so that a report can show them and pair a compiled benchmark with
its eager sibling (:func:`eager_key`). No torch here: the harness and the reports import it.

- ``--precision {fp32,tf32,bf16,fp16,tf32-fp16}``: fp32 (TF32 off), tf32 (TF32 matmuls and
  convolutions), bf16 / fp16 autocast (fp16 with a gradient scaler), tf32-fp16 (both).
- ``--compile[=MODE]``: ``torch.compile`` the forward and loss (backward through AOTAutograd);
  MODE is default (the bare flag), reduce-overhead, max-autotune or max-autotune-no-cudagraphs;
  ``none`` is eager (handy in a matrix). ``--compile-backend`` picks the backend (inductor).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "COMPILE_MODES",
    "DEFAULT_BACKEND",
    "EAGER",
    "PRECISIONS",
    "TRAINING_DEFINITIONS",
    "add_arguments",
    "eager_key",
    "run_dimensions",
]

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "tf32-fp16")
#: ``none`` is eager; the others are ``torch.compile`` modes.
EAGER = "none"
COMPILE_MODES = (EAGER, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DEFAULT_BACKEND = "inductor"

#: The built-in workloads that take these arguments (matmul and dataloader do not train).
TRAINING_DEFINITIONS = frozenset({
    "pytest_dlbench.workloads.toy:main",
    "pytest_dlbench.workloads.vision:train",
    "pytest_dlbench.workloads.timm_train:train",
    "pytest_dlbench.workloads.lm:train",
    "pytest_dlbench.workloads.clip:train",
    "pytest_dlbench.workloads.ddp:train",
})

_COMPILE_FLAGS = ("--compile", "--compile-backend")


def add_arguments(parser: argparse.ArgumentParser, *, precision: str = "fp32") -> None:
    """``--precision``, ``--allow-emulated-precision``, ``--compile[=MODE]`` and
    ``--compile-backend`` on a workload's parser."""
    parser.add_argument("--precision", choices=PRECISIONS, default=precision,
                        help=f"fp32, tf32, bf16 or fp16 autocast (default {precision}); a preset "
                             "the hardware cannot do is a skip")
    parser.add_argument("--allow-emulated-precision", action="store_true",
                        help="run a preset the hardware lacks anyway (emulated: measures the "
                             "code path, not the hardware)")
    add_compile_arguments(parser)


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """``--compile[=MODE]`` and ``--compile-backend`` alone (a workload with its own precision)."""
    parser.add_argument("--compile", nargs="?", const="default", default=EAGER,
                        choices=COMPILE_MODES, metavar="MODE",
                        help="torch.compile the forward and loss; MODE: default (the bare flag), "
                             "reduce-overhead, max-autotune, max-autotune-no-cudagraphs, or none "
                             "(eager, the default)")
    parser.add_argument("--compile-backend", default=DEFAULT_BACKEND, metavar="BACKEND",
                        help=f"torch.compile backend (default {DEFAULT_BACKEND})")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    add_arguments(parser)
    return parser


def run_dimensions(definition: str | None, args: Sequence[str]) -> dict[str, Any]:
    """``{"precision": ..., "compile": None | {"mode", "backend"}}`` of a built-in training
    workload's command line (the ``config`` record's fields); ``{}`` for any other definition,
    or for a command line these arguments cannot be read from (the workload reports that)."""
    if definition not in TRAINING_DEFINITIONS:
        return {}
    try:
        known, _ = _parser().parse_known_args([str(a) for a in args])
    except (argparse.ArgumentError, SystemExit):
        return {}
    compiled = None
    if known.compile != EAGER:
        compiled = {"mode": known.compile, "backend": known.compile_backend}
    return {"precision": known.precision, "compile": compiled}


def _strip_compile(args: Sequence[str]) -> list[str]:
    """``args`` without ``--compile[=MODE]``, ``--compile MODE`` and ``--compile-backend``."""
    out: list[str] = []
    i = 0
    args = [str(a) for a in args]
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if name in _COMPILE_FLAGS:
            takes_value = "=" not in arg and i + 1 < len(args)
            if takes_value and name == "--compile":
                takes_value = args[i + 1] in COMPILE_MODES
            i += 2 if takes_value else 1
            continue
        out.append(arg)
        i += 1
    return out


def eager_key(spec: Mapping[str, Any]) -> str | None:
    """What a compiled benchmark and its eager sibling share: the definition, the command line
    without the compile arguments, and the plan (of a ``config`` record's ``spec``). None for a
    spec without a definition."""
    definition = spec.get("definition")
    if not definition:
        return None
    plan = spec.get("plan") or {}
    return json.dumps(
        [definition, _strip_compile(spec.get("args") or ()), plan.get("method"), plan.get("n")],
        default=str,
    )
