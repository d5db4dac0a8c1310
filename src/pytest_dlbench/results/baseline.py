"""The JSON summary of a run (``--bench-save``, ``dlbench report --save``) and loading it back.

A summary is versioned (``"schema": "pytest-dlbench/summary"``, ``"version"``) and migrated on
load, so a baseline saved by an older pytest-dlbench stays usable. It records what it was
measured on (machine, package versions, git commit: results/machine.py) next to the numbers,
because a baseline is only as meaningful as the hardware and software it came from.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.results.machine import current_machine, git_commit
from pytest_dlbench.results.scoring import SuiteSummary
from pytest_dlbench.run.layout import json_safe

__all__ = [
    "MIGRATIONS",
    "SCHEMA",
    "VERSION",
    "BaselineError",
    "BaselineMissing",
    "load_summary",
    "migrate",
    "save_summary",
    "summary_dict",
]

SCHEMA = "pytest-dlbench/summary"
VERSION = 1


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
    """The saved form of ``summary``: header, provenance, then the numbers."""
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "version": VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **current_machine(),
        "commit": git_commit(),
    }
    numbers = summary.to_dict()
    if suite is not None:
        numbers["suite"] = suite
    data.update(numbers)
    return data


def save_summary(
    summary: SuiteSummary, path: str | PathLike[str], *, suite: str | None = None
) -> Path:
    """Write the JSON summary of ``summary`` to ``path`` (parents created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_safe(summary_dict(summary, suite=suite)), indent=2, allow_nan=False)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a baseline is never half written
    return path


# -- loading and migrating --------------------------------------------------------------------
def _v0_to_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v0 (pre-release): benchmarks as a list with ``std%`` and ``rates``; no ``samples``."""
    benches: dict[str, Any] = {}
    for entry in data.get("benchmarks") or []:
        bench = dict(entry)
        if "std%" in bench:
            bench["std_pct"] = bench.pop("std%")
        bench.setdefault("runs", [])
        benches[str(bench["name"])] = bench
    return {**data, "benchmarks": benches, "incomplete": data.get("incomplete", []),
            "failure_rate": data.get("failure_rate", 0.0), "version": 1}


#: version -> function turning that version's dict into the next version's.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _v0_to_v1}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Apply the migrations from ``data["version"]`` up to :data:`VERSION`."""
    version = data.get("version")
    while version != VERSION:
        step = MIGRATIONS.get(version)  # type: ignore[arg-type]
        if step is None:
            raise ValueError(f"unknown summary version {version!r}")
        data = step(data)
        if data.get("version") == version:
            raise ValueError(f"migration from version {version} did not advance")
        version = data.get("version")
    return data


_REQUIRED = ("perf_adj", "weight", "n", "fail")


def _validate(data: dict[str, Any]) -> None:
    benches = data.get("benchmarks")
    if not isinstance(benches, dict):
        raise ValueError("'benchmarks' is not a mapping")
    for name, bench in benches.items():
        if not isinstance(bench, dict):
            raise ValueError(f"benchmark {name!r} is not a mapping")
        missing = [k for k in _REQUIRED if k not in bench]
        if missing:
            raise ValueError(f"benchmark {name!r} lacks {', '.join(missing)}")
    score = data.get("score")
    if score is not None and not isinstance(score, int | float):
        raise ValueError("'score' is not a number")


def _schema() -> Any:
    """The typed shape of a (migrated) summary: what compare and the reports read of it."""
    from pytest_dlbench.schema import Bool, Int, Loose, Map, Num, Str

    class Run(Loose):
        status: Str | None = None
        rate: Num | None = None
        block_rates: list[Num | None] | None = None

    class Bench(Loose):
        perf_adj: Num | None
        weight: Num | None
        n: Int
        fail: Int
        perf: Num | None = None
        total: Num | None = None
        std: Num | None = None
        std_pct: Num | None = None
        rates: list[Num | None] | None = None
        samples: list[Num | None] | None = None
        enabled: Bool | None = None
        units: Str | None = None
        method: Str | None = None
        per_device: Map | None = None
        telemetry: Map | None = None
        runs: list[Run] | None = None

    class Summary(Loose):
        version: Int
        score: Num | None = None
        incomplete: list[Str] | None = None
        failure_rate: Num | None = None
        machine: Map | None = None
        benchmarks: dict[str, Bench]

    return Summary


def _typed(data: dict[str, Any]) -> dict[str, Any]:
    """Check the types of a summary (ValueError naming the field), and drop the nulls a saved
    summary has in place of non-finite numbers from its lists of samples."""
    from pydantic import ValidationError

    from pytest_dlbench.schema import first_error

    try:
        _schema().model_validate(data)
    except ValidationError as exc:
        raise ValueError(first_error(exc)) from None
    for bench in data["benchmarks"].values():
        for key in ("rates", "samples"):
            if isinstance(bench.get(key), list):
                bench[key] = [x for x in bench[key] if x is not None]
        for run in bench.get("runs") or ():
            if isinstance(run, dict) and isinstance(run.get("block_rates"), list):
                run["block_rates"] = [x for x in run["block_rates"] if x is not None]
    return data


def load_summary(path: str | PathLike[str]) -> dict[str, Any]:
    """Read a saved summary, migrated to the current version.

    Raises :class:`BaselineMissing` when the file does not exist and :class:`BaselineError`
    (one line naming the file) when it is not a readable pytest-dlbench summary.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineMissing(path, "no such baseline file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, f"cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BaselineError(path, f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BaselineError(path, f'not a pytest-dlbench summary (no "schema": "{SCHEMA}")')
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise BaselineError(
            path, f"summary version {version} is newer than this pytest-dlbench reads ({VERSION})"
        )
    try:
        data = migrate(data)
        _validate(data)
        data = _typed(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise BaselineError(path, f"invalid summary: {exc}") from exc
    return data
