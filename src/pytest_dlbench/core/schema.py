"""Typed readers: the value types and the one-line errors of the schemas that files read back are
checked with (stream records in measure/stream.py, ``manifest.json`` in layout.py, saved
summaries in results/model/baseline.py).

pydantic checks the shapes (required keys, nested mappings, where a value is); the values are
checked as JSON has them, strictly: a number is an int or a float (NaN and infinities included,
as the stream writes them), never a bool or a string that looks like one. Records are validated,
not converted: what a reader gets back is what was in the file.

Imported lazily by its users: the processes that only write (the child running a benchmark) never
load pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from pytest_dlbench.core.numbers import is_integer, is_number

__all__ = ["Bool", "Int", "Loose", "Map", "Num", "Str", "first_error", "problem"]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: Any) -> Any:
    if not is_number(value):
        raise ValueError(f"must be a number, got {_short(value)}")
    return value


def _integer(value: Any) -> Any:
    if not is_integer(value):
        raise ValueError(f"must be an integer, got {_short(value)}")
    return value


def _string(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {_short(value)}")
    return value


def _boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {_short(value)}")
    return value


def _mapping(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping, got {_short(value)}")
    return value


Num = Annotated[Any, PlainValidator(_number)]
Int = Annotated[Any, PlainValidator(_integer)]
Str = Annotated[Any, PlainValidator(_string)]
Bool = Annotated[Any, PlainValidator(_boolean)]
Map = Annotated[Any, PlainValidator(_mapping)]


class Loose(BaseModel):
    """A record or file section: the keys named are checked, any other key is kept."""

    model_config = ConfigDict(extra="allow")


def first_error(exc: ValidationError) -> str:
    """``field.path: what is wrong`` of the first error, in one line."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "(top level)"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        message = "missing"
    elif error["type"] in ("model_type", "dict_type"):
        message = f"must be a mapping, got {_short(error.get('input'))}"
    elif error["type"] == "list_type":
        message = f"must be a list, got {_short(error.get('input'))}"
    return " ".join(f"{where}: {message}".split())


def problem(model: type[BaseModel], data: Any) -> str | None:
    """What makes ``data`` not fit ``model`` (one line), or None when it fits."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return first_error(exc)
    return None
