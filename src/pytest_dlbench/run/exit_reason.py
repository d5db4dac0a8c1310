"""Why a benchmark that called ``sys.exit`` stopped: the last error line it wrote to stderr.

argparse reports a bad argument (``--bench-override 'toy.argv.--batch-szie=3'``) on stderr and
exits with status 2; the cause, ``unrecognized arguments: --batch-szie 3``, belongs in the failure
reason, not only in the log. :func:`stderr_tail` keeps the last lines written to ``sys.stderr``
while the benchmark runs (everything still goes through), :func:`exit_reason` names the cause.
"""

from __future__ import annotations

import contextlib
import sys
from collections import deque
from collections.abc import Iterator
from typing import Any, TextIO

from pytest_dlbench.core.errors import MAX_REASON

__all__ = ["StderrTail", "exit_reason", "stderr_tail"]

#: Lines kept: argparse writes its usage (a few lines) then the error line.
KEPT_LINES = 20
#: Longest cause put in a reason (the rest is in the log): the one cap of every reason.
MAX_CAUSE = MAX_REASON


class StderrTail:
    """A text stream that writes through to ``target`` and keeps its last lines."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._partial = ""

    def write(self, text: str) -> int:
        try:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()[-4096:]
            self.lines.extend(line for line in lines if line.strip())
        except Exception:  # noqa: BLE001 - keeping a tail never breaks the benchmark's output
            pass
        return self.target.write(text)

    def last_lines(self) -> list[str]:
        return [*self.lines, *([self._partial] if self._partial.strip() else [])]

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, isatty...
        return getattr(self.target, name)


@contextlib.contextmanager
def stderr_tail() -> Iterator[StderrTail]:
    """``sys.stderr`` kept while the block runs (put back after, unless someone replaced it)."""
    previous = sys.stderr
    tail = StderrTail(previous)
    sys.stderr = tail  # a text stream in all that is used of it
    try:
        yield tail
    finally:
        if sys.stderr is tail:
            sys.stderr = previous


def _cause(lines: list[str]) -> str | None:
    """The last line that says ``error`` (argparse: ``prog: error: MESSAGE``), else None."""
    for line in reversed(lines):
        text = line.strip()
        lowered = text.lower()
        if "error" in lowered:
            # "prog: error: unrecognized arguments: --batch-szie 3" -> the message.
            head, sep, message = text.partition(": error: ")
            text = message.strip() if sep and message.strip() else text
            return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."
    return None


def exit_reason(exc: SystemExit, lines: list[str] | None = None) -> str:
    """The failure reason of a benchmark that raised ``SystemExit``: its status and the cause it
    wrote on stderr (``lines``), or its message (``sys.exit("...")``)."""
    code = exc.code
    if isinstance(code, str) and code.strip():
        message = code.strip().splitlines()[-1]
        return f"the benchmark exited: {message}"
    status = 0 if code is None else code if isinstance(code, int) else 1
    cause = _cause(lines or [])
    if cause is not None:
        return f"the benchmark exited with status {status}: {cause}"
    return f"the benchmark exited with status {status} (an argument error? see its output)"
