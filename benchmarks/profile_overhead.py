"""Does profiling change the scored perf? The real path: pytest, child processes, wall clock.

Each pair runs the same benchmark twice through ``pytest --bench-suite``: once plain (A) and once
with ``--bench-profile`` (B), in random order within the pair so drift and bursts of load from
other processes hit both sides alike. The profiled window runs after the scored steps, so B's
scored perf should equal A's within the run-to-run noise. Printed: per pair A, B and B/A; the
median B/A; the noise (spread of A/A' between consecutive plain runs); and the verdict
"|median B/A - 1| < noise".

    python benchmarks/profile_overhead.py [--pairs 8] [--stop 30] [--reports all]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SUITE = textwrap.dedent(
    """
    cnn:
      definition: pytest_dlbench.workloads.vision:train
      max_duration: 600
      voir: {{options: {{skip: 3, stop: {stop}}}}}
      argv:
        --model: resnet18
        --batch-size: 8
        --image-size: 64
        --num-classes: 10
        --synthetic-data: true
        --precision: fp32
        --num-workers: 0
    """
)


def run(workdir: Path, profile: str | None, index: int) -> float:
    """One pytest run of the suite; the scored perf from its saved summary."""
    summary = workdir / f"summary-{index}.json"
    cmd = [sys.executable, "-m", "pytest", "--bench-suite=suite.yaml", "-q",
           "-p", "no:cacheprovider", f"--bench-base={workdir / 'base'}",
           f"--bench-save={summary}"]
    if profile is not None:
        cmd.append("--bench-profile" + (f"={profile}" if profile != "all" else ""))
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout[-2000:]}")
    return float(json.loads(summary.read_text())["benchmarks"]["cnn"]["perf"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--stop", type=int, default=30, help="scored observations per run")
    parser.add_argument("--reports", default="all",
                        help="what --bench-profile gets (all, or a comma list)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlbench-profile-overhead-") as tmp:
        workdir = Path(tmp)
        (workdir / "suite.yaml").write_text(SUITE.format(stop=args.stop))
        plain: list[float] = []
        profiled: list[float] = []
        index = 0
        print(f"{'pair':>4}  {'A plain':>10}  {'B profiled':>10}  {'B/A':>6}", flush=True)
        for pair in range(args.pairs):
            sides = ["A", "B"]
            rng.shuffle(sides)
            got = {}
            for side in sides:
                index += 1
                got[side] = run(workdir, args.reports if side == "B" else None, index)
            plain.append(got["A"])
            profiled.append(got["B"])
            print(f"{pair:>4}  {got['A']:>10.3f}  {got['B']:>10.3f}  "
                  f"{got['B'] / got['A']:>6.3f}", flush=True)
    ratios = [b / a for a, b in zip(plain, profiled, strict=True)]
    median = statistics.median(ratios)
    # Noise: how much two plain runs minutes apart differ (consecutive pairs' A sides).
    noise_ratios = [abs(b / a - 1) for a, b in zip(plain, plain[1:], strict=False)]
    noise = statistics.median(noise_ratios) if noise_ratios else float("nan")
    minutes = (time.monotonic() - started) / 60
    print()
    print(f"median B/A          {median:.4f}  (min {min(ratios):.3f}, max {max(ratios):.3f})")
    print(f"run-to-run noise    {noise:.4f}  (median |A_i+1/A_i - 1| over plain runs)")
    within = abs(median - 1) < noise
    print(f"|median B/A - 1| < noise: {'yes' if within else 'no'}   "
          f"({args.pairs} pairs, stop {args.stop}, {minutes:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
