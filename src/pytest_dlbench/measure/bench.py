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
device once, and the window's ``rate``, ``region`` and ``loss`` records are written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.measure.stream import ClosesOnExit, NullStream, Stream
from pytest_dlbench.measure.timing import Timer, backend_for

__all__ = ["Bench", "NonFiniteLoss", "count_items"]

T = TypeVar("T")


class NonFiniteLoss(DlbenchError, RuntimeError):
    """A logged loss was NaN or infinite: the run fails (reference/scoring.md)."""

    def __init__(self, value: float, step: int) -> None:
        self.value = value
        self.step = step
        super().__init__(f"loss is {value} at step {step}")


def _leading(value: Any) -> int | None:
    """Length of the first dimension of a tensor/array/sequence, None for a scalar-like."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 0 else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def count_items(batch: Any) -> int:
    """Number of samples in a batch, for when ``iterate`` is not given ``batch_size``.

    - a tensor or array: its first dimension;
    - a tuple/list whose first element is a tensor, array or sequence (a collated ``(x, y)``
      batch): that element's first dimension;
    - a mapping (``{"input_ids": ..., ...}``): the first value's first dimension;
    - another sequence (a list of samples): its length.

    A list of unstacked sample tensors looks like an ``(x, y)`` batch: pass ``batch_size``.
    """
    n = _leading(batch) if hasattr(batch, "shape") else None
    if n is not None:
        return n
    if isinstance(batch, (tuple, list)):
        if not batch:
            return 0
        n = _leading(batch[0])
        return n if n is not None else len(batch)
    if isinstance(batch, Mapping) and batch:
        n = _leading(next(iter(batch.values())))
        if n is not None:
            return n
    try:
        return len(batch)
    except TypeError:
        raise TypeError(
            f"cannot count the items of a {type(batch).__name__} batch; "
            "pass batch_size= to bench.iterate()"
        ) from None


def _as_device(device: Any) -> Any:
    """A ``torch.device`` when torch is available (what ``.to()`` callers expect), else as given."""
    if device is None:
        device = "cpu"
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency; keep working without it
        return device
    return torch.device(device)


def _losses_to_floats(values: list[Any]) -> list[float]:
    """Convert logged losses with one device-to-host copy for all tensors, not one per loss."""
    out: list[float | None] = [None] * len(values)
    tensors: list[tuple[int, Any]] = []
    for i, v in enumerate(values):
        if hasattr(v, "detach") and hasattr(v, "reshape"):
            tensors.append((i, v))
        else:
            out[i] = float(v)
    if tensors:
        import torch

        # A non-scalar loss (per-sample losses) is summarised by its mean; scalars (the usual
        # case) go to the host as they are, so the window read stays cheap.
        flat = [t if t.dim() == 0 else t.detach().reshape(-1).float().mean() for _, t in tensors]
        try:
            converted = torch.stack(flat).tolist()
        except RuntimeError:  # losses on different devices: convert one by one
            converted = [float(t) for t in flat]
        for (i, _), f in zip(tensors, converted, strict=True):
            out[i] = f
    return [float(x) for x in out]  # type: ignore[arg-type]


class Bench(ClosesOnExit):
    """Timing, counting and logging for one benchmark run.

    ``skip`` warm-up observations are recorded but flagged ``warmup``; the run is :attr:`done`
    after ``skip + stop`` observations, and :meth:`iterate` stops yielding then.

    ``items_scale`` multiplies the items of every observation (and :meth:`log_rate` values): the
    reporting rank of an ``njobs`` job passes the world size, so its stream holds the job's
    global throughput (docs/multinode.md).
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
        units: str = "items/s",
        start_barrier: Callable[[], Mapping[str, Any]] | None = None,
        items_scale: int = 1,
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
        self.device = _as_device(device)
        self.stream: Stream = stream if stream is not None else NullStream()
        self.skip = skip
        self.stop = stop
        self.window = window
        self.data_dir = Path(data_dir) if data_dir is not None else Path(".dlbench") / "data"
        self.timer = timer if timer is not None else Timer(backend_for(self.device))
        self.units = units
        # An njobs job reports for all its ranks: each rank steps in lockstep with the others
        # (DDP synchronises every step), so one rank's items times the world size is the job's.
        self.items_scale = items_scale
        self._n = 0  # observations so far (read or not)
        self._since_read = 0  # steps since the timer was last read
        self._written = 0  # rate records written: the next observation's index
        self._losses: list[tuple[int, Any]] = []
        self._closed = False
        # Replicas of a per_gpu benchmark on other devices wait here too, so that their timed
        # windows start together; called once, before the first timed step.
        self._start_barrier = start_barrier

    # -- state -----------------------------------------------------------------------------
    @property
    def observations(self) -> int:
        """Observations so far, including steps whose window has not been read yet."""
        return self._n

    @property
    def done(self) -> bool:
        """True once ``skip + stop`` observations have been made."""
        return self._n >= self.skip + self.stop

    def set_units(self, units: str) -> None:
        """Unit of the rate records written from now on (e.g. ``"TFLOP/s"``)."""
        self.units = units

    def region(self, key: str) -> AbstractContextManager[None]:
        """Shortcut for ``bench.timer.region(key)``."""
        return self.timer.region(key)

    # -- the loop --------------------------------------------------------------------------
    def iterate(self, iterable: Iterable[T], batch_size: int | None = None) -> Iterator[T]:
        """Yield batches from ``iterable``, timing each step from fetch to the next fetch.

        Stops after ``skip + stop`` observations in total, counted across calls; an iterable
        that runs out first just ends the call. Items per step are ``batch_size`` or
        :func:`count_items` of the batch.
        """
        self._check_open()
        limit = self.skip + self.stop
        if self._n >= limit:
            return
        timer = self.timer
        step = timer.step
        window = self.window
        # Making the iterator (DataLoader workers...) is excluded from the first step (seed 000).
        it = iter(iterable)
        if self._start_barrier is not None:
            barrier, self._start_barrier = self._start_barrier, None
            self.stream.write("barrier", **barrier())
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

    def log_loss(self, loss: Any) -> None:
        """Keep ``loss`` (a tensor or a number) for the next window read; no sync here."""
        detach = getattr(loss, "detach", None)
        self._losses.append((self._n, detach() if detach is not None else loss))

    def log_rate(self, value: float, units: str | None = None) -> None:
        """Record one observation measured by the benchmark itself (e.g. matmul TFLOP/s).

        Written at once and counted toward ``skip``/``stop``; ignored once :attr:`done`, so the
        stream holds exactly ``skip + stop`` observations, as with :meth:`iterate`. Multiplied by
        ``items_scale`` like the items :meth:`iterate` counts (a rank's rate -> the job's).
        """
        self._check_open()
        if self.done:
            return
        i = self._written
        self._written += 1
        self._n += 1
        self.stream.write(
            "rate",
            value=float(value) * self.items_scale,
            units=units if units is not None else self.units,
            step=i,
            warmup=i < self.skip,
            time=self.timer.wall_clock(),
        )

    def close(self) -> None:
        """Read the last partial window and write it. Idempotent; the stream stays open."""
        if self._closed:
            return
        self._closed = True
        self._read_window()

    # -- window reads ----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"bench {self.name!r} is closed")

    def _read_window(self) -> None:
        self._since_read = 0
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
                    "event": "rate",
                    "value": items / obs.seconds if obs.seconds > 0 else math.inf,
                    "units": units,
                    "step": i,
                    "warmup": i < self.skip,
                    "time": obs.time,
                    "items": items,
                    "seconds": obs.seconds,
                }
            )
        last = self._written - 1 if self._written else None
        for total in window.regions:
            records.append(
                {
                    "event": "region",
                    "key": total.key,
                    "count": total.count,
                    "seconds": total.total_seconds,
                    "step": last,
                }
            )
        bad: NonFiniteLoss | None = None
        if self._losses:
            losses, self._losses = self._losses, []
            values = _losses_to_floats([v for _, v in losses])
            for (step, _), value in zip(losses, values, strict=True):
                records.append({"event": "loss", "value": value, "step": step})
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
