"""The CLIP workload for time-to-train (workloads/clip.py) and its distinct synthetic pairs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.data import ImageTextDataset


def test_pairs_are_distinct_and_deterministic() -> None:
    import numpy as np

    data = ImageTextDataset(1000, image_size=32, seed=3)
    again = ImageTextDataset(1000, image_size=32, seed=3)
    other = ImageTextDataset(1000, image_size=32, seed=4)
    images = [np.asarray(data.image(i)) for i in range(20)]
    assert images[0].shape == (32, 32, 3) and images[0].dtype == np.uint8
    assert len({im.tobytes() for im in images}) == 20  # not one blank image
    assert len({data.caption(i) for i in range(1000)}) == 1000
    assert data.caption(7) == again.caption(7) and data.caption(7) != other.caption(7)
    assert np.array_equal(np.asarray(data.image(5)), np.asarray(again.image(5)))
    assert data.caption(12).endswith("photo 12") and data.caption(12).startswith("a ")
    assert len(data) == 1000
    with pytest.raises(IndexError):
        data.raw(1000)
    with pytest.raises(ValueError):
        ImageTextDataset(0)


@pytest.mark.slow  # imports open_clip (6 s here)
def test_pairs_through_open_clips_transform_and_tokenizer() -> None:
    open_clip = pytest.importorskip("open_clip")
    torch = pytest.importorskip("torch")
    data = ImageTextDataset(8, image_size=64, transform=open_clip.image_transform(64, True),
                            tokenizer=open_clip.get_tokenizer("ViT-B-32"))
    image, tokens = data[3]
    assert image.shape == (3, 64, 64) and image.dtype == torch.float32
    assert tokens.shape == (77,) and tokens.dtype == torch.long
    assert not torch.equal(data[0][1], data[1][1])


def _train(args: str, tmp_path: Path, **bench: Any) -> list[dict[str, Any]]:
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.stream import NullStream
    from pytest_dlbench.workloads import clip

    stream = NullStream()
    with Bench(name="clip", args=args.split(), device="cpu", stream=stream,
               data_dir=tmp_path, **bench) as b:
        clip.train(b)
    return stream.records


@pytest.mark.slow
def test_an_epoch_of_the_tiny_model_is_every_step_and_done(tmp_path: Path) -> None:
    pytest.importorskip("open_clip")
    records = _train("--model dlbench-tiny --batch-size 8 --train-num-samples 52 --epochs 2 "
                     "--local-loss --gather-with-grad --grad-checkpointing --precision amp",
                     tmp_path, skip=1, stop=100)
    rates = [r for r in records if r["event"] == "rate"]
    assert len(rates) == 2 * (52 // 8)  # drop_last, as OpenCLIP: 6 steps an epoch
    assert {r["items"] for r in rates} == {8}
    losses = [r["value"] for r in records if r["event"] == "loss"]
    assert len(losses) == 12 and all(math.isfinite(v) for v in losses)
    progress = [r for r in records if r["event"] == "progress"]
    assert [p["done_percent"] for p in progress] == [100.0]


@pytest.mark.slow
def test_the_cap_ends_an_epoch_early_and_says_how_far_it_got(tmp_path: Path) -> None:
    pytest.importorskip("open_clip")
    records = _train("--model dlbench-tiny --batch-size 8 --train-num-samples 80", tmp_path,
                     skip=1, stop=4)
    assert len([r for r in records if r["event"] == "rate"]) == 5
    assert [r["done_percent"] for r in records if r["event"] == "progress"] == [50.0]


def test_prepare_tiny_writes_a_local_dir_model(tmp_path: Path) -> None:
    open_clip = pytest.importorskip("open_clip")
    from pytest_dlbench.workloads import clip

    class FakeBench:
        data_dir = tmp_path

    if not hasattr(getattr(open_clip, "factory", None), "LOCAL_DIR_PREFIX"):
        with pytest.raises(pytest.skip.Exception, match="local-dir"):
            clip.prepare_tiny(FakeBench())
        return
    try:
        clip.prepare_tiny(FakeBench())
    except pytest.skip.Exception as exc:  # open_clip_train's own dependencies are missing
        pytest.skip(str(exc))
    folder = clip.tiny_model_dir(tmp_path)
    config = json.loads((folder / "open_clip_config.json").read_text())
    assert config["model_cfg"] == clip.TINY_CONFIG
    assert open_clip.get_model_config(f"local-dir:{folder}") == clip.TINY_CONFIG
    clip.prepare_tiny(FakeBench())  # again: unchanged, no error
