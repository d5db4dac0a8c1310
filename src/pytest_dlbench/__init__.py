"""pytest-dlbench: deep-learning training benchmarks as pytest test cases."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
