"""The shipped ``milabench`` suite against milabench's own settings.

``MILABENCH`` holds milabench's setting of each benchmark the suite shares with it, read at
one commit of github.com/mila-iqia/milabench, each fact with the file and line it comes from
(no file of milabench's is copied here). The test resolves the project's suite (as ``dlbench
resolve milabench`` does), reads each benchmark's setting the way its workload will (the
workload's own argument parser, after the launch-time filling of ``auto(...)`` and
``auto_batch(...)``), and asserts every one equal, except the differences listed in ``KEPT``
with their reason. A new difference fails; so does a listed one that has gone (the list would
then say something false). docs/milabench.md is the prose of these tables.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.suite.argv import fill_all
from pytest_dlbench.suite.locate import find_suite
from pytest_dlbench.suite.resolve import resolve_suite
from pytest_dlbench.suite.spec import BenchSpec
from pytest_dlbench.workloads import ddp, matmul, vision
from pytest_dlbench.workloads.images import FAKE_IMAGENET_CLASSES, FAKE_IMAGENET_IMAGES

MILABENCH_COMMIT = "faf39234e7ff35b45a49faa09c66383519f6ec55"

Fact = tuple[Any, str]  # (milabench's value, "file:line" at MILABENCH_COMMIT)

_DEFAULTS = "config/_defaults.yaml"
_TRAINING = "config/training.yaml"
_SYNTHETIC = "config/synthetic.yaml"
_ALL = "config/all.yaml"
_TV_MAIN = "benchmarks/torchvision/main.py"
_TV_VOIR = "benchmarks/torchvision/voirfile.py"
_LOADER = "benchmate/benchmate/dataloader.py"
_DATAGEN = "benchmate/benchmate/datagen.py"
_FLOPS = "benchmarks/flops/main.py"
_DDP_MAIN = "benchmarks/torchvision_ddp/main.py"

#: Every benchmark's: config/_defaults.yaml's ``_defaults``.
_COMMON: dict[str, Fact] = {
    "max_duration": (600, f"{_DEFAULTS}:3"),
    "interval": ("1s", f"{_DEFAULTS}:7"),
    "gpu_load_threshold": (0.5, f"{_DEFAULTS}:11"),
    "gpu_mem_threshold": (0.5, f"{_DEFAULTS}:12"),
}

#: config/training.yaml's ``_torchvision`` and benchmarks/torchvision/main.py's defaults.
_TORCHVISION: dict[str, Fact] = {
    **_COMMON,
    "group": ("torchvision", f"{_TRAINING}:7"),
    "plan": ("per_gpu", f"{_TRAINING}:10"),
    "precision": ("tf32-fp16", f"{_TRAINING}:12"),
    "lr": (0.01, f"{_TRAINING}:13"),
    # torch.optim.SGD(params, args.lr): torch's defaults, momentum 0, no fused kernels
    "momentum": (0.0, f"{_TV_MAIN}:209"),
    "fused": (False, f"{_TV_MAIN}:209"),
    "seed": (1234, f"{_TV_MAIN}:127"),
    "skip": (5, f"{_TV_VOIR}:20"),
    "stop": (60, f"{_DEFAULTS}:6"),
    # --loader pytorch: an ImageFolder (dataloader.py:170) of FakeImageNet's train split
    "loader": ("pytorch", f"{_TRAINING}:17"),
    "num_workers": ("auto({n_worker}, 8)", f"{_TRAINING}:16"),
    "image_size": (224, f"{_LOADER}:160"),  # RandomResizedCrop(224)
    # FakeImageNet as benchmate's datagen makes it: uniform uint8 noise (:26), 384 px (:122),
    # 1,000 classes (:30), batch 512 x 60 batches x GPUs images (:118-119, :149)
    "data": ("FakeImageNet: uniform noise, 384 px", f"{_DATAGEN}:26,122"),
    "data_classes": (1000, f"{_DATAGEN}:30"),
    "data_images": (512 * 60, f"{_DATAGEN}:118-119,149"),
    "soft_labels": (False, f"{_LOADER}:170"),  # ImageFolder: class indices
    # DataLoader(shuffle=True, pin_memory=True): every image once an epoch, the last batch
    # short, the workers started again each epoch
    "sampler": ("shuffle, partial last batch, workers per epoch", f"{_LOADER}:172,186-192"),
    "channels_last": (False, f"{_TV_MAIN}:57"),  # only with --optim channel_last
    "gpu_poll": (None, f"{_TV_VOIR}:26"),  # voirfile's default, 1 s: as the interval
}


def _input_dtype(precision: str) -> Fact:
    """main.py casts each batch to float_dtype(precision) before the model: fp16 where the
    preset says fp16 (on CUDA), fp32 otherwise."""
    return ("fp16" if "fp16" in precision else "fp32", f"{_TV_MAIN}:23,180")


def _torchvision(**facts: Fact) -> dict[str, Fact]:
    out = {**_TORCHVISION, **facts}
    out["input_dtype"] = _input_dtype(out["precision"][0])
    return out


def _convnext(precision: str, line: int, weight: float, weight_line: int) -> dict[str, Fact]:
    return _torchvision(
        model=("convnext_large", f"{_TRAINING}:180"),
        batch_size=("auto_batch(128)", f"{_TRAINING}:181"),
        stop=(30, f"{_TRAINING}:184"),
        precision=(precision, f"{_TRAINING}:{line}"),
        weight=(weight, f"{_ALL}:{weight_line}"),
    )


#: config/synthetic.yaml's ``_flops`` and benchmarks/flops/main.py.
_FLOPS_BASE: dict[str, Fact] = {
    **_COMMON,
    "group": ("flops", f"{_SYNTHETIC}:7"),
    "plan": ("per_gpu", f"{_SYNTHETIC}:10"),
    "number": (10, f"{_SYNTHETIC}:19"),
    # --repeat 90: 90 rates, each printed (main.py:154) and read from stdout
    # (benchmarks/flops/benchfile.py:15-18), none skipped
    "stop": (90, f"{_SYNTHETIC}:20"),
    "skip": (0, f"{_FLOPS}:154"),
    "tf32": (False, f"{_FLOPS}:175"),  # --tf32 store_true, default False
    "identity_chain": (True, f"{_FLOPS}:132,145-146"),  # x @ eye(n) into y, y @ eye(n) into x
    "clock": ("host clock, a device sync per repeat", f"{_FLOPS}:139-151"),
}


def _flops(dtype: str, line: int, weight_line: int, **facts: Fact) -> dict[str, Fact]:
    return {
        **_FLOPS_BASE,
        "m": (8192, f"{_SYNTHETIC}:{line}"),
        "n": (8192, f"{_SYNTHETIC}:{line + 1}"),
        "element_dtype": (dtype, f"{_SYNTHETIC}:{line + 2}"),
        "weight": (0.0, f"{_ALL}:{weight_line}"),
        **facts,
    }


MILABENCH: dict[str, dict[str, Fact]] = {
    "resnet50": _torchvision(
        model=("resnet50", f"{_TRAINING}:124"),
        batch_size=("auto_batch(256)", f"{_TRAINING}:125"),
        num_workers=("auto({n_worker}, 8)", f"{_TRAINING}:126"),
        loader=("pytorch", f"{_TRAINING}:127"),
        channels_last=(True, f"{_TRAINING}:128"),
        stop=(60, f"{_TRAINING}:112"),
        gpu_poll=(0.1, f"{_TRAINING}:113"),
        weight=(1.0, f"{_ALL}:21"),
    ),
    "resnet50-noio": _torchvision(
        model=("resnet50", f"{_TRAINING}:146"),
        batch_size=("auto_batch(256)", f"{_TRAINING}:147"),
        loader=("synthetic_fixed", f"{_TRAINING}:148"),
        channels_last=(True, f"{_TRAINING}:149"),
        stop=(500, f"{_TRAINING}:134"),
        interval=("1s", f"{_TRAINING}:135"),
        image_size=(244, f"{_LOADER}:198"),
        soft_labels=(True, f"{_LOADER}:40"),  # torch.rand_like(model(inp))
        num_workers=(None, f"{_LOADER}:252-253"),  # synthetic_fixed: no DataLoader
        data=(None, f"{_LOADER}:39"),  # one randn batch on the device
        data_classes=(None, f"{_LOADER}:39"),
        data_images=(None, f"{_LOADER}:39"),
        sampler=(None, f"{_LOADER}:252-253"),
        weight=(0.0, f"{_ALL}:25"),
    ),
    "convnext_large-fp32": _convnext("fp32", 189, 0.0, 29),
    "convnext_large-fp16": _convnext("fp16", 194, 0.0, 33),
    "convnext_large-tf32": _convnext("tf32", 199, 0.0, 37),
    "convnext_large-tf32-fp16": _convnext("tf32-fp16", 204, 1.0, 41),
    "regnet_y_128gf": _torchvision(
        model=("regnet_y_128gf", f"{_TRAINING}:216"),
        batch_size=("auto_batch(64)", f"{_TRAINING}:217"),
        weight=(1.0, f"{_ALL}:45"),
    ),
    # config/training.yaml's _torchvision_ddp and resnet152-ddp-gpus, and its main.py
    "resnet152-ddp-gpus": {
        **_COMMON,
        "group": ("torchvision", f"{_TRAINING}:24"),
        "plan": ("njobs", f"{_TRAINING}:29"),
        "requires": (["gpu['count'] > 1"], f"{_TRAINING}:37-38"),
        "model": ("resnet152", f"{_TRAINING}:166"),
        "batch_size": ("auto_batch(256)", f"{_TRAINING}:167"),
        "num_workers": ("auto({n_worker}, 8)", f"{_TRAINING}:168"),
        "loader": ("pytorch", f"{_LOADER}:265-266"),  # --loader torch: the pytorch folder
        "stop": (60, f"{_TRAINING}:162"),
        "gpu_poll": (0.1, f"{_TRAINING}:163"),
        "precision": ("bf16", f"{_DDP_MAIN}:73"),  # autocast(dtype=torch.bfloat16)
        # torch.optim.SGD(model.parameters(), lr=1e-3): torch's defaults otherwise
        "lr": (0.001, f"{_DDP_MAIN}:118"),
        "momentum": (0.0, f"{_DDP_MAIN}:118"),
        "fused": (False, f"{_DDP_MAIN}:118"),
        "channels_last": (False, f"{_DDP_MAIN}:52"),  # model.to(device) only
        "image_size": (224, f"{_LOADER}:160"),
        "data": ("FakeImageNet: uniform noise, 384 px", f"{_DATAGEN}:26,122"),
        "data_classes": (1000, f"{_DATAGEN}:30"),
        "data_images": (512 * 60, f"{_DATAGEN}:118-119,149"),
        # DistributedSampler(train, rank, num_replicas): each rank its part of every epoch
        "sampler": ("distributed, partial last batch, workers per epoch", f"{_LOADER}:174"),
        "weight": (0.0, f"{_ALL}:145"),
    },
    "fp8": _flops("fp8", 29, 206, number=(30, f"{_SYNTHETIC}:27"),
                  stop=(90, f"{_SYNTHETIC}:28")),
    "fp16": _flops("fp16", 39, 210, number=(30, f"{_SYNTHETIC}:37"),
                   stop=(90, f"{_SYNTHETIC}:38")),
    "bf16": _flops("bf16", 47, 214),
    "tf32": _flops("fp32", 55, 218, tf32=(True, f"{_SYNTHETIC}:58")),
    "fp32": _flops("fp32", 64, 222),
}

_JPEG_BENCHES = ("resnet50", "convnext_large-fp32", "convnext_large-fp16",
                 "convnext_large-tf32", "convnext_large-tf32-fp16", "regnet_y_128gf")
_FP16_INPUT = ("resnet50", "resnet50-noio", "convnext_large-fp16", "convnext_large-tf32-fp16",
               "regnet_y_128gf")

_DATA_REASON = (
    "milabench's FakeImageNet holds 512 x 60 images a GPU (30,720); the project generates the "
    "same kind of image (uniform noise, 384 px, 1,000 classes: --fake-imagenet) but 4,096 of "
    "them (workloads/images.py, FAKE_IMAGENET_IMAGES; a DDP job's ranks get at least 4 "
    "batches each): the same images to decode, a folder "
    "generated in seconds rather than minutes; the loader draws from it without end. "
    "milabench's own folder can be read as it is: --bench-override "
    "'<bench>.argv.--data=DIR/train'"
)
_INPUT_REASON = (
    "milabench casts each batch to the preset's float type (fp16) before the model; the "
    "project feeds fp32 images to autocast, which casts them at the first layer: the same "
    "arithmetic, but milabench copies half the bytes to the device per step (JPEG runs) and "
    "runs one cast kernel per step (resnet50-noio's fixed batch)"
)

#: (benchmark, setting) -> why the project's setting differs from milabench's.
KEPT: dict[tuple[str, str], str] = {
    **{(bench, "data_images"): _DATA_REASON
       for bench in (*_JPEG_BENCHES, "resnet152-ddp-gpus")},
    ("resnet152-ddp-gpus", "sampler"): (
        "the project's generated folder is small (4 batches a rank an epoch), so a run crosses "
        "epochs: its workers persist across them and every batch is full "
        "(workloads/images.py, jpeg_loader with a shard); milabench's FakeImageNet epoch "
        "outlasts a run"
    ),
    ("resnet152-ddp-gpus", "gpu_poll"): (
        "milabench's multi-GPU monitor polling period: the project's telemetry samples every "
        "voir.options.interval (1 s)"
    ),
    **{(bench, "input_dtype"): _INPUT_REASON for bench in _FP16_INPUT},
    **{(bench, "sampler"): (
        "the project's generated folder is small (1,024 images), so a run crosses epochs: "
        "its workers persist across them and every batch is full (workloads/images.py, "
        "jpeg_loader); milabench's FakeImageNet epoch (30,720 images a GPU) outlasts a run"
    ) for bench in _JPEG_BENCHES},
    ("resnet50", "gpu_poll"): (
        "voir's GPU polling period: the project's telemetry samples every "
        "voir.options.interval (1 s) and the suite would warn that gpu_poll has no effect"
    ),
    **{(bench, "clock"): (
        "the project times a step with CUDA events, synchronising once per window of steps "
        "(measure/timing.py), not the host clock around a synchronize per repeat: the launch "
        "gaps at each repeat's start are not in the figure"
    ) for bench in ("fp8", "fp16", "bf16", "tf32", "fp32")},
}

#: What the project's workloads do whatever their arguments (code, not configuration).
PROJECT_INPUT_DTYPE = "fp32"  # workloads/vision.py: fp32 images, autocast (workloads/train.py)
PROJECT_CLOCK = "CUDA events, one sync per window"  # workloads/matmul.py: bench.iterate
PROJECT_SAMPLER = "random, full batches, persistent workers"  # workloads/images.py: jpeg_loader
PROJECT_DDP_SAMPLER = "distributed, full batches, persistent workers"  # jpeg_loader(shard=...)


def _value(args: list[str], flag: str) -> str | None:
    """The raw text after `flag` in a command line (before any parsing)."""
    return args[args.index(flag) + 1] if flag in args else None


def _data_settings(ns: Any, reads_jpeg: bool) -> dict[str, Any]:
    """What the JPEG folder a workload reads holds (its image count on one GPU)."""
    if not reads_jpeg:
        return {"data": None, "data_classes": None, "data_images": None}
    if ns.data is not None:
        return {"data": ns.data, "data_classes": "as the folder", "data_images": "as the folder"}
    if not ns.fake_imagenet:
        return {"data": "smooth colour fields, 256 px", "data_classes": 100,
                "data_images": 1024}
    return {"data": "FakeImageNet: uniform noise, 384 px",
            "data_classes": min(ns.num_classes, FAKE_IMAGENET_CLASSES),
            "data_images": FAKE_IMAGENET_IMAGES}


def project_settings(spec: BenchSpec) -> dict[str, Any]:
    """The project's setting of each name ``MILABENCH`` uses, as its workload will read it."""
    usage = (spec.validation or {}).get("usage") or {}
    interval = ((spec.config.get("voir") or {}).get("options") or {}).get("interval")
    settings: dict[str, Any] = {
        "max_duration": spec.max_duration,
        "interval": interval,
        "gpu_load_threshold": usage.get("gpu_load_threshold"),
        "gpu_mem_threshold": usage.get("gpu_mem_threshold"),
        "group": spec.group,
        "plan": spec.plan.get("method"),
        "weight": spec.weight,
        "skip": spec.skip,
        "stop": spec.stop,
        "requires": spec.config.get("requires_capabilities"),
    }
    raw = list(spec.args)
    # milabench's auto(X, D) and auto_batch(D), as they are filled at launch (no system file)
    args = fill_all(raw, {"n_worker": 3})
    if spec.definition == "pytest_dlbench.workloads.vision:train":
        ns = vision.make_parser().parse_args(args)
        loader = "synthetic_fixed" if ns.fixed_batch else (
            "device tensors" if ns.synthetic_data else "pytorch")
        settings.update(
            model=ns.model, batch_size=_value(raw, "--batch-size"), precision=ns.precision,
            lr=ns.lr, momentum=ns.momentum, fused=ns.fused, seed=ns.seed,
            loader=loader, image_size=ns.image_size, soft_labels=ns.soft_labels,
            channels_last=ns.channels_last,
            num_workers=_value(raw, "--num-workers") if loader == "pytorch" else None,
            **_data_settings(ns, loader == "pytorch"),
            sampler=PROJECT_SAMPLER if loader == "pytorch" else None,
            gpu_poll=((spec.config.get("voir") or {}).get("options") or {}).get("gpu_poll"),
            input_dtype=PROJECT_INPUT_DTYPE,
        )
    elif spec.definition == "pytest_dlbench.workloads.ddp:train":
        ns = ddp.make_parser().parse_args(args)
        settings.update(
            model=ns.model, batch_size=_value(raw, "--batch-size"), precision=ns.precision,
            lr=ns.lr, momentum=ns.momentum, fused=ns.fused, channels_last=ns.channels_last,
            image_size=ns.image_size,
            loader="pytorch" if ns.jpeg else "device tensors",
            num_workers=_value(raw, "--num-workers") if ns.jpeg else None,
            **_data_settings(ns, ns.jpeg),
            sampler=PROJECT_DDP_SAMPLER if ns.jpeg else None,
            gpu_poll=((spec.config.get("voir") or {}).get("options") or {}).get("gpu_poll"),
        )
    elif spec.definition == "pytest_dlbench.workloads.matmul:main":
        ns = matmul.make_parser().parse_args(args)
        settings.update(
            m=ns.m, n=ns.n, number=ns.number, identity_chain=ns.identity_chain,
            element_dtype="fp32" if ns.dtype == "tf32" else ns.dtype, tf32=ns.dtype == "tf32",
            clock=PROJECT_CLOCK,
        )
    return settings


