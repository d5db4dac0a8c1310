"""A run's stream records, parsed once by kind: the one reader of what a run wrote.

:class:`RunRecords` groups the records of one stream by their :class:`Event` kind, in stream
order, so that a reader asks for what it needs instead of writing its own
``record.get("event") == ...`` loop::

    run = RunRecords.read(path)            # or RunRecords.of(records), records in memory
    run.config, run.meta, run.end          # one record each (None when absent)
    run.rates, run.steady, run.losses      # the observations, the scored window, the losses
    run.telemetry, run.monitor             # the monitor's samples and how it sampled
    run.profile_steps, run.profile_start   # the profiled window (profile/window.py)
    run.kind(Event.COMPILE)                # any kind, unknown ones included
    run.span                               # the first and last time of any record

Which record of a kind that appears more than once counts is decided here, once: ``end`` is the
last one (the parent appends one after a child killed before its own), ``monitor`` the first
(how sampling started), ``monitor_summary`` and ``flops`` the last. Records stay the mappings
that were written (a reader reads its fields); nothing here fails on a field.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_dlbench.core.numbers import is_number
from pytest_dlbench.measure.rates import Rates
from pytest_dlbench.measure.stream import Event, read_stream

__all__ = ["Record", "RunRecords"]

Record = Mapping[str, Any]


@dataclass(frozen=True)
class RunRecords:
    """The records of one run, by kind (module docstring). Build with :meth:`of` or
    :meth:`read`."""

    #: every record, in stream order
    records: tuple[Record, ...] = ()
    _kinds: Mapping[str, Sequence[Record]] = field(default_factory=dict, repr=False)
    #: Built by :meth:`collect`: the rate records are in :attr:`rates` only.
    _rates_apart: bool = field(default=False, repr=False)

    @classmethod
    def of(cls, records: Iterable[Record] | RunRecords) -> RunRecords:
        """Parse ``records`` (a stream's, in order); a :class:`RunRecords` is returned as is."""
        if isinstance(records, RunRecords):
            return records
        kept = tuple(records)
        return cls(kept, cls._by_kind(kept))

    @classmethod
    def collect(cls, records: Iterable[Record]) -> RunRecords:
        """Parse ``records`` as they come (a stream read line by line), keeping the ``rate``
        records by column only (:class:`~pytest_dlbench.measure.rates.Rates`): memory grows by
        a few tens of bytes per observation. :attr:`records` then holds the other records,
        and iterating yields them, then the rates."""
        others: list[Record] = []
        kinds = cls._by_kind(records, others)
        return cls(tuple(others), kinds, _rates_apart=True)

    @staticmethod
    def _by_kind(records: Iterable[Record],
                 others: list[Record] | None = None) -> dict[str, Sequence[Record]]:
        kinds: dict[str, list[Record]] = {}
        rates = Rates()
        for record in records:
            event = record.get("event")
            if not isinstance(event, str):
                if others is not None:
                    others.append(record)
                continue
            # A record kept in memory may hold an Event member, the file its value: one key.
            if event == Event.RATE:
                rates.append(record)
                continue
            if others is not None:
                others.append(record)
            kinds.setdefault(str(event), []).append(record)
        out: dict[str, Sequence[Record]] = {k: tuple(v) for k, v in kinds.items()}
        if rates:
            out[Event.RATE.value] = rates
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> RunRecords:
        """The records of the stream file at ``path`` (:func:`read_stream`: a torn last line
        is forgiven, a corrupt one before it raises)."""
        return cls.of(read_stream(path))

    # -- any kind ------------------------------------------------------------------------------
    def kind(self, event: str) -> Sequence[Record]:
        """The records of ``event`` (an :class:`Event` or any other kind), in stream order."""
        return self._kinds.get(str(event), ())

    def first(self, event: str) -> Record | None:
        found = self.kind(event)
        return found[0] if found else None

    def last(self, event: str) -> Record | None:
        found = self.kind(event)
        return found[-1] if found else None

    def __len__(self) -> int:
        return len(self.records) + (len(self.rates) if self._rates_apart else 0)

    def __iter__(self) -> Iterator[Record]:
        """Every record in stream order: a reader of plain records reads a RunRecords too (one
        built by :meth:`collect` yields the other records, then the rates)."""
        if self._rates_apart:
            return itertools.chain(self.records, self.rates)
        return iter(self.records)

    @property
    def span(self) -> tuple[float, float] | None:
        """The first and last ``time`` of any record (UNIX seconds); None when none has one."""
        times = [float(t) for r in self if is_number(t := r.get("time"))]
        return (min(times), max(times)) if times else None

    # -- one record each -----------------------------------------------------------------------
    @property
    def config(self) -> Record | None:
        """The ``config`` record (spec, device, repeat...) the harness writes first."""
        return self.first(Event.CONFIG)

    @property
    def meta(self) -> Record | None:
        """The machine facts of the process that ran the benchmark."""
        return self.first(Event.META)

    @property
    def end(self) -> Record | None:
        """How the run ended: the last ``end`` record (None: an incomplete stream)."""
        return self.last(Event.END)

    @property
    def flops(self) -> Record | None:
        return self.last(Event.FLOPS)

    @property
    def monitor(self) -> Record | None:
        """How telemetry was sampled (``gpu``, ``reason``, ``interval``): the first one."""
        return self.first(Event.MONITOR)

    @property
    def monitor_summary(self) -> Record | None:
        return self.last(Event.MONITOR_SUMMARY)

    # -- the observations ----------------------------------------------------------------------
    @property
    def rates(self) -> Rates:
        """Every observation (``rate`` records), warm-up included, in order (by column)."""
        rates = self.kind(Event.RATE)
        return rates if isinstance(rates, Rates) else Rates()

    @property
    def steady(self) -> Rates:
        """The scored window's observations: ``rate`` records without ``warmup`` (a view)."""
        return self.rates.select(warmup=False)

    @property
    def warmup(self) -> Rates:
        return self.rates.select(warmup=True)

    @property
    def regions(self) -> Sequence[Record]:
        """The timer regions' totals over each window of the scored run."""
        return self.kind(Event.REGION)

    @property
    def losses(self) -> Sequence[Record]:
        """Every ``loss`` record, those of the profiled window (``profiled``) included."""
        return self.kind(Event.LOSS)

    @property
    def progress(self) -> Sequence[Record]:
        return self.kind(Event.PROGRESS)

    @property
    def compiles(self) -> Sequence[Record]:
        return self.kind(Event.COMPILE)

    @property
    def warnings(self) -> Sequence[Record]:
        return self.kind(Event.WARNING)

    # -- the monitor ---------------------------------------------------------------------------
    @property
    def telemetry(self) -> Sequence[Record]:
        """The monitor's samples, in order."""
        return self.kind(Event.TELEMETRY)

    # -- the profiled window (profile/window.py) -----------------------------------------------
    @property
    def profile_start(self) -> Record | None:
        """The ``profile`` record that opened the profiled window; None when it never opened."""
        return next((r for r in self.kind(Event.PROFILE) if r.get("status") == "start"), None)

    @property
    def profile_steps(self) -> Sequence[Record]:
        return self.kind(Event.PROFILE_STEP)

    @property
    def profile_regions(self) -> Sequence[Record]:
        return self.kind(Event.PROFILE_REGION)
