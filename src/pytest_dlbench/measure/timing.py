"""Step and region timing for training loops, with pluggable clock backends.

The loop only *records* marks (a ``perf_counter`` value or a CUDA event) and appends them to
lists; nothing is converted to seconds, and nothing synchronises with the device, until
:meth:`Timer.read` is called at the end of a window of steps (milabench, "Methodology"; Deep500,
the region Timer). Reading synchronises once and turns every pending interval into seconds.

Backends are tiny objects with three methods (:class:`Backend`), so a fake device clock
(:class:`FakeCudaBackend`, or the real CUDA backend on the queue model of
:mod:`pytest_dlbench.measure.fakecuda`) tests the algorithm, including "no synchronisation inside
the loop", without a GPU. torch is imported only by :class:`CudaEventBackend`, when one is
constructed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from pytest_dlbench.core.errors import quoted

__all__ = [
    "STANDARD_KEYS",
    "Backend",
    "CpuBackend",
    "CudaEventBackend",
    "FakeClock",
    "FakeCudaBackend",
    "MonotonicWallClock",
    "RegionInterval",
    "RegionTotal",
    "StepObservation",
    "Timer",
    "TimerError",
    "Window",
    "backend_for",
]

#: Region keys of Deep500; any other string is accepted as a user key.
STANDARD_KEYS = ("epoch", "batch", "forward", "backward", "comm", "io", "other")

Mark = Any  # whatever a backend's record() returns: a float, a CUDA event, a fake event


class TimerError(RuntimeError):
    """Misuse of a Timer: a region opened twice, ended without start, a step before begin()."""


class Backend(Protocol):
    """Where marks come from and how two marks become seconds."""

    def record(self) -> Mark:
        """Take a mark now (on the current stream for a device). Must not synchronise."""
        ...

    def elapsed(self, start: Mark, end: Mark) -> float:
        """Seconds from ``start`` to ``end``. May synchronise; only called when reading."""
        ...

    def synchronize(self) -> None:
        """Wait until every mark recorded so far has completed."""
        ...


class CpuBackend:
    """Host wall-clock marks: ``clock()`` values (``time.perf_counter`` unless injected)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock

    def record(self) -> float:
        return self.clock()

    def elapsed(self, start: float, end: float) -> float:
        return end - start

    def synchronize(self) -> None:
        pass


class CudaEventBackend:
    """CUDA events with timing enabled, recorded on the stream current on ``device`` (the
    current device when None) at the first mark; later marks go on that same stream.

    Reading an interval waits for its end event; on a device that has already been synchronised
    that wait returns at once, so a window costs one real synchronisation.

    ``cuda`` stands in for ``torch.cuda`` (its ``Event``, ``current_stream`` and
    ``synchronize``): tests pass a :class:`~pytest_dlbench.measure.fakecuda.FakeCuda`, so this
    very code runs on a simulated device.
    """

    def __init__(self, device: Any = None, *, cuda: Any = None) -> None:
        if cuda is None:
            import torch  # lazily: constructing this backend is the first point that needs CUDA

            cuda = torch.cuda
            device = torch.device(device) if device is not None else None
        if device is not None and _device_type(device) != "cuda":
            raise ValueError(f"CudaEventBackend needs a cuda device, got {device}")
        self._cuda = cuda
        self._event = cuda.Event
        self.device = device
        # The stream every mark goes on, looked up at the first mark (not here: constructing
        # the backend must not initialise CUDA) and kept: a step records 9 marks, and a
        # current_stream() call per mark is host time in the timed loop.
        self._stream: Any = None

    def record(self) -> Any:
        event = self._event(enable_timing=True)
        stream = self._stream
        if stream is None:
            stream = self._stream = self._cuda.current_stream(self.device)
        event.record(stream)
        return event

    def elapsed(self, start: Any, end: Any) -> float:
        end.synchronize()
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds

    def synchronize(self) -> None:
        self._cuda.synchronize(self.device)


