"""benchmarks/gpu_check.sh, the first thing run on a lent GPU machine: its table comes out
whatever happens, one row per check, and its --dry-run (fake GPUs, fake pytest runs) runs here."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from _procs import child_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
QUICK_CUT = 60
CHECKS = ("torch / CUDA", "CUDA device", "NVML inventory", "pytest --bench-suite=smoke",
          "standard: resnet50, matmul-bf16", "timer backend", "timer agreement")


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _table(output: str) -> list[str]:
    """The final table's rows (after its header lines)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("gpu_check  "))
    return [line for line in lines[start + 1:] if line and not line.startswith("DRY RUN")]


def _row(table: list[str], check: str) -> str:
    (row,) = [line for line in table if line.startswith(check)]
    return row


def _run_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=child_env(), timeout=120)


@pytest.mark.slow  # fake pytest runs in subprocesses, the timer on the CPU: 5-15 s
@pytest.mark.parametrize("order", ["quick-first", "quick-last"])
def test_the_dry_run_prints_one_row_per_check_and_passes(tmp_path: Path, order: str):
    out = tmp_path / "out"
    args = (["--quick", "--dry-run", str(out)] if order == "quick-first"
            else ["--dry-run", str(out), "--quick"])
    done = _run_sh(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    table = _table(done.stdout)
    for check in CHECKS:
        _row(table, check)  # exactly one row each
    assert not any("  FAIL  " in line for line in table), "\n".join(table)
    # The output directory is the path given, never "--quick"; the final table is saved there.
    saved = (out / "gpu_check.txt").read_text()
    assert saved.startswith("gpu_check  2") and done.stdout.endswith(saved)
    assert not (ROOT / "--quick").exists() and not (tmp_path / "--quick").exists()
    assert "quick)" in next(x for x in done.stdout.splitlines() if x.startswith("gpu_check  "))
    # Per-GPU benchmarks ran on both (fake) GPUs at once: one pytest with -n 2.
    assert "2 runs on 2 devices" in _row(table, "  smoke toy")
    assert "fake GPUs" in (out / "smoke.log").read_text()
    # --quick cuts each benchmark at max_duration: one that hangs is one failure.
    for log in ("smoke.log", "standard.log"):
        assert f"*.max_duration={QUICK_CUT}" in (out / log).read_text()
    # A benchmark that skipped itself: skipped rows, its telemetry is not a failure.
    assert "skipped" in _row(table, "  smoke clip-tiny-openclip").split()
    assert "skipped" in _row(table, "telemetry smoke clip-tiny-openclip.D0").split()
    assert "ok" in _row(table, "telemetry smoke toy.D1").split()


def test_an_unknown_option_is_refused_by_the_script(tmp_path: Path):
    done = _run_sh("--dry-run", "--quik", str(tmp_path))
    assert done.returncode == 2 and "unknown option --quik" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--budget"], "--budget needs a value"),
    (["--budget", "0"], "--budget must be a positive number of seconds"),
    (["--budget=soon"], "--budget: invalid float value"),
    (["--wheels", "EMPTY"], "no .whl files there"),
])
def test_a_bad_budget_or_wheel_folder_is_refused_in_one_line(tmp_path: Path, args, message):
    (tmp_path / "empty").mkdir()
    args = [str(tmp_path / "empty") if a == "EMPTY" else a for a in args]
    done = _run_sh("--dry-run", str(tmp_path / "out"), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_arguments_in_any_order(gpu_check: ModuleType, tmp_path: Path):
    for argv in (["--quick", str(tmp_path)], [str(tmp_path), "--quick"],
                 ["--dry-run", "--quick", str(tmp_path)],
                 ["--budget", "420", "--quick", str(tmp_path)]):
        args = gpu_check.parse_args(argv)
        assert args.out == tmp_path and args.quick, argv
    assert gpu_check.parse_args(["--budget=420"]).budget == 420
    assert gpu_check.parse_args(["--quick"]).out == gpu_check.DEFAULT_OUT


def test_a_timeout_in_one_step_still_prints_the_table_with_a_fail_row(
        gpu_check: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    real_run = gpu_check.pytest_run

    def standard_hangs(out, name, args, timeout, *, dry_run=False):
        if name == "standard":
            raise subprocess.TimeoutExpired(["pytest"], timeout)
        return real_run(out, name, args, timeout, dry_run=dry_run)

    monkeypatch.setattr(gpu_check, "pytest_run", standard_hangs)
    monkeypatch.setattr(gpu_check, "timer_rows", lambda table, rounds, setup: None)
    status = gpu_check.main(["--dry-run", str(tmp_path)])
    table = _table(capsys.readouterr().out)
    assert status == 1
    standard = _row(table, "standard: resnet50, matmul-bf16")
    assert "FAIL" in standard.split()
    assert f"timed out after {gpu_check.STANDARD_TIMEOUT_S:g} s" in standard
    # The steps after it ran: the smoke suite and its telemetry have their rows.
    assert "ok" in _row(table, "pytest --bench-suite=smoke").split()
    assert "FAIL" in _row(table, "telemetry standard").split()  # no run directory
    assert "ok" in _row(table, "telemetry smoke toy.D0").split()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_caps_each_run_and_a_check_it_cannot_fit_is_not_run(
        gpu_check: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """A lease of 300 s: the timer takes 60, the standard subset hangs until its timeout (what
    is left less the reserve), and the smoke suite, with too little left, is not started."""
    clock = FakeClock()
    timeouts: dict[str, float] = {}

    def timer_takes_a_minute(table, rounds, setup):
        clock.now += 60
        table.add("timer agreement", "1.0000", True)

    def runs_hang(out, name, args, timeout, *, dry_run=False):
        timeouts[name] = timeout
        clock.now += timeout
        raise subprocess.TimeoutExpired(["pytest"], timeout)

    monkeypatch.setattr(gpu_check, "timer_rows", timer_takes_a_minute)
    monkeypatch.setattr(gpu_check, "pytest_run", runs_hang)
    args = gpu_check.parse_args(["--dry-run", "--budget", "300", str(tmp_path)])
    table = gpu_check.Table()
    gpu_check.run_checks(table, args, gpu_check.fake_facts, gpu_check.Budget(300, clock))
    rows = {r.check: r for r in table.rows}
    assert timeouts == {"standard": 300 - 60 - gpu_check.RESERVE_S}
    assert rows["standard: resnet50, matmul-bf16"].status == "FAIL"
    smoke = rows["pytest --bench-suite=smoke"]
    assert smoke.status == "-" and "not run: 15 s of --budget left" in smoke.figure
    capsys.readouterr()


def test_a_budget_too_short_for_anything_runs_only_the_device_rows(
        gpu_check: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gpu_check, "pytest_run", lambda *a, **k: pytest.fail("started a run"))
    monkeypatch.setattr(gpu_check, "timer_rows", lambda *a: pytest.fail("started the timer"))
    clock = FakeClock()
    budget = gpu_check.Budget(100, clock)
    clock.now += 90
    table = gpu_check.Table()
    gpu_check.run_checks(table, gpu_check.parse_args(["--dry-run", str(tmp_path)]),
                         gpu_check.fake_facts, budget)
    statuses = {r.check: r.status for r in table.rows}
    assert statuses["NVML inventory"] == "ok"
    for check in ("timer agreement", "standard: resnet50, matmul-bf16",
                  "pytest --bench-suite=smoke"):
        assert statuses[check] == "-", table.rows
    assert not any(r.status == "FAIL" for r in table.rows if not r.check.startswith("telemetry"))


def test_the_saved_table_grows_row_by_row(gpu_check: ModuleType, tmp_path: Path):
    table = gpu_check.Table(path=tmp_path / "gpu_check.txt")
    table.add("torch / CUDA", "2.11.0 / 13.0", True)
    first = table.path.read_text()
    assert "in progress" in first and "torch / CUDA" in first
    table.add("CUDA device", "1 x NVIDIA H100 80GB HBM3, 80 GiB", True)
    assert "CUDA device" in table.path.read_text()


@pytest.mark.slow  # the script with a fake pytest that hangs, in a subprocess: 5-10 s
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_from_outside_keeps_the_rows_measured_so_far(tmp_path: Path, sig: int):
    """``timeout`` sends SIGTERM to the script: the check itself gets it (the script execs it),
    kills the hanging run's process group and prints the table. Even SIGKILL, which nothing can
    catch, leaves gpu_check.txt with the rows before it."""
    out, back = tmp_path / "out", tmp_path / "back"
    env = {**child_env(), "GPU_CHECK_FAKE_HANG": "smoke"}
    proc = subprocess.Popen(["bash", str(SCRIPT), "--dry-run", str(out), "--copy-to", str(back)],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    log = out / "smoke.log"
    deadline = time.monotonic() + 90
    while "hangs" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.2)
    group = int(log.read_text().split("process group ")[1].split(")")[0])
    try:
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=30)
        saved = (out / "gpu_check.txt").read_text()
        assert "timer agreement" in saved and "standard: resnet50, matmul-bf16" in saved
        # --copy-to: a folder a lease brings back holds the same table and the logs so far.
        assert (back / "gpu_check.txt").read_text() == saved
        assert "fake pytest: standard" in (back / "standard.log").read_text()
        if sig == signal.SIGTERM:
            assert proc.returncode == 130, stdout
            assert "INTERRUPTED (SIGTERM)" in stdout and "INTERRUPTED (SIGTERM)" in saved
            with pytest.raises(ProcessLookupError):  # the hanging run's group was killed
                _wait_gone(group)
            assert "hangs" in (back / "smoke.log").read_text()  # the last copy, at the end
        else:
            assert "in progress" in saved
    finally:  # whatever failed: nothing of the script or its run is left behind
        for leftover in (group, proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leftover, signal.SIGKILL)


def _wait_gone(group: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        os.killpg(group, 0)  # raises ProcessLookupError once no process of it is left
        time.sleep(0.1)


def test_the_script_picks_the_interpreter_that_has_torch(tmp_path: Path):
    """A machine where a bare python3 comes first on PATH and torch lives in another one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\nexit 1\n")  # no torch, no anything
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    env = child_env()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60,
                          env={**env, "PYTHON": str(tmp_path / "nowhere")})
    assert done.returncode == 2 and "no Python interpreter" in done.stderr


def test_a_crash_anywhere_still_prints_the_table(gpu_check: ModuleType, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]):
    def broken_facts():
        raise RuntimeError("NVML exploded")

    assert gpu_check.main(["--dry-run", str(tmp_path)], facts_of=broken_facts) == 1
    table = _table(capsys.readouterr().out)
    assert "RuntimeError: NVML exploded" in _row(table, "device facts")
    assert "-" in _row(table, "pytest --bench-suite=smoke").split()  # not run, said so


def test_a_timed_out_pytest_is_killed_with_its_process_group(gpu_check: ModuleType,
                                                             tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gpu_check, "pytest_command", lambda *a, **k: [
        "bash", "-c", "sleep 60 & sleep 60; wait"])
    with pytest.raises(subprocess.TimeoutExpired):
        gpu_check.pytest_run(tmp_path, "hang", [], 0.5)


def _facts(gpu_check: ModuleType, torch_names: list[str], nvml_names: list[str],
           nvml_reason: str = ""):
    return gpu_check.Facts("2.11.0", "13.0", "", tuple((n, 80 * 2**30) for n in torch_names),
                           tuple(nvml_names), nvml_reason, "580.159.04")


@pytest.mark.parametrize(("torch_names", "nvml_names", "reason", "ok"), [
    (["H100"] * 8, ["H100"] * 8, "", True),
    (["H100"] * 8, ["H100"] * 7, "", False),  # a GPU NVML does not list
    (["H100"], ["H100"] * 8, "", False),  # NVML ignores CUDA_VISIBLE_DEVICES: 8 sampled for 1
    (["H100", "H100"], ["H100", "A100"], "", False),
    (["H100"], [], "NVML unavailable (NVMLError_LibraryNotFound)", False),
    ([], [], "", False),  # nothing at all is not a pass
])
def test_the_inventory_row_fails_when_nvml_and_torch_disagree(gpu_check: ModuleType,
                                                               torch_names, nvml_names,
                                                               reason, ok):
    figure, passed = gpu_check.inventory_row(_facts(gpu_check, torch_names, nvml_names, reason))
    assert passed is ok, figure


def test_a_mismatched_inventory_fails_the_run(gpu_check: ModuleType, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(gpu_check, "timer_rows", lambda table, rounds, setup: None)
    facts = _facts(gpu_check, ["NVIDIA H100 80GB HBM3"], ["NVIDIA H100 80GB HBM3"] * 2)
    assert gpu_check.main(["--dry-run", str(tmp_path)], facts_of=lambda: facts) == 1
    row = _row(_table(capsys.readouterr().out), "NVML inventory")
    assert "FAIL" in row.split() and "count differs" in row


def test_an_interpreter_without_torch_is_refused_with_how_to_name_one(tmp_path: Path):
    """The lent machine's bare python3 had no torch: the script stops in seconds and says how to
    name the interpreter that has it."""
    no_site = tmp_path / "python-without-site-packages"
    no_site.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    no_site.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=60, env={**child_env(), "PYTHON": str(no_site)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "missing (" in done.stderr and "torch" in done.stderr
    assert "PYTHON=/path/to/python" in done.stderr


def test_a_table_file_that_cannot_be_written_is_said_once_and_fails_no_check(
        gpu_check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    table = gpu_check.Table(path=blocker / "gpu_check.txt")
    table.add("torch / CUDA", "2.11.0 / 13.0", True)
    table.add("CUDA device", "1 x NVIDIA H100 80GB HBM3, 80 GiB", True)
    assert [r.status for r in table.rows] == ["ok", "ok"] and not table.failed
    assert capsys.readouterr().out.count("gpu_check: cannot write") == 1
