"""The ddp workload's JPEG loader (``--jpeg``, milabench's resnet152-ddp-gpus): each rank reads
its own part of every epoch of one folder (a DistributedSampler), the epochs reshuffled."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from pytest_dlbench.data import jpeg_folder  # noqa: E402
from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.stream import NullStream  # noqa: E402
from pytest_dlbench.workloads import ddp  # noqa: E402
from pytest_dlbench.workloads.images import jpeg_loader, sharded_epochs  # noqa: E402


def loader_args(data: Path | None, **kw: object) -> argparse.Namespace:
    values = {"data": str(data) if data else None, "num_images": None, "image_size": 32,
              "num_workers": 0, "seed": 0, **kw}
    return argparse.Namespace(**values)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jpeg_folder(tmp_path_factory.mktemp("jpeg") / "f", n=24, image_size=36,
                       num_classes=3)


def epoch_files(loader: object, epochs: int) -> list[list[int]]:
    """The dataset indices each epoch hands this rank, read from the sampler."""
    out = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        out.append(list(iter(loader.sampler)))  # type: ignore[attr-defined]
    return out


def test_two_ranks_read_disjoint_parts_of_each_epoch(folder: Path) -> None:
    bench = SimpleNamespace(data_dir=str(folder.parent))
    ranks = [jpeg_loader(bench, loader_args(folder), num_classes=3, batch_size=4,
                         pin_memory=False, shard=(rank, 2)) for rank in (0, 1)]
    first, second = (epoch_files(loader, 2) for loader in ranks)
    for epoch in range(2):
        assert len(first[epoch]) == len(second[epoch]) == 12
        assert set(first[epoch]).isdisjoint(second[epoch])  # every image once an epoch
        assert set(first[epoch]) | set(second[epoch]) == set(range(24))
    assert first[0] != first[1]  # set_epoch: another shuffle
    images, labels = next(sharded_epochs(ranks[0]))
    assert images.shape == (4, 3, 32, 32) and labels.shape == (4,)


def test_a_folder_too_small_for_a_batch_per_rank_is_named(folder: Path) -> None:
    bench = SimpleNamespace(data_dir=str(folder.parent))
    with pytest.raises(ValueError, match=r"24 images: fewer than one batch of 16 for each of 2"):
        jpeg_loader(bench, loader_args(folder), num_classes=3, batch_size=16, pin_memory=False,
                    shard=(0, 2))


def test_the_generated_folder_holds_batches_for_every_rank(tmp_path: Path) -> None:
    bench = SimpleNamespace(data_dir=str(tmp_path))
    loader = jpeg_loader(bench, loader_args(None, num_images=None), num_classes=3,
                         batch_size=80, pin_memory=False, shard=(1, 4))
    assert len(loader.sampler) == 320  # 4 batches of 80 for each of 4 ranks: 1,280 images


def test_ddp_trains_from_the_jpeg_folder(folder: Path) -> None:
    """One process (no process group): the same loader, without sharding, through
    train_steps; plain SGD as milabench's resnet152-ddp-gpus builds it."""
    args = ["--model", "resnet18", "--batch-size", "4", "--image-size", "32", "--num-classes",
            "3", "--jpeg", "--data", str(folder), "--num-workers", "0", "--lr", "0.001",
            "--momentum", "0", "--no-fused"]
    stream = NullStream()
    with Bench(args=args, device="cpu", stream=stream, skip=1, stop=2,
               data_dir=str(folder.parent)) as bench:
        ddp.train(bench, None)
    rates = [r for r in stream.records if r["event"] == "rate"]
    assert len(rates) == 3 and all(r["items"] == 4 for r in rates)


def test_jpeg_and_a_fixed_batch_are_two_sources() -> None:
    args = ["--jpeg", "--fixed-batch"]
    with pytest.raises(SystemExit, match="two data sources"):
        ddp._batches(SimpleNamespace(data_dir="."), ddp.make_parser().parse_args(args),
                     torch.device("cpu"), 0, 1)


def test_a_fake_imagenet_folder_is_noise_at_384_px_over_its_classes(tmp_path: Path) -> None:
    """milabench's FakeImageNet as benchmate's datagen makes it: uniform uint8 noise, 384 px,
    PIL's default JPEG quality; here as many classes as asked (1,000 by default)."""
    from PIL import Image

    bench = SimpleNamespace(data_dir=str(tmp_path))
    loader = jpeg_loader(bench, loader_args(None, num_images=12, fake_imagenet=True),
                         num_classes=4, batch_size=4, pin_memory=False)
    [root] = [p for p in tmp_path.iterdir() if p.name.startswith("fakeimagenet-")]
    files = sorted(root.rglob("*.jpg"))
    assert len(files) == 12 and len({f.parent for f in files}) == 4
    with Image.open(files[0]) as image:
        assert image.size == (384, 384)
        # Noise: next to no two neighbouring pixels alike (a smooth field is mostly alike).
        row = list(image.convert("L").tobytes()[:384])
    assert sum(abs(a - b) > 8 for a, b in zip(row, row[1:], strict=False)) > 300
    images, _ = next(iter(loader))
    assert images.shape == (4, 3, 32, 32)  # cropped to --image-size, as milabench crops 224
