"""A file the run writes for the user or for later readers (--bench-save, --bench-html,
--bench-export, the history, the manifest): checked before anything runs, written atomically, so
a full disk or a killed session never leaves a half-written file in its place."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from os import PathLike
from pathlib import Path

from pytest_dlbench.core.errors import DlbenchError

__all__ = ["check_outputs", "write_atomic"]



def write_atomic(path: str | PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` (parents created) so that ``path`` is, at every moment, its old
    content or the whole new one: a unique temporary file in the same directory (``mkstemp``:
    O_EXCL, never following a symlink placed at its name, so two writers never share one),
    fsync, ``os.replace``. On failure (a full disk) the temporary is removed and the OSError
    raised; the file that was there is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes it 0600: the file gets the mode a plain write would have given it.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself reaches the disk
        dir_fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it."""
    with contextlib.suppress(OSError, ValueError), \
            open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_outputs(paths: Mapping[str, str | PathLike[str] | None]) -> None:
    """Check the files a report will be written to, ``{option: path}`` (None or "": not asked),
    before anything runs: one line naming the option and the path (a DlbenchError) for two
    options given the same file, a directory, something other than a regular file, a file that
    is not writable, or a place where no file can be made; a missing parent is made."""
    asked = {option: Path(path) for option, path in paths.items() if path}
    seen: dict[str, str] = {}
    for option, path in asked.items():
        key = os.path.realpath(path)
        if key in seen:
            raise DlbenchError(f"{seen[key]} and {option} are the same file {path}: each "
                               "output needs its own")
        seen[key] = option
    for option, path in asked.items():
        problem = _output_problem(path)
        if problem:
            raise DlbenchError(f"{option}: {problem}")


def _output_problem(path: Path) -> str | None:
    if path.is_dir():
        return f"{path} is a directory"
    if path.exists():
        if not path.is_file():
            return f"{path} is not a regular file"
        if not os.access(path, os.W_OK):
            return f"{path} is not writable"
    for part in path.parents:
        if part.exists():
            if not part.is_dir():
                return f"{path}: {part} is not a directory"
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{path}: cannot make {exc.filename or path.parent}: {exc.strerror or exc}"
    try:  # the file itself is made at the end, next to a temporary one: one can be made here
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{path}: cannot write in {path.parent}: {exc.strerror or exc}"
    return None
