"""A suite run started in a milabench checkout: milabench's own test conftest stays unloaded.

pytest loads, before any plugin can decide what is collected, the ``conftest.py`` of the
directory it starts in and of its ``test*`` subfolders. In a milabench checkout that is
``tests/conftest.py``, which imports milabench itself (not installed to run its suites here):
``pytest --bench-suite=config/standard.yaml`` would stop with an ImportError, exit 4, before
collecting a benchmark (docs/suites.md, "milabench's folders through voir").

When every ``--bench-suite`` is a file of a milabench checkout (a folder holding ``config/`` and
``benchmarks/``: the suite in ``config/`` or beside it) and the command names no path of its
own, the first conftests are looked for along the suite files' paths instead of the starting
directory's: the checkout's ``conftest.py`` (milabench has none) still loads, its ``tests/`` is
never visited. A path named on the command line is loaded as pytest always does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["milabench_checkout", "pytest_load_initial_conftests"]

#: What makes a folder a milabench checkout: its suites and the benchmark folders they name
#: (``definition: ../benchmarks/<name>``, resolved from ``config/``).
CHECKOUT_FOLDERS = ("config", "benchmarks")


def milabench_checkout(suite: Path) -> Path | None:
    """The milabench checkout ``suite`` belongs to (the file in its ``config/``, or an overlay
    beside it), or None."""
    if not suite.is_file():
        return None
    folder = suite.resolve().parent
    for root in (folder, folder.parent):
        if all((root / name).is_dir() for name in CHECKOUT_FOLDERS):
            return root
    return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    namespace = early_config.known_args_namespace
    suites = getattr(namespace, "bench_suite", None) or []
    if not suites or namespace.file_or_dir or namespace.pyargs:
        return  # not a suite run, or paths of the user's own: pytest's rule
    start = early_config.invocation_params.dir.resolve()
    files = [start / suite for suite in suites]
    checkouts = [milabench_checkout(path) for path in files]
    if any(root is None for root in checkouts):
        return  # a suite of another kind: the starting directory's conftests, as always
    if not any(_inside(start, root) for root in checkouts if root is not None):
        return  # started outside the checkout: its tests/ is not a test* folder of here
    # pytest's own hook (trylast) reads these as the paths to start from.
    namespace.file_or_dir = [str(path) for path in files]
