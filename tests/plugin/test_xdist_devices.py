"""-n 2 on CPU: two one-core slots, replicas at the same time, all replicas in the score."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

DEFS = textwrap.dedent(
    """
    import time

    def spin(bench):
        for _ in bench.iterate(range(10_000), batch_size=4):
            end = time.perf_counter() + 0.02
            while time.perf_counter() < end:  # CPU work, so a shared core would show
                pass
    """
)
SUITE = textwrap.dedent(
    """
    _base: {voir: {options: {skip: 2, stop: 10}}, definition: defs.py:spin}
    first: {inherits: _base, weight: 1}
    second: {inherits: _base, weight: 1}
    """
)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_two_workers_two_slots_replicas_overlap(pytester: pytest.Pytester):
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest_subprocess(
        "--bench-suite=s.yaml", "-n", "2", "--bench-base=out", "-v", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines_random(
        ["*s.yaml::first[[]D0]*", "*s.yaml::first[[]D1]*", "*s.yaml::second[[]D1]*"]
    )
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    for name in ("first", "second"):
        streams = [read(run_dir / f"{name}.D{k}.data") for k in (0, 1)]
        metas = [next(r for r in s if r["event"] == "meta") for s in streams]
        assert [m["cpus"] for m in metas] == [[0], [1]]  # pinned, different cores
        assert [m["slot"] for m in metas] == ["0", "1"]
        barriers = [next(r for r in s if r["event"] == "barrier") for s in streams]
        assert [b["released"] for b in barriers] == ["all", "all"]
        windows = []
        for stream in streams:
            times = [r["time"] for r in stream if r["event"] == "rate" and not r["warmup"]]
            windows.append((min(times), max(times)))
        (start0, end0), (start1, end1) = windows
        assert max(start0, start1) < min(end0, end1), windows  # the steady windows overlap
    # The summary counts both replicas: n = 2, fail = 0 (-v shows those columns; read by the
    # header's names, not by a pattern the rates' digits can match or miss).
    lines = result.stdout.lines
    header = next(line.split() for line in lines if line.split()[:2] == ["bench", "perf"])
    for name in ("first", "second"):
        row = dict(zip(header, next(line.split() for line in lines
                                    if line.split()[:1] == [name]), strict=False))
        assert (row["n"], row["fail"]) == ("2", "0"), row


def test_more_workers_than_cores_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest("--bench-suite=s.yaml", "-n", "64", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: -n 64: needs 64 cores, * available*"])
