"""A queue-model fake of a CUDA device, for testing GPU timing paths on a machine without one.

Real CUDA is asynchronous: a kernel launch costs the host a few microseconds and returns; the
kernel runs later, when the device reaches it in its stream's FIFO queue. An event recorded on
the stream is stamped when the device reaches *it*, that is after all the work enqueued before
it, and its time can be read only once it has completed. A host sync (``torch.cuda.synchronize``,
``tensor.item()``, ``event.synchronize()``) blocks the host until the device gets there.

:class:`FakeCuda` models exactly that with two clocks on one time base: the host clock (a
:class:`~pytest_dlbench.measure.timing.FakeClock` that moves with host work, launch overheads and
waits) and the device's progress through one in-order stream. Tests drive it with

- :meth:`FakeCuda.host` -- host-only work (Python, data loading): the host clock moves;
- :meth:`FakeCuda.launch` -- enqueue device work of a given duration; the host pays only
  ``launch_overhead``, unless the launch queue is full (``queue_limit`` entries), when it waits;
- :meth:`FakeCuda.item` -- a hidden sync (what ``loss.item()`` or ``if tensor:`` does);

and read what the host saw with :meth:`FakeCuda.wall`. It also offers the part of the
``torch.cuda`` API that :class:`~pytest_dlbench.measure.timing.CudaEventBackend` uses
(``Event``, ``current_stream``, ``synchronize``), so :meth:`FakeCuda.backend` is the real backend
code running on the fake device. Events obey torch's contract (c10/cuda/CUDAEvent.h):
``elapsed_time`` raises unless both events were created with ``enable_timing=True``, were
recorded, and have completed; ``query()`` of an event never recorded is True.

What it does not model: several streams, events' 0.5 us resolution, clock drift between host and
device. No torch import.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from pytest_dlbench.measure.timing import CudaEventBackend, FakeClock

if TYPE_CHECKING:
    from pytest_dlbench.measure.timing import CudaEventBackend

__all__ = ["FakeCuda", "FakeCudaEvent", "FakeStream"]

#: host seconds a kernel launch costs (a typical CUDA launch is 2-10 us)
LAUNCH_OVERHEAD = 5e-6
#: entries the launch queue holds before a launch blocks the host (CUDA's is about 1024)
QUEUE_LIMIT = 1024


class FakeStream:
    """The device's one stream (what ``torch.cuda.current_stream()`` returns)."""

    def __init__(self, device: FakeCuda) -> None:
        self.device = device


