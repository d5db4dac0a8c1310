"""Reading a file someone else wrote: a regular file, of a bounded size, JSON of a bounded depth.

Every reader of a file that pytest-dlbench did not just write itself (a baseline, a run's
``manifest.json``, ``against.json``, a profile's ``index.json``, the specs handed to children,
a stream's lines) goes through here, so that none of them can hang on a FIFO, read
``/dev/zero`` until memory runs out, or recurse until the interpreter gives up on a JSON value
nested 100,000 levels deep:

- :func:`read_bytes` opens without blocking (a FIFO cannot hold the open), refuses anything that
  is not a regular file once it is open (``fstat``: no race with a rename), and never reads more
  than its limit, whatever the file's size says.
- :func:`loads` counts the nesting of a JSON text before parsing it (a count of brackets, and a
  scan outside strings only when the count could exceed the bound).

Both raise :class:`FileRefused`, a ``ValueError`` whose message is one line without the file's
name (the caller names the file in its own words: ``FILE: unreadable manifest: ...``). A file
that does not exist is still ``FileNotFoundError``, and other failures to open still
``OSError``: a missing baseline means something different from a bad one.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from os import PathLike
from typing import Any

from pytest_dlbench.core.errors import DlbenchError

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "MAX_LINE_BYTES",
    "FileRefused",
    "lines",
    "loads",
    "open_regular",
    "read_bytes",
    "read_json",
    "reason",
    "too_deep",
]

#: The largest JSON file read (a baseline, a manifest, a profile index): ours are kilobytes.
MAX_JSON_BYTES = 64 << 20
#: The longest stream line parsed: a record is a few hundred bytes, a telemetry sample of 8
#: GPUs a few kilobytes.
MAX_LINE_BYTES = 1 << 20
#: The deepest nesting of JSON values parsed: what pytest-dlbench writes is a few levels deep,
#: and a suite's values (which reach manifests and specs) are bounded at 64 levels.
MAX_DEPTH = 128

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
# A JSON string (its escapes included) or one bracket: the brackets outside strings.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_OPEN = frozenset(b"[{")


class FileRefused(DlbenchError, ValueError):
    """A file (or text) that is not read: not a regular file, too large, nested too deep."""


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"


def open_regular(path: str | PathLike[str]) -> int:
    """A file descriptor open for reading on the regular file ``path``; :class:`FileRefused`
    for anything else (a FIFO is opened without blocking, then refused). Symbolic links are
    followed: the file they name is checked. ``OSError`` as ``open`` raises it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
            raise FileRefused(f"not a regular file ({kind})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def lines(path: str | PathLike[str], *,
          limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` of the regular file ``path``, one line in memory at a time; a
    line longer than ``limit`` bytes is ``None`` (skipped without being kept). Line endings are
    removed. Raises as :func:`open_regular`."""
    with os.fdopen(open_regular(path), "rb") as handle:
        number = 0
        while True:
            raw = handle.readline(limit + 1)
            if not raw:
                return
            number += 1
            if len(raw) <= limit or raw.endswith(b"\n"):
                yield number, raw.rstrip(b"\r\n")
                continue
            while raw and not raw.endswith(b"\n"):  # the rest of the long line, unread
                raw = handle.readline(1 << 20)
            yield number, None


def read_bytes(path: str | PathLike[str], *, limit: int = MAX_JSON_BYTES) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes.

    Raises :class:`FileRefused` for anything but a regular file (a FIFO, a device, a directory)
    and for a file larger than ``limit``; ``FileNotFoundError`` and other ``OSError`` as
    ``open`` raises them. Symbolic links are followed: the file they name is checked.
    """
    fd = open_regular(path)
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise FileRefused(f"larger than {_size(limit)} ({info.st_size} bytes)")
        chunks: list[bytes] = []
        size = 0
        while True:  # the file may grow while it is read (or lie about its size: /proc)
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FileRefused(f"larger than {_size(limit)}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def too_deep(data: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects deeper than ``limit`` (brackets
    inside strings do not count). Linear; a text with few brackets is not scanned at all."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    for token in _TOKENS.finditer(raw):
        first = token.group()[0]
        if first in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif first != 0x22:  # a closing bracket (a string starts with '"')
            depth -= 1
    return False


# A float holds any integer of at most this many digits (its largest is about 1.8e308).
_FLOAT_DIGITS = 308
_LONG_DIGITS = re.compile(f"[0-9]{{{_FLOAT_DIGITS + 1},}}")
_LONG_DIGIT_BYTES = re.compile(_LONG_DIGITS.pattern.encode())


def _int(text: str) -> int | float:
    """A JSON integer, or the infinity of its sign where it is too large for a float: the
    figures read are floats, and ``1e999`` already reads as infinity, which every reader
    leaves out with its warning; a 401-digit integer would raise OverflowError in the
    arithmetic instead."""
    value = int(text)
    try:
        float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    return value


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)``, refusing a text nested deeper than ``max_depth`` before parsing
    (:class:`FileRefused`). Invalid JSON and invalid UTF-8 raise ``ValueError`` as ``json``
    does. An integer too large for a float reads as the infinity of its sign, as ``1e999``
    does."""
    if too_deep(data, max_depth):
        raise FileRefused(f"nested deeper than {max_depth} levels")
    try:
        if len(data) > _FLOAT_DIGITS and (
                _LONG_DIGITS.search(data) if isinstance(data, str)
                else _LONG_DIGIT_BYTES.search(data)):
            return json.loads(data, parse_int=_int)
        return json.loads(data)
    except RecursionError:  # pragma: no cover - the depth is bounded above
        raise FileRefused(f"nested deeper than {max_depth} levels") from None


def read_json(path: str | PathLike[str], *, limit: int = MAX_JSON_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in the regular file ``path`` (:func:`read_bytes`, :func:`loads`): UTF-8,
    at most ``limit`` bytes and ``max_depth`` levels. ``ValueError`` (:class:`FileRefused`,
    ``json.JSONDecodeError``, ``UnicodeDecodeError``) for a file that is not such a value,
    ``OSError`` (``FileNotFoundError`` included) for one that cannot be opened."""
    return loads(read_bytes(path, limit=limit).decode("utf-8"), max_depth=max_depth)


def reason(exc: BaseException) -> str:
    """Why a file could not be read, in one line: an ``OSError``'s own words (without the file
    name, which the caller gives), else the message."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return " ".join(text.split())
