"""The few exception types pytest-dlbench raises, each carrying the context a user needs."""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_MESSAGE", "MAX_QUOTED", "MAX_REASON", "DeviceError", "DlbenchError",
           "SuiteError", "one_line", "quoted", "shorten"]


class DlbenchError(Exception):
    """Base class: the message is one line meant for the user, not a traceback."""


class DeviceError(DlbenchError):
    """The device a run was given cannot be used: a GPU slot where torch cannot use CUDA (an
    old driver, a bad ``CUDA_VISIBLE_DEVICES``, a torch built without CUDA)."""


class SuiteError(DlbenchError):
    """A suite or system file cannot be resolved.

    Formats as ``file[:line[:column]]: benchmark: message`` so every error names where to look.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        bench: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.bench = bench
        self.line = line
        self.column = column
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
        parts = [p for p in (where, self.bench) if p]
        return ": ".join([*parts, shorten(self.message, MAX_MESSAGE)])


#: The longest failure reason a run records, whatever gave it (a Python exception's message, an
#: external command's error line, a ``sys.exit`` cause): the whole text is in the run's log.
MAX_REASON = 300


#: The longest message a :class:`SuiteError` gives (its file and benchmark are always whole): a
#: suite is text someone else wrote, and a value of 100,000 characters quoted whole made a
#: 100 KB error line.
MAX_MESSAGE = 1000
#: The most of a value written in a suite that a message quotes (:func:`quoted`).
MAX_QUOTED = 80


def shorten(text: str, limit: int = MAX_REASON) -> str:
    """``text`` in at most ``limit`` characters, cut with ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quoted(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for a message, in at most ``limit`` characters (cut with ``...``)."""
    return shorten(repr(value), limit)


def one_line(exc: BaseException) -> str:
    """``Type: first non-empty line of the message`` (just ``Type`` when it has none), at most
    :data:`MAX_REASON` characters: how an exception is reported as a run's reason, a logger's
    warning or a skipped report, so a multi-line message (a traceback text, a compiler log) never
    breaks a table row, and a 20 MB one does not fill the terminal, the report and the
    baseline."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return shorten(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
