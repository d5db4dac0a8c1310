"""The old name of :mod:`pytest_dlbench.workloads.dataloader` (the JPEG DataLoader benchmark).

Renamed because ``suite/loader.py`` loads suite files. Kept so that users' suites with
``definition: pytest_dlbench.workloads.loader:main`` still run the same benchmark.
"""

from __future__ import annotations

from pytest_dlbench.workloads.dataloader import main, make_parser

__all__ = ["main", "make_parser"]
