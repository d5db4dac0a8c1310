"""Faults with real processes and real signals (issue 16): a killed parent, a child past its
deadline, processes a benchmark leaves behind, a second ``end``, a full disk.

After each, no process of the run is left (found in the process table by the run's folder, in
their command line or their environment) and every stream ends with exactly one ``end``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _polling import wait_until
from _procs import child_env, ends, kill_all, processes_of, records, start_pytest

from pytest_dlbench import layout
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.run.child import run_child
from pytest_dlbench.suite import resolve_suite

pytestmark = pytest.mark.slow

DEFINITIONS = textwrap.dedent(
    """
    import ctypes
    import subprocess
    import sys
    import time

    MARKER = {marker!r}


    def stray():
        # A process in the benchmark's group that would outlive it (a server, a worker).
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", MARKER])


    def hang(bench):
        stray()
        for _ in bench.iterate(range(1000), batch_size=4):
            time.sleep(60)


    def leaves_a_stray(bench):
        stray()
        for _ in bench.iterate(range(1000), batch_size=4):
            pass


    def segfault_with_a_stray(bench):
        stray()
        for step in bench.iterate(range(1000), batch_size=4):
            if step == 1:
                ctypes.string_at(0)


    def oom_mid_window(bench):
        for step in bench.iterate(range(1000), batch_size=4):
            bench.log_loss(1.0)
            if step == 13:  # the window of steps 10-13 is not read yet
                raise MemoryError()


    def chatty(bench):
        for _ in bench.iterate(range(100_000), batch_size=4):
            bench.log_loss(1.0)
    """
)


@pytest.fixture
def run_dir_of(tmp_path: Path):
    """Cleans up, then checks that nothing of the test's runs is left in the process table."""
    yield lambda: next((tmp_path / "out" / "runs").iterdir())
    left = processes_of(tmp_path)
    kill_all(left)
    assert not left, [p.cmdline() for p in left]


def _write(tmp_path: Path, suite: str) -> None:
    (tmp_path / "defs.py").write_text(DEFINITIONS.format(marker=str(tmp_path)))
    (tmp_path / "s.yaml").write_text(textwrap.dedent(suite))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")


def test_a_killed_parent_takes_its_child_with_it(tmp_path: Path, run_dir_of) -> None:
    _write(tmp_path, "hang: {definition: defs.py:hang, max_duration: 600}\n")
    proc = start_pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out")
    try:
        # The child and the process it started.
        assert wait_until(lambda: len(processes_of(tmp_path)) >= 2, 60), "never started"
        stream = run_dir_of() / "hang.D0.data"
        proc.kill()  # SIGKILL: pytest cannot clean up anything
        proc.communicate(timeout=30)
        # The child dies with its parent (PR_SET_PDEATHSIG), the guard kills its group.
        assert wait_until(lambda: not processes_of(tmp_path), 10), processes_of(tmp_path)
        (end,) = ends(stream)
        assert records(stream)[-1] == end
        assert end["status"] == "fail" and end["writer"] == "guard", end
        assert end["reason"] == f"stopped: its parent process (pid {proc.pid}) died"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_all(processes_of(tmp_path))


