"""Numbers as the reports write them: the formatters live in :mod:`pytest_dlbench.numbers`, one
module below both ``report/`` and ``profile/`` (the profile reports use the same formats), and
are the report package's number formats under this name."""

from __future__ import annotations

from pytest_dlbench.numbers import (
    DASH,
    MISSING,
    byte_size,
    count,
    duration,
    fixed,
    gap,
    number,
    p_value,
    percent,
    rough_percent,
    si,
    significant,
)

__all__ = [
    "DASH",
    "MISSING",
    "byte_size",
    "count",
    "duration",
    "fixed",
    "gap",
    "number",
    "p_value",
    "percent",
    "rough_percent",
    "si",
    "significant",
]
