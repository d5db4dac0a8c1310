"""Live progress while benchmarks run: observations so far out of skip + stop, the current
rate, elapsed and remaining time, for every running benchmark (every replica under ``-n``).

The controller tails the run directory's streams, so it sees the children of its xdist workers
as well as its own. On a terminal the progress is one line, rewritten in place below pytest's
own line (and taken away before pytest writes again); in a CI log (not a terminal, or ``$CI``
set) it is a plain line every ``CI_PERIOD_S`` seconds. ``-q`` shows nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.measure.stream import Event
from pytest_dlbench.run import layout

__all__ = ["LiveRun", "ProgressReporter", "progress_line"]

#: Seconds between updates on a terminal, and between lines in a CI log.
TTY_PERIOD_S = 1.0
CI_PERIOD_S = 30.0
#: A benchmark shows progress only once it has run this long (short ones just finish).
QUIET_FOR_S = 3.0
#: The current rate is over this many of the latest observations.
RECENT = 10


@dataclass
class LiveRun:
    """What a running benchmark's stream says so far, read incrementally."""

    path: Path
    label: str
    seen_at: float
    offset: int = 0
    planned: int | None = None  # skip + stop, from the config record
    observations: int = 0
    recent: list[tuple[float, float]] = field(default_factory=list)  # (items, seconds)
    seconds: float = 0.0  # sum of the observations' step times
    units: str = "items/s"
    ended: bool = False

    def read(self) -> None:
        """Take in the complete lines written since the last read."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for raw in data[: end + 1].splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                self._take(record)

    def _take(self, record: dict[str, Any]) -> None:
        event = record.get("event")
        if event == Event.CONFIG:
            spec = record.get("spec") or {}
            skip, stop = spec.get("skip"), spec.get("stop")
            if isinstance(skip, int) and isinstance(stop, int):
                self.planned = skip + stop
        elif event == Event.RATE:
            self.observations += 1
            self.units = str(record.get("units") or self.units)
            items, seconds = record.get("items"), record.get("seconds")
            if isinstance(items, (int, float)) and isinstance(seconds, (int, float)):
                self.seconds += seconds
                self.recent = [*self.recent[-(RECENT - 1):], (items, seconds)]
            elif isinstance(record.get("value"), (int, float)):
                # Measured by the benchmark itself (bench.log_rate): its value, equally weighted.
                self.recent = [*self.recent[-(RECENT - 1):], (record["value"], 1.0)]
        elif event == Event.END:
            self.ended = True

    def rate(self) -> float | None:
        seconds = sum(s for _, s in self.recent)
        return sum(i for i, _ in self.recent) / seconds if seconds > 0 else None

    def remaining_s(self) -> float | None:
        if not self.planned or not self.observations or self.seconds <= 0:
            return None
        left = max(self.planned - self.observations, 0)
        return left * self.seconds / self.observations


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def progress_line(runs: list[LiveRun], now: float, width: int = 120) -> str:
    """``toy[D0] 14/17 2,345 items/s 3s ~1s left | toy[D1] ...``, cut to ``width``."""
    parts = []
    for run in runs:
        done = f"{run.observations}/{run.planned}" if run.planned else str(run.observations)
        rate = run.rate()
        text = f"{run.label} {done}"
        if rate is not None:
            text += f" {rate:,.4g} {run.units}"
        text += f" {_duration(now - run.seen_at)}"
        left = run.remaining_s()
        if left is not None:
            text += f" ~{_duration(left)} left"
        parts.append(text)
    line = "dlbench: " + " | ".join(parts)
    return line if len(line) <= width else line[: width - 1] + "…"


class ProgressReporter:
    """Registered by the controller unless ``-q``; draws from a thread, erases in the main one."""

    PLUGIN_NAME = "dlbench-progress"

    def __init__(self, run_dir: Callable[[], Path | None], terminal: Any = None, *,
                 in_place: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self._run_dir = run_dir  # a callable: the directory exists once something runs
        self.terminal = terminal
        self._capture: Any = None  # pytest's capture manager, from the session's start
        self.in_place = in_place
        self.clock = clock
        self.runs: dict[Path, LiveRun] = {}
        self._drawn = False  # a progress line is on screen (in place)
        self._last_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dlbench-progress", daemon=True)

    # -- pytest hooks -----------------------------------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None or config.get_verbosity() < 0:
            return  # -q: nothing
        self.terminal = terminal
        self.in_place = terminal.isatty() and not os.environ.get("CI")
        # While an item runs, pytest captures file descriptor 1: the line must pass around it.
        self._capture = config.pluginmanager.get_plugin("capturemanager")
        self._thread.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.erase()  # pytest writes next: its line must be where it left it

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.erase()

    # -- drawing ----------------------------------------------------------------------------------
    def running(self) -> list[LiveRun]:
        run_dir = self._run_dir()
        if run_dir is None:
            return []
        now = self.clock()
        for path in layout.stream_paths(run_dir):
            if path not in self.runs:
                name = layout.parse_stream_name(path)
                label = layout.item_name(name.bench, name.device, name.repeat)
                self.runs[path] = LiveRun(path, label, seen_at=now)
        live = []
        for run in self.runs.values():
            if not run.ended:
                run.read()
            if not run.ended and now - run.seen_at >= QUIET_FOR_S:
                live.append(run)
        return live

    def tick(self) -> None:
        runs = self.running()
        now = self.clock()
        capture = self._capture
        uncaptured = (capture.global_and_fixture_disabled() if capture is not None
                      else contextlib.nullcontext())
        with self._lock, uncaptured:
            width = self.terminal._tw.fullwidth
            if not runs:
                self._erase_locked()
                return
            line = progress_line(runs, now, width=width - 1)
            if self.in_place:
                tw = self.terminal._tw
                if not self._drawn:
                    # pytest's writer keeps its current line (for the [ 50%] column): saved
                    # here, given back when the progress line is taken away.
                    self._saved = getattr(tw, "_current_line", "")
                    self._column = self._pytest_column
                    tw.write("\n")
                tw.write("\r" + line + "\x1b[K", flush=True)
                self._drawn = True
            elif now - self._last_line >= CI_PERIOD_S:
                self._last_line = now
                self.terminal.write_line(line)

    def erase(self) -> None:
        with self._lock:
            self._erase_locked()

    def _erase_locked(self) -> None:
        if not self._drawn:
            return
        tw = self.terminal._tw
        # Clear our line, go back up to pytest's line, to the column pytest was at.
        tw.write(f"\r\x1b[K\x1b[A\x1b[{self._column + 1}G", flush=True)
        if hasattr(tw, "_current_line"):
            tw._current_line = self._saved
        self._drawn = False

    @property
    def _pytest_column(self) -> int:
        return int(getattr(self.terminal._tw, "width_of_current_line", 0))

    def _loop(self) -> None:
        period = TTY_PERIOD_S if self.in_place else 1.0
        while not self._stop.wait(period):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - progress is a courtesy: never fail the run
                return
