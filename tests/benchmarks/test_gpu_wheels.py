"""benchmarks/gpu_wheels.py: the wheels a GPU machine without a package index lacks, pinned to
the versions the tests ran with, for the GPU machine's Python (no download here)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_script
from _paths import REPO_ROOT

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def gpu_wheels() -> ModuleType:
    return load_script("gpu_wheels")


def test_each_wheel_is_pinned_to_the_version_installed_here(gpu_wheels: ModuleType):
    assert gpu_wheels.requirement("pydantic") == \
        f"pydantic=={importlib.metadata.version('pydantic')}"
    assert gpu_wheels.requirement("wcwidth==0.2.6") == "wcwidth==0.2.6"  # as asked
    assert gpu_wheels.requirement("no-such-distribution-here") == "no-such-distribution-here"


def test_the_download_targets_the_gpu_machines_python_and_platform(gpu_wheels: ModuleType,
                                                                    tmp_path: Path):
    command = gpu_wheels.pip_command(tmp_path, "3.12", ["pydantic==2.0"])
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert command[command.index("--python-version") + 1] == "3.12"
    assert "--no-deps" in command and "--only-binary=:all:" in command
    assert command[command.index("-d") + 1] == str(tmp_path)
    assert "manylinux2014_x86_64" in command and command[-1] == "pydantic==2.0"


def test_the_default_set_covers_what_the_check_needs_beyond_a_gpu_image(gpu_wheels: ModuleType):
    """The modules gpu_check.sh requires that the GPU image of 2026-11 did not have."""
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    for module, distribution in (("pydantic", "pydantic"), ("torchinfo", "torchinfo"),
                                 ("wcwidth", "wcwidth")):
        assert f'"{module}"' in script
        assert distribution in gpu_wheels.DEFAULT


def test_the_wheels_go_inside_the_checkout_by_default(gpu_wheels: ModuleType, tmp_path: Path):
    """Issue 37 item 18: a lease copies the checkout to the GPU machine, not /tmp: the default
    folder is the checkout's .whl (the one the lease recipe names), and a folder outside it is
    said to be one."""
    assert gpu_wheels.DEFAULT_OUT == ROOT / ".whl"
    assert not gpu_wheels.outside_checkout(gpu_wheels.DEFAULT_OUT)
    assert gpu_wheels.outside_checkout(tmp_path / "gpu-wheels")
    assert "--wheels .whl" in gpu_wheels.LEASE and "--budget 440" in gpu_wheels.LEASE


# What the GPU image of 2026-11 held (benchmarks/README.md, the gpu_check runs): torch 2.11,
# torchvision, timm (and what timm requires), pandas, pytest, xdist, nvidia-ml-py.
GPU_IMAGE = {"torch", "torchvision", "timm", "huggingface-hub", "safetensors", "pyyaml", "numpy",
             "pandas", "pytest", "pytest-xdist", "nvidia-ml-py", "pillow"}


def _requires(distribution: str, extra: str | None = None) -> set[str]:
    import re

    names = set()
    for line in importlib.metadata.requires(distribution) or []:
        requirement, _, marker = line.partition(";")
        if ("extra ==" in marker) != (extra is not None) or (extra and extra not in marker):
            continue
        names.add(re.split(r"[ <>=!\[(~]", requirement.strip(), maxsplit=1)[0].lower()
                  .replace("_", "-"))
    return names


def test_the_default_set_carries_open_clip_and_what_it_needs_beyond_the_gpu_image(
        gpu_wheels: ModuleType):
    """Issue 49 item 12: the CLIP rows (open_clip in-process, OpenCLIP's training script) skip
    themselves without open_clip: its wheel and those of what it and its training script
    import that the GPU image lacks travel with the others."""
    carried = {name.lower().replace("_", "-") for name in gpu_wheels.DEFAULT}
    assert "open-clip-torch" in carried
    assert _requires("open_clip_torch") <= carried | GPU_IMAGE
    # The training script's data module imports webdataset and braceexpand at the top.
    assert {"webdataset", "braceexpand"} <= carried
    assert _requires("webdataset") <= carried | GPU_IMAGE
    assert _requires("ftfy") <= carried | GPU_IMAGE
