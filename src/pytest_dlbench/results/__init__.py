"""What a run means (docs/architecture.md). ``frame(path)``: results as pandas DataFrames."""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["frame"]


def frame(path: str | PathLike[str], *, observations: bool = False) -> pd.DataFrame:
    """A run directory, a saved summary or a results history as a tidy DataFrame: one row
    per benchmark run, or per observation (:mod:`pytest_dlbench.results.frames`)."""
    from pytest_dlbench.results.frames import frame as make

    return make(path, observations=observations)
