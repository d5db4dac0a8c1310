"""Each node launcher's output into the job's log: one plain prefix per node, no terminal codes.

A remote launcher runs under ``ssh -tt`` (so that it gets SIGHUP with its ssh): its output
comes through a terminal, with CRLF line ends and colours. Here every line loses those, gets
``[node] `` in front, and the last lines of each node are kept to say why it failed.

Under Slurm every node's launcher writes into one ``srun --label`` output, each line behind its
task number (``1: ...``): :class:`LabelledOutput` splits it by task, and each launcher's first
and last lines (:func:`start_line`, :func:`exit_line`) say which node it is and how it ended.
"""

from __future__ import annotations

import queue
import re
import sys
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["LabelledOutput", "NodeOutput", "TaskEvent", "exit_line", "plain", "start_line"]

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


# -- one srun --label output, split by task ------------------------------------------------------

#: ``srun --label``'s task number in front of a line (padded with spaces to the widest).
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
#: A Slurm node launcher's first line: its node, its address, its step (nodes.py).
_START = re.compile(r"^dlbench: slurm node (\S+) \((\S*)\), node rank \d+, step (\S+)")
#: Its last line: the status it exits with.
_EXIT = re.compile(r"^dlbench: slurm node (\S+): its launcher exits with status (-?\d+)$")


def start_line(name: str, addr: str | None, node_rank: int, step: str) -> str:
    """What a node launcher under srun says first (read back by :class:`LabelledOutput`)."""
    return f"dlbench: slurm node {name} ({addr or ''}), node rank {node_rank}, step {step}"


def exit_line(name: str, code: int) -> str:
    """What a node launcher under srun says last."""
    return f"dlbench: slurm node {name}: its launcher exits with status {code}"


@dataclass(frozen=True)
class TaskEvent:
    """A task's start (``code`` None: its node, address and step) or its end (its status)."""

    task: int
    name: str
    addr: str = ""
    step: str = ""
    code: int | None = None


class LabelledOutput:
    """Copies an ``srun --label`` output to ``out`` in a thread, each task's lines behind its
    node's name (``[node2] ...``; srun's own lines behind ``[srun]``), keeps each task's last
    lines, and queues each task's start and end (:attr:`events`).

    ``names`` are the allocation's nodes in order: task ``i`` of a one-task-per-node step runs
    on the ``i``-th, until its own first line names its node (``SLURMD_NODENAME``)."""

    def __init__(self, names: Sequence[str], source: IO[bytes],
                 out: IO[str] | None = None) -> None:
        self.names = {index: name for index, name in enumerate(names)}
        self.addrs: dict[int, str] = {}
        self.tails: dict[int, deque[str]] = {}
        self.srun_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.events: queue.Queue[TaskEvent] = queue.Queue()
        self._source = source
        self._out = out
        self._thread = threading.Thread(target=self._copy, name="dlbench-relay-srun",
                                        daemon=True)
        self._thread.start()

    def name(self, task: int) -> str:
        return self.names.get(task, f"task{task}")

    def tail(self, task: int) -> list[str]:
        return list(self.tails.get(task, ()))

    def _copy(self) -> None:
        out = self._out or sys.stdout
        for raw in iter(self._source.readline, b""):
            line = plain(raw.decode("utf-8", "replace"))
            match = _LABEL.match(line)
            if match is None:
                self.srun_tail.append(line)
                prefixed = f"[srun] {line}"
            else:
                task, text = int(match.group(1)), match.group(2)
                self._note(task, text)
                self.tails.setdefault(task, deque(maxlen=TAIL_LINES)).append(text)
                prefixed = f"[{self.name(task)}] {text}"
            with _write_lock:
                out.write(prefixed + "\n")
                out.flush()

    def _note(self, task: int, text: str) -> None:
        start = _START.match(text)
        if start is not None:
            self.names[task], self.addrs[task] = start.group(1), start.group(2)
            self.events.put(TaskEvent(task, start.group(1), start.group(2), start.group(3)))
            return
        end = _EXIT.match(text)
        if end is not None:
            self.events.put(TaskEvent(task, self.name(task), self.addrs.get(task, ""),
                                      code=int(end.group(2))))

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the end of the output (srun ended)."""
        self._thread.join(timeout)
