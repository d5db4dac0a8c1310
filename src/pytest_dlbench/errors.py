"""The few exception types pytest-dlbench raises, each carrying the context a user needs."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DeviceError", "DlbenchError", "SuiteError", "one_line"]


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
        return ": ".join([*parts, self.message])


def one_line(exc: BaseException) -> str:
    """``Type: first non-empty line of the message`` (just ``Type`` when it has none): how an
    exception is reported as a run's reason, a logger's warning or a skipped report, so a
    multi-line message (a traceback text, a compiler log) never breaks a table row."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