@pytest.fixture(scope="module")
def suite() -> dict[str, BenchSpec]:
    return {s.name: s for s in resolve_suite(find_suite("milabench")).specs}


def _cells() -> Iterator[tuple[str, str]]:
    for bench, facts in MILABENCH.items():
        for setting in facts:
            yield bench, setting


def test_the_suite_holds_milabenchs_benchmarks_under_milabenchs_names(
        suite: dict[str, BenchSpec]) -> None:
    assert set(suite) == set(MILABENCH)
    assert all(spec.enabled for spec in suite.values())


def test_every_setting_is_milabenchs_or_a_listed_difference(
        suite: dict[str, BenchSpec]) -> None:
    unlisted: list[str] = []
    stale: list[str] = []
    for bench, facts in MILABENCH.items():
        ours = project_settings(suite[bench])
        for setting, (theirs, source) in facts.items():
            assert setting in ours, f"{bench}: no project reading of {setting!r}"
            same = ours[setting] == theirs
            if not same and (bench, setting) not in KEPT:
                unlisted.append(f"{bench}.{setting}: milabench {theirs!r} ({source} at "
                                f"{MILABENCH_COMMIT[:9]}), the project {ours[setting]!r}")
            if same and (bench, setting) in KEPT:
                stale.append(f"{bench}.{setting}: listed as a difference but equal")
    assert unlisted == [], "\n".join(unlisted)
    assert stale == [], "\n".join(stale)


