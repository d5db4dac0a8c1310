"""Profile reports (JSON, CSV) as tables: columns and rows, for ``mlflow.log_table`` and
``wandb.Table``. Shapes are guessed the way a person would read them; a file that is no table
is still uploaded as a plain artifact by the loggers, just not as a table."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core import untrusted

__all__ = ["Table", "read_table", "tabulate"]


@dataclass(frozen=True)
class Table:
    """Columns and rows, one type to a column: a column's cells are all numbers, all booleans
    or all strings, None for a missing cell. A column that mixes them (``key, value`` of a
    report, a CSV's empty cells) has its values as text: ``wandb.Table`` refuses a column of
    two types ("Data row contained incompatible types"), and the table would be lost."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _one_type_per_column(len(self.columns), self.rows))

    def as_columns(self) -> dict[str, list[Any]]:
        """``{column: [values...]}``, what ``MlflowClient.log_table`` takes."""
        return {c: [row[i] for row in self.rows] for i, c in enumerate(self.columns)}


def _kind(value: Any) -> str | None:
    """The type of a cell as a table sees it (None: missing)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else "str"


def _text(value: Any) -> Any:
    """A cell of a text column: strings and None as they are, numbers and booleans as JSON."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _one_type_per_column(width: int, rows: Sequence[Sequence[Any]]) -> tuple[tuple[Any, ...], ...]:
    mixed = [len({_kind(row[i] if i < len(row) else None) for row in rows} - {None}) > 1
             for i in range(width)]
    return tuple(tuple(_text(v) if i < width and mixed[i] else v for i, v in enumerate(row))
                 for row in rows)


def _cell(value: Any) -> Any:
    """Scalars as they are; nested values as their JSON text (a table cell is flat)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, default=str)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _records(rows: Sequence[Mapping[str, Any]], first: str | None = None,
             names: Sequence[str] | None = None) -> Table:
    columns: list[str] = [first] if first else []
    for row in rows:
        for key in row:
            if str(key) not in columns:
                columns.append(str(key))
    data = []
    for i, row in enumerate(rows):
        values = {str(k): v for k, v in row.items()}
        if first and names is not None:
            values[first] = names[i]
        data.append(tuple(_cell(values.get(c)) for c in columns))
    return Table(tuple(columns), tuple(data))


def tabulate(data: Any) -> Table | None:
    """A table from parsed JSON, or None when it is not one.

    - ``{"columns": [...], "data": [[...]...]}`` (MLflow's and pandas' split form) as is;
    - a list of objects: one row each, the union of their keys as columns;
    - an object of equal-length lists: one column each;
    - an object of objects: one row per key (first column ``name``);
    - an object of scalars: two columns, ``key`` and ``value``.
    """
    if isinstance(data, Mapping):
        if isinstance(data.get("columns"), list) and isinstance(data.get("data"), list):
            columns = tuple(str(c) for c in data["columns"])
            rows = tuple(tuple(_cell(v) for v in row) for row in data["data"]
                         if isinstance(row, list) and len(row) == len(columns))
            return Table(columns, rows)
        if not data:
            return None
        values = list(data.values())
        if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
            columns = tuple(str(k) for k in data)
            return Table(columns, tuple(tuple(_cell(v) for v in row)
                                        for row in zip(*values, strict=True)))
        if all(isinstance(v, Mapping) for v in values):
            return _records(values, first="name", names=[str(k) for k in data])
        if all(_is_scalar(v) for v in values):
            return Table(("key", "value"), tuple((str(k), _cell(v)) for k, v in data.items()))
        return None
    if isinstance(data, list) and data and all(isinstance(r, Mapping) for r in data):
        return _records(data)
    return None


def _number(text: str) -> Any:
    """A CSV cell: a number where it reads as one, None where it is empty (missing)."""
    if not text:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_table(path: str | PathLike[str]) -> Table | None:
    """A ``.json`` or ``.csv`` file as a table; None when it is not one or cannot be read."""
    path = Path(path)
    try:  # a regular file of bounded size and depth (core/untrusted.py): never /dev/zero or a FIFO
        if path.suffix.lower() == ".csv":
            text = untrusted.read_bytes(path).decode("utf-8")
            rows = list(csv.reader(io.StringIO(text, newline="")))
            if not rows:
                return None
            columns = tuple(rows[0])
            body = tuple(tuple(_number(v) for v in row) for row in rows[1:]
                         if len(row) == len(columns))
            return Table(columns, body)
        return tabulate(untrusted.read_json(path))
    except (OSError, ValueError, csv.Error):
        return None
