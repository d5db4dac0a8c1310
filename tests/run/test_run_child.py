"""The runner's pure parts: run directories, stream names, outcome classification."""

from __future__ import annotations

import datetime as dt
import sys
import types
from pathlib import Path

import pytest

from pytest_dlbench.layout import make_run_dir, stream_path
from pytest_dlbench.measure.bench import NonFiniteLoss
from pytest_dlbench.measure.stream import NullStream, read_stream
from pytest_dlbench.run.child import run_child
from pytest_dlbench.run.harness import classify_exception, execute


def test_run_dir_is_named_after_run_and_time_and_never_reused(tmp_path: Path):
    now = dt.datetime(2026, 11, 21, 22, 1, 8)
    first = make_run_dir(tmp_path, "smoke", now)
    second = make_run_dir(tmp_path, "smoke", now)
    assert first == tmp_path / "runs" / "smoke.20261121-220108"
    assert second == tmp_path / "runs" / "smoke.20261121-220108-2"
    assert first.is_dir() and second.is_dir()


def test_stream_names(tmp_path: Path):
    assert stream_path(tmp_path, "resnet50", 3).name == "resnet50.D3.data"
    assert stream_path(tmp_path, "resnet50", 0, 2).name == "resnet50.D0.R2.data"


@pytest.mark.parametrize(
    ("exc", "status", "reason"),
    [
        (NonFiniteLoss(float("nan"), 7), "nan", "NonFiniteLoss: loss is nan at step 7"),
        (MemoryError(), "oom", "out of memory: MemoryError"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore"), "oom",
         "out of memory: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory"), "oom",
         "out of memory: RuntimeError: DefaultCPUAllocator: can't allocate memory"),
        (ValueError("bad shape"), "fail", "ValueError: bad shape"),
        (SystemExit(2), "fail", "the benchmark exited with status 2 (an argument error? see "
                                "its output)"),
    ],
)
def test_classify_exception(exc, status, reason):
    outcome = classify_exception(exc)
    assert (outcome.status, outcome.reason) == (status, reason)
    assert "\n" not in outcome.reason


def test_cuda_out_of_memory_error_type_is_oom(monkeypatch):
    class OutOfMemoryError(RuntimeError):
        pass

    fake_cuda = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError)
    fake_torch = types.SimpleNamespace(cuda=fake_cuda)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    assert classify_exception(OutOfMemoryError("no room")).status == "oom"


def test_execute_records_end_once():
    stream = NullStream()
    outcome, exc = execute(lambda: None, stream)
    assert outcome.ok and exc is None
    assert [r["status"] for r in stream.records] == ["ok"]

    stream = NullStream()

    def boom():
        raise ValueError("x")

    outcome, exc = execute(boom, stream)
    assert outcome.status == "fail" and isinstance(exc, ValueError)
    assert stream.records[-1]["reason"] == "ValueError: x"


def test_execute_setup_phase_writes_nothing_on_success():
    stream = NullStream()
    execute(lambda: None, stream, final=False)
    assert stream.records == []


def test_parent_writes_end_when_child_dies(tmp_path: Path):
    stream = tmp_path / "x.D0.data"
    outcome = run_child(
        [sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"],
        stream=stream, log=tmp_path / "x.log", timeout=30,
    )
    assert outcome.status == "oom" and "SIGKILL" in outcome.reason
    (end,) = read_stream(stream)
    assert end["event"] == "end" and end["writer"] == "parent" and end["returncode"] == -9


def test_child_end_record_wins(tmp_path: Path):
    stream = tmp_path / "x.D0.data"
    code = (
        "import json, sys; "
        f"open({str(stream)!r}, 'a').write(json.dumps({{'event': 'end', 'status': 'nan', "
        "'reason': 'loss is nan at step 1'}) + '\\n'); sys.exit(1)"
    )
    outcome = run_child([sys.executable, "-c", code], stream=stream, log=tmp_path / "x.log",
                        timeout=30)
    assert (outcome.status, outcome.reason) == ("nan", "loss is nan at step 1")
    assert len(read_stream(stream)) == 1


# A "torchrun" that starts its rank in a session of its own (as torch's elastic agent does),
# then is SIGKILLed (the OOM killer): nothing makes the rank die with it.
FAKE_TORCHRUN = """
import os, signal, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                        start_new_session=True)
open(sys.argv[1], "w").write(str(rank.pid))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid: int) -> bool:
    """The process exists and is no zombie (a killed orphan may wait for a reaper)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_ranks_of_a_sigkilled_torchrun_are_killed(tmp_path: Path):
    import os
    import signal

    pid_file, stream = tmp_path / "rank.pid", tmp_path / "x.D0.data"
    outcome = run_child([sys.executable, "-c", FAKE_TORCHRUN, str(pid_file)], stream=stream,
                        log=tmp_path / "x.log", timeout=30)
    rank = int(pid_file.read_text())
    try:
        assert outcome.status == "oom" and outcome.returncode == -9
        assert not _alive(rank), "the rank outlived its torchrun"
    finally:
        if _alive(rank):
            os.kill(rank, signal.SIGKILL)
