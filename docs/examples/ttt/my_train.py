"""A training script that knows nothing of pytest-dlbench: it times its steps and logs them."""

import argparse
import math
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--work", type=int, default=20000, help="arithmetic per sample")
args = parser.parse_args()

print(f"training for {args.steps} steps of {args.batch_size} samples", flush=True)
loss = 2.0
for step in range(1, args.steps + 1):
    start = time.perf_counter()
    total = sum(math.sqrt(i) for i in range(args.work * args.batch_size // 100))
    loss *= 0.97
    seconds = time.perf_counter() - start
    print(f"step {step}/{args.steps} ({100 * step / args.steps:.0f}%) samples {args.batch_size} "
          f"time {seconds:.4f}s loss {loss:.4f}", flush=True)
print("done", flush=True)
