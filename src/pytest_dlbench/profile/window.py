"""The profiled window of a run: steps after the scored ones, under torch.profiler.

The harness makes one :class:`ProfiledWindow` from the run's :class:`ProfileConfig` and hands it
to :class:`~pytest_dlbench.measure.bench.Bench` (``Bench(profiled=...)``), which runs its steps
once the ``skip + stop`` observations are done and calls it around them: :meth:`start` when
the scored window has been read, :meth:`step` after every step, :meth:`records` at each window
read, :meth:`end` at the end (or when the run stops before). Its records are ``profile``
(``status`` start and end), ``profile_step`` and ``profile_region``, all flagged
``"profiled": true``, and never ``rate``: scoring reads exactly what it reads without
profiling. The torch.profiler and CUDA memory machinery is the window's :class:`Capture`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pytest_dlbench.layout import profile_dir
from pytest_dlbench.measure.stream import Event
from pytest_dlbench.profile.capture import Capture, rank_from_env
from pytest_dlbench.profile.config import ProfileConfig
from pytest_dlbench.profile.writer import SNAPSHOT_FILE

if TYPE_CHECKING:
    from pytest_dlbench.measure.bench import Bench

__all__ = ["ProfiledWindow"]


class ProfiledWindow:
    """The profiled window of one run (module docstring).

    ``capture``: the window's machinery when given (tests pass one with fakes), else made from
    ``config`` for the bench's device when it is attached. ``profile_dir``: where its files go,
    by default next to the stream file (None without one: a snapshot is then kept in memory).
    """

    #: Fields added to the loss records of its steps (they are no scored step's).
    marks: Mapping[str, Any] = MappingProxyType({"profiled": True})

    def __init__(
        self,
        config: ProfileConfig,
        *,
        capture: Capture | None = None,
        profile_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config
        #: the window's torch.profiler and snapshot; None when the settings need no window
        self.capture: Capture | None = None
        self.profile_dir: Path | None = Path(profile_dir) if profile_dir is not None else None
        self.total_steps = 0  # steps wanted after the scored ones
        self.steps = 0  # steps of the window so far
        self.started = False  # the scored window is read: steps are profiled now
        self._given = capture
        self._first = 0  # bench index of the window's first step (skip + stop)
        self._offset = 0  # bench index - timer index, in the window

    def attach(self, bench: Bench) -> None:
        """Bind to ``bench`` (once, when it is made): its stream's folder and its device."""
        rank = rank_from_env()
        if self.profile_dir is None:
            path = getattr(bench.stream, "path", None)
            self.profile_dir = profile_dir(path, rank=rank) if path is not None else None
        capture = self._given
        if capture is None:
            capture = Capture(
                self.config, device=bench.device, rank=rank,
                snapshot_path=self.profile_dir / SNAPSHOT_FILE if self.profile_dir else None,
            )
        if capture.total_steps > 0:
            self.capture = capture
            self.total_steps = capture.total_steps

    @property
    def finished(self) -> bool:
        return self.steps >= self.total_steps

    def _capture(self) -> Capture:
        assert self.capture is not None, "a window without steps is never started"
        return self.capture

    def start(self, bench: Bench) -> None:
        """Enter the window (idempotent), once the scored window has been read."""
        if self.started:
            return
        self.started = True
        capture = self._capture()
        first = bench.skip + bench.stop
        self._first = first
        self._offset = first - bench.timer.next_index
        capture.start(timer=bench.timer, first_step=first)
        bench.stream.write(
            Event.PROFILE, status="start", step=first, steps=capture.total_steps,
            timed=capture.timed, warmup=capture.warmup, active=capture.active, profiled=True,
            time=bench.timer.wall_clock(),
        )

    def step(self) -> str:
        """After each step of the window (outside any timed step): that step's phase."""
        self.steps += 1
        return self._capture().step()

    def end(self, bench: Bench) -> None:
        """End the window (idempotent): at its last step, or when the run stops before."""
        capture = self.capture
        if capture is None or not self.started or capture.stopped:
            return
        capture.stop()
        bench.stream.write(
            Event.PROFILE, status="end", step=self._first, steps=self.steps,
            profiled_steps=capture.profiled_steps, notes=dict(capture.notes), profiled=True,
            time=bench.timer.wall_clock(),
        )

    def log_rate(self, bench: Bench, value: float, units: str | None) -> None:
        """One ``bench.log_rate`` call in the window: a ``profile_step`` record."""
        self.start(bench)
        k = self.steps
        phase = self.step()
        bench.stream.write(
            Event.PROFILE_STEP,
            value=float(value) * bench.items_scale,
            units=units if units is not None else bench.units,
            step=self._first + k,
            k=k,
            phase=phase,
            time=bench.timer.wall_clock(),
            profiled=True,
        )
        if self.finished:
            self.end(bench)

    def records(self, bench: Bench) -> list[dict[str, Any]]:
        """Read the timer: ``profile_step`` and ``profile_region`` records, one per step and
        region interval."""
        window = bench.timer.read(intervals=True)
        capture = self._capture()
        units = bench.units
        scale = bench.items_scale
        offset = self._offset
        records: list[dict[str, Any]] = []
        for obs in window.steps:
            i = obs.index + offset
            k = i - self._first
            items = obs.items * scale
            records.append({
                "event": Event.PROFILE_STEP.value,
                "value": items / obs.seconds if obs.seconds > 0 else math.inf,
                "units": units,
                "step": i,
                "k": k,
                "phase": capture.phase(k),
                "time": obs.time,
                "items": items,
                "seconds": obs.seconds,
                "profiled": True,
            })
        for interval in window.intervals:
            records.append({
                "event": Event.PROFILE_REGION.value,
                "key": interval.key,
                "step": interval.step + offset,
                "seconds": interval.seconds,
                "start": interval.start,
                "profiled": True,
            })
        return records
