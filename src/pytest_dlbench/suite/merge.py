"""The merge rules of suite layers (suite-format.md, "Merging two layers")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import SuiteError

__all__ = ["DELETE", "merge", "strip_deletes", "finalize"]


class _Delete:
    """The value of a ``!delete`` tag: removes the key from what earlier layers gave."""

    _instance: _Delete | None = None

    def __new__(cls) -> _Delete:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "!delete"

    def __deepcopy__(self, memo: dict) -> _Delete:
        return self


DELETE = _Delete()

_File = str | Path | None


def _is_append(value: Any) -> bool:
    return isinstance(value, dict) and "append" in value


def strip_deletes(
    value: Any, *, where: str = "", bench: str | None = None, file: _File = None
) -> Any:
    """A later layer's value landing where nothing was: ``!delete`` vanishes.

    An ``{append: [...]}`` mapping stays a (normalised) append mapping, so that it still extends
    the list an inherited parent or ``*`` gives; ``finalize`` turns what is left into a list.
    """
    if isinstance(value, dict):
        if _is_append(value):
            return {"append": _append_items(value, where=where, bench=bench, file=file)}
        return {
            k: strip_deletes(v, where=_join(where, k), bench=bench, file=file)
            for k, v in value.items()
            if v is not DELETE
        }
    if isinstance(value, list):
        if any(v is DELETE for v in value):
            raise SuiteError(
                f"key '{where}': !delete is a mapping value, it cannot be a list item",
                file=file,
                bench=bench,
            )
        return [strip_deletes(v, where=where, bench=bench, file=file) for v in value]
    return value


def finalize(value: Any) -> Any:
    """A fresh copy of a merged value in which every append mapping left over is a plain list."""
    if isinstance(value, dict):
        if _is_append(value):
            return [finalize(v) for v in value["append"]]
        return {k: finalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finalize(v) for v in value]
    return value


def _append_items(value: dict, *, where: str, bench: str | None, file: _File) -> list:
    extra = set(value) - {"append"}
    if extra:
        raise SuiteError(
            f"key '{where}': an append mapping takes only 'append', got {sorted(extra)}",
            file=file,
            bench=bench,
        )
    items = value["append"]
    if not isinstance(items, list):
        items = [items]
    return strip_deletes(items, where=where, bench=bench, file=file)  # a list: no !delete


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def merge(
    earlier: Any,
    later: Any,
    *,
    where: str = "",
    bench: str | None = None,
    file: _File = None,
) -> Any:
    """Merge ``later`` over ``earlier``; neither argument is modified.

    ``where`` is the dotted key path, ``bench`` the entry name and ``file`` the file of the later
    layer; they are used only in error messages.
    """
    if isinstance(earlier, dict) and isinstance(later, dict) and not _is_append(later):
        if _is_append(earlier):
            raise SuiteError(
                f"key '{where}': cannot merge a mapping over a list "
                "(use {append: [...]} to extend it)",
                file=file,
                bench=bench,
            )
        result = dict(earlier)
        for key, value in later.items():
            if value is DELETE:
                result.pop(key, None)
            elif key in result:
                result[key] = merge(
                    result[key], value, where=_join(where, key), bench=bench, file=file
                )
            else:
                result[key] = strip_deletes(value, where=_join(where, key), bench=bench, file=file)
        return result
    if isinstance(earlier, dict) and isinstance(later, list) and not _is_append(earlier):
        raise SuiteError(
            f"key '{where}': cannot merge a list over a mapping", file=file, bench=bench
        )
    if _is_append(later):
        items = _append_items(later, where=where, bench=bench, file=file)
        if _is_append(earlier):
            # Two appends to a list that is not known yet (it comes from a parent or '*').
            return {"append": [*earlier["append"], *items]}
        if isinstance(earlier, dict):
            raise SuiteError(f"key '{where}': cannot append to a mapping", file=file, bench=bench)
        if isinstance(earlier, list):
            return [*earlier, *items]
        # A scalar or null is replaced: the later value wins.
        return items
    if isinstance(earlier, list) and isinstance(later, dict):
        raise SuiteError(
            f"key '{where}': cannot merge a mapping over a list "
            "(use {append: [...]} to extend it)",
            file=file,
            bench=bench,
        )
    # Lists replace lists (and pending appends), scalars and null are replaced by anything, and
    # a scalar or null later value wins over a mapping (null overrides).
    return strip_deletes(later, where=where, bench=bench, file=file)
