"""The shipped standard suite's defaults (issue 37, items 11 and 12): convnets in channels-last
as milabench runs them, and no GPU memory warning that fires on every large card."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.suite.resolve import resolve_suite
from pytest_dlbench.suite.spec import BenchSpec

STANDARD = Path(__file__).resolve().parents[1] / "bench_suites" / "standard.yaml"
IMAGE_WORKLOADS = ("workloads.vision:", "workloads.timm_train:", "workloads.ddp:")


def _image_models(tag: str) -> list[BenchSpec]:
    """The standard suite's image-training benchmarks tagged `tag`."""
    specs = resolve_suite(STANDARD).specs
    return [s for s in specs if s.definition and s.definition.split("pytest_dlbench.")[-1]
            .startswith(IMAGE_WORKLOADS) and tag in s.tags]


def test_the_standard_suites_convnets_run_channels_last() -> None:
    convnets = _image_models("convnet")
    # resnet50 (+ compiled), convnext_large, the 4 noio batch sizes, resnet50-ddp
    assert len(convnets) >= 8
    missing = [s.name for s in convnets if "--channels-last" not in s.args]
    assert missing == []


def test_the_standard_suites_vits_stay_nchw() -> None:
    vits = _image_models("transformer")
    assert [s.name for s in vits] == ["vit_b_16"]
    assert "--channels-last" not in vits[0].args


def test_the_standard_suite_sets_no_gpu_memory_floor() -> None:
    """A 50 % memory floor warns on nearly every benchmark of an 80 or 141 GB card; the load
    floor (milabench's failing check) stays wherever the GPU does the work."""
    specs = resolve_suite(STANDARD).specs
    usage = {s.name: (s.validation or {}).get("usage") or {} for s in specs}
    assert {name for name, u in usage.items() if u.get("gpu_mem_threshold")} == set()
    assert usage["resnet50"].get("gpu_load_threshold") == 0.5
    assert usage["loader"].get("gpu_load_threshold") is None  # CPU work: no floor


def test_the_suites_page_says_why() -> None:
    text = (STANDARD.parents[1] / "docs" / "suites.md").read_text()
    section = text.split("## The standard suite's choices", 1)[1]
    assert "--channels-last" in section and "gpu_mem_threshold" in section


# -- the flag does what it says, on a tiny model ---------------------------------------------
class _LayoutSpy:
    """A tiny convnet that notes the memory format of each input and of its conv weight."""

    def __init__(self, torch: Any) -> None:
        self.inputs: list[bool] = []
        self.weights: list[bool] = []
        spy = self

        class Net(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
                self.head = torch.nn.Linear(4, 10)

            def forward(self, x: Any) -> Any:
                cl = torch.channels_last
                spy.inputs.append(x.is_contiguous(memory_format=cl))
                spy.weights.append(self.conv.weight.is_contiguous(memory_format=cl))
                return self.head(self.conv(x).mean(dim=(2, 3)))

        self.net = Net


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("data", ["--synthetic-data", "--fixed-batch"])
def test_channels_last_puts_the_model_and_every_batch_in_nhwc(flag: bool, data: str,
                                                             tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.stream import NullStream
    from pytest_dlbench.workloads.vision import make_parser, train_classifier

    spy = _LayoutSpy(torch)
    argv = ["--batch-size", "2", "--image-size", "8", "--num-classes", "10", data,
            "--num-images", "4", *(["--channels-last"] if flag else [])]
    args: argparse.Namespace = make_parser().parse_args(argv)
    with Bench(name="spy", args=argv, device="cpu", stream=NullStream(), skip=1, stop=2,
               data_dir=tmp_path) as bench:
        train_classifier(bench, args, lambda name, classes, size: spy.net())
    assert len(spy.inputs) >= 3  # the 3 steps (and the FLOP count's forward, NCHW zeros)
    assert set(spy.inputs[-3:]) == {flag}
    assert set(spy.weights[-3:]) == {flag}
