import os
import signal
import sys
from pathlib import Path

# Under xdist (the README's `pytest -n 2` on 2 cores), torch's default of one OpenMP thread per
# core in each worker oversubscribes the machine: spinning threads cost about a fifth of the run
# (5:30 -> 4:33 here). One thread per worker, set before any test module imports torch. A
# benchmark's child still gets its slot's thread count from the plugin.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

# A shell's background job (`pytest ... &`, nohup) starts with SIGINT ignored, and every child
# inherits that: the tests that send a real Ctrl-C to a pytest they start would see it ignored
# and fail. Restore Python's own handler, as a foreground run has it, so the children do too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# -- tests/ on sys.path -----------------------------------------------------------------------
# The helpers (tests/_runs.py, _git.py, ...) import by their plain names from any test folder; a
# test module never imports another (tests/core/test_test_layout.py). pytest's default import
# mode imports a test file by its basename: no two folders may hold one file name.
_TESTS_DIR = Path(__file__).resolve().parent
if str(_TESTS_DIR) not in sys.path:
    sys.path.append(str(_TESTS_DIR))
