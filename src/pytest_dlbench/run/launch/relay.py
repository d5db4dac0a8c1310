"""Each node launcher's output into the job's log: one plain prefix per node, no terminal codes.

A remote launcher runs under ``ssh -tt`` (so that it gets SIGHUP with its ssh): its output
comes through a terminal, with CRLF line ends and colours. Here every line loses those, gets
``[node] `` in front, and the last lines of each node are kept to say why it failed.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import deque
from typing import IO

__all__ = ["NodeOutput", "plain"]

#: ANSI/VT100 escape sequences (colours, cursor moves) and other control characters but tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")
#: Lines kept per node for its failure's reason.
TAIL_LINES = 60

_write_lock = threading.Lock()


def plain(line: str) -> str:
    """``line`` without its line end, carriage returns and terminal escape sequences."""
    line = line.rstrip("\r\n")
    if "\r" in line:  # a progress line redrawn in place: what is left on the screen
        line = line.rsplit("\r", 1)[-1] or line.replace("\r", "")
    return _ESCAPES.sub("", line)


class NodeOutput:
    """Copies one node launcher's output to ``out`` line by line, prefixed, in a thread."""

    def __init__(self, name: str, source: IO[bytes], out: IO[str] | None = None) -> None:
        self.name = name
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._source = source
        self._out = out
        self._thread = threading.Thread(target=self._copy, name=f"dlbench-relay-{name}",
                                        daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        out = self._out or sys.stdout
        for raw in iter(self._source.readline, b""):
            line = plain(raw.decode("utf-8", "replace"))
            self.tail.append(line)
            with _write_lock:
                out.write(f"[{self.name}] {line}\n")
                out.flush()

    def join(self, timeout: float = 5.0) -> list[str]:
        """Wait for the end of the output (the process ended); the last lines."""
        self._thread.join(timeout)
        return list(self.tail)
