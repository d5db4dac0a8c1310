"""The JSON summary of a run (``--bench-save``, ``dlbench report --save``) as a file: written
atomically, read back with one-line errors naming the file.

The format itself is the type's (``SuiteSummary.to_dict``/``from_dict``, results/model/summary.py):
versioned (``"schema": "pytest-dlbench/summary"``, ``"version"``) and migrated on load, so a
baseline saved by an older pytest-dlbench stays usable. Saving stamps it with what it was
measured on (machine, package versions, git commit: results/figures/machine.py), because a baseline
is only as meaningful as the hardware and software it came from.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.output_files import write_atomic
from pytest_dlbench.layout import json_safe
from pytest_dlbench.measure.machine import current_machine, git_commit
from pytest_dlbench.results.model.summary import SuiteSummary
from pytest_dlbench.results.model.summary_json import GATE, SummaryFormatError

__all__ = [
    "BaselineError",
    "BaselineMissing",
    "load_summary",
    "save_summary",
    "summary_dict",
]


class BaselineError(DlbenchError):
    """A summary file that cannot be used: corrupt, foreign, or from a newer version."""

    def __init__(self, path: str | PathLike[str], message: str) -> None:
        self.path = str(path)
        # One line naming the file, whatever the underlying message looked like.
        super().__init__(f"{self.path}: {' '.join(message.split())}")


class BaselineMissing(BaselineError):
    """The baseline file does not exist (a distinct exit status: 'baseline required')."""


# -- saving -----------------------------------------------------------------------------------
def summary_dict(summary: SuiteSummary, *, suite: str | None = None) -> dict[str, Any]:
    """The saved form of ``summary`` (``to_dict``), stamped with where it was measured: this
    machine, now, for a summary scored here; a summary read back keeps its own."""
    if summary.provenance is None:
        summary = dataclasses.replace(summary, provenance={
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **current_machine(),
            "commit": git_commit(),
        })
    if suite is not None:
        summary = dataclasses.replace(summary, suite=suite)
    return summary.to_dict()


def save_summary(
    summary: SuiteSummary, path: str | PathLike[str], *, suite: str | None = None,
    gate: Mapping[str, Any] | None = None,
) -> Path:
    """Write the JSON summary of ``summary`` to ``path`` (parents created); return the path.
    ``gate``: the verdict of a comparison (results/gate.gate_record), saved beside it."""
    data = summary_dict(summary, suite=suite)
    if gate is not None:
        data[GATE] = dict(gate)
    text = json.dumps(json_safe(data), indent=2, allow_nan=False)
    return write_atomic(path, text + "\n")  # a baseline is never half written


# -- loading -----------------------------------------------------------------------------------
def load_summary(path: str | PathLike[str]) -> SuiteSummary:
    """Read a saved summary (any version: ``SuiteSummary.from_dict`` migrates it).

    Raises :class:`BaselineMissing` when the file does not exist and :class:`BaselineError`
    (one line naming the file, and the key when one is wrong) when it is not a readable
    pytest-dlbench summary.
    """
    path = Path(path)
    try:
        raw = untrusted.read_bytes(path)  # a regular file of bounded size: never /dev/zero
    except FileNotFoundError:
        raise BaselineMissing(path, "no such baseline file") from None
    except untrusted.FileRefused as exc:
        raise BaselineError(path, f"cannot read: {exc}") from None
    except OSError as exc:
        raise BaselineError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(path, f"cannot read: {exc}") from None
    try:
        data = untrusted.loads(text)  # its depth bounded before it is parsed
    except untrusted.FileRefused as exc:
        raise BaselineError(path, f"not read: {exc}") from None
    except ValueError as exc:
        raise BaselineError(path, f"not valid JSON: {exc}") from None
    try:
        return SuiteSummary.from_dict(data)
    except SummaryFormatError as exc:
        raise BaselineError(path, str(exc)) from None
