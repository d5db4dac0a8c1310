"""``kill -9`` of an xdist worker in the middle of a suite (issue 16.2): its child dies with it,
the replicas on the other worker stop waiting for it at once, every item is reported, pytest and
the summary agree, and the rest of the suite runs (on the worker xdist starts in its place, or,
without one, the lost items are reported with their reason)."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from _polling import wait_until
from _procs import ends, kill_all, processes_of, records, start_pytest

from pytest_dlbench.cli import main as dlbench

pytestmark = pytest.mark.slow

DEFINITIONS = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path


    def stalls_on_slot_1(bench):
        # Replica D1 stalls before its first timed step (where replicas wait for each other);
        # its worker is killed then. Replica D0 waits for it at the start barrier.
        if os.environ.get("DLBENCH_SLOT") == "1":
            Path(os.environ["READY"]).write_text("ready")
            time.sleep(300)
        for _ in bench.iterate(range(1000), batch_size=4):
            time.sleep(0.001)


    def quick(bench):
        for _ in bench.iterate(range(1000), batch_size=4):
            time.sleep(0.001)
    """
)

SUITE = textwrap.dedent(
    """
    _b: {voir: {options: {skip: 1, stop: 5}}, max_duration: 120, weight: 1}
    a: {inherits: _b, definition: defs.py:stalls_on_slot_1}
    b: {inherits: _b, definition: defs.py:quick}
    c: {inherits: _b, definition: defs.py:quick}
    """
)


def _worker_of(stream_name: str, marker: Path) -> psutil.Process:
    """The xdist worker running the child that writes ``stream_name``: the child's parent."""
    for proc in processes_of(marker):
        if any(arg.endswith(stream_name) for arg in proc.cmdline()):
            return proc.parent()
    raise AssertionError(f"no child writes {stream_name}")


@pytest.mark.parametrize("restarts", ["default", "0"])
def test_a_killed_worker_derails_nothing(tmp_path: Path, restarts: str) -> None:
    (tmp_path / "defs.py").write_text(DEFINITIONS)
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    ready = tmp_path / "ready"
    args = ["--bench-suite=s.yaml", "--bench-base=out", "-n", "2", "-rfE",
            "--bench-cpus-per-slot=1"]
    if restarts != "default":
        args.append(f"--max-worker-restart={restarts}")
    os.environ["READY"] = str(ready)  # inherited by the workers and their children
    try:
        proc = start_pytest(tmp_path, *args)
    finally:
        del os.environ["READY"]
    try:
        assert wait_until(ready.exists, 120), "replica a[D1] never started"
        worker = _worker_of("a.D1.data", tmp_path)
        killed_at = time.monotonic()
        worker.kill()
        output, _ = proc.communicate(timeout=300)
        elapsed = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        left = processes_of(tmp_path)
        kill_all(left)
    assert not left, [p.cmdline() for p in left]
    # The other replica of a did not wait for the dead one until max_duration (120 s).
    assert elapsed < 100, output
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    barrier = next(r for r in records(run_dir / "a.D0.data") if r["event"] == "barrier")
    assert barrier["released"] == "some left" and barrier["waited"] < 60, barrier

    lines = output.splitlines()
    assert any("worker 'gw1' crashed while running 's.yaml::a[D1]'" in line for line in lines)
    if restarts == "default":  # gw1's slot goes on, on the worker started in its place
        assert "5 passed" in lines[-1] and "1 failed" in lines[-1], output
        expected = {"a.D0": "ok", "a.D1": "fail", "b.D0": "ok", "b.D1": "ok", "c.D0": "ok",
                    "c.D1": "ok"}
    else:
        # No replacement: xdist stops the run. gw1's items are reported lost at once, gw0 runs
        # what it holds already, and what was never sent is reported at the end.
        assert "2 passed" in lines[-1] and "4 failed" in lines[-1], output
        for name in ("b[D1]", "c[D1]"):
            assert any(line.startswith(f"FAILED s.yaml::{name} - not run: xdist worker gw1 "
                                       "died and was not replaced") for line in lines), output
        assert any(line.startswith("FAILED s.yaml::c[D0] - not run: the run stopped after "
                                   "xdist workers died (gw1)") for line in lines), output
        expected = {"a.D0": "ok", "a.D1": "fail", "b.D0": "ok", "b.D1": "fail",
                    "c.D0": "fail", "c.D1": "fail"}
    # Every item has a stream that ends with exactly one end, and the summary agrees.
    for name, status in expected.items():
        stream = run_dir / f"{name}.data"
        (end,) = ends(stream)
        assert records(stream)[-1] == end
        assert end["status"] == status, (name, end)
    crashed = ends(run_dir / "a.D1.data")[0]
    assert crashed["writer"] in ("guard", "controller"), crashed
    assert proc.returncode == 1
    assert dlbench(["report", str(run_dir), "--save", str(tmp_path / "summary.json")]) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    failed = {f"{b}[D{r['device']}]" for b, bench in summary["benchmarks"].items()
              for r in bench["runs"] if r["status"] != "ok"}
    pytest_failed = {line.split("::")[1].split(" ")[0] for line in lines
                     if line.startswith("FAILED ")}
    assert failed == pytest_failed, (failed, pytest_failed)
