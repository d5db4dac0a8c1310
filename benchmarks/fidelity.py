"""Does the harness perturb a real training step? The rate pytest-dlbench reports for a small
MLP training step (one thread, pinned to core 0), against a bare wall-clock loop of the same
step on the same core, in many short interleaved pairs.

A: ``pytest --bench-suite=<suite>`` (the path users run: a child process forked by the warm
   launcher, ``bench.iterate``, the monitor thread, the stream), one run of ``--steps`` steps;
   its rate is the steady windows' items over their seconds (what the score uses).
B: a bare loop of the same step, the same number of steps after the same warm-up, timed with
   ``perf_counter`` in a long-lived process pinned to the same core (no start-up to pay).

Variants locate a perturbation: ``default``; ``no-monitor`` (the telemetry thread samples once,
``interval: 3600s``); ``no-gc`` (the benchmark freezes and disables the garbage collector before
its loop). Each prints the median of the per-pair ratios A/B and their spread; 1.0 is a perfect
reading. Pairs alternate AB/BA so drift hits both sides.

    python benchmarks/fidelity.py [--pairs 20] [--steps 300] [--variants default,no-monitor]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STEP = """
import gc, os, time
import torch

def make_step(width=256, batch=64):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, width), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step, batch

WARMUP = 30
"""

DEFS = STEP + """
def mlp(bench):
    step, batch = make_step()
    for _ in range(WARMUP):
        step()
    if "--no-gc" in bench.args:
        gc.freeze()
        gc.disable()
    for _ in bench.iterate(range(10**9), batch_size=batch):
        step()
"""

BARE = STEP + """
import sys
os.sched_setaffinity(0, {0})
step, batch = make_step()
for line in sys.stdin:
    steps = int(line)
    for _ in range(WARMUP):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print(steps * batch / (time.perf_counter() - start), flush=True)
"""

SUITE = """
mlp:
  definition: defs.py:mlp
  env: {{OMP_NUM_THREADS: "1"}}
  voir: {{options: {{skip: {skip}, stop: {stop}, interval: {interval}}}}}
  argv: {argv}
"""

VARIANTS = {
    "default": {"interval": "1s", "argv": "{}"},
    "no-monitor": {"interval": "3600s", "argv": "{}"},
    "no-gc": {"interval": "1s", "argv": "{--no-gc: true}"},
}


def _env() -> dict[str, str]:
    rest = os.environ.get("PYTHONPATH")
    path = os.pathsep.join(p for p in (str(ROOT / "src"), rest) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def harness_rate(work: Path, variant: str, steps: int, run: int) -> float:
    """One pytest run of the variant; the rate of its steady windows (items / seconds)."""
    base = work / f"out-{variant}-{run}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         f"--bench-suite={work / (variant + '.yaml')}", f"--bench-base={base}",
         "--bench-cpus-per-slot=1", "--bench-launcher=warm"],
        cwd=work, env=_env(), capture_output=True, text=True,
    )
    if done.returncode != 0:
        sys.exit(f"the {variant} run failed:\n{done.stdout[-3000:]}")
    (run_dir,) = (base / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "mlp.D0.data").read_text().splitlines()]
    steady = [r for r in records if r.get("event") == "rate" and not r.get("warmup")]
    return sum(r["items"] for r in steady) / sum(r["seconds"] for r in steady)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=300, help="timed steps per run")
    parser.add_argument("--variants", default="default,no-monitor,no-gc")
    args = parser.parse_args()
    variants = args.variants.split(",")
    work = Path(tempfile.mkdtemp(prefix="dlbench-fidelity-"))
    # One observation per step: 5 warm-up steps, then the timed ones.
    skip = 5
    for variant in variants:
        knobs = VARIANTS[variant]
        (work / f"{variant}.yaml").write_text(SUITE.format(
            skip=skip, stop=args.steps, interval=knobs["interval"], argv=knobs["argv"]))
    (work / "defs.py").write_text(textwrap.dedent(DEFS))
    bare = subprocess.Popen([sys.executable, "-c", textwrap.dedent(BARE)], env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert bare.stdin is not None and bare.stdout is not None

    def bare_rate() -> float:
        bare.stdin.write(f"{args.steps}\n")
        bare.stdin.flush()
        return float(bare.stdout.readline())

    ratios: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for pair in range(args.pairs):
            for variant in variants:
                if pair % 2 == 0:
                    a = harness_rate(work, variant, args.steps, pair)
                    b = bare_rate()
                else:
                    b = bare_rate()
                    a = harness_rate(work, variant, args.steps, pair)
                ratios[variant].append(a / b)
            print(f"pair {pair + 1}/{args.pairs}: " + ", ".join(
                f"{v} {ratios[v][-1]:.3f}" for v in variants), flush=True)
    finally:
        bare.stdin.close()
        bare.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nharness rate / bare loop rate, {args.pairs} interleaved pairs of {args.steps} "
          "steps (1.0 = no perturbation):")
    for variant, values in ratios.items():
        q = statistics.quantiles(values, n=4) if len(values) >= 4 else [min(values), 0, max(values)]
        print(f"  {variant:11s} median {statistics.median(values):.3f}  "
              f"IQR {q[0]:.3f}-{q[2]:.3f}  range {min(values):.3f}-{max(values):.3f}")


if __name__ == "__main__":
    main()
