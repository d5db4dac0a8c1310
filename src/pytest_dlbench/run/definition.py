"""Loading a benchmark's ``definition``: ``package.module:function`` or ``file.py:function``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import DlbenchError, one_line

__all__ = ["DefinitionError", "load_definition"]


class DefinitionError(DlbenchError):
    """The definition of a benchmark cannot be imported or does not name a callable."""


def _module_from_file(path: Path) -> Any:
    # A stable, unique module name per file so two suites' ``main.py`` files do not collide.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"_dlbench_def_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_failed(prefix: str, what: str, exc: BaseException) -> DefinitionError:
    """The one line a definition that fails to import costs (its own error, not a traceback)."""
    return DefinitionError(f"{prefix}cannot import {what}: {one_line(exc)}")


def load_definition(definition: str, *, bench: str = "") -> Callable[..., Any]:
    """Import and return the function a definition names (the default function is ``main``)."""
    target, _, function = definition.rpartition(":") if ":" in definition else (definition, "", "")
    function = function or "main"
    prefix = f"{bench}: " if bench else ""
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise DefinitionError(f"{prefix}definition file not found: {path}")
        try:
            module = _module_from_file(path)
        except (Exception, SystemExit) as exc:  # an import, a syntax error, a sys.exit() in it
            raise _import_failed(prefix, str(path), exc) from exc
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise DefinitionError(
                f"{prefix}cannot import '{target}' (definition '{definition}'): {exc}"
            ) from exc
        except (Exception, SystemExit) as exc:
            raise _import_failed(prefix, f"'{target}'", exc) from exc
    func = getattr(module, function, None)
    if not callable(func):
        raise DefinitionError(f"{prefix}'{target}' has no function '{function}'")
    return func