def test_every_listed_difference_names_a_setting_of_the_table() -> None:
    assert set(KEPT) <= set(_cells())
    assert all(reason.strip() for reason in KEPT.values())


def test_every_fact_names_its_source_line() -> None:
    known = {_DEFAULTS, _TRAINING, _SYNTHETIC, _ALL, _TV_MAIN, _TV_VOIR, _LOADER, _DATAGEN,
             _FLOPS, _DDP_MAIN}
    for bench, facts in MILABENCH.items():
        for setting, (_, source) in facts.items():
            path, _, lines = source.partition(":")
            assert path in known and lines, f"{bench}.{setting}: {source!r}"


def test_dlbench_resolve_gives_milabenchs_sizes(tmp_path: Path) -> None:
    """The command users run: resnet50-noio at 244 px and batch 256, resnet50 from the JPEG
    folder with 8 workers and plain SGD, in the arguments a launch gets (``--launch``:
    milabench's auto(...) calls filled)."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert dlbench(["resolve", "milabench", "--json", "--launch",
                        "--bench-base", str(tmp_path)]) == 0
    resolved = json.loads(out.getvalue())

    def launched(name: str) -> list[str]:
        args: list[str] = resolved[name]["launch_args"]
        return args

    noio = launched("resnet50-noio")
    assert _value(noio, "--image-size") == "244"
    assert _value(noio, "--batch-size") == "256"
    assert "--fixed-batch" in noio and "--soft-labels" in noio
    assert resolved["resnet50-noio"]["stop"] == 500
    jpeg = launched("resnet50")
    assert "--synthetic-data" not in jpeg and "--fixed-batch" not in jpeg
    assert _value(jpeg, "--num-workers") == "8"
    assert _value(jpeg, "--batch-size") == "256"
    assert _value(jpeg, "--momentum") == "0" and "--no-fused" in jpeg
    assert "--channels-last" in jpeg
    assert (resolved["resnet50"]["skip"], resolved["resnet50"]["stop"]) == (5, 60)
