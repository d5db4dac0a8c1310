"""Numbers as the reports write them: the formatters live in :mod:`pytest_dlbench.numbers`, one
module below both ``report/`` and ``profile/`` (the profile reports use the same formats), and
are the report package's number formats under this name."""

from __future__ import annotations

from pytest_dlbench import numbers as _numbers
from pytest_dlbench.numbers import *  # noqa: F403 - the same formatters, not a copy of them

__all__ = list(_numbers.__all__)
