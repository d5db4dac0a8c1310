"""Synthetic data sets: determinism by seed, shapes, dtypes, the JPEG folder built once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pytest_dlbench import data  # noqa: E402


def test_importing_data_does_not_import_torch() -> None:
    code = "import sys, pytest_dlbench.data; assert 'torch' not in sys.modules, 'torch imported'"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# -- in-memory data sets ---------------------------------------------------------------------
def test_synthetic_images_shapes_and_dtypes() -> None:
    ds = data.synthetic_images(n=6, image_size=16, num_classes=5, seed=1, channels=1)
    images, labels = ds.tensors
    assert len(ds) == 6
    assert images.shape == (6, 1, 16, 16) and images.dtype == torch.float32
    assert labels.shape == (6,) and labels.dtype == torch.int64
    assert int(labels.min()) >= 0 and int(labels.max()) < 5
    x, y = ds[0]
    assert x.shape == (1, 16, 16) and y.dim() == 0
    # "normalised": roughly zero mean, unit variance
    big = data.synthetic_images(n=8, image_size=32, seed=0).tensors[0]
    assert abs(float(big.mean())) < 0.05 and abs(float(big.std()) - 1) < 0.05


@pytest.mark.parametrize(
    "make",
    [
        lambda seed: data.synthetic_images(n=4, image_size=8, num_classes=3, seed=seed),
        lambda seed: data.image_text_pairs(n=4, image_size=8, context_length=12, vocab_size=50,
                                           seed=seed),
        lambda seed: data.token_sequences(n=4, seq_len=10, vocab_size=50, seed=seed),
    ],
    ids=["images", "image_text", "tokens"],
)
def test_deterministic_by_seed(make) -> None:
    a, b, c = make(0), make(0), make(1)
    for ta, tb in zip(a.tensors, b.tensors, strict=True):
        assert torch.equal(ta, tb)
    assert not all(torch.equal(ta, tc) for ta, tc in zip(a.tensors, c.tensors, strict=True))


def test_data_sets_leave_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    data.synthetic_images(n=2, image_size=4)
    data.token_sequences(n=2, seq_len=4, vocab_size=10)
    assert torch.equal(torch.rand(3), expected)


def test_image_text_pairs_look_like_clip_tokens() -> None:
    vocab, ctx = 100, 12
    ds = data.image_text_pairs(n=32, image_size=8, context_length=ctx, vocab_size=vocab, seed=0)
    images, tokens = ds.tensors
    assert images.shape == (32, 3, 8, 8) and images.dtype == torch.float32
    assert tokens.shape == (32, ctx) and tokens.dtype == torch.int64
    sot, eot = vocab - 2, vocab - 1
    assert (tokens[:, 0] == sot).all()
    assert ((tokens == eot).sum(dim=1) == 1).all()
    end = tokens.argmax(dim=1)  # how CLIP text towers find the end token
    assert (tokens[torch.arange(32), end] == eot).all()
    for row, e in zip(tokens, end.tolist(), strict=True):
        assert e >= 2  # at least one word
        assert ((row[1:e] >= 1) & (row[1:e] < sot)).all()
        assert (row[e + 1 :] == 0).all()


def test_image_text_pairs_rejects_too_short_context() -> None:
    with pytest.raises(ValueError, match="context_length"):
        data.image_text_pairs(n=1, context_length=1)


def test_token_sequences_targets_are_shifted_inputs() -> None:
    ds = data.token_sequences(n=5, seq_len=7, vocab_size=11, seed=3)
    inputs, targets = ds.tensors
    assert inputs.shape == targets.shape == (5, 7)
    assert inputs.dtype == targets.dtype == torch.int64
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert int(inputs.min()) >= 0 and int(inputs.max()) < 11


# -- forever -----------------------------------------------------------------------------------
def test_forever_cycles_and_reiterates() -> None:
    passes = []

    class Loader:
        def __iter__(self):
            passes.append(1)
            return iter([1, 2, 3])

    it = data.forever(Loader())
    assert [next(it) for _ in range(7)] == [1, 2, 3, 1, 2, 3, 1]
    assert len(passes) == 3  # a fresh iterator (a new epoch) each pass


def test_forever_rejects_an_empty_iterable() -> None:
    with pytest.raises(ValueError, match="empty"):
        next(data.forever([]))


# -- the JPEG folder ---------------------------------------------------------------------------
def _leftovers(parent: Path) -> list[str]:
    """Temporary or stale copies left next to the folder (the lock file may stay)."""
    return [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".stale-" in p.name]


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_jpeg_folder_layout(tmp_path: Path) -> None:
    from PIL import Image

    root = data.jpeg_folder(tmp_path / "imgs", n=12, image_size=20, num_classes=3, seed=0)
    assert root == tmp_path / "imgs"
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert classes == ["class_000", "class_001", "class_002"]
    jpegs = sorted(root.rglob("*.jpg"))
    assert len(jpegs) == 12
    assert {p.parent.name for p in jpegs[:4]} == {"class_000"}
    assert jpegs[0].name == "img_0000.jpg"
    with Image.open(jpegs[0]) as im:
        assert im.format == "JPEG" and im.size == (20, 20) and im.mode == "RGB"
    marker = json.loads((root / data.MARKER).read_text())
    assert marker["n"] == 12 and marker["image_size"] == 20
    assert _leftovers(tmp_path) == []


def test_jpeg_folder_is_an_image_folder(tmp_path: Path) -> None:
    datasets = pytest.importorskip("torchvision.datasets")
    root = data.jpeg_folder(tmp_path / "imgs", n=6, image_size=16, num_classes=2)
    ds = datasets.ImageFolder(str(root))
    assert len(ds) == 6 and ds.classes == ["class_000", "class_001"]
    assert sorted(label for _, label in ds.samples) == [0, 0, 0, 1, 1, 1]


def test_jpeg_folder_without_empty_classes(tmp_path: Path) -> None:
    root = data.jpeg_folder(tmp_path / "imgs", n=3, image_size=8, num_classes=10)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "class_000", "class_001", "class_002",
    ]


def test_jpeg_folder_is_deterministic(tmp_path: Path) -> None:
    a = data.jpeg_folder(tmp_path / "a", n=4, image_size=16, num_classes=2, seed=5)
    b = data.jpeg_folder(tmp_path / "b", n=4, image_size=16, num_classes=2, seed=5)
    for p in sorted(a.rglob("*.jpg")):
        assert p.read_bytes() == (b / p.relative_to(a)).read_bytes()


def test_jpeg_folder_is_written_once_and_reused(tmp_path: Path) -> None:
    root = data.jpeg_folder(tmp_path / "imgs", n=4, image_size=16, num_classes=2)
    before = _files(root)
    again = data.jpeg_folder(tmp_path / "imgs", n=4, image_size=16, num_classes=2)
    assert again == root
    assert _files(root) == before  # same files, same mtimes: nothing rewritten


def test_jpeg_folder_without_marker_is_rebuilt(tmp_path: Path) -> None:
    root = data.jpeg_folder(tmp_path / "imgs", n=4, image_size=16, num_classes=2)
    # What a killed run leaves: some files, no marker.
    (root / data.MARKER).unlink()
    (root / "class_000" / "partial.jpg").write_bytes(b"\xff\xd8")
    data.jpeg_folder(tmp_path / "imgs", n=4, image_size=16, num_classes=2)
    assert (root / data.MARKER).is_file()
    assert not (root / "class_000" / "partial.jpg").exists()
    assert len(list(root.rglob("*.jpg"))) == 4
    assert _leftovers(tmp_path) == []


def test_jpeg_folder_with_other_parameters_is_rebuilt(tmp_path: Path) -> None:
    root = data.jpeg_folder(tmp_path / "imgs", n=4, image_size=16, num_classes=2)
    data.jpeg_folder(tmp_path / "imgs", n=6, image_size=16, num_classes=2)
    assert len(list(root.rglob("*.jpg"))) == 6


def test_jpeg_folder_built_by_two_threads_at_once(tmp_path: Path) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(data.jpeg_folder(tmp_path / "imgs", n=8, image_size=16,
                                            num_classes=2))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [tmp_path / "imgs"] * 2
    assert len(list((tmp_path / "imgs").rglob("*.jpg"))) == 8
    assert _leftovers(tmp_path) == []


def test_jpeg_folder_cleans_copies_left_by_killed_builders(tmp_path: Path) -> None:
    orphan = tmp_path / ".imgs.tmp-99999-deadbeef"
    (orphan / "class_000").mkdir(parents=True)
    other = tmp_path / ".other.tmp-1-x"  # another folder's build: not ours to remove
    other.mkdir()
    data.jpeg_folder(tmp_path / "imgs", n=2, image_size=8, num_classes=1)
    assert not orphan.exists()
    assert other.exists()


def test_install_when_another_builder_finished_first(tmp_path: Path) -> None:
    params = {"n": 1}
    root = tmp_path / "imgs"
    root.mkdir()
    (root / data.MARKER).write_text(json.dumps(params))
    (root / "winner").write_text("")
    tmp = tmp_path / ".imgs.tmp-1-a"
    tmp.mkdir()
    (tmp / "loser").write_text("")
    data._install(tmp, root, params)  # the rename fails; the finished folder is kept
    assert (root / "winner").exists() and not (root / "loser").exists()
