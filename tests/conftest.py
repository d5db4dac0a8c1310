import os

# Under xdist (the README's `pytest -n 2` on 2 cores), torch's default of one OpenMP thread per
# core in each worker oversubscribes the machine: spinning threads cost about a fifth of the run
# (5:30 -> 4:33 here). One thread per worker, set before any test module imports torch. A
# benchmark's child still gets its slot's thread count from the plugin.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")
