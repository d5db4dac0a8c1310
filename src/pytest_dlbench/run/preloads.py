"""What the warm launcher's server imports before it forks (run/forkserver.py): the base modules,
and the libraries the session's benchmarks will import (torch only when one of them does, the
heavier ones a workload names in ``WARM_IMPORTS``), so a forked child finds them loaded."""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BASE_PRELOAD", "PYTEST_PLUGINS", "preload_for"]

# Imported once by the server when installed (each one that is missing is skipped). torch is
# left out when no benchmark of the session imports it (preload_for); a workload module of this
# package names the heavier libraries it needs in ``WARM_IMPORTS`` (torchvision, timm, open_clip).
BASE_PRELOAD = ("torch", "numpy", "pytest", "pytest_dlbench.plugin",
                "pytest_dlbench.plugin.child", "pytest_dlbench.plugin.items",
                "pytest_dlbench.run.harness", "pytest_dlbench.measure.bench",
                "pytest_dlbench.profile", "pytest_dlbench.data")


def preload_for(definitions: Sequence[str | None],
                roots: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
    """What a server for these benchmark definitions imports: the base libraries and this
    package's workload modules among them (with the libraries they import lazily, their
    ``WARM_IMPORTS``). A user's own module is left to its child: importing it in the server
    would run its top level once for every child, and it might initialise CUDA.

    torch (seconds of the server's start) only when a definition may need it: a workload of
    this package, or a module whose source imports torch or a library built on it (read, not
    imported; searched in ``roots`` and ``sys.path``); one that cannot be read counts as yes."""
    targets = [d.rsplit(":", 1)[0] for d in definitions if d]
    own = [m for m in dict.fromkeys(targets) if m.startswith("pytest_dlbench.")]
    search = [Path(r) for r in roots] + [Path(p or ".") for p in sys.path]
    torch = any(_may_import_torch(t, search) for t in dict.fromkeys(targets))
    base = [m for m in BASE_PRELOAD if torch or m != "torch"]
    return [*base, PYTEST_PLUGINS, *own]


#: Top-level packages whose import imports torch.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "timm", "open_clip",
                          "transformers", "lightning", "pytorch_lightning", "accelerate",
                          "deepspeed", "diffusers", "torchmetrics"})


def _may_import_torch(target: str, search: Sequence[Path]) -> bool:
    if target.startswith("pytest_dlbench."):
        return target.startswith("pytest_dlbench.workloads")
    source = _source_of(target, search)
    if source is None:
        return True  # not found without importing it: assume it does
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return True
    for node in ast.walk(tree):  # imports inside functions count: the child runs them
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name.split(".", 1)[0] in TORCH_FAMILY for name in names):
            return True
    return False


def _source_of(target: str, search: Sequence[Path]) -> Path | None:
    """The source file of ``file.py`` or ``package.module``, found without importing it."""
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        return path if path.is_file() else None
    parts = target.split(".")
    for root in search:
        for candidate in (root.joinpath(*parts).with_suffix(".py"),
                          root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


# In a preload list: the modules of the installed pytest plugins (entry points ``pytest11``).
PYTEST_PLUGINS = "<pytest11>"
