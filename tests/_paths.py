"""Where the tests find the checkout and tests/ itself, from whichever folder of tests/ they
are in (tests/ mirrors src's wings: tests/run, tests/results, ...)."""

from __future__ import annotations

from pathlib import Path

#: tests/
TESTS_DIR = Path(__file__).resolve().parent
#: The checkout: docs/, bench_suites/, benchmarks/, src/.
REPO_ROOT = TESTS_DIR.parent
