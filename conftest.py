# pytester is enabled in pyproject.toml (addopts), not with pytest_plugins here: a suite shipped in
# this checkout may be collected by a pytest started elsewhere, and pytest refuses pytest_plugins in
# a conftest outside its rootdir.

# pytester's in-process runs restore sys.modules afterwards, so a module first imported inside a
# run is imported again by the next one. C extensions do not survive that (PyYAML's nodes lose
# their tags; numpy, pandas, scipy and torch crash the process; matplotlib's classes stop
# matching), so they are imported once, up front.
import matplotlib  # noqa: F401
import matplotlib.backends.backend_svg  # noqa: F401
import matplotlib.figure  # noqa: F401
import numpy  # noqa: F401
import pandas  # noqa: F401
import scipy.stats  # noqa: F401
import torch  # noqa: F401
import yaml  # noqa: F401
