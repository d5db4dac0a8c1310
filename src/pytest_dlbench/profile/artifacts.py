"""The snapshot and trace reports: a file each, written next to the JSON reports.

- ``snapshot.pickle``: ``torch.cuda.memory._dump_snapshot`` after the snapshot's steps, with the
  allocation history recorded from the end of its warm-up; drop it on
  https://pytorch.org/memory_viz. CUDA only.
- ``trace.json``: ``prof.export_chrome_trace`` of the profiled steps; open it in
  https://ui.perfetto.dev or ``chrome://tracing``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.profile.base import register

__all__ = ["SnapshotReport", "TraceReport"]


@register
@dataclass(frozen=True)
class SnapshotReport:
    name: ClassVar[str] = "snapshot"

    file: str  # relative to the profile directory
    bytes: int
    warmup: int
    steps: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SnapshotReport:
        names = set(cls.__dataclass_fields__) - {"name"}
        return cls(**{k: v for k, v in data.items() if k in names})

    def rows(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(self).items()}]

    def render(self, verbose: bool = False) -> str:
        text = (f"snapshot: {self.file} ({fmt.byte_size(self.bytes)}, {self.steps} steps after "
                f"{self.warmup} warm-up); open it in https://pytorch.org/memory_viz")
        return text + (f"\n  {self.note}" if self.note else "")


@register
@dataclass(frozen=True)
class TraceReport:
    name: ClassVar[str] = "trace"

    file: str  # relative to the profile directory
    bytes: int
    steps: int
    rank: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceReport:
        names = set(cls.__dataclass_fields__) - {"name"}
        return cls(**{k: v for k, v in data.items() if k in names})

    def rows(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(self).items()}]

    def render(self, verbose: bool = False) -> str:
        text = (f"trace: {self.file} ({fmt.byte_size(self.bytes)}, {self.steps} profiled steps"
                + (f", rank {self.rank}" if self.rank else "")
                + "); open it in https://ui.perfetto.dev")
        return text + (f"\n  {self.note}" if self.note else "")
