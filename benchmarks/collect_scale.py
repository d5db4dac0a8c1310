"""Collection speed of a generated 2,000-benchmark matrix suite.

Measures, side by side and interleaved (the machine is shared and noisy):
  A. `pytest --bench-suite=<2000-benchmark matrix suite> --collect-only -q` (whole process)
  B. `pytest --collect-only -q` on 2,000 plain parametrized tests (pytest's own floor)
  C. `resolve_suite` alone, in this process
and prints benchmarks per second and the ratio A/B. Target: A under 2 s.

    python benchmarks/collect_scale.py [--benchmarks 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = """
_defaults:
  definition: pytest_dlbench.workloads.toy:main
  max_duration: 60
  voir: {{options: {{skip: 2, stop: 10}}}}

_vision:
  inherits: _defaults
  tags: [vision, convnet]
  argv:
    --precision: fp32
    --num-workers: "{{n_worker}}"

grid:
  matrix:
    batch-size: [{sizes}]
    width: [{widths}]
  job:
    name: 'net-bs{{batch-size}}-w{{width}}'
    inherits: _vision
    weight: 1
    argv:
      --batch-size: '{{batch-size}}'
      --width: '{{width}}'
"""

PLAIN = """
import pytest

@pytest.mark.parametrize("width", range({widths}))
@pytest.mark.parametrize("size", range({sizes}))
def test_net(size, width):
    pass
"""


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    widths = 40
    sizes = args.benchmarks // widths
    count = sizes * widths
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "grid.yaml").write_text(
            SUITE.format(sizes=", ".join(str(8 * (i + 1)) for i in range(sizes)),
                         widths=", ".join(str(i + 1) for i in range(widths)))
        )
        (root / "test_plain.py").write_text(PLAIN.format(sizes=sizes, widths=widths))
        (root / "pytest.ini").write_text("[pytest]\n")
        suite_cmd = [sys.executable, "-m", "pytest", "--bench-suite=grid.yaml",
                     "--collect-only", "-q", "-p", "no:cacheprovider"]
        plain_cmd = [sys.executable, "-m", "pytest", "test_plain.py", "--collect-only", "-q",
                     "-p", "no:cacheprovider"]
        _, out = timed(suite_cmd, root)  # warm the file cache once, and check the count
        collected = sum(1 for line in out.splitlines() if "::" in line)
        assert collected == count, (collected, count)

        from pytest_dlbench.suite import resolve_suite

        suite_times, plain_times, resolve_times = [], [], []
        for _ in range(args.rounds):
            suite_times.append(timed(suite_cmd, root)[0])
            plain_times.append(timed(plain_cmd, root)[0])
            start = time.perf_counter()
            resolved = resolve_suite(root / "grid.yaml")
            resolve_times.append(time.perf_counter() - start)
            assert len(resolved.specs) == count

    suite_s = statistics.median(suite_times)
    plain_s = statistics.median(plain_times)
    resolve_s = statistics.median(resolve_times)
    print(f"benchmarks collected          {count}")
    print(f"A dlbench --collect-only      {suite_s:6.2f} s   {count / suite_s:8.0f} benchmarks/s")
    print(f"B plain parametrized tests    {plain_s:6.2f} s   {count / plain_s:8.0f} tests/s")
    print(f"C resolve_suite alone         {resolve_s:6.2f} s   "
          f"{count / resolve_s:8.0f} benchmarks/s")
    print(f"ratio A/B                     {suite_s / plain_s:6.2f}")
    print(f"target A < 2 s                {'met' if suite_s < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
