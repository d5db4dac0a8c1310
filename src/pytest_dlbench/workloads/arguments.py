"""A workload's start: its arguments (parsed from ``bench.args``), its device, and how it
ends as skipped when the machine cannot run it.

Private to the workloads package. torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["device_of", "parse", "positive_int", "skip"]


def skip(reason: str) -> None:
    """End the benchmark as skipped (not failed): pytest's skip, the harness's ``skipped``."""
    import pytest

    raise pytest.skip.Exception(reason)


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
