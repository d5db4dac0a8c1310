"""After the run: build every enabled report and write it next to the stream.

:func:`finish_profile` is the one call the harness makes, once the benchmark function returned
and its ``Bench`` is closed (and, for a complete system report, once
the monitor stopped). A report that cannot be made becomes a one-line
:class:`~pytest_dlbench.profile.base.NoteReport`; nothing here fails the run.
"""

from __future__ import annotations

import itertools
import os
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import one_line
from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.layout import profile_dir
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.profile._records import (
    Record,
    profiled_intervals,
    profiled_steps,
    step_samples,
)
from pytest_dlbench.profile.artifacts import SnapshotReport, TraceReport
from pytest_dlbench.profile.base import NoteReport
from pytest_dlbench.profile.capture import Capture, rank_from_env
from pytest_dlbench.profile.config import PROFILER_REPORTS, WINDOW_REPORTS, ProfileConfig
from pytest_dlbench.profile.memory import build_memory_report, profiler_totals
from pytest_dlbench.profile.speed import build_speed_report
from pytest_dlbench.profile.summary import build_summary_report, not_watched
from pytest_dlbench.profile.system import build_system_report
from pytest_dlbench.profile.timereport import build_time_report, top_level_events
from pytest_dlbench.profile.window import ProfiledWindow
from pytest_dlbench.profile.writer import (
    SNAPSHOT_FILE,
    TIMELINE_FILE,
    TRACE_FILE,
    write_reports,
)

__all__ = ["ScoredRate", "build_reports", "finish_profile"]

#: The run's score rate from its stream records, scoring's own figure (for the speed report),
#: handed in by the caller: the profile, below the results, reads no score of its own.
#: It receives the run's :class:`RunRecords` (iterable as the plain records).
ScoredRate = Callable[[RunRecords], "float | None"]


class _Profiler:
    """What the reports read from torch.profiler, each read once and only when possible."""

    def __init__(self, capture: Capture | None) -> None:
        self.capture = capture
        self.prof = capture.prof if capture is not None else None
        self.steps = capture.profiled_steps if capture is not None else 0
        self._averages: list[Any] | None = None
        self._events: list[Any] | None = None
        self.error = ""

    @property
    def usable(self) -> bool:
        return self.prof is not None and self.steps > 0

    def averages(self) -> list[Any]:
        if self._averages is None:
            self._averages = self._read(lambda p: list(p.key_averages()))
        return self._averages

    def events(self) -> list[Any]:
        if self._events is None:
            self._events = self._read(lambda p: list(p.events() or ()))
        return self._events

    def _read(self, fn: Any) -> list[Any]:
        if not self.usable:
            return []
        try:
            return fn(self.prof)
        except Exception as exc:  # noqa: BLE001 - one note instead of a lost run
            self.error = f"profiler results unreadable: {one_line(exc)}"
            return []


def _window_note(name: str, capture: Capture | None, start: Record | None) -> str | None:
    """Why a window report has nothing to report, or None when it has its window."""
    if capture is None:
        return None
    if not capture.started or start is None:
        return (f"{name}: not profiled: the run ended before its scored observations were "
                "done, and the profiled window comes after them")
    return None