class FakeCudaEvent:
    """A ``torch.cuda.Event`` on a :class:`FakeCuda`: stamped when the device reaches it."""

    def __init__(self, device: FakeCuda, enable_timing: bool = False) -> None:
        self._device = device
        self.enable_timing = enable_timing
        #: the time the device reaches the event, None until recorded
        self.at: float | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        if stream is not None and stream.device is not self._device:
            raise RuntimeError("Event device does not match recording stream's device.")
        self.at = self._device._enqueue(0.0)

    def query(self) -> bool:
        """True once the device has reached the event (and for an event never recorded)."""
        return self.at is None or self._device.clock.now >= self.at

    def synchronize(self) -> None:
        """Block the host until the event has completed (``cudaEventSynchronize``)."""
        if self.at is not None:
            self._device.event_syncs += 1
            self._device._wait_until(self.at)

    def elapsed_time(self, end: FakeCudaEvent) -> float:
        """Milliseconds from this event to ``end``; both must have completed, as in torch."""
        if not (self.enable_timing and end.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end.at is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return (end.at - self.at) * 1000.0


class FakeCuda:
    """A simulated CUDA device with one in-order stream and a host that runs ahead of it.

    Counters for tests: ``synchronize_calls`` (device syncs, ``torch.cuda.synchronize``),
    ``event_syncs`` (``event.synchronize()``), ``hidden_syncs`` (:meth:`item`), ``queue_waits``
    (launches that found the queue full), ``kernels``, ``busy`` (device seconds of work),
    ``max_depth`` (the most entries ever queued), ``events`` (``Event`` objects made) and
    ``stream_lookups`` (``current_stream`` calls: host time a timer should not spend per mark).
    """

    def __init__(
        self,
        *,
        launch_overhead: float = LAUNCH_OVERHEAD,
        queue_limit: int = QUEUE_LIMIT,
        wall_origin: float = 1_000_000.0,
        clock: FakeClock | None = None,
    ) -> None:
        if queue_limit < 1:
            raise ValueError(f"queue_limit must be >= 1, got {queue_limit}")
        self.clock = clock if clock is not None else FakeClock()
        self.launch_overhead = launch_overhead
        self.queue_limit = queue_limit
        self.wall_origin = wall_origin
        self.stream = FakeStream(self)
        self._pending: deque[float] = deque()  # completion times of entries not yet done
        self._tail = 0.0  # when the last entry enqueued completes (the queue drains)
        self.synchronize_calls = 0
        self.event_syncs = 0
        self.hidden_syncs = 0
        self.queue_waits = 0
        self.kernels = 0
        self.busy = 0.0
        self.max_depth = 0
        self.events = 0
        self.stream_lookups = 0

    # -- what a test does ------------------------------------------------------------------
    def host(self, seconds: float) -> None:
        """Host-only work (Python, data loading, a CPU transform): the device is not involved."""
        self.clock.advance(seconds)

    def launch(self, seconds: float) -> None:
        """Enqueue a kernel that runs ``seconds`` on the device; returns once it is queued."""
        if seconds < 0:
            raise ValueError("a kernel cannot take negative time")
        self.clock.advance(self.launch_overhead)
        self._enqueue(seconds)
        self.kernels += 1
        self.busy += seconds

    def item(self) -> None:
        """A hidden sync: a scalar copied to the host waits for all the work queued before it."""
        self.hidden_syncs += 1
        self._wait_until(self._enqueue(0.0))

    def wall(self) -> float:
        """The host's wall clock (``time.time()``): pass as the Timer's ``wall_clock``."""
        return self.wall_origin + self.clock.now

    def device_done(self) -> float:
        """Wall time at which the device finishes all the work queued so far."""
        return self.wall_origin + max(self._tail, self.clock.now)

    @property
    def depth(self) -> int:
        """Entries (kernels, events) queued or running now."""
        self._retire()
        return len(self._pending)

    def backend(self, device: Any = "cuda:0") -> CudaEventBackend:
        """The real :class:`CudaEventBackend` code, running on this fake device."""
        return CudaEventBackend(device, cuda=self)

    # -- the torch.cuda API CudaEventBackend uses -------------------------------------------
    def Event(self, enable_timing: bool = False, **_: Any) -> FakeCudaEvent:  # noqa: N802
        self.events += 1
        return FakeCudaEvent(self, enable_timing=enable_timing)

    def current_stream(self, device: Any = None) -> FakeStream:
        self.stream_lookups += 1
        return self.stream

    def synchronize(self, device: Any = None) -> None:
        """``torch.cuda.synchronize``: block the host until the queue has drained."""
        self.synchronize_calls += 1
        self._wait_until(self._tail)

    # -- the model -------------------------------------------------------------------------
    def _retire(self) -> None:
        now = self.clock.now
        pending = self._pending
        while pending and pending[0] <= now:
            pending.popleft()

    def _wait_until(self, t: float) -> None:
        if t > self.clock.now:
            self.clock.advance(t - self.clock.now)

    def _enqueue(self, seconds: float) -> float:
        """Put an entry of ``seconds`` at the end of the stream; return when it completes."""
        self._retire()
        while len(self._pending) >= self.queue_limit:
            # The launch queue is full: the host blocks until the oldest entry is done.
            self.queue_waits += 1
            self._wait_until(self._pending[0])
            self._retire()
        end = max(self.clock.now, self._tail) + seconds
        self._tail = end
        self._pending.append(end)
        self.max_depth = max(self.max_depth, len(self._pending))
        return end
