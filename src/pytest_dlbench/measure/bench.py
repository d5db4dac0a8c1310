"""The run context handed to a benchmark function as the ``bench`` fixture.

A benchmark drives its own training loop and lets :class:`Bench` time it::

    def bench_mlp(bench):
        model = make_model().to(bench.device)
        for epoch in range(10):
            for x, y in bench.iterate(loader):
                loss = train_step(model, x, y)
                bench.log_loss(loss)
            if bench.done:
                break

The per-step path only records a mark and appends to lists. Every ``window`` steps (and when an
``iterate`` call ends, and at :meth:`Bench.close`) the timer is read, which synchronises the
device once, and the window's ``rate``, ``region`` and ``loss`` records are written. Each
``iterate`` call also synchronises once before its first step, so that work queued before the
loop is in no step and the first window's ``time`` values are when the device finished each step.

Profiling (docs/profiling.md) never touches those observations: given a *profiled window*
(``profiled=``, a :class:`ProfiledWindow` such as profile/window.py's, made by the harness), once
the ``skip + stop`` observations are done ``iterate`` goes on for the window's steps, whose
records the window writes (``profile_step``, ``profile_region``) and whose ``loss`` records
carry its :attr:`~ProfiledWindow.marks` (no ``rate`` record, so scoring reads exactly what it
reads without profiling).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.layout import DATA, DEFAULT_BASE
from pytest_dlbench.measure.batches import count_items, losses_to_floats
from pytest_dlbench.measure.flops import checked_items_per_example
from pytest_dlbench.measure.stream import LOOP_START, ClosesOnExit, Event, NullStream, Stream
from pytest_dlbench.measure.timing import Timer, backend_for

__all__ = ["Bench", "NonFiniteLoss", "ProfiledWindow", "count_items"]

T = TypeVar("T")


class NonFiniteLoss(DlbenchError, RuntimeError):
    """A logged loss was NaN or infinite: the run fails (reference/scoring.md)."""

    def __init__(self, value: float, step: int) -> None:
        self.value = value
        self.step = step
        super().__init__(f"loss is {value} at step {step}")


def _as_device(device: Any) -> Any:
    """A ``torch.device`` when torch is available (what ``.to()`` callers expect), else as given."""
    if device is None:
        device = "cpu"
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency; keep working without it
        return device
    return torch.device(device)


class ProfiledWindow(Protocol):
    """Steps after the scored ones, never observations (profile/window.py's). :class:`Bench`
    calls :meth:`attach` once, :meth:`start` when its scored window has been read,
    :meth:`step` after each step of the window, :meth:`records` at each read, :meth:`end`."""

    total_steps: int  # steps wanted after the scored ones (0: no window)
    steps: int  # steps of the window so far
    started: bool

    @property
    def marks(self) -> Mapping[str, Any]:
        """Fields added to the loss records of its steps."""
        ...

    def attach(self, bench: Bench) -> None: ...
    def start(self, bench: Bench) -> None: ...
    def step(self) -> str: ...
    def log_rate(self, bench: Bench, value: float, units: str | None) -> None: ...
    def records(self, bench: Bench) -> list[dict[str, Any]]: ...
    def end(self, bench: Bench) -> None: ...


class Bench(ClosesOnExit):
    """Timing, counting and logging for one benchmark run.

    ``skip`` warm-up observations are recorded but flagged ``warmup``; the run is :attr:`done`
    after ``skip + stop`` observations, and :meth:`iterate` stops yielding then.

    ``items_scale`` multiplies the items of every observation (and :meth:`log_rate` values): the
    reporting rank of an ``njobs`` job passes the world size, so its stream holds the job's
    global throughput (docs/multinode.md).

    ``profiled`` (a :class:`ProfiledWindow`, made by the harness from the run's profiling
    settings) adds the profiled window after the ``skip + stop`` observations (module
    docstring).
    """

    def __init__(
        self,
        *,
        name: str = "bench",
        args: Sequence[str] = (),
        device: Any = None,
        stream: Stream | None = None,
        skip: int = 5,
        stop: int = 60,
        data_dir: Path | str | None = None,
        timer: Timer | None = None,
        window: int = 10,
        units: str = DEFAULT_UNITS,
        start_barrier: Callable[[], Mapping[str, Any]] | None = None,
        items_scale: int = 1,
        profiled: ProfiledWindow | None = None,
    ) -> None:
        if skip < 0:
            raise ValueError(f"skip must be >= 0, got {skip}")
        if stop < 1:
            raise ValueError(f"stop must be >= 1, got {stop}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if items_scale < 1:
            raise ValueError(f"items_scale must be >= 1, got {items_scale}")
        self.name = name
        self.args = list(args)
        # A torch.device on first use: a benchmark that never asks (a command, a sleep, pure
        # Python) starts without importing torch, seconds sooner in a fresh child.
        self._device_arg = device
        self._device: Any = None
        self.stream: Stream = stream if stream is not None else NullStream()
        self.skip = skip
        self.stop = stop
        self.window = window
        self.data_dir = Path(data_dir) if data_dir is not None else Path(DEFAULT_BASE) / DATA
        self.timer = timer if timer is not None else Timer(backend_for(device))
        self.units = units
        # An njobs job reports for all its ranks: each rank steps in lockstep with the others
        # (DDP synchronises every step), so one rank's items times the world size is the job's.
        self.items_scale = items_scale
        self._n = 0  # observations so far (read or not)
        self._since_read = 0  # steps since the timer was last read
        self._written = 0  # rate records written: the next observation's index
        # Index of the first observation of the current ``iterate`` call: its rate record says
        # so (``loop_start``), since the wall clock before it (making the iterator, the user's
        # own work between calls) was never the timer's to measure
        # (results/figures/plausibility.py).
        self._loop_start: int | None = None
        self._losses: list[tuple[int, Any]] = []
        self._closed = False
        # Replicas of a per_gpu benchmark on other devices wait here too, so that their timed
        # windows start together; called once, before the first timed step.
        self._start_barrier = start_barrier
        #: ``(model, example)`` from :meth:`watch`, for the model summary
        self.watched: tuple[Any, Any] | None = None
        #: rate items one example of ``watched`` holds (:meth:`watch`), for the FLOPs count
        self.items_per_example: float = 1
        #: the profiled window (None: no profiling); read by ``profile.finish_profile``
        self.profiled = profiled
        if profiled is not None:
            profiled.attach(self)
        # The window, when it has steps to run (settings without one still make reports).
        self._window = profiled if profiled is not None and profiled.total_steps > 0 else None

    # -- state -----------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        """The benchmark's device, a ``torch.device`` (``cpu`` when none was given)."""
        if self._device is None:
            self._device = _as_device(self._device_arg)
        return self._device

    @property
    def observations(self) -> int:
        """Observations so far, including steps whose window has not been read yet."""
        return self._n

    @property
    def done(self) -> bool:
        """True once ``skip + stop`` observations have been made (and, when profiling, the
        profiled window's steps after them)."""
        window = self._window
        return self._n >= self.skip + self.stop and (window is None or
                                                     window.steps >= window.total_steps)

    @property
    def profiled_steps(self) -> int:
        """Steps of the profiled window so far (never observations: they are not scored)."""
        return self._window.steps if self._window is not None else 0

    def watch(self, model: Any, example: Any = None, *, items_per_example: float = 1) -> None:
        """Hand the model and an example input to the harness, for the ``summary`` report and
        the FLOPs count (TFLOP/s, MFU) made after the run.

        ``example`` is what ``model`` is called with: a tensor, a tuple of positional inputs or
        a dict of keyword inputs, whose leading dimension is the examples; or a function
        returning it, called only after the run. ``items_per_example``: the rate items one
        example holds, so that FLOPs per item are in the rate's unit (a language model whose
        rate is in tokens/s: its sequence length).
        """
        self.items_per_example = checked_items_per_example(items_per_example)
        self.watched = (model, example)

    def set_units(self, units: str) -> None:
        """Unit of the rate records written from now on (e.g. ``"TFLOP/s"``)."""
        self.units = units

    def region(self, key: str) -> AbstractContextManager[None]:
        """Shortcut for ``bench.timer.region(key)``."""
        return self.timer.region(key)

    # -- the loop --------------------------------------------------------------------------
    def iterate(self, iterable: Iterable[T], batch_size: int | None = None) -> Iterator[T]:
        """Yield batches from ``iterable``, timing each step from fetch to the next fetch.

        Stops after ``skip + stop`` observations in total (plus the profiled window's steps when
        profiling), counted across calls; an iterable that runs out first just ends the call.
        Items per step are ``batch_size`` or :func:`count_items` of the batch.
        """
        self._check_open()
        if self.done:
            return
        limit = self.skip + self.stop
        # Making the iterator (DataLoader workers...) is excluded from the first step: the
        # timer's contract (docs/writing-benchmarks.md).
        it = iter(iterable)
        if self._n < limit:
            timer = self.timer
            step = timer.step
            window = self.window
            # Work queued before the loop (model setup, copies to the device, compilation,
            # cudnn autotuning) would delay the begin event behind it: the chain's wall times
            # would be early by that backlog and the first step's host work hidden by it. One
            # sync per call, in no step; before the barrier, so replicas start their windows
            # together whatever each had queued.
            timer.synchronize()
            if self._start_barrier is not None:
                barrier, self._start_barrier = self._start_barrier, None
                self.stream.write(Event.BARRIER, **barrier())
            self._loop_start = self._n
            timer.begin()
            for batch in it:
                items = batch_size if batch_size is not None else count_items(batch)
                yield batch
                step(items)
                self._n += 1
                self._since_read += 1
                if self._n >= limit:
                    break
                if self._since_read >= window:
                    self._read_window()
                    # Restart the chain so the read (and its sync) is in no step.
                    timer.begin()
            # Outside the timed loop: write what this call measured.
            self._read_window()
            if self._n < limit:
                return
        if self._window is not None:
            yield from self._profiled_loop(self._window, it, batch_size)

    def _profiled_loop(
        self, window: ProfiledWindow, it: Iterator[T], batch_size: int | None
    ) -> Iterator[T]:
        """The profiled window's steps, after the scored ones: never ``rate`` observations."""
        window.start(self)
        timer = self.timer
        total = window.total_steps
        timer.synchronize()  # as before the scored steps: work queued before is in no step
        timer.begin()
        for batch in it:
            items = batch_size if batch_size is not None else count_items(batch)
            yield batch
            timer.step(items)
            window.step()
            if window.steps >= total:
                break
            # The profiler's step bookkeeping is in no step. No sync here: the device may still
            # be running the steps before, so the chain's wall time follows the device's clock.
            timer.begin(follow=True)
        self._read_window()
        if window.steps >= total:
            window.end(self)

    def log_loss(self, loss: Any) -> None:
        """Keep ``loss`` (a tensor or a number) for the next window read; no sync here."""
        detach = getattr(loss, "detach", None)
        # The step in progress: profiled steps are numbered on from the scored ones.
        self._losses.append((self._n + self.profiled_steps,
                             detach() if detach is not None else loss))

    def log_rate(self, value: float, units: str | None = None) -> None:
        """Record one observation measured by the benchmark itself (e.g. matmul TFLOP/s).

        Written at once and counted toward ``skip``/``stop``; ignored once :attr:`done`, so the
        stream holds exactly ``skip + stop`` observations, as with :meth:`iterate`. Multiplied by
        ``items_scale`` like the items :meth:`iterate` counts (a rank's rate -> the job's).
        """
        self._check_open()
        window = self._window
        if self._n >= self.skip + self.stop:
            if window is not None and window.steps < window.total_steps:
                window.log_rate(self, value, units)
            return
        i = self._written
        self._written += 1
        self._n += 1
        self.stream.write(
            Event.RATE,
            value=float(value) * self.items_scale,
            units=units if units is not None else self.units,
            step=i,
            warmup=i < self.skip,
            time=self.timer.wall_clock(),
        )
        if self._n >= self.skip + self.stop and window is not None:
            # The next calls measure profiled work: the profiler starts now, between two.
            window.start(self)

    def log_step(
        self,
        items: float,
        seconds: float,
        *,
        per_rank: bool = True,
        loss: Any = None,
        time: float | None = None,
    ) -> bool:
        """Record one step timed outside :meth:`iterate`: ``items`` done in ``seconds``.

        For steps whose duration the benchmark knows itself, e.g. read from an external
        command's log (run/external.py). Written at once, with ``items`` and ``seconds`` like
        the records of :meth:`iterate`, so throughput and ``total_time_secs`` are computed the
        same way; counted toward ``skip``/``stop`` and ignored once :attr:`done` (returns
        whether it was recorded). ``per_rank=False``: ``items`` already count the whole job
        (an external command's global figure), so ``items_scale`` is not applied. ``loss`` is
        recorded for the step (a NaN raises :class:`NonFiniteLoss`, as from a window read).
        """
        self._check_open()
        if self._n >= self.skip + self.stop:
            return False
        i = self._written
        self._written += 1
        self._n += 1
        items = float(items) * (self.items_scale if per_rank else 1)
        seconds = float(seconds)
        record = {
            "event": Event.RATE.value,
            "value": items / seconds if seconds > 0 else math.inf,
            "units": self.units,
            "step": i,
            "warmup": i < self.skip,
            "time": self.timer.wall_clock() if time is None else float(time),
            "items": items,
            "seconds": seconds,
        }
        if loss is not None:
            detach = getattr(loss, "detach", None)
            self._losses.append((i, detach() if detach is not None else loss))
        self._write_window([record])
        return True

    def log_progress(self, done_percent: float) -> None:
        """Record how much of its work the run has done, 0-100 (the sweep table's
        ``done_percent_last``): e.g. 100 when a time-to-train workload finished its epochs."""
        self._check_open()
        self.stream.write(
            Event.PROGRESS,
            done_percent=float(done_percent),
            step=self._written - 1 if self._written else None,
            time=self.timer.wall_clock(),
        )

    def close(self) -> None:
        """Read the last partial window and write it, and end a profiled window cut short.
        Idempotent; the stream stays open."""
        if self._closed:
            return
        self._closed = True
        try:
            self._read_window()
        finally:
            if self._window is not None:
                self._window.end(self)

    # -- window reads ----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"bench {self.name!r} is closed")

    def _read_window(self) -> None:
        self._since_read = 0
        window = self._window
        records = (window.records(self) if window is not None and window.started
                   else self._scored_records())
        self._write_window(records)

    def _scored_records(self) -> list[dict[str, Any]]:
        window = self.timer.read()
        units = self.units
        scale = self.items_scale
        records: list[dict[str, Any]] = []
        for obs in window.steps:
            i = self._written
            self._written += 1
            items = obs.items * scale
            records.append(
                {
                    "event": Event.RATE.value,
                    "value": items / obs.seconds if obs.seconds > 0 else math.inf,
                    "units": units,
                    "step": i,
                    "warmup": i < self.skip,
                    "time": obs.time,
                    "items": items,
                    "seconds": obs.seconds,
                    **({LOOP_START: True} if i == self._loop_start else {}),
                }
            )
        last = self._written - 1 if self._written else None
        for total in window.regions:
            records.append(
                {
                    "event": Event.REGION.value,
                    "key": total.key,
                    "count": total.count,
                    "seconds": total.total_seconds,
                    "step": last,
                }
            )
        return records

    def _write_window(self, records: list[dict[str, Any]]) -> None:
        window = self._window
        marks = window.marks if window is not None and window.started else {}
        bad: NonFiniteLoss | None = None
        if self._losses:
            losses, self._losses = self._losses, []
            values = losses_to_floats([v for _, v in losses])
            for (step, _), value in zip(losses, values, strict=True):
                records.append({"event": Event.LOSS.value, "value": value, "step": step, **marks})
                if bad is None and not math.isfinite(value):
                    bad = NonFiniteLoss(value, step)
        # The whole window in one write: the records before a NaN are kept, then it fails.
        self.stream.write_many(records)
        if bad is not None:
            raise bad

    def __repr__(self) -> str:
        return (
            f"Bench(name={self.name!r}, device={str(self.device)!r}, "
            f"observations={self._n}/{self.skip + self.stop})"
        )