def build_reports(
    config: ProfileConfig,
    records: Iterable[Record],
    *,
    bench: str,
    capture: Capture | None,
    watched: tuple[Any, Any] | None = None,
    out_dir: str | os.PathLike[str],
    dirs: Mapping[str, str | os.PathLike[str] | None] | None = None,
    units: str | None = None,
    rank: int = 0,
    scored_rate: ScoredRate | None = None,
) -> dict[str, Any]:
    """Every enabled report (name -> report), in report order; writes the trace, snapshot and
    memory timeline files into ``out_dir`` as it goes. ``scored_rate``: the speed report's
    throughput (None without it)."""
    run = RunRecords.of(records)  # parsed once, for every report
    out = Path(out_dir)
    start = run.profile_start
    prof = _Profiler(capture)
    cuda = capture.cuda if capture is not None else False
    notes = dict(capture.notes) if capture is not None else {}
    if units is None:
        units = next((str(r["units"]) for r in itertools.chain(run.rates, run.profile_steps)
                      if r.get("units")), DEFAULT_UNITS)  # read up to the first: no list of them
    reports: dict[str, Any] = {}

    def note_for(name: str) -> str:
        text = notes.get(name, "")
        return text if not prof.error else (f"{text}; {prof.error}" if text else prof.error)

    for name in config.enabled_reports:
        if name in WINDOW_REPORTS:
            if name == "snapshot" and not cuda:
                reports[name] = NoteReport(name, "snapshot needs CUDA; skipped")
                continue
            missing = _window_note(name, capture, start)
            if missing is not None:
                reports[name] = NoteReport(name, missing)
                continue
        try:
            reports[name] = _build_one(
                name, config, run, bench=bench, capture=capture, prof=prof, cuda=cuda,
                watched=watched, out=out, dirs=dirs, units=units, rank=rank,
                scored_rate=scored_rate,
                note=note_for(name) if name in PROFILER_REPORTS else notes.get(name, ""),
            )
        except OSError as exc:  # a full disk: say where it was writing (no file name in it)
            where = exc.filename or out
            reports[name] = NoteReport(
                name, f"{name}: could not be written in {where}: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001 - the run is not lost for a report
            reports[name] = NoteReport(name, f"{name}: could not be made: {one_line(exc)}")
    return reports


def _build_one(
    name: str,
    config: ProfileConfig,
    records: RunRecords,
    *,
    bench: str,
    capture: Capture | None,
    prof: _Profiler,
    cuda: bool,
    watched: tuple[Any, Any] | None,
    out: Path,
    dirs: Mapping[str, str | os.PathLike[str] | None] | None,
    units: str,
    rank: int,
    scored_rate: ScoredRate | None,
    note: str,
) -> Any:
    settings = config[name]
    if name == "speed":
        chosen = profiled_steps(records, phase="active")
        io = profiled_intervals(records, {int(r["step"]) for r in chosen})
        io_only = [iv for iv in io if iv.key == "io"]
        cpu_s = device_s = None
        if prof.usable:
            cpu_s, device_s = profiler_totals(prof.averages(), device=cuda)
        return build_speed_report(
            records, scored_rate=scored_rate(records) if scored_rate is not None else None,
            units=units, profiled=chosen,
            profiled_io=(len(io_only), sum(iv.seconds for iv in io_only)) if io_only else None,
            profiler_cpu_s=cpu_s, profiler_device_s=device_s, note=note,
        )
    if name == "time":
        chosen = profiled_steps(records, warmup=settings.warmup, steps=settings.steps)
        steps = step_samples(chosen)
        intervals = profiled_intervals(records, {s.index for s in steps})
        events = top_level_events(prof.events(), limit=settings.top) if prof.usable else []
        time_note = "" if steps or note else "no profiled step completed"
        return build_time_report(steps, intervals, events=events, note=note or time_note)
    if name == "memory":
        timeline = None
        extra = ""
        if settings.extra_plots:
            if not cuda:
                extra = "memory timeline needs CUDA; skipped"
            elif prof.usable:
                timeline, extra = _timeline(prof.prof, out, capture)
        text = "; ".join(t for t in (note, extra) if t)
        if not prof.usable and not text:
            text = "no profiled step: torch.profiler recorded nothing"
        return build_memory_report(prof.averages(), device=cuda, steps=prof.steps,
                                   top=settings.top, timeline=timeline, note=text)
    if name == "system":
        return build_system_report(records, dirs=dirs)
    if name == "summary":
        if watched is None:
            return not_watched(bench)
        model, example = watched
        return build_summary_report(model, example)
    if name == "snapshot":
        return _snapshot(capture, out, settings.warmup, settings.steps, note)
    if name == "trace":
        if settings.trace_rank0_only and rank != 0:
            return NoteReport(name, f"trace: none on rank {rank} (trace_rank0_only)")
        if not prof.usable or prof.prof is None:  # (a usable one has a profiler)
            return NoteReport(name, note or "trace: torch.profiler recorded no step")
        out.mkdir(parents=True, exist_ok=True)
        path = out / TRACE_FILE
        prof.prof.export_chrome_trace(str(path))
        return TraceReport(file=TRACE_FILE, bytes=path.stat().st_size, steps=prof.steps,
                           rank=rank, note=note)
    raise ValueError(f"unknown report {name!r}")


def _timeline(prof: Any, out: Path, capture: Capture | None) -> tuple[str | None, str]:
    try:
        out.mkdir(parents=True, exist_ok=True)
        device = str(capture.device) if capture is not None else "cuda:0"
        if device == "cuda":
            device = "cuda:0"
        prof.export_memory_timeline(str(out / TIMELINE_FILE), device=device)
        return TIMELINE_FILE, ""
    except Exception as exc:  # noqa: BLE001
        return None, f"memory timeline failed: {one_line(exc)}"


def _snapshot(capture: Capture | None, out: Path, warmup: int, steps: int,
              note: str) -> Any:
    if capture is None:
        return NoteReport("snapshot", "snapshot: no profiled window")
    path = out / SNAPSHOT_FILE
    if capture.snapshot_file is not None and Path(capture.snapshot_file) != path:
        out.mkdir(parents=True, exist_ok=True)
        os.replace(capture.snapshot_file, path)
    elif capture.snapshot_file is None and capture.snapshot is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(capture.snapshot, f)
    if not path.is_file():
        return NoteReport("snapshot", note or "snapshot: none was taken")
    return SnapshotReport(file=SNAPSHOT_FILE, bytes=path.stat().st_size, warmup=warmup,
                          steps=steps, note=note)


def finish_profile(
    bench: Any,
    run_dir: str | os.PathLike[str] | None,
    stream_path: str | os.PathLike[str],
    records: Sequence[Record] | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    scored_rate: ScoredRate | None = None,
) -> list[Path]:
    """Build and write the reports of ``bench``'s run (nothing when it was not profiled).

    ``scored_rate``: how the results score the run's rate (the speed report's throughput), e.g.
    ``lambda records: run_from_records(records).rate`` from ``results/figures/scoring.py``.

    ``records``: the run stream's records; when None, those of the bench's in-memory stream
    (a rank that does not report) or of the file at ``stream_path``. Writes into
    ``run.layout.profile_dir(stream_path, rank=...)``; returns the files written (index.json last).
    """
    window: ProfiledWindow | None = getattr(bench, "profiled", None)
    if window is None or not window.config:
        return []
    config, capture = window.config, window.capture
    if capture is not None and not capture.stopped:
        capture.stop()
    rank = capture.rank if capture is not None else rank_from_env()
    if records is None:
        # A rank that does not report streams into memory (a NullStream): its own records,
        # not those of the reporting rank's file at stream_path.
        in_memory = getattr(getattr(bench, "stream", None), "records", None)
        if in_memory is not None:
            records = list(in_memory)
        else:
            path = Path(stream_path)
            records = read_stream(path) if path.is_file() else []
    run = RunRecords.of(records)
    out = profile_dir(stream_path, rank=rank)
    reports = build_reports(
        config, run, bench=getattr(bench, "name", "bench"), capture=capture,
        watched=getattr(bench, "watched", None), out_dir=out,
        dirs={"data": data_dir if data_dir is not None else getattr(bench, "data_dir", None),
              "results": run_dir},
        units=getattr(bench, "units", None), rank=rank, scored_rate=scored_rate,
    )
    start = run.profile_start
    meta = {
        "bench": getattr(bench, "name", "bench"),
        "stream": Path(stream_path).name,
        "rank": rank,
        "profile": config.to_dict(),
        "window": {
            "first_step": start.get("step") if start else None,
            "steps": capture.k if capture is not None else 0,
            "warmup": capture.warmup if capture is not None else 0,
            "active": capture.active if capture is not None else 0,
            "profiled_steps": capture.profiled_steps if capture is not None else 0,
        },
        "notes": dict(capture.notes) if capture is not None else {},
    }
    written = write_reports(reports, out, meta=meta)
    files = [getattr(r, "file", None) or getattr(r, "timeline", None) for r in reports.values()]
    return [out / f for f in files if f] + written
