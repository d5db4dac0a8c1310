"""A stand-in for milabench's ``benchmarks/torchvision/main.py``, small enough for a CPU test.

It takes the same command line (the unknown options are ignored), reads the data set its
``prepare.py`` wrote under ``--data``, trains a linear model in pure Python, and reports to voir
through ``giving`` as milabench's folders do with benchmate: a ``rate`` per step (with its
``elapsed`` seconds under ``BENCHMATE_LOG_MODE=all``), pushed as each step ends under
``BENCHMATE_EAGER_SYNC=1`` and in one burst at an epoch's end otherwise, the ``loss`` and the
early-stop ``progress``. ``--mode`` makes it fail in the ways the tests need.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from giving import give


def parse_args():
    parser = argparse.ArgumentParser(description="a tiny stand-in for milabench's torchvision")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--data", default=None)
    parser.add_argument("--step-time", type=float, default=0.005, help="seconds a step sleeps")
    parser.add_argument("--mode", default="good",
                        choices=["good", "raise", "nan", "short", "no-rates"])
    args, _ = parser.parse_known_args()
    return args


def load(data):
    folder = Path(data or os.path.join(os.environ["MILABENCH_DIR_DATA"], "FakeImageNet"))
    with open(folder / "train.json") as f:  # written by prepare.py: fails if it did not run
        return json.load(f)


def main():
    args = parse_args()
    samples = load(args.data)
    eager = os.environ.get("BENCHMATE_EAGER_SYNC") == "1"
    log_all = os.environ.get("BENCHMATE_LOG_MODE") == "all"
    weight, bias = 0.0, 0.0
    batches = max(1, len(samples) // args.batch_size)
    pending = []  # lazy pushes: one burst at the end of an epoch, as benchmate without sync
    step = 0
    for _epoch in range(args.epochs):
        for b in range(batches):
            start = time.perf_counter()
            batch = samples[b * args.batch_size:(b + 1) * args.batch_size]
            grad_w = grad_b = loss = 0.0
            for x, y in batch:
                error = weight * x + bias - y
                loss += error * error / len(batch)
                grad_w += 2 * error * x / len(batch)
                grad_b += 2 * error / len(batch)
            weight -= args.lr * grad_w
            bias -= args.lr * grad_b
            time.sleep(args.step_time)
            elapsed = time.perf_counter() - start
            step += 1
            if args.mode == "raise" and step == 4:
                raise RuntimeError(f"tiny model diverged at step {step}")
            if args.mode == "nan" and step == 3:
                loss = math.nan
            if args.mode == "short" and step > 9:
                return
            data = {"rate": len(batch) / elapsed, "units": "items/s", "task": "train"}
            if log_all:
                data["elapsed"] = elapsed
            if args.mode != "no-rates":
                pending.append(data)
            give(loss=loss, task="train")
            give(progress=(step, batches * args.epochs), task="early_stop")
            if eager:
                for item in pending:
                    give(**item)
                pending = []
            print(f"step {step} loss {loss:.4f}", flush=True)
        for item in pending:
            give(**item)
        pending = []


if __name__ == "__main__":
    main()
    sys.exit(0)
