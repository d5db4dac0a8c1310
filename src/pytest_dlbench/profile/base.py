"""What every report is: a typed dataclass that turns into JSON, CSV rows and terminal text.

A report that cannot be made (no CUDA for a snapshot, no ``bench.watch`` for a summary, a
profiler that failed) is a :class:`NoteReport`: one line that says why, and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

__all__ = ["NoteReport", "Report", "register", "report_from_dict"]


@runtime_checkable
class Report(Protocol):
    """One report of one run."""

    name: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``{"report": name, ...}``; :func:`report_from_dict` reads it back."""
        ...

    def rows(self) -> list[dict[str, Any]]:
        """The CSV rows (one table per report; a ``table`` column when it holds several)."""
        ...

    def render(self, verbose: bool = False) -> str:
        """Terminal text: concise by default, everything with ``verbose``."""
        ...


_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {}


class _Readable(Protocol):
    """A report class that :func:`register` takes: its ``name`` and how it reads its dicts."""

    name: ClassVar[str]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any: ...


_R = TypeVar("_R", bound=_Readable)


def register(cls: type[_R]) -> type[_R]:
    """Class decorator: ``report_from_dict`` reads dicts whose ``report`` is ``cls.name``."""
    _READERS[cls.name] = cls.from_dict
    return cls


@dataclass(frozen=True)
class NoteReport:
    """A report that was not made, with the one line that says why."""

    report: str
    note: str
    name: ClassVar[str] = "note"

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.report, "skipped": True, "note": self.note}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NoteReport:
        return cls(str(data["report"]), str(data.get("note") or ""))

    def rows(self) -> list[dict[str, Any]]:
        return [{"report": self.report, "note": self.note}]

    def render(self, verbose: bool = False) -> str:
        return self.note


def report_from_dict(data: Mapping[str, Any]) -> Any:
    """The report a ``to_dict()`` came from (a :class:`NoteReport` for a skipped one)."""
    if data.get("skipped"):
        return NoteReport.from_dict(data)
    name = data.get("report")
    reader = _READERS.get(str(name))
    if reader is None:
        raise ValueError(f"unknown report {name!r}")
    return reader(data)
