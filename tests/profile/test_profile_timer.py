"""The region timer stands alone: ``from pytest_dlbench import Timer`` without torch or pytest."""

from __future__ import annotations

import subprocess
import sys

from _paths import REPO_ROOT

SRC = REPO_ROOT / "src"


def test_timer_import_is_lazy_and_needs_neither_torch_nor_pytest() -> None:
    code = (
        "import sys, pytest_dlbench\n"
        "assert 'pytest_dlbench.measure.timing' not in sys.modules\n"
        "from pytest_dlbench import Timer\n"
        "from pytest_dlbench.profile import time_report_from_windows\n"
        "t = Timer(); t.begin()\n"
        "with t.region('forward'): pass\n"
        "t.step(1)\n"
        "print(time_report_from_windows(t.read(intervals=True)).steps)\n"
        "print('torch' in sys.modules, 'pytest' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": str(SRC)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "False", "False"]