def test_a_child_ends_itself_at_its_deadline(tmp_path: Path, run_dir_of) -> None:
    """With nobody left to stop it (no parent), a child stops at its own deadline: one ``end``
    (timeout) in its stream, and its process group killed."""
    _write(tmp_path, "hang: {definition: defs.py:hang, max_duration: 600}\n")
    suite = resolve_suite(tmp_path / "s.yaml")
    run_dir = layout.make_run_dir(tmp_path / "out", "s")
    spec_file = layout.write_spec(run_dir, suite["hang"])
    stream = layout.stream_path(run_dir, "hang", 0)
    cmd = [
        sys.executable, "-m", "pytest", "s.yaml::hang[D0]", "-p", "no:cacheprovider", "-q",
        "-s", "--rootdir", str(tmp_path), "--bench-suite", "s.yaml",
        "--bench-isolation", "inline", "--bench-child-stream", str(stream),
        "--bench-child-spec", str(spec_file), "--bench-child-run-dir", str(run_dir),
        "--bench-base", "out",
    ]
    started = time.time()
    env = child_env(DLBENCH_DEADLINE=str(started + 8))  # after its start-up (1-3 s here)
    child = subprocess.Popen(cmd, cwd=tmp_path, env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail("the child ran past its deadline")
    assert 7 < time.time() - started < 35, output
    assert child.returncode in (124, -signal.SIGKILL), output
    (end,) = ends(stream)
    assert records(stream)[-1] == end
    assert end["status"] == "timeout" and end["writer"] == "deadline", end
    assert "no parent process to stop it" in end["reason"]
    assert wait_until(lambda: not processes_of(tmp_path), 5)


def test_what_a_benchmark_leaves_in_its_group_is_killed(tmp_path: Path, run_dir_of) -> None:
    _write(
        tmp_path,
        """
        _b: {voir: {options: {skip: 1, stop: 2}}}
        ok: {inherits: _b, definition: defs.py:leaves_a_stray}
        segv: {inherits: _b, definition: defs.py:segfault_with_a_stray}
        """,
    )
    proc = start_pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out", "-rf")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, output
    assert "FAILED s.yaml::segv[D0] - crash: killed by SIGSEGV" in output
    assert wait_until(lambda: not processes_of(tmp_path), 5), processes_of(tmp_path)
    for name in ("ok", "segv"):
        stream = run_dir_of() / f"{name}.D0.data"
        assert len(ends(stream)) == 1 and records(stream)[-1]["event"] == "end"


def test_the_parent_adds_no_end_after_the_childs(tmp_path: Path) -> None:
    """A child that wrote its end, then hung on its way out past the timeout: one end."""
    stream = tmp_path / "x.D0.data"
    code = (
        "import json, time; "
        f"open({str(stream)!r}, 'a').write(json.dumps({{'event': 'end', 'status': 'ok', "
        "'reason': ''}) + '\\n'); time.sleep(60)"
    )
    outcome = run_child([sys.executable, "-c", code, str(tmp_path)], stream=stream,
                        log=tmp_path / "x.log", timeout=2)
    assert outcome.ok
    assert [r["event"] for r in read_stream(stream)] == ["end"]
    assert not processes_of(tmp_path)


def test_nothing_follows_end_after_an_out_of_memory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=DEFINITIONS.format(marker=str(pytester.path)))
    pytester.makefile(".yaml", s="oom: {definition: defs.py:oom_mid_window, "
                                 "voir: {options: {skip: 2, stop: 30}}}")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out")
    result.assert_outcomes(failed=1)
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    stream = run_dir / "oom.D0.data"
    events = [r["event"] for r in records(stream)]
    assert events[-1] == "end" and events.count("end") == 1, events
    assert records(stream)[-1]["status"] == "oom"
    # The window read after the failure is kept, before the end.
    assert events.count("rate") == 13 and events.count("loss") == 14, events


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True)
    return done.returncode == 0


def test_a_full_disk_costs_one_line_and_keeps_the_stream_readable(tmp_path: Path,
                                                                  run_dir_of) -> None:
    full = tmp_path / "out"
    if not _mount_tmpfs(full, "64k"):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        _write(
            tmp_path,
            """
            _b: {voir: {options: {skip: 1, stop: 100000}}}
            first: {inherits: _b, definition: defs.py:chatty}
            second: {inherits: _b, definition: defs.py:chatty}
            """,
        )
        proc = start_pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out", "-rf")
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 1, output
        failed = [line for line in output.splitlines() if line.startswith("FAILED")]
        assert len(failed) == 2, output
        for line in failed:
            assert "No space left on device" in line, line
            assert "cannot write " in line, line
        assert len(output.splitlines()) < 150, output
        assert "Traceback" not in output, output
        run_dir = run_dir_of()
        for name in ("first", "second"):
            stream = layout.stream_path(run_dir, name, 0)
            if stream.exists():
                read_stream(stream)  # readable: no torn line in the middle
                # The end record usually fits in the last block's slack; it cannot be promised.
                assert len(ends(stream)) <= 1
    finally:
        kill_all(processes_of(tmp_path))
        subprocess.run(["umount", "-l", str(full)], check=False)
