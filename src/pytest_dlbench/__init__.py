"""pytest-dlbench: deep-learning training benchmarks as pytest test cases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Timer", "__version__"]

if TYPE_CHECKING:
    from pytest_dlbench.measure.timing import Timer


def __getattr__(name: str) -> Any:
    # ``from pytest_dlbench import Timer`` in any training script; imported on first use, so
    # that importing the package (the pytest plugin does) stays cheap.
    if name == "Timer":
        from pytest_dlbench.measure.timing import Timer

        return Timer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
