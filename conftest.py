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
