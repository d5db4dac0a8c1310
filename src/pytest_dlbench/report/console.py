"""Text on a terminal that cannot show all of it: ``PYTHONIOENCODING=ascii``, a C locale, a
pipe opened as latin-1. A benchmark named ``bé€nch`` is written escaped (``b\\xe9\\u20acnch``),
never a ``UnicodeEncodeError`` that loses the table and the score."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

__all__ = ["tolerant_output"]


def tolerant_output(*streams: Any) -> None:
    """Set ``errors="backslashreplace"`` on ``streams`` (default: ``sys.stdout`` and
    ``sys.stderr``, and the interpreter's own ones when something has replaced those): what their
    encoding cannot hold is escaped. A stream that cannot be reconfigured is left as it is."""
    targets = streams or (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    for stream in targets:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or getattr(stream, "errors", None) == "backslashreplace":
            continue
        with contextlib.suppress(ValueError, OSError, TypeError, AttributeError):
            reconfigure(errors="backslashreplace")
