"""The merge rules of suite layers (suite-format.md, "Merging two layers")."""

from __future__ import annotations

from typing import Any

from ..errors import SuiteError

__all__ = ["DELETE", "merge", "strip_deletes"]


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


def _is_append(value: Any) -> bool:
    return isinstance(value, dict) and "append" in value


def strip_deletes(value: Any, *, where: str = "", bench: str | None = None) -> Any:
    """A later layer's value landing where nothing was: ``!delete`` vanishes, ``append`` is a list."""
    if isinstance(value, dict):
        if _is_append(value):
            return list(_append_items(value, where=where, bench=bench))
        return {
            k: strip_deletes(v, where=_join(where, k), bench=bench)
            for k, v in value.items()
            if v is not DELETE
        }
    if isinstance(value, list):
        return [strip_deletes(v, where=where, bench=bench) for v in value]
    return value


def _append_items(value: dict, *, where: str, bench: str | None) -> list:
    extra = set(value) - {"append"}
    if extra:
        raise SuiteError(
            f"key '{where}': an append mapping takes only 'append', got {sorted(extra)}",
            bench=bench,
        )
    items = value["append"]
    if not isinstance(items, list):
        items = [items]
    return [strip_deletes(v, where=where, bench=bench) for v in items]


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def merge(earlier: Any, later: Any, *, where: str = "", bench: str | None = None) -> Any:
    """Merge ``later`` over ``earlier``; neither argument is modified.

    ``where`` is the dotted key path and ``bench`` the entry name, used only in error messages.
    """
    if isinstance(earlier, dict) and isinstance(later, dict) and not _is_append(later):
        result = dict(earlier)
        for key, value in later.items():
            if value is DELETE:
                result.pop(key, None)
            elif key in result:
                result[key] = merge(result[key], value, where=_join(where, key), bench=bench)
            else:
                result[key] = strip_deletes(value, where=_join(where, key), bench=bench)
        return result
    if isinstance(earlier, dict) and isinstance(later, list):
        raise SuiteError(
            f"key '{where}': cannot merge a list over a mapping", bench=bench
        )
    if isinstance(earlier, dict) and _is_append(later):
        raise SuiteError(
            f"key '{where}': cannot append to a mapping", bench=bench
        )
    if isinstance(earlier, list) and isinstance(later, dict):
        if not _is_append(later):
            raise SuiteError(
                f"key '{where}': cannot merge a mapping over a list "
                "(use {append: [...]} to extend it)",
                bench=bench,
            )
        return [*earlier, *_append_items(later, where=where, bench=bench)]
    # Lists replace lists, scalars and null are replaced by anything, and a scalar or null
    # later value wins over a mapping (null overrides).
    return strip_deletes(later, where=where, bench=bench)
