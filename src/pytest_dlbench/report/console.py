"""Text on a terminal that cannot show all of it: ``PYTHONIOENCODING=ascii``, a C locale, a
pipe opened as latin-1. A benchmark named ``bé€nch`` is written escaped (``b\\xe9\\u20acnch``),
never a ``UnicodeEncodeError`` that loses the table and the score."""

from __future__ import annotations

import contextlib
import shutil
import sys
from typing import Any

__all__ = ["report_width", "tolerant_output"]


def report_width() -> int:
    """The width the run's report is fitted to, as pytest's terminal reckons it
    (``_pytest._io.terminalwriter.get_terminal_width``): the terminal's, ``$COLUMNS``, else 80
    (and 80 for a width under 40). ``dlbench report`` uses it, so that it cuts a run's tables
    into the same blocks as the pytest run printed."""
    columns = shutil.get_terminal_size(fallback=(80, 24)).columns
    return columns if columns >= 40 else 80


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
