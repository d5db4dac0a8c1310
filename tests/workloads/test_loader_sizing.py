"""The JPEG loader's epoch keeps every worker busy (issue 37, item 5): an epoch of at least
2 x prefetch_factor x workers batches, whatever the folder's size."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from pytest_dlbench.workloads.images import PREFETCH_FACTOR, epoch_samples


def _busy_workers(batches_per_epoch: int, workers: int) -> int:
    """Workers that get a batch to decode in an epoch: DataLoader hands out batch indices
    round-robin, prefetch_factor per worker at the start (a bare model of its queue)."""
    return min(workers, batches_per_epoch)


@pytest.mark.parametrize(("images", "batch_size", "workers"), [
    (1024, 256, 16),  # the issue's case: 4 batches an epoch, 4 of 16 workers decoding
    (1024, 64, 8),
    (100, 7, 3),
    (12, 4, 2),
])
def test_an_epoch_holds_two_rounds_of_prefetch_for_every_worker(
        images: int, batch_size: int, workers: int) -> None:
    samples = epoch_samples(images, batch_size, workers)
    batches = samples // batch_size  # drop_last
    assert batches >= 2 * PREFETCH_FACTOR * workers
    assert _busy_workers(batches, workers) == workers
    assert samples >= images  # a large folder is never cut


def test_the_old_sizing_starved_the_issues_case() -> None:
    """The reference point: `max(1024, batch_size)` images at bs 256 is 4 batches, fewer than
    16 workers x 2 in flight; the new epoch is 64 batches (2 x 2 x 16)."""
    old_batches = max(1024, 256) // 256
    assert _busy_workers(old_batches, 16) == 4
    assert epoch_samples(1024, 256, 16) // 256 == 2 * 2 * 16


def test_a_large_folder_and_no_workers_keep_one_pass() -> None:
    assert epoch_samples(50_000, 256, 16) == 50_000
    assert epoch_samples(1024, 256, 0) == 1024


def test_the_loader_draws_the_sized_epoch(tmp_path: Path) -> None:
    """The DataLoader itself: 12 images, bs 4, 2 workers was 3 batches an epoch; now at least
    2 x 2 x 2 = 8, drawn with replacement from the 12 files (no worker is started here)."""
    pytest.importorskip("torchvision")
    from pytest_dlbench.workloads.images import add_image_data_args, jpeg_loader

    parser = argparse.ArgumentParser()
    add_image_data_args(parser)
    args = parser.parse_args(["--image-size", "16", "--num-workers", "2", "--num-images", "12"])

    class FakeBench:
        data_dir = str(tmp_path)

    loader = jpeg_loader(FakeBench(), args, num_classes=10, batch_size=4, pin_memory=False)
    assert len(loader.dataset) == 12
    assert len(loader) == math.floor(epoch_samples(12, 4, 2) / 4) >= 2 * PREFETCH_FACTOR * 2
    assert loader.prefetch_factor == PREFETCH_FACTOR
