"""The ``process_group`` fixture: the torch.distributed group of an ``njobs`` rank.

Kept apart from :mod:`pytest_dlbench.plugin.fixtures` so that the domain code in
:mod:`pytest_dlbench.run.launch.torchrun` stays free of pytest; ``plugin.py`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["process_group"]


@pytest.fixture(scope="session")
def process_group() -> Iterator[Any]:
    """The default process group when this process is a torchrun rank, else ``None``.

    ``nccl`` on the rank's GPU (``cuda:LOCAL_RANK``), ``gloo`` on the CPU. Made once per process
    (each rank runs one benchmark item) and destroyed at the end of the session. Outside
    torchrun (an ordinary inline run, one process) there is no group: a benchmark runs without
    DistributedDataParallel then.
    """
    from pytest_dlbench.run.launch.torchrun import (
        RankInfo,
        destroy_process_group,
        init_process_group,
        rank_device,
    )

    rank = RankInfo.from_env()
    if not rank.is_distributed:
        yield None
        return
    group = init_process_group(rank_device(rank))
    try:
        yield group
    finally:
        destroy_process_group()
