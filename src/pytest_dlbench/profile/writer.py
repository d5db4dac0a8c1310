"""Where the reports go, and reading them back.

Next to a run's stream ``<run_dir>/<stem>.data`` (``resnet18.D0.data``)::

    <run_dir>/<stem>.profile/
        index.json          what was made: bench, rank, settings, every report's dict, notes
        speed.json  speed.csv
        time.json   time.csv
        memory.json memory.csv
        system.json system.csv
        summary.json summary.csv
        trace.json          the Chrome/Kineto trace (Perfetto), when made
        snapshot.pickle     the CUDA memory snapshot (pytorch.org/memory_viz), when made
        memory_timeline.html  with ``extra_plots`` on a GPU

``trace.json`` is the trace itself, so the trace and snapshot reports (a file name, a size, a
step count) are kept in ``index.json`` only. Rank ``r > 0`` of a job writes into
``<stem>.profile/rank<r>/``.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_dlbench.profile.base import report_from_dict
from pytest_dlbench.profile.config import REPORTS, ProfileConfig
from pytest_dlbench.run import layout

__all__ = [
    "ARTIFACT_REPORTS",
    "INDEX_FILE",
    "SNAPSHOT_FILE",
    "TIMELINE_FILE",
    "TRACE_FILE",
    "load_reports",
    "render_reports",
    "write_reports",
]

INDEX_FILE = "index.json"
TRACE_FILE = "trace.json"
SNAPSHOT_FILE = "snapshot.pickle"
TIMELINE_FILE = "memory_timeline.html"
#: Reports whose content is a file of their own; their dicts live in index.json.
ARTIFACT_REPORTS = ("snapshot", "trace")


def _json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns or ["note"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


def write_reports(
    reports: Mapping[str, Any],
    out_dir: str | os.PathLike[str],
    *,
    meta: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write ``reports`` (report name -> report) into ``out_dir``; return the files written.

    ``meta`` (bench, rank, settings...) goes into ``index.json`` with every report's dict.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    index: dict[str, Any] = {**(meta or {}), "reports": {}}
    for name in _ordered(reports):
        report = reports[name]
        data = report.to_dict()
        index["reports"][name] = data
        if name in ARTIFACT_REPORTS:
            continue
        json_path = out / f"{name}.json"
        json_path.write_text(json.dumps(data, indent=2, default=_json) + "\n", encoding="utf-8")
        csv_path = out / f"{name}.csv"
        _write_csv(csv_path, report.rows())
        written += [json_path, csv_path]
    index_path = out / INDEX_FILE
    index_path.write_text(json.dumps(index, indent=2, default=_json) + "\n", encoding="utf-8")
    written.append(index_path)
    return written


def _ordered(names: Iterable[str]) -> list[str]:
    names = list(names)
    return [n for n in REPORTS if n in names] + [n for n in names if n not in REPORTS]


def load_reports(profile_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The reports written into ``profile_dir``, in report order (``{}`` when there are none).

    Reads ``index.json``; without one (a run cut short while writing), the ``<report>.json``
    files that exist.
    """
    root = Path(profile_dir)
    index_path = root / INDEX_FILE
    dicts: dict[str, Any] = {}
    if index_path.is_file():
        dicts = dict(json.loads(index_path.read_text(encoding="utf-8")).get("reports") or {})
    else:
        for name in REPORTS:
            path = root / f"{name}.json"
            if path.is_file():
                dicts[name] = json.loads(path.read_text(encoding="utf-8"))
    return {name: report_from_dict(dicts[name]) for name in _ordered(dicts)}


def load_meta(profile_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``index.json`` without the reports: bench, rank, settings, window."""
    path = Path(profile_dir) / INDEX_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("reports", None)
    return data


def render_reports(
    reports: Mapping[str, Any],
    verbose: bool = False,
    *,
    title: str | None = None,
    config: ProfileConfig | Mapping[str, Any] | None = None,
) -> str:
    """The terminal text of one benchmark's reports: concise, or everything with ``verbose``
    (``-v``); ``config`` (a :class:`ProfileConfig` or its ``to_dict()``, as in ``index.json``)
    makes the reports with ``verbose: true`` full too."""
    if config is not None and not isinstance(config, ProfileConfig):
        config = ProfileConfig.from_dict(config)
    parts = [title] if title else []
    for name in _ordered(reports):
        full = verbose or (config is not None and name in REPORTS and config[name].verbose)
        parts.append(reports[name].render(full))
    return "\n".join(parts)


def profile_sections(
    run_dir: str | os.PathLike[str], *, verbose: bool = False, bench: str | None = None
) -> list[tuple[str, str]]:
    """(title, text) of every profiled run in a run directory (only ``bench``'s, if given), as
    the terminal summary, the HTML report and ``dlbench profile`` show them."""
    sections = []
    for stream in layout.stream_paths(run_dir):
        if bench is not None and layout.parse_stream_name(stream).bench != bench:
            continue
        out = layout.profile_dir(stream)
        if not (out / "index.json").is_file():
            continue
        meta = load_meta(out)
        text = render_reports(load_reports(out), verbose, config=meta.get("profile"))
        sections.append((f"profile of {stream.name.removesuffix('.data')}", text))
    return sections
