"""Rendering a benchmark's ``argv`` into a command line, and ``{placeholder}`` substitution."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.suite.auto import fill_auto

__all__ = ["render_argv", "fill_placeholders", "fill_all"]

# A placeholder is {name} with an identifier-like name (dashes and dots allowed, as in matrix
# keys such as {batch-size}). JSON such as {"k": 1} never matches, so it is left alone.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


def fill_placeholders(text: str, context: Mapping[str, Any]) -> str:
    """Replace the ``{name}`` whose name is in ``context``; leave every other brace untouched.

    This is plain text substitution: nothing is evaluated (see :func:`fill_all` for milabench's
    ``auto(X, D)`` and ``auto_batch(D)``).
    """
    if "{" not in text:
        return text

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(context[name]) if name in context else match.group(0)

    return _PLACEHOLDER.sub(substitute, text)


def fill_all(args: Sequence[str], context: Mapping[str, Any]) -> list[str]:
    """The launch-time arguments: placeholders filled, then milabench's ``auto(X, D)`` and
    ``auto_batch(D)`` calls replaced by their values (suite/auto.py; the system file's
    ``options``, in ``context``, decide them). Nothing is ``eval``-ed."""
    options = context.get("options")
    return [fill_auto(fill_placeholders(a, context), options) for a in args]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_argv(argv: Any, *, bench: str | None = None, file: Any = None) -> list[str]:
    """The command-line list of an ``argv`` value (suite-format.md, "argv -> command line")."""
    if argv is None:
        return []
    if isinstance(argv, list):
        return [_scalar(v) for v in argv]
    if not isinstance(argv, Mapping):
        raise SuiteError("'argv' must be a mapping or a list", file=file, bench=bench)
    positionals: list[str] = []
    options: list[str] = []
    tail: list[str] = []
    for key, value in argv.items():
        key = str(key)
        if value is None:
            continue  # null cancels, '--' included
        elif value is False:
            raise SuiteError(
                f"argv '{key}' is false: use null to cancel an option, not false",
                file=file,
                bench=bench,
            )
        elif key == "--":
            values = value if isinstance(value, list) else [value]
            tail.extend(_scalar(v) for v in values)
        elif value is True:
            (options if key.startswith("-") else positionals).append(key)
        elif isinstance(value, list):
            options.extend([key, ",".join(_scalar(v) for v in value)])
        elif isinstance(value, Mapping):
            raise SuiteError(
                f"argv '{key}' is a mapping; argv values must be scalars or lists",
                file=file,
                bench=bench,
            )
        else:
            options.extend([key, _scalar(value)])
    return [*positionals, *options, *tail]
