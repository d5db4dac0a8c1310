"""The old name of :mod:`pytest_dlbench.workloads.matmul` (the matrix-multiply benchmark).

Renamed because ``flops`` also names what ``measure/flops.py`` counts (the FLOPs of a training
step). Kept so that users' suites with ``definition: pytest_dlbench.workloads.flops:main``
still run the same benchmark.
"""

from __future__ import annotations

from pytest_dlbench.workloads.matmul import DTYPES, main, make_parser

__all__ = ["DTYPES", "main", "make_parser"]
