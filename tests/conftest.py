import os
import sys
from pathlib import Path

# Under xdist (the README's `pytest -n 2` on 2 cores), torch's default of one OpenMP thread per
# core in each worker oversubscribes the machine: spinning threads cost about a fifth of the run
# (5:30 -> 4:33 here). One thread per worker, set before any test module imports torch. A
# benchmark's child still gets its slot's thread count from the plugin.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

# -- test folders on sys.path ----------------------------------------------------------------
# tests/ mirrors src's wings in folders (tests/run, tests/results, ...). tests/ and each of them
# are on sys.path, as tests/ was for the flat files: the helpers (_runs.py, _git.py, ...) and a
# test module another one still imports (``from test_report_html import write_stream``; what
# tests share belongs in a helper) keep their plain names, whatever folder the importer is in
# (pytest's default import mode: basenames are unique).
_TESTS_DIR = Path(__file__).resolve().parent
for _folder in (_TESTS_DIR, *sorted({p.parent for p in _TESTS_DIR.glob("*/test_*.py")})):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))
