"""Download the wheels a GPU machine without a package index needs to run gpu_check.sh.

GPU images usually hold torch, torchvision, timm, pytest, xdist, pandas, scipy and nvidia-ml-py,
and not the project's small pure dependencies (pydantic and its helpers, torchinfo, wcwidth) nor
open_clip and what it imports (the CLIP rows: ``CLIP``); about 6 MiB of wheels in all.
Run this where pip reaches an index; DIR is the checkout's ``.whl`` by default, so the wheels
travel with the checkout (a lease copies the checkout, not /tmp; git does not ignore ``.whl``),
and pass it there as ``bash benchmarks/gpu_check.sh ... --wheels .whl``: the wheels go into the
check's output folder, nothing is installed on the machine. The versions are the ones installed
here (the versions the project's tests ran with), for the GPU machine's Python (``--python``,
3.12 by default) on x86-64 Linux.

    python benchmarks/gpu_wheels.py [DIR] [--python 3.12] [EXTRA_DISTRIBUTION ...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Inside the checkout: what a lease copies to the GPU machine.
DEFAULT_OUT = ROOT / ".whl"
# The lease's command, from the checkout's root there, under a limit of 500 s (docs/gpu.md,
# benchmarks/README.md).
LEASE = "bash benchmarks/gpu_check.sh /tmp/gc --quick --budget 440 --wheels .whl --copy-to $OUT"
# What the GPU images seen so far lack (the 'cuda' image of 2026-11: docs/gpu.md): the
# project's small pure dependencies, then what the CLIP rows need beyond torch, torchvision and
# timm: open_clip imports ftfy, regex and tqdm; its training script webdataset and braceexpand
# (huggingface_hub and safetensors it imports only to load pretrained weights).
PROJECT = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection",
           "typing-extensions", "torchinfo", "wcwidth")
CLIP = ("open-clip-torch", "ftfy", "regex", "tqdm", "webdataset", "braceexpand")
DEFAULT = (*PROJECT, *CLIP)
# manylinux tags pip matches exactly: the common ones for x86-64 wheels.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")


def requirement(name: str) -> str:
    """``name==version`` as installed here, else the bare name (the newest)."""
    if "=" in name or "<" in name or ">" in name:
        return name
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def pip_command(out: Path, python: str, requirements: Sequence[str]) -> list[str]:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--only-binary=:all:", "--python-version", python,
               "--implementation", "cp", "-d", str(out)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return command + list(requirements)


def outside_checkout(path: Path) -> bool:
    """True when ``path`` is not under the checkout: a lease that copies the checkout leaves
    it behind, and gpu_check.sh exits 2 there before any row."""
    return not path.resolve().is_relative_to(ROOT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?", default=DEFAULT_OUT,
                        help="where the wheels go (default: the checkout's .whl)")
    parser.add_argument("--python", default="3.12",
                        help="the GPU machine's Python version (default 3.12)")
    parser.add_argument("extra", nargs="*", help="more distributions, NAME or NAME==VERSION")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    requirements = [requirement(name) for name in (*DEFAULT, *args.extra)]
    done = subprocess.run(pip_command(args.out, args.python, requirements), check=False)
    if done.returncode != 0:
        print(f"gpu_wheels: pip download failed (exit {done.returncode}) for "
              f"{' '.join(requirements)}", file=sys.stderr)
        return 1
    wheels = sorted(args.out.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"gpu_wheels: {len(wheels)} wheels, {size:.1f} MiB in {args.out} "
          f"(Python {args.python}); on the GPU machine, from the checkout's root: "
          + (LEASE if args.out.resolve() == DEFAULT_OUT else
             f"bash benchmarks/gpu_check.sh ... --wheels {args.out}"))
    if outside_checkout(args.out):
        print(f"gpu_wheels: {args.out} is outside the checkout: carry it to the GPU machine "
              f"yourself (a lease copies the checkout only)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
