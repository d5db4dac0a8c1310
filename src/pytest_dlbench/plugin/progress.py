"""Live progress while benchmarks run: observations so far out of skip + stop, the current
rate, elapsed and remaining time, for every running benchmark (every replica under ``-n``).

The controller tails the run directory's streams, so it sees the children of its xdist workers
as well as its own. On a terminal the progress is one line, rewritten in place below pytest's
own line every second (and taken away before pytest writes again). A benchmark writes its
observations once per window (its device is synchronised once per window), so between two
windows the count is an estimate from the step time so far (``~12/15``) and the time left
counts down with the clock. In a CI log (not a terminal, or ``$CI`` set) it is one line per
benchmark when it ends (name, status, its rate as the table scores it), written after pytest's
result letter for it, and one every ``CI_PERIOD_S`` seconds for a long one, on a line of its
own; pytest's file name is written once, before the first (``s.yaml . dlbench: toy[D0] passed:
...`` then ``. dlbench: mlp[D0] passed: ...``; docs/running.md, "While it runs"). ``-q`` shows
nothing.

A test that uses the ``bench`` fixture under ``--bench-against`` is one pytest item for all its
rounds (plugin/fixture_against.py): the live line follows both sides' children (``with_base``:
the base side's streams, under ``base/``, are labelled ``... base``), and every round ends with
a line of its own (:func:`round_line`), on a terminal too, since pytest's result comes only
after the last round.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench import layout
from pytest_dlbench.core import untrusted
from pytest_dlbench.core.numbers import DEFAULT_UNITS, number, printable
from pytest_dlbench.measure.stream import Event

__all__ = ["LiveRun", "ProgressReporter", "progress_line", "round_line"]

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
    units: str = DEFAULT_UNITS
    ended: bool = False
    #: the clock when the count last grew (the countdown and the estimate run from there)
    counted_at: float | None = None
    #: the clock of this run's last line in a CI log
    logged_at: float | None = None

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
            try:  # depth bounded (core/untrusted.py): a line nested 100k deep is skipped
                record = untrusted.loads(raw)
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

    def remaining_s(self, now: float | None = None) -> float | None:
        """Seconds left: the steps to go at the step time so far; counting down from when the
        count last grew (``now``: the clock, with :attr:`counted_at`)."""
        if not self.planned or not self.observations or self.seconds <= 0:
            return None
        left = max(self.planned - self.observations, 0) * self.seconds / self.observations
        if now is not None and self.counted_at is not None:
            left -= max(now - self.counted_at, 0.0)
        return max(left, 0.0)

    def estimated(self, now: float) -> int:
        """Observations done by now: those read, and the steps since at the step time so far
        (records come once per window); never past the plan."""
        done = self.observations
        if not done or self.seconds <= 0 or self.counted_at is None:
            return done
        step = self.seconds / done
        ahead = int(max(now - self.counted_at, 0.0) / step)
        return min(done + ahead, self.planned or done + ahead)

    def take_new(self, now: float) -> None:
        """Read what is new; note when the count grew."""
        before = self.observations
        self.read()
        if self.observations != before:
            self.counted_at = now


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def run_text(run: LiveRun, now: float) -> str:
    """``toy[D0] ~14/17 2,345 items/s 3s ~1s left``: ``~`` when the count is an estimate."""
    done = run.estimated(now)
    count = f"{done}/{run.planned}" if run.planned else str(done)
    text = f"{printable(run.label)} {'~' if done != run.observations else ''}{count}"
    rate = run.rate()
    if rate is not None:
        text += f" {rate:,.4g} {printable(run.units)}"
    text += f" {_duration(now - run.seen_at)}"
    left = run.remaining_s(now)
    if left is not None:
        text += f" ~{_duration(left)} left"
    return text


def progress_line(runs: list[LiveRun], now: float, width: int = 120) -> str:
    """``toy[D0] 14/17 2,345 items/s 3s ~1s left | toy[D1] ...``, cut to ``width``."""
    line = "dlbench: " + " | ".join(run_text(run, now) for run in runs)
    return line if len(line) <= width else line[: width - 1] + "…"


def end_line(label: str, outcome: str, stream: Path | None, seconds: float | None) -> str:
    """``dlbench: toy[D0] passed: 2,345 items/s in 12s``: a benchmark's end in a CI log, its
    rate as the table scores it (results/figures/scoring.load_run of its stream); a run that did not
    pass shows its reason instead (``broken[D0] failed: fail: RuntimeError: boom``): the rate
    of the steps it took before failing is no result."""
    text = f"dlbench: {printable(label)} {outcome}"
    if stream is not None:
        from pytest_dlbench.results.figures import load_run

        run = load_run(stream)
        if outcome != "passed" or not run.ok:
            reason = run.reason or outcome
            # Reasons usually start with their status already ("crash: killed by SIGSEGV").
            why = reason if reason.startswith(str(run.status)) else f"{run.status}: {reason}"
            text += f": {printable(why)}"
        elif run.rate is not None:
            text += f": {number(run.rate)} {printable(run.units)}"
    if seconds is not None:
        text += f" in {_duration(seconds)}"
    return text


def round_line(label: str, round_index: int, rounds: int, sides: list[tuple[str, Path]],
               seconds: float) -> str:
    """``dlbench: test_step[D0-R2] round 3 of 10: base 2,345 items/s, candidate 2,301 items/s
    in 14s``: one round of a paired fixture test, each side's rate as the table scores it
    (results/figures/scoring.load_run of its stream), or why it has none (``candidate failed:
    ...``)."""
    from pytest_dlbench.results.figures import load_run

    parts = []
    for side, stream in sides:
        run = load_run(stream)
        if run.ok and run.rate is not None:
            parts.append(f"{side} {number(run.rate)} {printable(run.units)}")
        else:
            reason = run.reason or str(run.status)
            why = reason if reason.startswith(str(run.status)) else f"{run.status}: {reason}"
            parts.append(f"{side} failed: {printable(why)}")
    return (f"dlbench: {printable(label)} round {round_index + 1} of {rounds}: "
            f"{', '.join(parts)} in {_duration(seconds)}")


#: What pytest's terminal reporter is told its current file is after a line of ours: not a
#: test file, so that it starts its next result on a new line with the file's name.
_OUR_LINE = Path("<dlbench progress>")


class ProgressReporter:
    """Registered by the controller unless ``-q``; draws from a thread, erases in the main one."""

    PLUGIN_NAME = "dlbench-progress"

    def __init__(self, run_dir: Callable[[], Path | None], terminal: Any = None, *,
                 in_place: bool = False, clock: Callable[[], float] = time.monotonic,
                 with_base: bool = False) -> None:
        self._run_dir = run_dir  # a callable: the directory exists once something runs
        self.with_base = with_base  # the base side's streams too (a paired fixture run)
        self.terminal = terminal
        self._capture: Any = None  # pytest's capture manager, from the session's start
        self.in_place = in_place
        self.clock = clock
        self.runs: dict[Path, LiveRun] = {}
        self._drawn = False  # a progress line is on screen (in place)
        self._started = False
        self._outcomes: dict[str, tuple[str, float]] = {}  # nodeid: (outcome, seconds)
        #: A benchmark's end line is on pytest's result line, left open for pytest's progress
        #: column (``[ 50%]``) when the next item is in another file, or after the last one.
        self._line_open = False
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
        self._started = True
        self._thread.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.erase()  # pytest writes next: its line must be where it left it
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self._outcomes[report.nodeid] = (report.outcome, report.duration)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """In a CI log, before the next item of the same file: our open line ends, so that
        pytest's letter starts the next line; for another file pytest ends it itself, after its
        progress column, and writes the new file's name."""
        if not self._line_open or self.terminal is None:
            return
        self._line_open = False
        terminal = self.terminal
        root = getattr(getattr(terminal, "config", None), "rootpath", None) or Path.cwd()
        path = Path(root) / nodeid.split("::")[0]  # as pytest finds an item's file
        if getattr(terminal._tw, "width_of_current_line", 0) and path == terminal.currentfspath:
            terminal._tw.write("\n", flush=True)

    @pytest.hookimpl(tryfirst=True)  # before pytest's progress column, which then ends our line
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        """In a CI log: the benchmark's line once pytest has written its result letter."""
        outcome = self._outcomes.pop(nodeid, None)
        if self.in_place or self.terminal is None or outcome is None or not self._started:
            return
        label = nodeid.rpartition("::")[2]
        stream = next((run.path for run in self.runs.values() if run.label == label), None)
        if stream is None:  # a short benchmark, ended before the first look: find it now
            self.running()
            stream = next((run.path for run in self.runs.values() if run.label == label), None)
        if stream is None:
            return  # not a benchmark of the suite (an ordinary test beside it)
        with self._lock:
            self._emit(end_line(label, outcome[0], stream, outcome[1]), between=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.finish()

    def finish(self) -> None:
        """No more lines of progress: the thread stopped, the line taken away (the reporter
        calls it too, before it writes the session's end)."""
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
        paths = [(path, "") for path in layout.stream_paths(run_dir)]
        if self.with_base:
            paths += [(path, f" {layout.BASE}")
                      for path in layout.stream_paths(layout.base_dir(run_dir))]
        for path, side in paths:
            if path not in self.runs:
                name = layout.parse_stream_name(path)
                label = layout.item_name(name.bench, name.device, name.repeat) + side
                self.runs[path] = LiveRun(path, label, seen_at=now)
        live = []
        for run in self.runs.values():
            if not run.ended:
                run.take_new(now)
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
            else:  # a CI log: each long benchmark every CI_PERIOD_S, on a line of its own
                for run in runs:
                    if now - (run.logged_at or run.seen_at) >= CI_PERIOD_S:
                        run.logged_at = now
                        self._emit(f"dlbench: {run_text(run, now)}")

    def say(self, line: str) -> None:
        """A line of its own while an item runs (a paired fixture test's round), on a terminal
        as in a CI log: the live line is taken away first and drawn again below it."""
        if self.terminal is None or not self._started:
            return
        capture = self._capture
        uncaptured = (capture.global_and_fixture_disabled() if capture is not None
                      else contextlib.nullcontext())
        with self._lock, uncaptured:
            self._erase_locked()
            # Within the item, as a periodic line: the file's name again below it, where
            # pytest's result goes (pytest writes the name only when an item starts).
            self._emit(line)

    def _emit(self, line: str, *, between: bool = False) -> None:
        """A line of a CI log between pytest's. Where pytest writes a file's name and a letter
        per item, a benchmark's end (``between`` items) goes on the line of its letter, after
        it, and the file's name is never written again (``s.yaml . dlbench: toy[D0] passed``,
        then ``. dlbench: ...``); a periodic line (within an item) goes on a line of its own,
        above the letter to come. Elsewhere (``-v``, under xdist) pytest's line in progress is
        ended first and ours is a line of its own."""
        terminal = self.terminal
        tw = terminal._tw
        current = getattr(terminal, "currentfspath", None)
        dots = (getattr(terminal, "verbosity", 0) <= 0 and isinstance(current, Path)
                and current != _OUR_LINE)
        if dots and between:
            tw.write(" " + line, flush=True)
            self._line_open = True  # ended by the next item's start, or by pytest's progress
            return
        if getattr(tw, "width_of_current_line", 0):
            tw.write("\n")
        tw.write(line, flush=True)
        if current is None or dots:  # xdist writes no file's name; dots: the letter below
            tw.write("\n", flush=True)
            return
        terminal.currentfspath = _OUR_LINE  # pytest ends our line, then writes its own

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