def _device_type(device: Any) -> str:
    """``"cuda"`` for ``torch.device("cuda", 1)`` or ``"cuda:1"``; a bare int is a CUDA ordinal."""
    if isinstance(device, int):
        return "cuda"
    return getattr(device, "type", None) or str(device).split(":", 1)[0]


def backend_for(device: Any = None) -> Backend:
    """CUDA events for a cuda device (a ``torch.device`` or a string such as ``"cuda:1"``),
    host timestamps for anything else, including ``None`` and ``"cpu"``."""
    if device is None:
        return CpuBackend()
    if _device_type(device) == "cuda":  # torch reads a bare index as a CUDA ordinal
        return CudaEventBackend(device)
    return CpuBackend()


class FakeClock:
    """A clock that only moves when told to; use as ``CpuBackend(clock=FakeClock())``."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go back")
        self.now += seconds


class _FakeEvent(NamedTuple):
    serial: int
    at: float


class FakeCudaBackend:
    """A stand-in for :class:`CudaEventBackend` with a device clock the test advances.

    A kind fake: events are stamped when recorded, as if the host never ran ahead of the device,
    so a backlog of queued work or a hidden sync cannot show here. For those, run the real
    backend on the queue model, :meth:`pytest_dlbench.measure.fakecuda.FakeCuda.backend`.

    Like real CUDA events, an event's time can only be read once it is known to have completed,
    that is after :meth:`synchronize`; :meth:`elapsed` raises otherwise, so a Timer that forgets to
    synchronise fails its tests. ``synchronizations`` counts synchronisations, so tests can assert
    that none happen inside the loop.
    """

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.synchronizations = 0
        self.records = 0
        self._completed = 0  # events with serial <= this have completed

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of device time pass."""
        self.clock.advance(seconds)

    def record(self) -> _FakeEvent:
        self.records += 1
        return _FakeEvent(self.records, self.clock.now)

    def elapsed(self, start: _FakeEvent, end: _FakeEvent) -> float:
        if max(start.serial, end.serial) > self._completed:
            raise RuntimeError("fake CUDA event read before it completed: synchronize() first")
        return end.at - start.at

    def synchronize(self) -> None:
        self.synchronizations += 1
        self._completed = self.records


class MonotonicWallClock:
    """The host's wall clock read once, then carried forward by a monotonic clock.

    A step's ``time`` is judged against its timed seconds (results/figures/plausibility.py), which
    come from a monotonic clock or the device's: ``time.time()`` itself jumps when NTP steps the
    clock or the host resumes from a suspend, and the whole jump would land in one gap between
    windows, failing a correct run as an error of measurement. Offsetting the monotonic clock
    by the wall clock once keeps the times on the calendar and their differences true."""

    def __init__(self, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.perf_counter) -> None:
        self._monotonic = monotonic
        self._offset = wall() - monotonic()

    def __call__(self) -> float:
        return self._offset + self._monotonic()


class StepObservation(NamedTuple):
    """One step: its index since the Timer was made, item count, duration, wall time at its end."""

    index: int  # type: ignore[assignment]  # a field named like tuple.index, on purpose
    items: int
    seconds: float
    time: float


class RegionTotal(NamedTuple):
    """All intervals of one region key that ended in a window."""

    key: str
    count: int  # type: ignore[assignment]  # a field named like tuple.count, on purpose
    total_seconds: float


class RegionInterval(NamedTuple):
    """One interval of a region, kept by ``Timer.read(intervals=True)`` (per-step statistics).

    ``step`` is the index of the step during which the region ended (the step in progress when
    :meth:`Timer.end` was called); ``start`` is the seconds from that step's start to the
    region's start (negative for a region opened before the step began), None when that step
    has not ended by the read.
    """

    key: str
    step: int
    seconds: float
    start: float | None


