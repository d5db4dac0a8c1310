# pytester is enabled in pyproject.toml (addopts), not with pytest_plugins here: a suite shipped in
# this checkout may be collected by a pytest started elsewhere, and pytest refuses pytest_plugins in
# a conftest outside its rootdir.

# pytester's in-process runs restore sys.modules afterwards, so a module first imported inside a
# run is imported again by the next one. C extensions do not survive that (PyYAML's nodes lose
# their tags; numpy, pandas, scipy and torch crash the process; matplotlib's classes stop
# matching), so they are imported once, up front.
import contextlib
import importlib
import os

from pytest_dlbench.run.protocol import Env

# Not in a benchmark's child process (a suite of this checkout loads this conftest there too):
# it runs no pytester test, and these imports would cost each benchmark 2-3 s of start-up.
# Tolerant: a GPU machine carrying the project as source (benchmarks/gpu_check.sh) may lack the
# report's libraries, and runs no pytester test there.
if Env.STREAM not in os.environ:
    for _module in ("matplotlib", "matplotlib.backends.backend_svg", "matplotlib.figure",
                    "numpy", "pandas", "scipy.stats", "torch", "yaml"):
        with contextlib.suppress(ImportError):
            importlib.import_module(_module)
