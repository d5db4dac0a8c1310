"""A crashing, hanging, out-of-memory or NaN benchmark fails alone; the suite goes on."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

DEFINITIONS = textwrap.dedent(
    """
    import ctypes
    import os
    import time


    def good(bench):
        import torch

        for _ in bench.iterate(range(1000), batch_size=4):
            bench.log_loss(torch.tensor(1.0))


    def segfault(bench):
        for step in bench.iterate(range(1000), batch_size=4):
            if step == 14:  # after the first window of 10 steps was read and written
                ctypes.string_at(0)  # reads address 0: SIGSEGV


    def exits(bench):
        for step in bench.iterate(range(1000), batch_size=4):
            if step == 3:
                os._exit(3)


    def hang(bench):
        for _ in bench.iterate(range(1000), batch_size=4):
            time.sleep(60)


    def oom(bench):
        import torch

        for _ in bench.iterate(range(1000), batch_size=4):
            torch.empty(2**62, dtype=torch.uint8)  # far more than any host has


    def skipper(bench):
        import pytest

        pytest.skip("needs a GPU")


    def badargs(bench):
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int)
        parser.parse_args(bench.args)


    def nan(bench):
        import torch

        for step in bench.iterate(range(1000), batch_size=4):
            bench.log_loss(torch.tensor(float("nan") if step == 5 else 1.0))
    """
)

SUITE = textwrap.dedent(
    """
    _base:
      voir: {options: {skip: 2, stop: 6}}
      max_duration: 60
    good: {inherits: _base, definition: defs.py:good}
    segfault: {inherits: _base, definition: defs.py:segfault, voir: {options: {stop: 30}}}
    exits: {inherits: _base, definition: defs.py:exits}
    hang: {inherits: _base, definition: defs.py:hang, max_duration: 4}
    oom: {inherits: _base, definition: defs.py:oom}
    nan: {inherits: _base, definition: defs.py:nan}
    skipper: {inherits: _base, definition: defs.py:skipper}
    badargs: {inherits: _base, definition: defs.py:badargs, argv: {--batch-sise: 3}}
    broken: {inherits: _base, definition: "nosuchmodule:main"}
    """
)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_failures_are_recorded_and_the_suite_goes_on(pytester: pytest.Pytester):
    pytester.makepyfile(defs=DEFINITIONS)
    pytester.makefile(".yaml", failing=SUITE)
    result = pytester.runpytest("--bench-suite=failing.yaml", "--bench-base=out", "-rfs")
    result.assert_outcomes(passed=1, failed=7, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(
        [
            "FAILED failing.yaml::segfault[D0] - crash: killed by SIGSEGV",
            "FAILED failing.yaml::exits[D0] - crash: exited with status 3 before finishing",
            "FAILED failing.yaml::hang[D0] - timeout: ran past max_duration (4 s)",
            "FAILED failing.yaml::oom[[]D0] - out of memory: *",
            "FAILED failing.yaml::nan[D0] - NonFiniteLoss: loss is nan at step 5",
            "FAILED failing.yaml::badargs[[]D0] - the benchmark exited with status 2: *",
            "SKIPPED [[]1] failing.yaml:1: needs a GPU",
            "FAILED failing.yaml::broken[[]D0] - broken: cannot import 'nosuchmodule' *",
        ]
    )
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    expected = {
        "good": "ok",
        "segfault": "crash",
        "exits": "crash",
        "hang": "timeout",
        "oom": "oom",
        "nan": "nan",
        "skipper": "skipped",
        "badargs": "fail",
        "broken": "fail",
    }
    for name, status in expected.items():
        records = read(run_dir / f"{name}.D0.data")
        assert records[0]["event"] == "config"
        assert records[-1]["event"] == "end", name
        assert records[-1]["status"] == status, (name, records[-1])
        assert records[-1]["reason"] or status == "ok"
    assert "unrecognized arguments: --batch-sise 3" in (run_dir / "badargs.D0.log").read_text()
    # Observations taken before the crash are kept.
    segfault_rates = [r for r in read(run_dir / "segfault.D0.data") if r["event"] == "rate"]
    good_rates = [r for r in read(run_dir / "good.D0.data") if r["event"] == "rate"]
    assert len(good_rates) == 8
    assert len(segfault_rates) == 10  # the first window, written before the crash
    nan_losses = [r for r in read(run_dir / "nan.D0.data") if r["event"] == "loss"]
    assert nan_losses[:5] == [{"event": "loss", "value": 1.0, "step": i} for i in range(5)]
