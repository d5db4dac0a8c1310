"""Benchmark functions shipped with pytest-dlbench, for suites' `definition:` entries.

Each is `def fn(bench)` (`ddp` also takes the `process_group` fixture): it parses
`bench.args` with argparse, builds everything on `bench.device` and loops over
`bench.iterate(...)` until the run has its observations.

Importing this package (or any workload module) does not import torch.

| definition                                | what                                 | units    |
| ----------------------------------------- | ------------------------------------ | -------- |
| pytest_dlbench.workloads.toy:main         | tiny MLP sanity check, runs first    | items/s  |
| pytest_dlbench.workloads.vision:train     | torchvision classifier training      | items/s  |
| pytest_dlbench.workloads.timm_train:train | timm classifier training             | items/s  |
| pytest_dlbench.workloads.matmul:main      | matmul throughput                    | TFLOP/s  |
| pytest_dlbench.workloads.dataloader:main  | JPEG decoding and DataLoader workers | items/s  |
| pytest_dlbench.workloads.lm:train         | small GPT language-model training    | tokens/s |
| pytest_dlbench.workloads.clip:train       | open_clip training (optional extra)  | items/s  |
| pytest_dlbench.workloads.ddp:train        | DDP training (njobs, torchrun ranks) | items/s  |

The modules `flops` and `loader` are the old names of `matmul` and `dataloader`, kept for the
suites that name them.
"""

from __future__ import annotations

__all__ = ["WORKLOADS"]

#: Short name -> definition string (`module:function`).
WORKLOADS: dict[str, str] = {
    "toy": "pytest_dlbench.workloads.toy:main",
    "vision": "pytest_dlbench.workloads.vision:train",
    "timm": "pytest_dlbench.workloads.timm_train:train",
    "matmul": "pytest_dlbench.workloads.matmul:main",
    "dataloader": "pytest_dlbench.workloads.dataloader:main",
    "lm": "pytest_dlbench.workloads.lm:train",
    "clip": "pytest_dlbench.workloads.clip:train",  # needs the `clip` extra (open-clip-torch)
    "ddp": "pytest_dlbench.workloads.ddp:train",  # `def train(bench, process_group)`
}
