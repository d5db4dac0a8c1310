"""The names the workloads once took from this one module, now split by job (issue 22):

- :mod:`.arguments`: a workload's arguments, its device, skipping;
- :mod:`.precision`: precision presets, fused optimizers, backend switches;
- :mod:`.compilation`: ``torch.compile`` options, warm-up and records;
- :mod:`.batches`: in-memory batches on the device;
- :mod:`.models`: classifier models built for their input size, their logits;
- :mod:`.images`: the JPEG ImageFolder DataLoader;
- :mod:`.train`: the timed training loop.

Kept so that a user's benchmark written against ``pytest_dlbench.workloads._common`` still
imports; the package's own workloads import the modules above.
"""

from __future__ import annotations

from pytest_dlbench.suite.presets import COMPILE_MODES, PRECISIONS
from pytest_dlbench.suite.presets import add_arguments as add_training_args
from pytest_dlbench.workloads.arguments import device_of, parse, positive_int, skip
from pytest_dlbench.workloads.batches import tensor_batches, to_device
from pytest_dlbench.workloads.compilation import (
    COMPILE_MAX_STEPS,
    COMPILE_MIN_STEPS,
    CompileError,
    CompileOptions,
    compile_function,
    compile_reason,
    compile_stats,
    compile_warmup,
    note_late_compiles,
)
from pytest_dlbench.workloads.images import add_image_data_args, jpeg_loader
from pytest_dlbench.workloads.models import build_sized, logits_of
from pytest_dlbench.workloads.precision import (
    Precision,
    backend_flags,
    cpu_runs_fp16,
    optimizer_options,
    precision_unsupported,
    resolve_precision,
    setup_precision,
)
from pytest_dlbench.workloads.train import train_steps

__all__ = [
    "COMPILE_MAX_STEPS",
    "COMPILE_MIN_STEPS",
    "COMPILE_MODES",
    "PRECISIONS",
    "CompileError",
    "CompileOptions",
    "Precision",
    "add_image_data_args",
    "add_training_args",
    "backend_flags",
    "build_sized",
    "compile_function",
    "compile_reason",
    "compile_stats",
    "compile_warmup",
    "cpu_runs_fp16",
    "device_of",
    "jpeg_loader",
    "logits_of",
    "note_late_compiles",
    "optimizer_options",
    "parse",
    "positive_int",
    "precision_unsupported",
    "resolve_precision",
    "setup_precision",
    "skip",
    "tensor_batches",
    "to_device",
    "train_steps",
]
