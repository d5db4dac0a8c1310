"""The ``bench`` fixture's process tree is the test's process and its children (issue 51, item
11): a ``DLBENCH_STREAM`` the shell passed on (a neighbour's marker, an outer run's) must not
make that shell the run's root, its other processes the test's (their memory the test's peak
RSS, their CPU the run's own, so that the run is never busy). A paired round's child keeps the
marker its parent gave it: that run is its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.layout import stream_paths

TEST = textwrap.dedent(
    """
    import time

    def test_fast(bench):
        for _ in bench.iterate(range(12), batch_size=4):
            time.sleep(0.05)
    """
)
#: A neighbour of the shell: 300 MiB resident, until it is stopped.
NEIGHBOUR = ("import sys, time; block = bytearray(300 * 2**20); block[::4096] = b'x' * "
             "len(block[::4096]); open(sys.argv[1], 'w').close(); time.sleep(600)")


@pytest.mark.slow
def test_a_marker_from_the_shell_does_not_adopt_its_neighbours(tmp_path: Path) -> None:
    (tmp_path / "test_own.py").write_text(TEST)
    ready = tmp_path / "neighbour-ready"
    # The shell carries a marker (as one started from a benchmark's command would) and runs a
    # neighbour beside pytest: before, the fixture's monitor rooted its tree at the shell.
    script = (f'"$PY" -c "$NEIGHBOUR" {ready} & '
              f'while [ ! -e {ready} ]; do sleep 0.05; done; '
              '"$PY" -m pytest -q -p no:cacheprovider --bench-base=out test_own.py; '
              'status=$?; kill $!; exit $status')
    env = {**os.environ, Env.STREAM: str(tmp_path / "outer.D0.data"), "PY": sys.executable,
           "NEIGHBOUR": NEIGHBOUR}
    started = time.monotonic()
    done = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    (stream,) = stream_paths(run_dir)
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    samples = [r for r in records if r["event"] == "telemetry" and r.get("procs")]
    assert samples, f"no telemetry in {time.monotonic() - started:.0f}s"
    assert {s["procs"] for s in samples} == {1}  # pytest alone: no shell, no neighbour
    assert max(s["rss_bytes"] for s in samples) < 300 * 2**20


def test_a_fixture_run_roots_its_tree_at_its_own_process(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: the fixture's monitor is given no marker to walk up to, whatever
    ``DLBENCH_STREAM`` this process inherited (process.OWN_TREE)."""
    from pytest_dlbench.measure.monitor import process, sampler

    markers: list[str | None] = []

    class Recording(process.ProcessTree):
        def __init__(self, psutil: Any, pid: int, marker: str | None = None,
                     session: Any = None) -> None:
            markers.append(marker)
            super().__init__(psutil, pid, marker, session)

    monkeypatch.setattr(sampler, "ProcessTree", Recording)
    monkeypatch.setenv(Env.STREAM, str(pytester.path / "outer.D0.data"))
    pytester.makepyfile(test_own=TEST.replace("0.05", "0.001"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out", "-q")
    assert result.ret == 0, result.stdout.str()
    assert markers == [process.OWN_TREE]
