"""What it costs to start a benchmark, through the path users run (pytest, child processes, the
real clock), with the warm launcher (a fork server) and with a fresh interpreter per child.

1. Launch overhead per benchmark: a suite of small benchmarks runs under
   ``--bench-launcher=warm`` and ``=fresh``, interleaved; for each run, the time from the
   parent's launch (``config.launched``, written by the parent's clock into the child's
   environment) to the benchmark function receiving its ``Bench`` (the ``meta`` record): the
   start-up, without the benchmark's own set-up. Beside it, ``python -c "import torch"`` timed
   in the same script, the floor a fresh interpreter pays.
2. The smoke suite's wall time, ``pytest --bench-suite=smoke`` from start to exit: warm, fresh,
   and (``--before REV``) the code at REV, run from a temporary git worktree, interleaved.

Targets (issue 13): launch overhead under 0.5 s per benchmark; smoke wall time at most 60 % of
the code before the warm launcher.

    python benchmarks/startup.py [--rounds 3] [--smoke-pairs 2] [--before REV]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
_small:
  definition: pytest_dlbench.workloads.toy:main
  voir: {options: {skip: 1, stop: 4}}
{names}
"""


def _env(src: Path) -> dict[str, str]:
    rest = os.environ.get("PYTHONPATH")
    path = os.pathsep.join(p for p in (str(src), rest) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


def _pytest(cwd: Path, src: Path, *args: str) -> float:
    """Run pytest to its exit; its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, env=_env(src), capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"pytest {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return took


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def launch_overheads(run_dir: Path) -> list[float]:
    """Seconds from each run's launch to its ``meta`` record, in launch order (with the warm
    launcher the first waits for the server's imports, which began with the session)."""
    found = []
    for stream in sorted(run_dir.glob("*.data")):
        records = _records(stream)
        config = next(r for r in records if r.get("event") == "config")
        meta = next(r for r in records if r.get("event") == "meta")
        found.append((float(config["launched"]), float(meta["time"]) - float(config["launched"])))
    return [overhead for _, overhead in sorted(found)]


def import_torch_seconds(times: int = 3) -> float:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def measure_launch(work: Path, benchmarks: int, rounds: int) -> dict[str, list[float]]:
    names = "\n".join(f"b{i}: {{inherits: _small}}" for i in range(benchmarks))
    (work / "s.yaml").write_text(SUITE.replace("{names}", names))
    seen: dict[str, list[float]] = {"warm": [], "fresh": []}
    for round_ in range(rounds):
        order = ("warm", "fresh") if round_ % 2 == 0 else ("fresh", "warm")
        for launcher in order:
            base = work / f"out-{launcher}-{round_}"
            _pytest(work, ROOT / "src", "--bench-suite=s.yaml", f"--bench-base={base}",
                    f"--bench-launcher={launcher}")
            (run_dir,) = (base / "runs").iterdir()
            seen[launcher] += launch_overheads(run_dir)
    return seen


def measure_smoke(work: Path, pairs: int, before: str | None) -> dict[str, list[float]]:
    sides: dict[str, tuple[Path, Path, tuple[str, ...]]] = {
        "warm": (ROOT, ROOT / "src", ("--bench-launcher=warm",)),
        "fresh": (ROOT, ROOT / "src", ("--bench-launcher=fresh",)),
    }
    tree = None
    if before:
        tree = work / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), before],
                       check=True, capture_output=True)
        sides[f"before ({before})"] = (tree, tree / "src", ())
    walls: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for pair in range(pairs):
            names = list(sides) if pair % 2 == 0 else list(reversed(sides))
            for name in names:
                cwd, src, extra = sides[name]
                base = work / f"smoke-{pair}-{name.split()[0]}"
                walls[name].append(_pytest(cwd, src, "--bench-suite=smoke",
                                           f"--bench-base={base}", *extra))
                print(f"  smoke {name}: {walls[name][-1]:.1f} s", flush=True)
    finally:
        if tree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", type=int, default=6, help="small benchmarks per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of the suite per launcher")
    parser.add_argument("--smoke-pairs", type=int, default=2,
                        help="runs of the smoke suite per side (0: skip that part)")
    parser.add_argument("--before", default=None,
                        help="a git revision before the warm launcher, run from a worktree")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dlbench-startup-"))
    try:
        floor = import_torch_seconds()
        launch = measure_launch(work, args.benchmarks, args.rounds)
        print(f"python -c 'import torch': {floor:.2f} s (median of 3)")
        for name, values in launch.items():
            print(f"launch overhead, {name:5s}: median {statistics.median(values):.3f} s, "
                  f"mean {statistics.mean(values):.3f}, min {min(values):.3f}, "
                  f"max {max(values):.3f} over {len(values)} runs")
        ratio = statistics.median(launch["warm"]) / statistics.median(launch["fresh"])
        print(f"launch overhead warm / fresh: {ratio:.3f}   (target: warm < 0.5 s)")
        if args.smoke_pairs:
            walls = measure_smoke(work, args.smoke_pairs, args.before)
            medians = {name: statistics.median(v) for name, v in walls.items()}
            for name, value in medians.items():
                print(f"smoke wall time, {name}: median {value:.1f} s over {len(walls[name])}")
            print(f"smoke warm / fresh: {medians['warm'] / medians['fresh']:.3f}")
            for name, value in medians.items():
                if name.startswith("before"):
                    print(f"smoke warm / {name}: {medians['warm'] / value:.3f}   "
                          "(target: at most 0.60)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
