"""A package's lazy face (PEP 562): the names its ``__init__`` exports, each imported from the
module that defines it on first use, so that importing the package imports none of them
(docs/architecture.md, "results/ by job"). A face lists its names in ``_HOMES`` (module ->
names), in ``__all__``, and in its ``if TYPE_CHECKING:`` imports, which give the type checker
the real types; tests/core/test_layers.py checks that the three agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["face_getattr"]


def face_getattr(package: str, homes: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``'s face: a name of ``homes`` is read from its module
    (``package.<module>``, imported the first time). Read each time, never kept on the face: a
    test that patches the defining module (``monkeypatch.setattr``) is seen by every later
    ``from <face> import name``, and its undoing too."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
