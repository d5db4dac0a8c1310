# Enables pytester for the plugin's own tests (pytest_plugins is only honoured in the root conftest).
pytest_plugins = ["pytester"]

# pytester's in-process runs restore sys.modules afterwards, so a module first imported inside a
# run is imported again by the next one. C extensions do not survive that (PyYAML's nodes lose
# their tags; numpy, pandas, scipy and torch crash the process; matplotlib's classes stop
# matching), so they are imported once, up front.
import matplotlib  # noqa: E402, F401
import matplotlib.backends.backend_svg  # noqa: E402, F401
import matplotlib.figure  # noqa: E402, F401
import numpy  # noqa: E402, F401
import pandas  # noqa: E402, F401
import scipy.stats  # noqa: E402, F401
import torch  # noqa: E402, F401
import yaml  # noqa: E402, F401
