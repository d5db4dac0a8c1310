"""A plain training script (no pytest) timed with pytest-dlbench's region Timer.

    python docs/examples/profiling/standalone_timer.py [--steps 30] [--verbose]

Prints the same time report that `--bench-profile=time` writes for a suite benchmark.
"""

import argparse

import torch

from pytest_dlbench import Timer
from pytest_dlbench.measure.timing import backend_for
from pytest_dlbench.profile import time_report_from_windows

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--verbose", action="store_true")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(8)]

timer = Timer(backend_for(device))  # CUDA events on a GPU, perf_counter on a CPU
windows = []
timer.synchronize()  # the model's copy to the device is in no step
timer.begin()
for step in range(args.warmup + args.steps):
    x, y = data[step % len(data)]
    with timer.region("io"):
        x, y = x.to(device), y.to(device)
    with timer.region("forward"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    with timer.region("backward"):
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    with timer.region("optimizer"):
        optimizer.step()
    timer.step(len(x))
    if (step + 1) % 10 == 0:  # read every 10 steps: one synchronisation each
        windows.append(timer.read(intervals=True))
        timer.begin()  # the read is in no step
windows.append(timer.read(intervals=True))

report = time_report_from_windows(windows, skip=args.warmup)
print(report.render(verbose=args.verbose))