class Window(NamedTuple):
    """What one :meth:`Timer.read` returns; ``intervals`` only with ``read(intervals=True)``."""

    steps: list[StepObservation]
    regions: list[RegionTotal]
    intervals: Sequence[RegionInterval] = ()

    @property
    def items(self) -> int:
        return sum(s.items for s in self.steps)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def rate(self) -> float | None:
        """Items per second over the window (Σ items / Σ seconds), None without time."""
        seconds = self.seconds
        return self.items / seconds if seconds > 0 else None


class _Region:
    """Context manager for one region; a class, not @contextmanager, to stay cheap per step."""

    __slots__ = ("_key", "_timer")

    def __init__(self, timer: Timer, key: str) -> None:
        self._timer = timer
        self._key = key

    def __enter__(self) -> None:
        self._timer.start(self._key)

    def __exit__(self, *exc: object) -> None:
        # Ended even on an exception, so the timer is still usable if the caller recovers.
        self._timer.end(self._key)


class Timer:
    """Times steps and named regions of a loop with marks read only once per window.

    Steps form chains: :meth:`begin` takes the first mark, each :meth:`step` closes the interval
    from the previous mark, so consecutive steps cover everything in between (data loading
    included), like milabench's ``start = end``. Call :meth:`begin` again after anything that should
    not count (creating a data iterator, reading a window).

    Regions (:meth:`start`/:meth:`end` or :meth:`region`) are independent of steps and of each
    other: they may nest or overlap, but one key cannot be open twice at once.

    ``on_region``, when set, is called as ``on_region(key, True)`` just before a region's start
    mark and ``on_region(key, False)`` just after its end mark (the profiler names the region in
    its trace that way); None, the default, costs one attribute test per region.

    Wall-clock times: each chain's first mark is paired with ``wall_clock()`` when it is taken
    (by default a :class:`MonotonicWallClock`: ``time.time()`` once, then ``perf_counter``, so
    a clock step between chains is no gap); a step's ``time`` is that plus the device seconds of
    the chain's steps up to its end. For the CPU backend that is the perf_counter offset; for
    CUDA it is exact only when the device queue is empty at :meth:`begin`, so that the begin
    event runs as soon as it is recorded: after a window read, or after :meth:`synchronize`.
    With work still queued (model setup, copies to the device, compilation) the begin event
    runs later than its wall time says, every ``time`` of the chain is early by that backlog,
    and host work of the first step hides behind it; call :meth:`synchronize` before such a
    :meth:`begin` (``Bench.iterate`` does).
    """

    def __init__(
        self, backend: Backend | None = None, *, wall_clock: Callable[[], float] | None = None
    ) -> None:
        self.backend: Backend = backend if backend is not None else CpuBackend()
        self.wall_clock = wall_clock if wall_clock is not None else MonotonicWallClock()
        self.time_origin: float | None = None  # wall time of the first begin()
        self._record = self.backend.record
        self._last: Mark | None = None
        self._steps: list[tuple[Mark, Mark, int]] = []
        # (index into _steps, wall time of its start or None, the step end mark it follows)
        self._chains: list[tuple[int, float | None, Mark | None]] = []
        self._stepped = False  # _last is a step's end mark (a chain can follow it)
        self._open: dict[str, Mark] = {}
        # (key, start, end, index into _steps of the step in progress when the region ended)
        self._regions: list[tuple[str, Mark, Mark, int]] = []
        self.on_region: Callable[[str, bool], None] | None = None
        self._index = 0  # global index of the next step to be read
        self._wall = 0.0  # wall time at the end of the last step read (continues a chain)

    # -- steps -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until the device has done all the work queued so far: one host sync, for
        outside the timed steps (before a :meth:`begin`), never inside a window."""
        self.backend.synchronize()

    def begin(self, *, follow: bool = False) -> None:
        """Start a chain of steps: the next :meth:`step` measures from now.

        The chain's wall time is ``wall_clock()`` now, right only on an idle device (class
        docstring). ``follow``: for a restart with work still queued (no sync since the last
        step), take it from the last step's end instead, plus the device time from that end to
        this mark; a chain with no step before it falls back to ``wall_clock()``.
        """
        last, stepped = self._last, self._stepped
        mark = self._record()
        self._last = mark
        self._stepped = False
        if follow and stepped:
            self._chains.append((len(self._steps), None, last))
            return
        wall = self.wall_clock()
        if self.time_origin is None:
            self.time_origin = wall
        self._chains.append((len(self._steps), wall, None))

    def step(self, items: int) -> None:
        """Mark a step boundary: the step that just ended processed ``items`` items."""
        mark = self._record()
        last = self._last
        if last is None:
            raise TimerError("Timer.step() before Timer.begin(): the first step has no start")
        self._steps.append((last, mark, items))
        self._last = mark
        self._stepped = True

    @property
    def pending(self) -> int:
        """Steps recorded but not yet read."""
        return len(self._steps)

    @property
    def next_index(self) -> int:
        """Index the next completed step will have (steps so far, read or not)."""
        return self._index + len(self._steps)

    # -- regions ---------------------------------------------------------------------------
    def start(self, key: str) -> None:
        """Open region ``key``."""
        if key in self._open:
            raise TimerError(
                f"region {quoted(key)} is already open; end it before starting it again")
        hook = self.on_region
        if hook is not None:
            hook(key, True)
        self._open[key] = self._record()

    def end(self, key: str) -> None:
        """Close region ``key``; its interval is read with the next window."""
        mark = self._record()
        try:
            start = self._open.pop(key)
        except KeyError:
            raise TimerError(f"region {quoted(key)} is not open") from None
        self._regions.append((key, start, mark, len(self._steps)))
        hook = self.on_region
        if hook is not None:
            hook(key, False)

    def region(self, key: str) -> _Region:
        """``with timer.region("forward"): ...`` times the block as region ``key``."""
        return _Region(self, key)

    @property
    def open_regions(self) -> tuple[str, ...]:
        return tuple(self._open)

    # -- reading ---------------------------------------------------------------------------
    def read(self, *, intervals: bool = False) -> Window:
        """Synchronise once and convert every pending step and region interval to seconds.

        Open regions stay open and are counted in the window in which they end. With
        ``intervals``, the window also lists every region interval with its step
        (:class:`RegionInterval`), for per-step statistics (the profiler's time report).
        """
        steps, self._steps = self._steps, []
        chains, self._chains = self._chains, []
        regions, self._regions = self._regions, []
        if not steps and not regions:
            # Nothing to convert: keep chain starts for the steps still to come, skip the sync.
            self._chains = [(0, wall, link) for _, wall, link in chains]
            return Window([], [])

        backend = self.backend
        backend.synchronize()
        elapsed = backend.elapsed

        observations: list[StepObservation] = []
        wall = self._wall
        c = 0
        for i, (start, end, items) in enumerate(steps):
            while c < len(chains) and chains[c][0] == i:
                _, chain_wall, link = chains[c]
                # A following chain: ``wall`` is still the wall time of ``link``, the end of
                # the step before (of this window, or the last one read).
                wall = chain_wall if chain_wall is not None else wall + elapsed(link, start)
                c += 1
            seconds = elapsed(start, end)
            wall += seconds
            observations.append(StepObservation(self._index + i, items, seconds, wall))
        self._index += len(steps)
        self._wall = wall
        # A begin() after the last step starts the next window's first chain.
        self._chains = [(0, w, link) for idx, w, link in chains[c:] if idx >= len(steps)]

        totals: dict[str, list[float]] = {}
        kept: list[RegionInterval] = []
        base = self._index - len(steps)  # global index of steps[0]
        for key, start, end, in_step in regions:
            seconds = elapsed(start, end)
            acc = totals.setdefault(key, [0, 0.0])
            acc[0] += 1
            acc[1] += seconds
            if intervals:
                offset = elapsed(steps[in_step][0], start) if in_step < len(steps) else None
                kept.append(RegionInterval(key, base + in_step, seconds, offset))
        region_totals = [RegionTotal(k, int(n), s) for k, (n, s) in totals.items()]
        return Window(observations, region_totals, kept if intervals else ())
