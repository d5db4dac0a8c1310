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
import io
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench import layout
from pytest_dlbench.core import output_files, untrusted
from pytest_dlbench.core.errors import DlbenchError, one_line
from pytest_dlbench.profile.base import NoteReport, report_from_dict
from pytest_dlbench.profile.config import REPORTS, ProfileConfig

__all__ = [
    "ARTIFACT_REPORTS",
    "INDEX_FILE",
    "ProfileIndex",
    "ProfileWriteError",
    "SNAPSHOT_FILE",
    "TIMELINE_FILE",
    "TRACE_FILE",
    "load_meta",
    "load_reports",
    "profile_sections",
    "read_index",
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


class ProfileWriteError(DlbenchError, OSError):
    """A report file that cannot be written (a full disk): one line naming the file. The file
    that was there is untouched (written atomically: never an empty ``index.json``)."""


def _write(path: Path, text: str) -> Path:
    try:
        return output_files.write_atomic(path, text)
    except OSError as exc:
        raise ProfileWriteError(f"cannot write {path}: {exc.strerror or exc}") from None


def _csv_text(rows: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns or ["note"])
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()


def write_reports(
    reports: Mapping[str, Any],
    out_dir: str | os.PathLike[str],
    *,
    meta: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write ``reports`` (report name -> report) into ``out_dir``; return the files written.

    ``meta`` (bench, rank, settings...) goes into ``index.json`` with every report's dict. Each
    file is written atomically; one that cannot be written is a :class:`ProfileWriteError`
    naming it.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfileWriteError(f"cannot make {out}: {exc.strerror or exc}") from None
    written: list[Path] = []
    index: dict[str, Any] = {**(meta or {}), "reports": {}}
    for name in _ordered(reports):
        report = reports[name]
        data = report.to_dict()
        index["reports"][name] = data
        if name in ARTIFACT_REPORTS:
            continue
        json_path = _write(out / f"{name}.json",
                           json.dumps(data, indent=2, default=_json) + "\n")
        csv_path = _write(out / f"{name}.csv", _csv_text(report.rows()))
        written += [json_path, csv_path]
    written.append(_write(out / INDEX_FILE, json.dumps(index, indent=2, default=_json) + "\n"))
    return written


def _ordered(names: Iterable[str]) -> list[str]:
    names = list(names)
    return [n for n in REPORTS if n in names] + [n for n in names if n not in REPORTS]


def _index_schema() -> Any:
    """What the readers use of ``index.json`` (pydantic, imported by readers only)."""
    from pytest_dlbench.core.schema import Int, Loose, Map, Str

    class Report(Loose):
        report: Str

    class Index(Loose):
        bench: Str | None = None
        stream: Str | None = None
        rank: Int | None = None
        profile: Map | None = None
        window: Map | None = None
        notes: Map | None = None
        reports: dict[str, Report] | None = None

    return Index


@dataclass(frozen=True)
class ProfileIndex:
    """``index.json`` as the reports read it: the meta (bench, rank, settings, window), the
    reports' dicts, and the one note that says why the file could not be used (then both are
    empty)."""

    meta: dict[str, Any] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


def read_index(profile_dir: str | os.PathLike[str]) -> ProfileIndex:
    """``<profile_dir>/index.json``, read as a file someone else wrote (core/untrusted.py: a regular
    file, bounded) and typed: corrupt, empty, a list, a missing or mistyped field is
    :attr:`ProfileIndex.note`, one line naming the file; no file is an empty index."""
    from pytest_dlbench.core.schema import problem

    path = Path(profile_dir) / INDEX_FILE
    try:
        data = untrusted.read_json(path)
    except FileNotFoundError:
        return ProfileIndex()
    except (OSError, ValueError) as exc:
        return ProfileIndex(note=f"{path}: unreadable profile index: {untrusted.reason(exc)}")
    wrong = problem(_index_schema(), data)
    if wrong is not None:
        return ProfileIndex(note=f"{path}: invalid profile index: {wrong}")
    meta = {k: v for k, v in data.items() if k != "reports"}
    return ProfileIndex(meta, dict(data.get("reports") or {}))


#: What a report's dict of the wrong shape raises when it is read back or shown.
_BAD_REPORT = (ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError)


def _report(name: str, data: Any, where: Path) -> Any:
    """The report of one dict of ``index.json``, or a NoteReport saying why it cannot be
    shown: read back and rendered once here, so a report of the wrong shape costs its own
    section, never the run's report."""
    try:
        report = report_from_dict(data)
        report.render(False)
        report.render(True)
        report.rows()
    except _BAD_REPORT as exc:
        return NoteReport(name, f"{where}: report {name!r} left out: {one_line(exc)}")
    return report


def load_reports(profile_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The reports written into ``profile_dir``, in report order (``{}`` when there are none).

    Reads ``index.json``; without one (a run cut short while writing), the ``<report>.json``
    files that exist. An index that cannot be used is one :class:`NoteReport` (``index``); a
    report that cannot be read back is a :class:`NoteReport` of its own name.
    """
    root = Path(profile_dir)
    index = read_index(root)
    if index.note is not None:
        return {"index": NoteReport("index", index.note)}
    dicts: dict[str, Any] = index.reports
    where = root / INDEX_FILE
    if not (root / INDEX_FILE).exists():
        for name in REPORTS:
            path = root / f"{name}.json"
            if path.is_file():
                try:
                    dicts[name] = untrusted.read_json(path)
                except (OSError, ValueError) as exc:
                    dicts[name] = {"report": name, "skipped": True,
                                   "note": f"{path}: unreadable: {one_line(exc)}"}
        where = root
    return {name: _report(name, dicts[name], where) for name in _ordered(dicts)}


def load_meta(profile_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``index.json`` without the reports: bench, rank, settings, window (``{}`` when it
    cannot be read: :func:`load_reports` says why)."""
    return read_index(profile_dir).meta


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
        try:  # the settings of an index.json: a wrong one shows the reports concise
            config = ProfileConfig.from_dict(config)
        except (DlbenchError, ValueError, TypeError):
            config = None
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
        if not (out / INDEX_FILE).exists():
            continue
        meta = load_meta(out)
        text = render_reports(load_reports(out), verbose, config=meta.get("profile"))
        sections.append((f"profile of {stream.name.removesuffix('.data')}", text))
    return sections
