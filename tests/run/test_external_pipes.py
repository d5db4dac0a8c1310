"""An external command's pipes (issue 40 items 4 and 10; run/external.py): a line without end is
cut to its head in linear work, and a process the command left in the background holding its
output open neither holds the run nor outlives it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.run.external import LINE_CAP, LineBuffer, run_command

REGEX = r"took (?P<seconds>[\d.]+)s for (?P<items>\d+) items"
BIG = 48 << 20


def new_bench(stop: int = 20) -> tuple[Bench, NullStream]:
    stream = NullStream()
    stream.write("config", spec={"name": "ext", "metric": "total_time_secs"}, device=0)
    return Bench(name="ext", stream=stream, skip=1, stop=stop), stream


def kinds(stream: NullStream, kind: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if str(r["event"]) == kind]


# -- item 10: one line of 48 MiB ---------------------------------------------------------------
def test_a_line_without_end_keeps_its_head_in_linear_work() -> None:
    buffer = LineBuffer(LINE_CAP)
    chunk = b"x" * 65536
    most = 0
    for _ in range(BIG // len(chunk)):
        assert buffer.feed(chunk) == []
        most = max(most, buffer.held)
    lines = buffer.feed(b"yz\nstep 1\npart")
    assert lines == [(b"x" * LINE_CAP + b"\n", BIG + 2 - LINE_CAP), (b"step 1\n", 0)]
    assert most == LINE_CAP  # never more of the line in memory than its head
    # Each byte searched for a newline once: no rescans of what was already read.
    assert buffer.scanned == BIG + len(b"yz\nstep 1\npart")
    assert buffer.flush() == (b"part", 0)


def test_lines_are_split_across_chunks_and_the_last_one_is_flushed() -> None:
    buffer = LineBuffer(8)
    out = buffer.feed(b"ab") + buffer.feed(b"c\nd") + buffer.feed(b"e\n0123456789\n\nf")
    assert out == [(b"abc\n", 0), (b"de\n", 0), (b"01234567\n", 2), (b"\n", 0)]
    assert buffer.flush() == (b"f", 0) and buffer.flush() is None
    exact = LineBuffer(4)
    assert exact.feed(b"abcd\n") == [(b"abcd\n", 0)]  # exactly the cap: nothing cut


BIG_LINE = textwrap.dedent(
    f"""
    import os, sys
    out = sys.stdout.buffer
    out.write(b"step 0 took 0.5s for 16 items\\n")
    for _ in range({BIG // 65536}):
        out.write(b"x" * 65536)
    out.write(b"\\n")
    for i in range(1, 6):
        out.write(f"step {{i}} took 0.25s for 16 items\\n".encode())
    out.flush()
    """
)


def test_a_48_mib_line_is_cut_with_a_note_and_the_steps_after_it_are_read(
    tmp_path: Path,
) -> None:
    script = tmp_path / "big.py"
    script.write_text(BIG_LINE)
    bench, stream = new_bench()
    out = io.StringIO()
    tracemalloc.start()
    try:
        result = run_command(bench, [sys.executable, str(script)], parser={"regex": REGEX},
                             workdir=tmp_path / "work", out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        bench.close()
    assert result.returncode == 0 and result.steps == 6
    assert len(kinds(stream, "rate")) == 6
    # The reader never held the line: its head only (the log here is a StringIO holding it).
    assert peak < 8 * LINE_CAP + (4 << 20)
    log = out.getvalue().splitlines()
    assert log[1] == "x" * LINE_CAP
    assert log[2] == (f"pytest-dlbench: the line above was cut: {BIG} bytes without a newline, "
                      f"its first {LINE_CAP} kept")
    (warning,) = kinds(stream, "warning")
    assert warning["message"] == (f"a line of the command's output was cut: {BIG} bytes "
                                  f"without a newline, its first {LINE_CAP} kept")


# -- item 4: a background process holding the output open ------------------------------------------
BACKGROUND = (
    "sleep 600 & echo $! > bg.pid; "
    "for i in 0 1 2 3 4 5 6 7; do echo \"step $i took 0.125s for 16 items\"; done; exit 0"
)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_background_process_holding_the_output_neither_holds_nor_outlives_the_run(
    tmp_path: Path,
) -> None:
    bench, stream = new_bench()
    out = io.StringIO()
    work = tmp_path / "work"
    done: list[Any] = []

    def go() -> None:
        try:
            done.append(run_command(bench, ["sh", "-c", BACKGROUND], parser={"regex": REGEX},
                                    workdir=work, out=out))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            done.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    # The background sleep holds the pipe for 600 s: the run must end long before.
    thread.join(timeout=60)
    pid = int((work / "bg.pid").read_text())
    try:
        assert not thread.is_alive(), "the reader waited for the background process"
    finally:
        if alive(pid):
            psutil.Process(pid).kill()
    (result,) = done
    assert result.returncode == 0 and result.steps == 8  # scored: every step it logged
    assert len(kinds(stream, "rate")) == 8
    assert not alive(pid)  # killed, not left running
    assert (f"pytest-dlbench: the command exited, and 1 process it left running (pid {pid}) "
            "kept its output open: stopped reading 2 s later and killed it") in out.getvalue()


SUITE = """
_ext:
  max_duration: 60
  metric: total_time_secs
  definition:
    command:
      - sh
      - -c
      - 'sleep 600 & echo $! > bg.pid; for i in 0 1 2 3 4 5; do echo "step $i took 0.125s for
        16 items"; done'
    parser: {regex: 'took (?P<seconds>[\\d.]+)s for (?P<items>\\d+) items'}
held: {inherits: _ext}
"""


@pytest.mark.slow
def test_a_benchmark_whose_command_leaves_a_background_process_is_scored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out", "-p", "no:randomly")
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    pid = int((run_dir / "held.D0.work" / "bg.pid").read_text())
    try:
        result.assert_outcomes(passed=1)  # not a timeout at max_duration
    finally:
        if alive(pid):
            psutil.Process(pid).kill()
    records = [json.loads(line) for line in (run_dir / "held.D0.data").read_text().splitlines()]
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"
    assert len([r for r in records if r["event"] == "rate"]) == 6
    assert not alive(pid)
    result.stdout.fnmatch_lines(["*total_time_secs*"])


# -- a process that is not the run's holding the output: named, never killed -------------------
#: Started before the run, in a session of its own: it waits for the command's pid, opens its
#: output through /proc to read it (read-write, as a reader of a FIFO does so that the open
#: does not block: a writer too, the pipe gives no end-of-file), and holds it.
NEIGHBOUR = textwrap.dedent(
    """
    import os, sys, time
    pid_file, ready = sys.argv[1], sys.argv[2]
    while not os.path.exists(pid_file):
        time.sleep(0.01)
    fd = os.open(f"/proc/{open(pid_file).read().strip()}/fd/1", os.O_RDWR | os.O_NONBLOCK)
    open(ready + ".tmp", "w").close()
    os.rename(ready + ".tmp", ready)
    time.sleep(600)
    """
)
WAIT_FOR_NEIGHBOUR = (
    "echo $$ > ../cmd.tmp && mv ../cmd.tmp ../cmd.pid; "
    "n=0; while [ ! -e ../ready ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; "
    "for i in 0 1 2 3 4 5 6 7; do echo \"step $i took 0.125s for 16 items\"; done; exit 0"
)


def test_a_process_not_the_runs_holding_the_output_is_named_and_left_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "neighbour.py").write_text(NEIGHBOUR)
    neighbour = subprocess.Popen(
        [sys.executable, str(tmp_path / "neighbour.py"), str(tmp_path / "cmd.pid"),
         str(tmp_path / "ready")], start_new_session=True)
    bench, stream = new_bench()
    out = io.StringIO()
    try:
        result = run_command(bench, ["sh", "-c", WAIT_FOR_NEIGHBOUR], parser={"regex": REGEX},
                             workdir=tmp_path / "work", out=out)
        assert (tmp_path / "ready").exists(), "the neighbour never opened the output"
        assert result.returncode == 0 and result.steps == 8
        assert len(kinds(stream, "rate")) == 8
        notes = [line for line in out.getvalue().splitlines()
                 if line.startswith("pytest-dlbench:")]
        assert len(notes) == 1 and notes[0].startswith(
            f"pytest-dlbench: process {neighbour.pid} (")
        assert notes[0].endswith(
            "), not the run's, holds the command's output open: stopped reading it 2 s after "
            "the command exited, and left that process alone")
        with pytest.raises(subprocess.TimeoutExpired):  # not killed: still running
            neighbour.wait(timeout=1)
    finally:
        bench.close()
        neighbour.kill()
        neighbour.wait()


def test_a_process_of_the_run_in_a_session_of_its_own_is_killed(tmp_path: Path) -> None:
    """A daemon the command started (setsid: another process group) keeps the run's marker."""
    bench, _ = new_bench()
    out = io.StringIO()
    work = tmp_path / "work"
    command = ("setsid sleep 600 & echo $! > bg.pid; "
               "for i in 0 1 2 3 4 5; do echo \"step $i took 0.125s for 16 items\"; done")
    try:
        result = run_command(bench, ["sh", "-c", command], parser={"regex": REGEX},
                             workdir=work, out=out, env={Env.STREAM: str(tmp_path / "s.data")})
    finally:
        bench.close()
    pid = int((work / "bg.pid").read_text())
    try:
        assert result.returncode == 0 and not alive(pid)
        assert f"1 process it left running (pid {pid})" in out.getvalue()
    finally:
        if alive(pid):
            psutil.Process(pid).kill()
