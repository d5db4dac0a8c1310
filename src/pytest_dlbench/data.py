"""Synthetic datasets for the workloads, deterministic by seed.

torch, torchvision and PIL are imported inside the functions: importing this module stays cheap
(a suite can be resolved, a report read, without torch).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_dlbench.core.errors import quoted

if TYPE_CHECKING:
    import torch
    from torch.utils.data import TensorDataset

__all__ = [
    "MARKER",
    "ImageTextDataset",
    "forever",
    "image_text_pairs",
    "jpeg_folder",
    "regression_pairs",
    "synthetic_images",
    "token_sequences",
]

T = TypeVar("T")

#: Written last into a finished JPEG folder; its content records the parameters it was built with.
MARKER = ".dlbench-complete"

_JPEG_FORMAT = 1  # bump when the on-disk layout or the image generator changes
#: What a generated JPEG folder's images look like (jpeg_folder's ``style``).
JPEG_STYLES = ("smooth", "noise")


def _generator(seed: int) -> torch.Generator:
    import torch

    # A private CPU generator: the datasets do not depend on (or disturb) the global RNG state.
    return torch.Generator(device="cpu").manual_seed(seed)


def synthetic_images(
    n: int = 256,
    image_size: int = 224,
    num_classes: int = 1000,
    seed: int = 0,
    channels: int = 3,
) -> TensorDataset:
    """`n` normalised float32 images (C, H, W) with int64 labels, held in memory; no I/O.

    The pixels are standard-normal, i.e. already what `Normalize` would produce from real images.
    """
    import torch
    from torch.utils.data import TensorDataset

    g = _generator(seed)
    images = torch.randn(n, channels, image_size, image_size, generator=g)
    labels = torch.randint(0, num_classes, (n,), generator=g, dtype=torch.int64)
    return TensorDataset(images, labels)


def regression_pairs(
    n: int = 512,
    features: int = 32,
    seed: int = 0,
    noise: float = 0.1,
) -> TensorDataset:
    """`n` (inputs, targets) float32 pairs of a noisy random linear function, held in memory:
    learnable data, so a falling loss shows that training works (the toy workload's)."""
    import torch
    from torch.utils.data import TensorDataset

    g = _generator(seed)
    weights = torch.randn(features, 1, generator=g)
    inputs = torch.randn(n, features, generator=g)
    targets = inputs @ weights + noise * torch.randn(n, 1, generator=g)
    return TensorDataset(inputs, targets)


def image_text_pairs(
    n: int = 256,
    image_size: int = 224,
    context_length: int = 77,
    vocab_size: int = 49408,
    seed: int = 0,
) -> TensorDataset:
    """`n` (image, token_ids) pairs for CLIP-style training, held in memory.

    Token rows look like a CLIP tokenizer's output: start token (`vocab_size - 2`), a random
    number of word tokens, end token (`vocab_size - 1`), zero padding. The end token is the largest
    id because CLIP text towers find it with `argmax`.
    """
    import torch
    from torch.utils.data import TensorDataset

    if context_length < 2:
        raise ValueError(f"context_length must be at least 2, got {context_length}")
    if vocab_size < 4:
        raise ValueError(f"vocab_size must be at least 4, got {vocab_size}")
    g = _generator(seed)
    images = torch.randn(n, 3, image_size, image_size, generator=g)
    sot, eot = vocab_size - 2, vocab_size - 1
    tokens = torch.zeros(n, context_length, dtype=torch.int64)
    # Number of word tokens per caption, between 1 and context_length - 2.
    lengths = torch.randint(1, max(context_length - 1, 2), (n,), generator=g)
    words = torch.randint(1, sot, (n, context_length), generator=g, dtype=torch.int64)
    positions = torch.arange(context_length).expand(n, -1)
    body = (positions >= 1) & (positions <= lengths[:, None])
    tokens[body] = words[body]
    tokens[:, 0] = sot
    tokens[torch.arange(n), lengths + 1] = eot
    return TensorDataset(images, tokens)


_ADJECTIVES = (
    "red", "blue", "green", "small", "large", "muddy", "young", "bright", "dark", "striped",
    "wooden", "shiny", "quiet", "busy", "wet", "frozen", "golden", "tiny", "tall", "round",
)
_NOUNS = (
    "dog", "cat", "house", "car", "tree", "river", "mountain", "bicycle", "bird", "street",
    "boat", "flower", "table", "chair", "horse", "train", "bridge", "garden", "beach", "clock",
    "lamp", "window", "cake", "field", "city", "forest", "kitchen", "market", "road", "sky",
)
_PLACES = ("next to", "under", "behind", "in front of", "near", "on top of", "beside", "inside")


class ImageTextDataset:
    """``n`` distinct image-caption pairs for CLIP training, made on the fly, deterministic by
    ``seed``: pair ``i`` depends only on ``(seed, i)``, so any size costs no memory and two runs
    (or two ranks reading disjoint indices) see the same pairs for the same indices.

    An image is a smooth random colour field (an 8x8 grid of colours, resized bilinearly to
    ``image_size``, a PIL RGB image); a caption is a short sentence ("a red dog next to a
    wooden bridge, photo 12"; the number makes every caption distinct). ``transform`` and
    ``tokenizer`` (e.g. OpenCLIP's ``image_transform`` and ``get_tokenizer``) turn them into
    tensors, as a real input pipeline does: sample by sample, in DataLoader workers. A
    map-style data set (``len`` and indexing): DataLoader and DistributedSampler take it.

    Unlike OpenCLIP's ``--dataset-type synthetic`` (one blank image and one caption repeated),
    the pixels and tokens differ from sample to sample; the work per sample is the same.
    """

    def __init__(
        self,
        n: int,
        *,
        image_size: int = 224,
        seed: int = 0,
        transform: Any = None,
        tokenizer: Any = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = n
        self.image_size = image_size
        self.seed = seed
        self.transform = transform
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return self.n

    def raw(self, index: int) -> tuple[Any, str]:
        """Pair ``index`` before ``transform`` and ``tokenizer``: (PIL image, caption)."""
        import numpy as np
        from PIL import Image

        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} pairs")
        rng = np.random.default_rng((self.seed, index))
        grid = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        words = rng.integers(0, 1 << 30, size=5)
        size = (self.image_size, self.image_size)
        image = Image.fromarray(grid, mode="RGB").resize(size, Image.Resampling.BILINEAR)
        adjective, noun = _ADJECTIVES, _NOUNS
        caption = (f"a {adjective[words[0] % len(adjective)]} {noun[words[1] % len(noun)]} "
                   f"{_PLACES[words[2] % len(_PLACES)]} a {adjective[words[3] % len(adjective)]} "
                   f"{noun[words[4] % len(noun)]}, photo {index}")
        return image, caption

    def image(self, index: int) -> Any:
        """The PIL image of pair ``index``."""
        return self.raw(index)[0]

    def caption(self, index: int) -> str:
        """The caption of pair ``index``."""
        return self.raw(index)[1]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image, text = self.raw(index)
        if self.transform is not None:
            image = self.transform(image)
        if self.tokenizer is not None:
            text = self.tokenizer([text])[0]
        return image, text


def token_sequences(
    n: int = 256,
    seq_len: int = 128,
    vocab_size: int = 32000,
    seed: int = 0,
) -> TensorDataset:
    """`n` (inputs, targets) pairs of int64 token sequences of length `seq_len`.

    Both come from one random sequence of `seq_len + 1` tokens: targets are the inputs shifted by
    one position, as in next-token prediction.
    """
    import torch
    from torch.utils.data import TensorDataset

    g = _generator(seed)
    tokens = torch.randint(0, vocab_size, (n, seq_len + 1), generator=g, dtype=torch.int64)
    return TensorDataset(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())


def jpeg_folder(
    root: str | os.PathLike[str],
    n: int = 256,
    image_size: int = 224,
    num_classes: int = 10,
    seed: int = 0,
    style: str = "smooth",
) -> Path:
    """An ImageFolder tree of `n` real JPEG files (`root/class_xxx/img_yyyy.jpg`), built once.

    Image `i` goes to class `i % num_classes` (fewer class folders when `n < num_classes`).
    ``style``: ``smooth`` colour fields with mild noise (decode like photographs), or ``noise``:
    uniform random pixels saved at PIL's default quality, as milabench's FakeImageNet is made
    (benchmate's datagen.py; larger files, slower to decode).

    A folder is reused when its marker file records the same parameters; otherwise (missing
    marker: a run killed half-way, or other parameters) it is rebuilt. Building happens in a
    private temporary folder next to `root` that is renamed into place, so readers never see
    partial files. Builders of the same folder take turns on a lock file (`.<name>.lock`, left in
    place): the first builds, the others find it done; where locking is unavailable they race
    and the first rename wins.
    """
    root = Path(root)
    params: dict[str, Any] = {
        "format": _JPEG_FORMAT,
        "n": n,
        "image_size": image_size,
        "num_classes": num_classes,
        "seed": seed,
    }
    if style not in JPEG_STYLES:
        raise ValueError(f"style must be one of {', '.join(JPEG_STYLES)}, got {quoted(style)}")
    if style != "smooth":  # the smooth folders cached before the style existed stay valid
        params["style"] = style
    if _marker_matches(root, params):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(root) as exclusive:
        # Replicas started together (per_gpu) queue here; the first one builds, the rest reuse.
        if _marker_matches(root, params):
            return root
        if exclusive:
            # Nobody else is building: copies left by killed builders are garbage.
            prefixes = (f".{root.name}.tmp-", f".{root.name}.stale-")
            for junk in root.parent.iterdir():
                if junk.name.startswith(prefixes) and junk.is_dir():
                    shutil.rmtree(junk, ignore_errors=True)
        tmp = root.parent / f".{root.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _write_jpegs(tmp, n=n, image_size=image_size, num_classes=num_classes, seed=seed,
                         style=style)
            # The marker goes last: its presence means every image before it was written.
            (tmp / MARKER).write_text(json.dumps(params, sort_keys=True))
            _install(tmp, root, params)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[bool]:
    """An advisory lock next to `root` (POSIX flock; released by the OS if the holder dies).

    Yields whether the lock is really exclusive. Only an optimisation: without fcntl (Windows)
    builders race, and the atomic rename in `_install` still keeps the folder consistent.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield False
        return
    with open(root.parent / f".{root.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _marker_matches(root: Path, params: dict[str, Any]) -> bool:
    try:
        return json.loads((root / MARKER).read_text()) == params
    except (OSError, ValueError):
        return False


def _install(tmp: Path, root: Path, params: dict[str, Any]) -> None:
    """Move the finished `tmp` folder to `root`, replacing a stale or partial one."""
    for _ in range(3):
        try:
            os.rename(tmp, root)
            return
        except OSError:
            # root exists (rename onto a non-empty directory fails); another process may have
            # just finished the same folder.
            if _marker_matches(root, params):
                return
            stale = root.parent / f".{root.name}.stale-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(root, stale)  # atomic: readers never see a half-deleted folder
            except FileNotFoundError:
                continue
            shutil.rmtree(stale, ignore_errors=True)
    raise OSError(f"could not install the JPEG folder at {root}")


def _write_jpegs(folder: Path, *, n: int, image_size: int, num_classes: int, seed: int,
                 style: str = "smooth") -> None:
    import torch
    import torch.nn.functional as F
    from PIL import Image

    g = _generator(seed)
    width = max(3, len(str(num_classes - 1)))
    # Only classes that receive an image: ImageFolder rejects an empty class folder.
    classes = [folder / f"class_{c:0{width}d}" for c in range(min(num_classes, n))]
    for d in classes:
        d.mkdir(parents=True)
    img_width = max(4, len(str(n - 1)))
    if style == "noise":
        _write_noise_jpegs(classes, n=n, image_size=image_size, seed=seed, width=img_width)
        return
    for i in range(n):
        # Smooth colour fields plus mild noise: compresses and decodes like a photograph, unlike
        # pure noise (huge files) or flat colour (trivially small).
        coarse = torch.rand(1, 3, 8, 8, generator=g)
        smooth = F.interpolate(coarse, size=(image_size, image_size), mode="bilinear",
                               align_corners=False)[0]
        noise = torch.randn(3, image_size, image_size, generator=g) * 0.05
        pixels = ((smooth + noise).clamp(0, 1) * 255).to(torch.uint8).permute(1, 2, 0)
        image = Image.fromarray(pixels.numpy())
        # Round-robin labels so every class has images whenever n >= num_classes.
        image.save(classes[i % len(classes)] / f"img_{i:0{img_width}d}.jpg", quality=90)


def _write_noise_jpegs(classes: list[Path], *, n: int, image_size: int, seed: int,
                       width: int) -> None:
    """milabench's FakeImageNet images: uniform uint8 noise, saved at PIL's default quality."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n):
        pixels = rng.integers(0, 256, size=(image_size, image_size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(classes[i % len(classes)] / f"img_{i:0{width}d}.jpg")


def forever(loader: Iterable[T]) -> Iterator[T]:
    """Cycle a finite iterable without end, re-iterating it each pass (new epoch, new shuffle).

    The benchmark's `iterate()` decides when to stop, so data must never run out first.
    """
    while True:
        empty = True
        for item in loader:
            empty = False
            yield item
        if empty:
            raise ValueError("forever() was given an empty iterable")
