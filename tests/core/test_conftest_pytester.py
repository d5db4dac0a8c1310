"""The checkout's conftest.py keeps torch whole across pytester's in-process runs.

pytester puts sys.modules back as it was after each in-process run, so a torch module first
imported inside one (``import timm`` and ``torch.compile`` import ``torch._dynamo``) is imported
again by the next test in that worker, and ``torch._inductor.test_operators`` cannot
register its operators twice: every later benchmark in the worker failed ("Only a single
TORCH_LIBRARY can be used to register the namespace _inductor_test"). The two tests below run in
a fresh process with this checkout's conftest.py, in the order that failed.
"""

from __future__ import annotations

import pytest
from _paths import REPO_ROOT

CONFTEST = REPO_ROOT / "conftest.py"

INNER = '''
def test_a_run_in_process_imports_dynamo_first(pytester):
    pytester.makepyfile(test_inner="""
def test_compile_is_imported():
    import torch._dynamo  # as torch.compile, and torch's functions that disable it, do
""")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_next_test_still_has_dynamo():
    import sys

    import torch._dynamo  # executed again (and failing) had pytester dropped it

    assert "torch._inductor.test_operators" in sys.modules
'''


@pytest.mark.slow
def test_torch_modules_imported_in_a_pytester_run_stay_imported(pytester: pytest.Pytester
                                                                 ) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_order=INNER)
    result = pytester.runpytest_subprocess("-p", "pytester", "-p", "no:cacheprovider",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=2)
