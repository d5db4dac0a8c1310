"""The run directory and every name in it: written and parsed here, nowhere else.

```
<base>/runs/<run-name>.<YYYYmmdd-HHMMSS>/
    manifest.json               the benchmarks this run set out to measure (the score's
                                "incomplete" rule needs the ones that never wrote a stream)
    specs/<bench>.json          the resolved spec a child process (or torchrun rank) runs
    <bench>.D<k>[.R<r>].data    one JSON-lines stream per run of a benchmark
    <bench>.D<k>[.R<r>].log     that run's child output
```

Item ids follow the same names: ``<bench>[D<k>]``, or ``<bench>[D<k>-R<r>]`` with repeats.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.suite import BenchSpec

__all__ = [
    "MANIFEST",
    "StreamName",
    "item_name",
    "log_path",
    "make_run_dir",
    "parse_item_id",
    "parse_stream_name",
    "profile_dir",
    "read_manifest",
    "read_spec",
    "spec_path",
    "stream_path",
    "stream_paths",
    "work_dir",
    "write_manifest",
    "write_spec",
]

MANIFEST = "manifest.json"
STREAM_SUFFIX = ".data"
LOG_SUFFIX = ".log"
PROFILE_SUFFIX = ".profile"
WORK_SUFFIX = ".work"
SPECS = "specs"
_STREAM_NAME = re.compile(r"^(?P<bench>.+)\.D(?P<device>\d+)(?:\.R(?P<repeat>\d+))?\.data$")
_ITEM_ID = re.compile(r"(?:^|::)(?P<bench>[^:\[]+)\[D(?P<device>\d+)(?:-R(?P<repeat>\d+))?\]$")


@dataclass(frozen=True)
class StreamName:
    """Which run of which benchmark a stream file (or an item) is."""

    bench: str
    device: int
    repeat: int | None = None


# -- the run directory ---------------------------------------------------------------------------


def make_run_dir(base: Path, run_name: str, now: _dt.datetime | None = None) -> Path:
    """``<base>/runs/<run-name>.<YYYYmmdd-HHMMSS>``, made unique if that second is taken."""
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    runs = Path(base) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    candidate = runs / f"{run_name}.{stamp}"
    suffix = 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = runs / f"{run_name}.{stamp}-{suffix}"


# -- streams -------------------------------------------------------------------------------------


def stream_path(run_dir: str | PathLike[str], bench: str, device: int,
                repeat: int | None = None) -> Path:
    name = f"{bench}.D{device}" + (f".R{repeat}" if repeat is not None else "") + STREAM_SUFFIX
    return Path(run_dir) / name


def log_path(stream: str | PathLike[str]) -> Path:
    """The child output kept beside a stream."""
    return Path(stream).with_suffix(LOG_SUFFIX)


def parse_stream_name(path: str | PathLike[str] | None) -> StreamName:
    """(bench, device, repeat) from a stream's file name; an unexpected name is the bench."""
    name = Path(path).name if path else ""
    match = _STREAM_NAME.match(name)
    if match is None:
        return StreamName(Path(name).stem if name else "?", 0)
    repeat = match["repeat"]
    return StreamName(match["bench"], int(match["device"]), int(repeat) if repeat else None)


def stream_paths(run_dir: str | PathLike[str]) -> list[Path]:
    """Every stream of a run directory, sorted."""
    return sorted(p for p in Path(run_dir).glob("*" + STREAM_SUFFIX) if p.is_file())


def profile_dir(stream: str | PathLike[str], *, rank: int = 0) -> Path:
    """``<run_dir>/<stem>.profile`` beside the stream ``<stem>.data``: its profile reports
    (``rank<r>/`` inside it for rank ``r > 0`` of an njobs job)."""
    path = Path(stream)
    stem = path.name.removesuffix(STREAM_SUFFIX) if path.name.endswith(STREAM_SUFFIX) else path.stem
    out = path.parent / f"{stem}{PROFILE_SUFFIX}"
    return out / f"rank{rank}" if rank else out


def work_dir(stream: str | PathLike[str]) -> Path:
    """``<run_dir>/<stem>.work`` beside the stream ``<stem>.data``: the working folder of an
    external command (its cwd and ``{workdir}``: checkpoints, its own logs), one per run."""
    path = Path(stream)
    stem = path.name.removesuffix(STREAM_SUFFIX) if path.name.endswith(STREAM_SUFFIX) else path.stem
    return path.parent / f"{stem}{WORK_SUFFIX}"


# -- item ids ------------------------------------------------------------------------------------


def item_name(bench: str, device: int, repeat: int | None) -> str:
    params = f"D{device}" + (f"-R{repeat}" if repeat is not None else "")
    return f"{bench}[{params}]"


def parse_item_id(nodeid: str) -> StreamName | None:
    """The benchmark run a pytest node id (or item name) stands for; None for other tests."""
    match = _ITEM_ID.search(nodeid)
    if match is None:
        return None
    repeat = match["repeat"]
    return StreamName(match["bench"], int(match["device"]), int(repeat) if repeat else None)


# -- the manifest --------------------------------------------------------------------------------


def write_manifest(run_dir: str | PathLike[str], suite: str, specs: Iterable[BenchSpec],
                   facts: dict[str, Any] | None = None) -> Path:
    """``manifest.json``: the benchmarks selected to run, with what the score needs of them,
    and ``facts`` about the run (commit, machine, versions) at its top level."""
    benchmarks = {spec.name: _manifest_entry(spec) for spec in specs}
    path = Path(run_dir) / MANIFEST
    manifest = {"version": 1, "suite": suite, **(facts or {}), "benchmarks": benchmarks}
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def _manifest_entry(spec: BenchSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "weight": spec.weight,
        "enabled": spec.enabled,
        "units": spec.units,
        "plan": spec.plan,
        "suite": str(spec.origin),
    }
    # Only when said: a benchmark that never ran is still a time-to-train one in the report,
    # and keeps its matrix combination in the sweep table (docs/time-to-train.md).
    if getattr(spec, "metric", None):
        entry["metric"] = spec.metric
    matrix = spec.config.get("matrix_values") if isinstance(spec.config, dict) else None
    if matrix:
        entry["matrix"] = {str(k): v for k, v in matrix.items()}
    return entry


def read_manifest(run_dir: str | PathLike[str]) -> dict[str, Any] | None:
    """``<run_dir>/manifest.json`` written when the run started, or None without one."""
    path = Path(run_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DlbenchError(f"{path}: unreadable manifest: {exc}") from exc
    return data if isinstance(data, dict) else None


# -- resolved specs handed to children -----------------------------------------------------------


def spec_path(run_dir: str | PathLike[str], bench: str) -> Path:
    return Path(run_dir) / SPECS / f"{bench}.json"


def write_spec(run_dir: str | PathLike[str], spec: BenchSpec) -> Path:
    """The resolved spec a child runs: it never re-reads the suite (edited mid-run or not)."""
    path = spec_path(run_dir, spec.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec.to_json(), default=str) + "\n")
    return path


def read_spec(path: str | PathLike[str]) -> BenchSpec:
    try:
        data = json.loads(Path(path).read_text())
        return BenchSpec.from_json(data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise DlbenchError(f"{path}: unreadable benchmark spec: {exc}") from exc
