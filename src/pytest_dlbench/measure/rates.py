"""A run's ``rate`` records kept by column: a few tens of bytes per observation, not a dict's
hundreds (a million observations took 1.2 GB to summarise as dicts).

:class:`Rates` is a sequence of mappings, so every reader of ``rate`` records reads it as it
reads a tuple of dicts (``r.get("value")``, slices, iteration); each record is rebuilt as it is
read and let go after. What it holds is what the file held: a record with a key or a value the
columns do not take (a field of another type, an extra key) is kept whole, and an integer stays
an integer.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.measure.stream import Event

__all__ = ["Rates"]

Record = Mapping[str, Any]

#: The numeric fields kept in columns of doubles, each with a bit saying it is there and one
#: saying it was an integer.
_NUMBERS = ("value", "time", "items", "seconds")
_KEYS = frozenset(("event", *_NUMBERS, "step", "warmup", "units"))
_EXACT = 1 << 53  # integers up to this are exact as doubles
_STEP_MAX = 1 << 62

# Bits of ``_flags``: the fields present, then the warm-up value.
_HAS = {name: 1 << i for i, name in enumerate((*_NUMBERS, "step", "warmup", "units"))}
_WARM = 1 << 7
_PLAIN = sum(_HAS.values())  # every field there


def _kind(value: Any) -> int | None:
    """0 for a float, 1 for an exact integer, None for anything the columns do not take."""
    if isinstance(value, float):
        return 0
    if is_integer(value) and -_EXACT <= value <= _EXACT:
        return 1
    return None


class _Columns:
    """The columns of every record appended (one position per record)."""

    __slots__ = ("flags", "ints", "missing", "numbers", "step", "unit_ids", "unit_names",
                 "units", "whole")

    def __init__(self) -> None:
        self.numbers = {name: array("d") for name in _NUMBERS}
        self.step = array("q")
        self.flags = bytearray()
        self.ints = bytearray()  # bit i: _NUMBERS[i] was an integer
        self.units = array("H")
        self.unit_names: list[str] = []
        self.unit_ids: dict[str, int] = {}
        self.whole: dict[int, Record] = {}  # records the columns do not take, by position
        self.missing = dict.fromkeys(_NUMBERS, 0)  # records without each number

    def __len__(self) -> int:
        return len(self.flags)

    def _columnar(self, record: Record) -> bool:
        if not _KEYS.issuperset(record):
            return False
        if any(name in record and _kind(record[name]) is None for name in _NUMBERS):
            return False
        step, warm, units = record.get("step"), record.get("warmup"), record.get("units")
        return (
            ("step" not in record or (type(step) is int and abs(step) < _STEP_MAX))
            and ("warmup" not in record or isinstance(warm, bool))
            and ("units" not in record or (isinstance(units, str)
                                           and (units in self.unit_ids
                                                or len(self.unit_names) < 0xFFFF)))
        )

    def _append_plain(self, record: Record) -> bool:
        """The record as Bench writes it (every field, of its usual type): appended at once."""
        value, time, items, seconds = (record.get("value"), record.get("time"),
                                       record.get("items"), record.get("seconds"))
        step, warm, units = record.get("step"), record.get("warmup"), record.get("units")
        if not (len(record) == 8 and "event" in record and type(value) is float
                and type(time) is float and type(items) is float and type(seconds) is float
                and type(step) is int
                and abs(step) < _STEP_MAX and type(warm) is bool and type(units) is str
                and units in self.unit_ids):
            return False
        numbers = self.numbers
        numbers["value"].append(value)
        numbers["time"].append(time)
        numbers["items"].append(items)
        numbers["seconds"].append(seconds)
        self.step.append(step)
        self.units.append(self.unit_ids[units])
        self.flags.append(_PLAIN | (_WARM if warm else 0))
        self.ints.append(0)
        return True

    def append(self, record: Record) -> None:
        if self._append_plain(record):
            return
        position = len(self.flags)
        columnar = self._columnar(record)
        flags = ints = 0
        for i, name in enumerate(_NUMBERS):
            value = record.get(name) if columnar else None
            if value is not None:
                flags |= _HAS[name]
                ints |= (1 << i) if isinstance(value, int) else 0
            else:
                self.missing[name] += 1
            self.numbers[name].append(float(value) if value is not None else 0.0)
        step = record.get("step") if columnar else None
        self.step.append(step if step is not None else 0)
        flags |= _HAS["step"] if step is not None else 0
        warm = record.get("warmup") if columnar else None
        if warm is not None:
            flags |= _HAS["warmup"] | (_WARM if warm else 0)
        elif not columnar and record.get("warmup"):
            flags |= _WARM  # what select() reads, also of a record kept whole
        units = record.get("units") if columnar else None
        if units is not None:
            flags |= _HAS["units"]
            if units not in self.unit_ids:
                self.unit_ids[units] = len(self.unit_names)
                self.unit_names.append(units)
            self.units.append(self.unit_ids[units])
        else:
            self.units.append(0)
        self.flags.append(flags)
        self.ints.append(ints)
        if not columnar:
            self.whole[position] = record

    def number(self, position: int, name: str, default: Any) -> Any:
        whole = self.whole.get(position)
        if whole is not None:
            return whole.get(name, default)
        return self.numbers[name][position] if self.flags[position] & _HAS[name] else default

    def record(self, position: int) -> Record:
        whole = self.whole.get(position)
        if whole is not None:
            return whole
        flags, ints = self.flags[position], self.ints[position]
        out: dict[str, Any] = {"event": Event.RATE.value}
        for i, name in enumerate(_NUMBERS):
            if flags & _HAS[name]:
                number = self.numbers[name][position]
                out[name] = int(number) if ints & (1 << i) else number
        if flags & _HAS["units"]:
            out["units"] = self.unit_names[self.units[position]]
        if flags & _HAS["step"]:
            out["step"] = self.step[position]
        if flags & _HAS["warmup"]:
            out["warmup"] = bool(flags & _WARM)
        return out


class Rates(Sequence[Record]):
    """``rate`` records by column (module docstring): append them in stream order (the caller
    sorts records by kind: measure/records.RunRecords), read them as a sequence of mappings;
    :meth:`select` and slices are views, no copy of the columns."""

    __slots__ = ("_columns", "_index")

    def __init__(self, records: Iterable[Record] = (), *, _columns: _Columns | None = None,
                 _index: range | array[int] | None = None) -> None:
        self._columns = _columns if _columns is not None else _Columns()
        self._index = _index  # None: every position, in order
        for record in records:
            self.append(record)

    def append(self, record: Record) -> None:
        if self._index is not None:
            raise TypeError("a view of rate records cannot be appended to")
        self._columns.append(record)

    def _positions(self) -> range | array[int]:
        return range(len(self._columns)) if self._index is None else self._index

    def __len__(self) -> int:
        return len(self._columns) if self._index is None else len(self._index)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> Rates: ...

    def __getitem__(self, i: int | slice) -> Record | Rates:
        if isinstance(i, slice):
            return Rates(_columns=self._columns, _index=self._positions()[i])
        return self._columns.record(self._positions()[i])

    def __iter__(self) -> Iterator[Record]:
        record = self._columns.record
        for position in self._positions():
            yield record(position)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"Rates({len(self)} records)"

    def numbers(self, name: str, default: Any = None) -> Iterator[Any]:
        """The number ``name`` (value, time, items or seconds) of each record, in order, as a
        float (``default`` where a record has none; a record kept whole gives its own value):
        what a sum reads, without rebuilding the records."""
        columns, positions = self._columns, self._positions()
        column = columns.numbers[name]
        if not columns.whole and not columns.missing[name]:
            if isinstance(positions, range) and positions.step == 1:
                return itertools.islice(column, positions.start, positions.stop)
            return (column[p] for p in positions)
        return (columns.number(p, name, default) for p in positions)

    def marked(self, key: str) -> Iterator[bool]:
        """Whether each record, in order, has a true ``key`` that the columns do not hold (such
        a record is kept whole: ``loop_start``, one record an ``iterate`` call)."""
        whole = self._columns.whole
        return (bool(whole[p].get(key)) if p in whole else False for p in self._positions())

    def select(self, *, warmup: bool) -> Rates:
        """The warm-up records (``warmup=True``) or the others, in order: a view."""
        flags, want = self._columns.flags, _WARM if warmup else 0
        first = last = -1
        count = 0
        for p in self._positions():
            if flags[p] & _WARM == want:
                first = p if count == 0 else first
                last, count = p, count + 1
        if last - first + 1 == count:  # one run of positions (warm-up first): no index kept
            return Rates(_columns=self._columns, _index=range(first, last + 1) if count else
                         range(0))
        chosen = array("q", (p for p in self._positions() if flags[p] & _WARM == want))
        return Rates(_columns=self._columns, _index=chosen)
