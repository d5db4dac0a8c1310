# pytester is enabled in pyproject.toml (addopts), not with pytest_plugins here: a suite shipped in
# this checkout may be collected by a pytest started elsewhere, and pytest refuses pytest_plugins in
# a conftest outside its rootdir.
import contextlib
import importlib

import pytest

# pytester's in-process runs restore sys.modules afterwards, so a module first imported inside a
# run is imported again by the next one. C extensions do not survive that (PyYAML's nodes lose
# their tags; numpy, pandas, scipy and torch crash the process; matplotlib's classes stop
# matching), so a test that uses pytester imports them before pytester takes its snapshot.
C_EXTENSIONS = ("matplotlib", "matplotlib.backends.backend_svg", "matplotlib.figure", "numpy",
                "pandas", "scipy.stats", "torch", "yaml")


@pytest.fixture(autouse=True)
def _c_extensions_outlive_pytester(request: pytest.FixtureRequest) -> None:
    """Autouse fixtures are set up before the others of their scope, so before ``pytester``.
    Only where pytester is used: a benchmark run from this checkout (the smoke suite's parent
    pytest, a test's subprocess) does not pay these 6 s of imports."""
    if "pytester" in request.fixturenames:
        for module in C_EXTENSIONS:
            # Tolerant: a GPU machine carrying the project as source may lack the report's
            # libraries.
            with contextlib.suppress(ImportError):
                importlib.import_module(module)



#: Packages whose modules a run imports lazily (``import timm`` or ``torch.compile`` imports
#: ``torch._dynamo``) and whose imports register operators with torch's C++ dispatcher, which
#: outlives sys.modules: imported a second time, ``torch._inductor.test_operators`` fails with
#: "Only a single TORCH_LIBRARY can be used to register the namespace _inductor_test", and so
#: does every later benchmark in that worker (seen with `pytest -m slow -n 2`: 38 failures that
#: passed when run again). tests/core/test_conftest_pytester.py runs the order that failed.
KEEP_AFTER_PYTESTER = ("torch", "torchvision", "timm", "open_clip")


def _keep_torch_across_pytester_snapshots() -> None:
    """pytester puts sys.modules back after each in-process run (``SysModulesSnapshot``); this
    keeps what the run imported of torch and its model libraries, as one process keeps one
    torch. Importing them all before the snapshot, as above, would cost every worker ~3 s more.
    A pytest without that class keeps its own behaviour."""
    import sys

    from _pytest import pytester

    snapshot = getattr(pytester, "SysModulesSnapshot", None)
    if snapshot is None or getattr(snapshot.restore, "_keeps_torch", False):
        return
    restore = snapshot.restore

    def restore_keeping_torch(self: object) -> None:
        loaded = {name: module for name, module in sys.modules.items()
                  if name.split(".", 1)[0] in KEEP_AFTER_PYTESTER}
        restore(self)
        for name, module in loaded.items():
            sys.modules.setdefault(name, module)

    restore_keeping_torch._keeps_torch = True  # type: ignore[attr-defined]
    snapshot.restore = restore_keeping_torch


_keep_torch_across_pytester_snapshots()
