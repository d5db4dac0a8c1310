"""milabench's argument functions ``auto(X, D)`` and ``auto_batch(D)``, read without ``eval``.

milabench formats each argument with its launch context and then evaluates the ones that begin
with ``auto`` (after the first ``=``, so ``batch_size=auto_batch(8)`` works too). Its defaults:

- ``auto(X, D)`` is ``D``; with the system option ``cpu.enabled`` it is ``X`` (typically
  ``{n_worker}`` or ``{cpu_per_gpu}``, filled in before).
- ``auto_batch(D)`` is ``D``; with ``sizer.auto`` it is ``max(1, int(D * sizer.mult) + sizer.add)``
  when ``mult`` or ``add`` is set, else ``sizer.batch_size``. milabench can also size the batch
  from a memory model of the GPU (its scaling files); that is refused when the system file is
  read (:func:`check_options`).

Here an argument is rewritten only when it is exactly one of those calls with number
arguments; anything else (an unfilled ``{placeholder}`` inside, ``expr(...)``, other text) is left
as written. Nothing is ever evaluated as Python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.core.numbers import is_finite

__all__ = ["check_options", "fill_auto"]

_NUMBER = r"\s*(-?\d+(?:\.\d+)?)\s*"
_CALLS = {
    "auto": re.compile(rf"auto\({_NUMBER},{_NUMBER}\)"),
    "auto_batch": re.compile(rf"auto_batch\({_NUMBER}\)"),
}


#: The longest number an ``auto``/``auto_batch`` call may hold, and the largest value it may
#: give: a suite is text someone else wrote, and int() of thousands of digits raises (Python's
#: 4,300-digit limit) where a batch of 2**31 is already no batch.
MAX_DIGITS = 18
MAX_VALUE = 2**31


def _number(text: str, call: str) -> int | float:
    if len(text.lstrip("-").replace(".", "")) > MAX_DIGITS:
        raise SuiteError(f"{call[:40]}...: a number of more than {MAX_DIGITS} digits")
    return float(text) if "." in text else int(text)


def _bounded(value: float, call: str) -> int | float:
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        raise SuiteError(f"{call} gives {value:.3g}, not a size (at most {MAX_VALUE:,})")
    return value


def _section(options: Any, name: str) -> Mapping[str, Any]:
    section = options.get(name) if isinstance(options, Mapping) else None
    return section if isinstance(section, Mapping) else {}


def _batch(default: int | float, sizer: Mapping[str, Any], call: str) -> int | float:
    if not sizer.get("auto"):
        return default
    mult, add = sizer.get("mult"), sizer.get("add")
    if mult is not None or add is not None:
        scaled = default * (mult if mult is not None else 1)
        _bounded(scaled + (add or 0), call)
        return max(1, int(scaled) + (add or 0))
    size = sizer.get("batch_size")
    return default if size is None else size


def _evaluate(call: str, options: Any) -> str | None:
    match = _CALLS["auto"].fullmatch(call)
    if match:
        value, default = (_number(g, call) for g in match.groups())
        return str(value if _section(options, "cpu").get("enabled") else default)
    match = _CALLS["auto_batch"].fullmatch(call)
    if match:
        return str(_batch(_number(match.group(1), call), _section(options, "sizer"), call))
    return None


def fill_auto(text: str, options: Any = None) -> str:
    """``text`` with an ``auto(X, D)`` / ``auto_batch(D)`` call replaced by its value.

    ``options`` is the system file's ``options`` mapping (``cpu``, ``sizer``), as milabench's.
    """
    if "auto" not in text:
        return text
    head, sep, value = text.partition("=")
    if not sep:
        head, value = "", text
    else:
        head += sep
    result = _evaluate(value, options)
    return text if result is None else head + result


def check_options(options: Any, *, file: Any = None) -> None:
    """Refuse the milabench system options this project cannot honour (a one-line error)."""
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise SuiteError("'system.options' must be a mapping", file=file)
    for name in ("cpu", "sizer"):
        if options.get(name) is not None and not isinstance(options.get(name), Mapping):
            raise SuiteError(f"'system.options.{name}' must be a mapping", file=file)
    sizer = _section(options, "sizer")
    numbers = [("sizer", k) for k in ("auto", "mult", "add", "batch_size")]
    numbers += [("cpu", k) for k in ("min", "max", "n_workers")]
    for section, key in numbers:
        value = _section(options, section).get(key)
        if value is not None and not is_finite(value):
            raise SuiteError(
                f"'system.options.{section}.{key}' must be a finite number, got {quoted(value)}",
                file=file,
            )
    if sizer.get("auto") and all(sizer.get(k) is None for k in ("mult", "add", "batch_size")):
        raise SuiteError(
            "'system.options.sizer.auto' without 'mult', 'add' or 'batch_size' sizes batches "
            "from milabench's GPU memory model, which pytest-dlbench does not have: set one of "
            "them, or remove 'sizer.auto' to keep each auto_batch(D) default",
            file=file,
        )
