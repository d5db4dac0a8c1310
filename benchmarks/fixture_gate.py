"""The ``bench`` fixture's saved-baseline gate beside a memory-streaming neighbour (issue 38).

An unchanged test of your own (the ``bench`` fixture, no suite: a small MLP's training step, one
thread) is run through the real path, pytest subprocesses judged by their exit status: per
trial, ``pytest --bench-save`` on a quiet machine, then ``pytest --bench-compare`` of the same
code beside benchmarks/neighbour.py's memory-streaming processes, as a CI job on a busier runner.
The code is identical, so exit 6 (regressed) is a false alarm; 9 (inconclusive) is the gate
saying it cannot tell, 0 that nothing changed.

    PYTHONPATH=src python benchmarks/fixture_gate.py --trials 5 --duty 50
    PYTHONPATH=/other/checkout/src python benchmarks/fixture_gate.py   # another version

Each compare prints its table row, its doubts and confirmations; ``--out`` keeps them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from neighbour import Neighbour, default_procs, neighbour_command  # noqa: E402

#: The user's test: a training step that reads more memory than the cache holds (the weights
#: are 25 MB), so that a memory-streaming neighbour slows it, as in the issue's report.
TEST_FILE = textwrap.dedent(
    """
    import torch


    def test_mlp(bench):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = torch.nn.Sequential(torch.nn.Linear(3 * 64 * 64, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(64, 3 * 64 * 64), torch.randint(0, 10, (64,))
        for _ in bench.iterate(range(64 * 65), batch_size=64):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            bench.log_loss(loss)
    """
)
#: The lines of a compare's output worth keeping: its table row, doubts and confirmations.
KEPT = ("test_mlp ", "inconclusive:", "dlbench: confirming", "  test_mlp:", "score:")


@dataclass
class Trial:
    index: int
    save_status: int
    compare_status: int
    seconds: float
    lines: list[str] = field(default_factory=list)


def pytest_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest test_mlp.py`` in ``folder``, one thread, its results under ``out``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "160"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "test_mlp.py", "-p", "no:cacheprovider",
         "-p", "no:xdist", "--bench-base=out", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=1800, check=False)


def kept_lines(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines() if line.startswith(KEPT)]


def run_trial(folder: Path, index: int, neighbour: Neighbour, confirm: int) -> Trial:
    """A quiet save, then the compare of the same code beside the neighbour."""
    start = time.monotonic()
    baseline = f"base{index}.json"
    saved = pytest_run(folder, f"--bench-save={baseline}")
    if saved.returncode != 0:
        print(saved.stdout[-3000:], saved.stderr[-3000:], file=sys.stderr)
    with neighbour:
        compared = pytest_run(folder, f"--bench-compare={baseline}",
                              f"--bench-confirm={confirm}")
    return Trial(index, saved.returncode, compared.returncode, time.monotonic() - start,
                 kept_lines(compared.stdout))


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--duty", type=float, default=50.0,
                        help="the neighbour's duty cycle in %% (0: none)")
    parser.add_argument("--procs", type=int, default=default_procs(),
                        help="neighbour processes (default: cores - 1)")
    parser.add_argument("--confirm", type=int, default=2, help="--bench-confirm of the compare")
    parser.add_argument("--out", type=Path, default=None, help="the trials as JSON")
    args = parser.parse_args(argv)
    import pytest_dlbench

    print(f"pytest_dlbench from {Path(pytest_dlbench.__file__).parent}; neighbour "
          f"{args.procs} x {args.duty:g} %; --bench-confirm={args.confirm}; "
          f"load before {load_average()}", flush=True)
    trials = []
    with tempfile.TemporaryDirectory(prefix="fixture_gate.") as tmp:
        folder = Path(tmp)
        (folder / "test_mlp.py").write_text(TEST_FILE)
        for index in range(args.trials):
            neighbour = Neighbour(args.duty, args.procs,
                                  neighbour_command(args.duty, seed=index))
            trial = run_trial(folder, index, neighbour, args.confirm)
            trials.append(trial)
            print(f"trial {index}: save exit {trial.save_status}, compare exit "
                  f"{trial.compare_status} ({trial.seconds:.0f} s)", flush=True)
            for line in trial.lines:
                print(f"    {line}", flush=True)
    statuses = [t.compare_status for t in trials]
    print(f"compare exit statuses: {statuses}; regressed (6): {statuses.count(6)} of "
          f"{len(statuses)}; load after {load_average()}")
    if args.out is not None:
        args.out.write_text(json.dumps([asdict(t) for t in trials], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
