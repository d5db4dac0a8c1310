"""A package's lazy face (PEP 562): the names its ``__init__`` exports, each imported from the
module that defines it on first use, so that importing the package imports none of them
(docs/architecture.md, "results/ by job"). A face lists its names in ``_HOMES`` (module ->
names), in ``__all__``, and in its ``if TYPE_CHECKING:`` imports, which give the type checker
the real types; tests/test_layers.py checks that the three agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["face_getattr"]


def face_getattr(package: str, homes: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``'s face: a name of ``homes`` is imported from its
    module (``package.<module>``) the first time it is asked for, then kept on the package."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next use is a plain attribute
        return value

    return __getattr__
