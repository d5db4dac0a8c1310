"""Ctrl-C keeps finished streams readable; the fixtures work in ordinary test functions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_ctrl_c_stops_the_suite_and_keeps_streams(tmp_path: Path):
    (tmp_path / "defs.py").write_text(
        textwrap.dedent(
            """
            import time

            def good(bench):
                for _ in bench.iterate(range(100), batch_size=2):
                    pass

            def slow(bench):
                for _ in bench.iterate(range(10_000), batch_size=2):
                    time.sleep(0.05)
            """
        )
    )
    (tmp_path / "s.yaml").write_text(
        "good: {definition: defs.py:good, voir: {options: {skip: 1, stop: 3}}}\n"
        "slow: {definition: defs.py:slow, voir: {options: {skip: 1, stop: 5000}}}\n"
        "never: {definition: defs.py:good}\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "--bench-base=out", "-p",
         "no:cacheprovider"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 120
    slow_stream = None
    while time.monotonic() < deadline:
        streams = list((tmp_path / "out" / "runs").glob("*/slow.D0.data"))
        if streams and '"rate"' in streams[0].read_text():
            slow_stream = streams[0]
            break
        time.sleep(0.2)
    assert slow_stream is not None, "the slow benchmark never started"
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    run_dir = slow_stream.parent
    good = read(run_dir / "good.D0.data")
    assert good[-1]["event"] == "end" and good[-1]["status"] == "ok"
    slow = read(slow_stream)
    assert slow[-1] == {**slow[-1], "event": "end", "status": "fail", "reason": "interrupted"}
    assert not (run_dir / "never.D0.data").exists()


@pytest.mark.slow
def test_fixtures_in_an_ordinary_test_function(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_model=textwrap.dedent(
            """
            import torch
            from torch.utils.data import DataLoader

            def test_my_model(bench, synthetic_images):
                data = synthetic_images(n=32, image_size=16, num_classes=4)
                model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 4))
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in bench.iterate(DataLoader(data, batch_size=8)):
                    with bench.timer.region("forward"):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                    bench.log_loss(loss)
                assert bench.observations == 4
            """
        )
    )
    # In a subprocess: a test function that trains imports parts of torch that cannot be
    # imported twice, and pytester's in-process runs would re-import them.
    result = pytester.runpytest_subprocess("--bench-base=out")
    result.assert_outcomes(passed=1)
    (stream,) = (pytester.path / "out" / "runs").glob("tests.*/test_my_model.D0.data")
    records = read(stream)
    assert [r["event"] for r in records[:2]] == ["config", "meta"]
    assert len([r for r in records if r["event"] == "rate"]) == 4
    assert any(r["event"] == "region" and r["key"] == "forward" for r in records)
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"


@pytest.mark.slow
def test_plain_test_run_does_not_import_torch(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_plain=textwrap.dedent(
            """
            import sys

            def test_no_torch(pytestconfig):
                assert pytestconfig.pluginmanager.hasplugin("dlbench")
                assert "torch" not in sys.modules
                assert "pytest_dlbench.suite" not in sys.modules
            """
        )
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
