"""Exit statuses of ``dlbench report``/``compare`` (and of pytest runs with a baseline gate).

0, 1, 2 and 4 mean what they mean for pytest (``pytest.ExitCode``), so a CI script can treat
``pytest --bench-...`` and ``dlbench report`` alike; 6 and 7 are ours, above pytest's 0-5, so that
CI can tell "slower" and "nothing to compare with" from "broken".
"""

from __future__ import annotations

__all__ = ["BASELINE_MISSING", "BENCH_FAILED", "INTERRUPTED", "OK", "REGRESSED", "USAGE_ERROR"]

#: Every benchmark ran and nothing regressed.
OK = 0
#: A benchmark run failed, or a weighted benchmark of the suite did not run. Wins over 6.
BENCH_FAILED = 1
#: Interrupted (Ctrl-C), as pytest.
INTERRUPTED = 2
#: Bad input: an unreadable, corrupt or foreign baseline file, a bad option, no run directory.
USAGE_ERROR = 4
#: Every benchmark passed, but performance regressed against the baseline.
REGRESSED = 6
#: A baseline was required (``--compare``/``--bench-compare``) but its file does not exist.
BASELINE_MISSING = 7
