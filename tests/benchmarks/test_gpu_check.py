"""benchmarks/gpu_check.sh, the first thing run on a lent GPU machine: its table comes out
whatever happens, one row per check, and its --dry-run (fake GPUs, fake pytest runs) runs here."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_script
from _paths import REPO_ROOT
from _procs import child_env

ROOT = REPO_ROOT
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
QUICK_CUT = 60
STANDARD = "standard: resnet50, resnet50-compiled, vit_b_16, lm-gpt-small, matmul-bf16"
PATHS = "paths: resnet50-reduce-overhead, vit-fp16, clip-b32, openclip-b32"
WINDOW = "load check, scored window >= 1.5 s: standard resnet50"
NVML = "NVML utilisation sample period"
CHECKS = ("torch / CUDA", "CUDA device", "NVML inventory", NVML, "pytest --bench-suite=smoke",
          STANDARD, "timer backend", "timer agreement", WINDOW, PATHS,
          "reference: pytest resnet50-noio bs248", "reference resnet50-noio bs248",
          "reference matmul bf16 8192^3")
# Issue 49 item 12: the rows of the paths no shipped run had taken on a GPU.
NEW_BENCHMARK_ROWS = ("  standard resnet50-compiled", "  standard vit_b_16",
                      "  standard lm-gpt-small", "  paths resnet50-reduce-overhead",
                      "  paths vit-fp16", "  paths clip-b32", "  paths openclip-b32")
# Published figures the reference rows compare with (not the script's constants): milabench's
# per-GPU resnet50-noio img/s at faf3923 (config/scaling/H100.yaml line 371, batch 248 at 8
# workers: the published batch nearest the suite's auto_batch(256), the smaller of 248 and 264;
# config/scaling/H200.yaml line 109, batch 256), the H100/H200 SXM datasheets' dense bf16
# TFLOP/s.
MILABENCH_H100_BS248, MILABENCH_H200_BS256 = 3968.86, 4868.3
DATASHEET_BF16_DENSE = 989.4


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    return load_script("gpu_check")  # benchmarks/ on sys.path: it imports its sibling modules


@pytest.fixture(scope="module")
def fake() -> ModuleType:
    """The dry run's fake pytest (benchmarks/gpu_check_fake.py): its streams."""
    return load_script("gpu_check_fake")


def _table(output: str) -> list[str]:
    """The final table's rows (after its header lines)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("gpu_check  "))
    return [line for line in lines[start + 1:] if line and not line.startswith("DRY RUN")]


def _row(table: list[str], check: str) -> str:
    (row,) = [line for line in table if line.startswith(check)]
    return row


def _run_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=child_env(**env), timeout=300)


def _interpreter(folder: Path, name: str, body: str) -> Path:
    """An interpreter for the script's PYTHON: a shell script ``body`` (the real one is
    ``$REAL``)."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nREAL={sys.executable}\n{body}")
    path.chmod(0o755)
    return path


def _fake_workers(gpu_check: ModuleType, facts=None, took=None):
    """Stands for the worker processes (no torch): the device facts, the bare loops' figures
    and the timer's rows; ``took(name)`` is called for each (a fake clock moves there)."""
    def run(out, name, options, timeout, *, dry_run, quick=False, env=None):
        if took is not None:
            took(name, timeout)
        if name == "facts":
            return dataclasses.asdict(facts or gpu_check.fake_facts())
        if name == "bare":
            return {"resnet50": 3290.0, "matmul": 765.0}
        if name == "nvml":
            return {"samples": 40, "period_us": 166_667.0, "newest_minus_now_us": -50_000.0,
                    "last_values": [100.0] * 6, "last_gaps_us": [166_667.0] * 5}
        return [["timer backend", "CudaEventBackend", "ok"], ["timer agreement", "1.0010", "ok"]]
    return run


@pytest.mark.slow  # fake pytest runs and the workers in subprocesses, on the CPU: 15-40 s
def test_the_dry_run_prints_one_row_per_check_and_passes(tmp_path: Path):
    """The whole dry run through the script, its parent process unable to import torch (item
    14: the checks that need torch give their figures from their worker processes)."""
    out = tmp_path / "out"
    back = tmp_path / "back"
    harness = tmp_path / "parent_without_torch.py"
    harness.write_text(_PARENT_WITHOUT_TORCH.format(pytest_runs=""))
    python = _interpreter(tmp_path, "python", 'if [ "$1" = benchmarks/gpu_check.py ]; then\n'
                          f'  shift; exec "$REAL" {harness} {ROOT / "benchmarks"} "$@"\nfi\n'
                          'exec "$REAL" "$@"\n')
    done = _run_sh("--quick", "--dry-run", str(out), "--copy-to", str(back), PYTHON=str(python))
    assert done.returncode == 0, done.stdout + done.stderr
    table = _table(done.stdout)
    for check in CHECKS:
        _row(table, check)  # exactly one row each
    assert not any("  FAIL  " in line for line in table), "\n".join(table)
    assert not any("the parent imported torch" in row for row in table), done.stdout
    assert "ok" in _row(table, "timer agreement").split()  # the timer ran, in its worker
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
    # The reference rows, like with like: the milabench suite's resnet50-noio beside the bare
    # loop's (run on the CPU here) and milabench's published figure for a (fake) H100 at the
    # same batch, each with TFLOP/s; the datasheet's peak with its ratio.
    resnet = _row(table, "reference resnet50-noio bs248")
    assert f"milabench H100 {MILABENCH_H100_BS248:,.1f} img/s (" in resnet
    assert "project/milabench " in resnet and "config/scaling/H100.yaml:371" in resnet
    assert "bare loop none" not in resnet and "project/bare" in resnet
    assert resnet.count("TFLOP/s") == 3
    # The reference run's resnet50-noio is the milabench suite's: --bench-reference's line.
    assert "--bench-reference" in (out / "reference.log").read_text()
    matmul = _row(table, "reference matmul bf16 8192^3")
    assert f"datasheet dense peak {DATASHEET_BF16_DENSE}" in matmul and "milabench" not in matmul
    # Issue 49 item 12: every new row; NVML's sample period and its timestamps' clock.
    for check in NEW_BENCHMARK_ROWS:
        _row(table, check)
    nvml = _row(table, NVML)
    assert "period 166.7 ms" in nvml and "newest timestamp - time.time() = " in nvml
    assert "(UNIX microseconds)" in nvml and "last values 100" in nvml
    window = _row(table, WINDOW)
    assert "window 5.00 s: load 97% (" in window and "samples); check ok" in window
    # Item 11: per stream, the load over the scored window with its sample count and the load
    # check's outcome; the whole run's mean named as such; NVML's peak beside torch's reserved;
    # TFLOP/s and MFU where the run counted FLOPs.
    resnet50 = _row(table, "telemetry standard resnet50.D0")
    assert "window 5.00 s: load 97% (" in resnet50
    assert " samples); check ok; whole-run mean " in resnet50
    assert "util=" not in resnet50 and "whole-run mean 97" not in resnet50  # idle warm-up
    assert "peak NVML 22.0 GiB / torch reserved 16.0 GiB" in resnet50
    assert "TFLOP/s, MFU " in resnet50 and "ok" in resnet50.split()
    assert "no load check set" not in resnet50
    # Item 14: at most 8 files come back: the table, the workers' log, each run's summary and
    # one archive of the rest (each run's log and suite file, the streams).
    copied = sorted(p.name for p in back.iterdir())
    assert len(copied) <= 8 and {"gpu_check.txt", "reference.json", "standard.json",
                                 "paths.json", "smoke.json", "checks.log",
                                 "gpu_check_runs.tar.gz"} == set(copied), copied
    with tarfile.open(back / "gpu_check_runs.tar.gz") as tar:
        names = tar.getnames()
    for name in ("smoke.log", "standard.log", "paths.log", "paths.yaml", "reference.yaml"):
        assert name in names, names
    assert any(n.startswith("standard/runs/") and n.endswith("resnet50.D0.data")
               for n in names), names


@pytest.mark.parametrize("order", ["quick-first", "quick-last"])
def test_the_script_hands_the_check_its_output_folder_and_flags_in_any_order(
        gpu_check: ModuleType, tmp_path: Path, order: str):
    """The script's own argument loop: the output folder is the path given, never "--quick",
    whatever the order; what it hands gpu_check.py (recorded by a stand-in interpreter) parses
    to that folder and those flags."""
    out, back, handed = tmp_path / "out", tmp_path / "back", tmp_path / "handed"
    python = _interpreter(tmp_path, "python", 'if [ "$1" = benchmarks/gpu_check.py ]; then\n'
                          f'  shift; printf "%s\\n" "$@" > {handed}; exit 0\nfi\n'
                          '[ "$1" != - ] || cat > /dev/null  # the module check, on stdin\n')
    args = (["--quick", "--dry-run", str(out)] if order == "quick-first"
            else ["--dry-run", str(out), "--quick"])
    done = _run_sh(*args, "--copy-to", str(back), PYTHON=str(python))
    assert done.returncode == 0, done.stdout + done.stderr
    argv = handed.read_text().splitlines()
    parsed = gpu_check.parse_args(argv)
    assert argv[0] == str(out) and parsed.out == out, argv
    assert parsed.quick and parsed.dry_run and parsed.copy_to == back, argv
    assert not (ROOT / "--quick").exists() and not (tmp_path / "--quick").exists()


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

    def standard_hangs(out, name, args, timeout, *, dry_run=False, env=None):
        if name == "standard":
            raise subprocess.TimeoutExpired(["pytest"], timeout)
        return real_run(out, name, args, timeout, dry_run=dry_run, env=env)

    monkeypatch.setattr(gpu_check, "pytest_run", standard_hangs)
    monkeypatch.setattr(gpu_check, "in_subprocess", _fake_workers(gpu_check))
    status = gpu_check.main(["--dry-run", str(tmp_path)])
    table = _table(capsys.readouterr().out)
    assert status == 1
    standard = _row(table, STANDARD)
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
    """A lease of 330 s: the NVML probe takes 10, the bare loops 30, the reference run hangs
    until its timeout, the timer takes 60, the standard subset hangs until what is left less
    the reserve, and the paths run and the smoke suite, with too little left, are not
    started."""
    clock = FakeClock()
    timeouts: dict[str, float] = {}

    def worker_takes(name, timeout):
        timeouts[name] = timeout
        clock.now += {"nvml": 10, "bare": 30, "timer": 60}[name]

    def runs_hang(out, name, args, timeout, *, dry_run=False, env=None):
        timeouts[name] = timeout
        clock.now += timeout
        raise subprocess.TimeoutExpired(["pytest"], timeout)

    monkeypatch.setattr(gpu_check, "in_subprocess", _fake_workers(gpu_check, took=worker_takes))
    monkeypatch.setattr(gpu_check, "pytest_run", runs_hang)
    args = gpu_check.parse_args(["--dry-run", "--budget", "330", str(tmp_path)])
    table = gpu_check.Table()
    gpu_check.run_checks(table, args, gpu_check.fake_facts, gpu_check.Budget(330, clock))
    rows = {r.check: r for r in table.rows}
    reserve = gpu_check.RESERVE_S
    assert timeouts == {"nvml": gpu_check.NVML_TIMEOUT_S, "bare": gpu_check.BARE_TIMEOUT_S,
                        "reference": gpu_check.REFERENCE_TIMEOUT_S,
                        "timer": 330 - 40 - gpu_check.REFERENCE_TIMEOUT_S - reserve,
                        "standard": 330 - 40 - gpu_check.REFERENCE_TIMEOUT_S - 60 - reserve}
    # Cut by what the budget left, not by its own timeout: dropped, said so, not a failure.
    standard = rows[STANDARD]
    assert standard.status == "-" and standard.figure.startswith("cut by --budget after 35 s")
    paths = rows[PATHS]
    assert paths.status == "-" and f"not run: {reserve:.0f} s of --budget left" in paths.figure
    smoke = rows["pytest --bench-suite=smoke"]
    assert smoke.status == "-" and "dropped (the lowest priority)" in smoke.figure
    capsys.readouterr()


def test_the_smoke_suite_is_dropped_rather_than_cut_and_the_paths_run_loses_its_tail(
        gpu_check: ModuleType, fake: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """Issue 49 item 14: a budget that cannot hold everything drops the lowest-priority rows,
    each said: the paths run, cut by its timeout after its first benchmark, has a "-" row for
    each benchmark it did not reach; the smoke suite, which would not fit whole, is not
    started."""
    clock = FakeClock()
    started: list[str] = []

    def runs(out, name, args, timeout, *, dry_run=False, env=None):
        started.append(name)
        if name != "paths":
            clock.now += 20
            return gpu_check.PytestRun(0, None, 20.0)
        run_dir = out / name / "runs" / "paths.20261128-180000"
        run_dir.mkdir(parents=True)
        fake.fake_stream(run_dir, "resnet50-reduce-overhead", "items/s", 2950.0, 0, "ok",
                               [0])
        clock.now += timeout
        raise subprocess.TimeoutExpired(["pytest"], timeout)

    monkeypatch.setattr(gpu_check, "in_subprocess", _fake_workers(gpu_check))
    monkeypatch.setattr(gpu_check, "pytest_run", runs)
    args = gpu_check.parse_args(["--dry-run", "--quick", str(tmp_path)])
    table = gpu_check.Table()
    budget = gpu_check.Budget(200, clock)
    gpu_check.run_checks(table, args, gpu_check.fake_facts, budget)
    capsys.readouterr()
    rows = {r.check: r for r in table.rows}
    assert started == ["reference", "standard", "paths"]
    assert rows["  paths resnet50-reduce-overhead"].status == "ok"
    assert rows[PATHS].status == "-" and "cut by --budget after 145 s" in rows[PATHS].figure
    for name in ("vit-fp16", "clip-b32", "openclip-b32"):
        row = rows[f"  paths {name}"]
        assert row.status == "-" and row.figure.startswith("dropped: the run's time ran out")
    smoke = rows["pytest --bench-suite=smoke"]
    assert smoke.status == "-" and "dropped (the lowest priority)" in smoke.figure
    assert budget.elapsed() <= 200


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
    catch, leaves gpu_check.txt with the rows before it. The paths run hangs: the last run but
    one, so that the smoke run after it is not waited for."""
    out, back = tmp_path / "out", tmp_path / "back"
    env = {**child_env(), "GPU_CHECK_FAKE_HANG": "paths"}
    proc = subprocess.Popen(["bash", str(SCRIPT), "--dry-run", str(out), "--copy-to", str(back)],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    log = out / "paths.log"
    deadline = time.monotonic() + 240  # the runs before it, on a loaded CPU
    while "hangs" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.2)
    group = int(log.read_text().split("process group ")[1].split(")")[0])
    try:
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=30)
        saved = (out / "gpu_check.txt").read_text()
        assert "timer agreement" in saved and STANDARD in saved
        # --copy-to: a folder a lease brings back holds the same table and the logs so far.
        assert (back / "gpu_check.txt").read_text() == saved
        assert "fake pytest: standard" in _archived(back, "standard.log")
        if sig == signal.SIGTERM:
            assert proc.returncode == 130, stdout
            assert "INTERRUPTED (SIGTERM)" in stdout and "INTERRUPTED (SIGTERM)" in saved
            with pytest.raises(ProcessLookupError):  # the hanging run's group was killed
                _wait_gone(group)
            assert "hangs" in _archived(back, "paths.log")  # the last copy, at the end
        else:
            assert "in progress" in saved
    finally:  # whatever failed: nothing of the script or its run is left behind
        for leftover in (group, proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leftover, signal.SIGKILL)


def _archived(folder: Path, name: str) -> str:
    with tarfile.open(folder / "gpu_check_runs.tar.gz") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read().decode()


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
    # A budget of 1 s: the interpreter's module check and the table, no check's worker (the
    # interpreter, not the checks, is what this test is about; a shim chosen fails with exit 2).
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", str(tmp_path / "out"),
                           "--budget", "1"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s of --budget left" in _row(_table(done.stdout), "device facts")
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
    monkeypatch.setattr(gpu_check, "in_subprocess", _fake_workers(gpu_check))
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


# -- issue 37, items 14-19 -------------------------------------------------------------------------
# gpu_check.py's main in a process that cannot import torch: ``python THIS BENCHMARKS ARGS``.
_PARENT_WITHOUT_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("the parent imported torch")
sys.meta_path.insert(0, NoTorch())
sys.path.insert(0, sys.argv[1])
import gpu_check
{pytest_runs}
sys.exit(gpu_check.main(sys.argv[2:]))
"""


@pytest.mark.slow  # two workers import torch in subprocesses: 5-15 s
def test_the_parent_never_imports_torch_so_never_initialises_cuda(tmp_path: Path):
    """Item 14: the process that runs the pytest runs holds no CUDA context (whose cached memory
    NVML would count in every telemetry row): torch cannot even be imported there, and the
    checks that need it still give their figures, from their worker processes (the dry run's
    test holds the same on the CPU's figures)."""
    # The suites are not what this test is about: no pytest run (their rows say no summary).
    no_runs = "gpu_check.pytest_run = lambda out, name, *a, **k: gpu_check.PytestRun(0, None, 0.0)"
    done = subprocess.run([sys.executable, "-c", _PARENT_WITHOUT_TORCH.format(pytest_runs=no_runs),
                           str(ROOT / "benchmarks"), str(tmp_path / "out")], capture_output=True,
                          text=True, env=child_env(), timeout=300)
    table = _table(done.stdout)
    assert not any("the parent imported torch" in row for row in table), done.stdout
    # This machine has no GPU: the worker's torch says so.
    assert "torch.cuda.is_available() is False" in _row(table, "CUDA device"), done.stdout


def test_the_table_is_written_before_the_device_facts_are_read(gpu_check: ModuleType,
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture):
    """Item 17: reading the device facts starts CUDA, which can hang: the table (the facts
    pending) is already in OUT and in --copy-to by then."""
    out, back = tmp_path / "out", tmp_path / "back"
    back.mkdir()
    seen: dict[str, str] = {}

    def facts_hang():
        for where in (out, back):
            path = where / "gpu_check.txt"
            seen[str(where)] = path.read_text() if path.exists() else "(no file)"
        raise TimeoutError("cuInit hangs")

    gpu_check.main(["--dry-run", str(out), "--copy-to", str(back)], facts_of=facts_hang)
    capsys.readouterr()
    for where in (out, back):
        assert "device facts pending" in seen[str(where)], seen


def _stream_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_a_run_cut_by_its_timeout_keeps_the_rows_of_the_benchmarks_that_finished(
        gpu_check: ModuleType, fake: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture):
    """Item 16: toy finished on both GPUs, resnet18 was cut mid-run: toy's row keeps its figure
    (the rate its streams hold), resnet18's says it failed, the run's row the timeout."""
    toy_rate = 51234.0

    def killed_mid_suite(out, name, args, timeout, *, dry_run=False, env=None):
        run_dir = out / name / "runs" / "smoke.20261127-120000"
        run_dir.mkdir(parents=True)
        for device in (0, 1):
            fake.fake_stream(run_dir, "toy", "items/s", toy_rate, device, "ok", [device])
        fake.fake_stream(run_dir, "resnet18", "items/s", 2950.0, 0, "ok", [0])
        cut = run_dir / "resnet18.D0.data"  # the stream of the run in flight: no end record
        cut.write_text("\n".join(_stream_lines(cut)[:-5]) + "\n")
        raise subprocess.TimeoutExpired(["pytest"], timeout)

    monkeypatch.setattr(gpu_check, "pytest_run", killed_mid_suite)
    table = gpu_check.Table()
    run_dir = gpu_check.suite_rows(table, tmp_path, "smoke", "pytest --bench-suite=smoke", [],
                                   100.0, dry_run=True)
    capsys.readouterr()
    rows = {r.check: r for r in table.rows}
    title = rows["pytest --bench-suite=smoke"]
    assert title.status == "FAIL" and "timed out after 100 s" in title.figure
    assert "2 benchmarks read from the streams" in title.figure
    toy = rows["  smoke toy"]
    assert toy.status == "ok" and f"{toy_rate:,.1f} items/s" in toy.figure
    assert "2 runs on 2 devices" in toy.figure
    assert rows["  smoke resnet18"].status == "FAIL"
    assert run_dir is not None and run_dir.name == "smoke.20261127-120000"  # for telemetry


def test_copy_to_gets_the_table_the_summaries_and_one_archive_of_the_rest(
        gpu_check: ModuleType, tmp_path: Path):
    """Issue 49 item 14: what a lease brings back is at most 8 files: the table, the workers'
    log, each suite's summary JSON and one archive of the rest (each run's log, the streams),
    not the run directories' other files nor the workers' results one by one."""
    out, back = tmp_path / "out", tmp_path / "back"
    (out / "workers").mkdir(parents=True)
    back.mkdir()
    wanted = {"checks.log"} | {f"{s}.json" for s in ("reference", "standard", "paths", "smoke")}
    for name in (*wanted, "smoke.log", "other.log", "reference.yaml", "workers/facts.json"):
        (out / name).write_text(f"{name}\n")
    table = gpu_check.Table(path=out / "gpu_check.txt", copy_to=back)
    table.add("torch / CUDA", "2.11.0 / 13.0", True)
    copied = {p.name for p in back.iterdir()}
    assert copied == wanted | {"gpu_check.txt"}
    assert (back / "smoke.json").read_text() == "smoke.json\n"
    table.archive()  # after each run
    copied = {p.name for p in back.iterdir()}
    assert copied == wanted | {"gpu_check.txt", "gpu_check_runs.tar.gz"} and len(copied) <= 8
    assert len(gpu_check.COPIED) <= 8
    assert _archived(back, "smoke.log") == "smoke.log\n"


def _recipe_lines(text: str, word: str) -> list[str]:
    """The command lines naming ``word`` (a line continued with a backslash joined)."""
    joined = text.replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if word in line]


def test_one_lease_recipe_everywhere_with_the_wheels_inside_the_checkout():
    """Item 18: where only the checkout is copied to the GPU node, wheels in /tmp are not
    there (exit 2 before any row): every recipe carries them in the checkout's .whl, which git
    does not ignore (the device copies what git does not ignore)."""
    for doc in (ROOT / "docs" / "gpu.md", ROOT / "benchmarks" / "README.md"):
        text = doc.read_text()
        # The recipes (a result table's row records how an older lease ran: not a recipe).
        leases = [line for line in _recipe_lines(text, "gpu_check.sh")
                  if "--budget" in line and not line.startswith("|")]
        wheels = [line for line in _recipe_lines(text, "benchmarks/gpu_wheels.py")
                  if line.startswith(("python", "`python"))]
        assert leases and wheels, doc
        for line in leases:
            assert "--wheels .whl" in line and "--budget 440" in line, (doc, line)
        for line in wheels:
            assert "gpu_wheels.py .whl" in line, (doc, line)
        assert "/tmp/gpu-wheels" not in text, doc
    # No ignore file of the project's names it (a clone's own .git/info/exclude is not the
    # project's: a checkout made elsewhere does not have it).
    ignored = subprocess.run(["git", "check-ignore", "-v", ".whl/pydantic.whl"], cwd=ROOT,
                             check=False, capture_output=True, text=True)
    assert ignored.returncode == 1 or "info/exclude:" in ignored.stdout, ignored.stdout


def test_the_bare_window_is_pipelined_on_a_fake_cuda_device(gpu_check: ModuleType):
    """Item 15: the reference times a window with two events and one synchronize, so the host
    runs ahead as in training: a step of 1 ms of host work and 4 ms on the device reads the
    device's 4 ms (a sync per step would read 5 ms)."""
    from pytest_dlbench.measure.fakecuda import FakeCuda

    cuda = FakeCuda(launch_overhead=0.0)
    host, device, batch, steps = 0.001, 0.004, 64, 20

    def step() -> None:
        cuda.host(host)
        cuda.launch(device)

    rate = gpu_check.window_rate(step, batch, steps=steps, warmup=3, cuda=cuda)
    assert rate == pytest.approx(batch / device, rel=1e-9)
    assert cuda.synchronize_calls + cuda.event_syncs == 1

    def synced_step() -> None:  # the reference before issue 37: a sync after every step
        step()
        cuda.synchronize()

    serialised = gpu_check.window_rate(synced_step, batch, steps=steps, warmup=3, cuda=cuda)
    assert serialised == pytest.approx(batch / (host + device), rel=1e-9)


def test_the_window_on_the_cpu_times_the_steps_after_the_warmup(gpu_check: ModuleType):
    durations = [5.0, 5.0, 0.5, 0.25, 0.25]  # two warm-up steps, then three timed
    clock = FakeClock()

    def step() -> None:
        clock.now += durations.pop(0)

    rate = gpu_check.window_rate(step, 8, steps=3, warmup=2, clock=clock)
    assert rate == pytest.approx(3 * 8 / (0.5 + 0.25 + 0.25)) and not durations


def test_the_bare_loop_on_the_cpu_agrees_with_an_independent_timing(gpu_check: ModuleType):
    """Item 19: the bare training step (tiny convnet, the reference's layout and optimizer) on
    the CPU: its rate against one timed by stamps around each timed step."""
    import time as clock

    batch, warmup, steps = 4, 2, 5
    step = gpu_check.bare_training_step(batch, device="cpu", tiny=True)
    stamps: list[tuple[float, float]] = []

    def stamped() -> None:
        started = clock.perf_counter()
        step()
        stamps.append((started, clock.perf_counter()))

    rate = gpu_check.window_rate(stamped, batch, steps=steps, warmup=warmup)
    timed = stamps[warmup:]
    independent = batch * len(timed) / (timed[-1][1] - timed[0][0])
    assert len(timed) == steps
    # The window holds the stamped span and the loop's few microseconds between steps.
    assert 0.8 * independent <= rate <= independent * 1.000001


@pytest.mark.parametrize(("gpu", "batch", "milabench"), [
    ("NVIDIA H100 80GB HBM3", 248, MILABENCH_H100_BS248),
    ("NVIDIA H200", 256, MILABENCH_H200_BS256),
    # milabench's sizer maps only "NVIDIA H100 80GB HBM3" to H100.yaml: no figure, the suite's
    # own auto_batch(256)
    ("NVIDIA H100 PCIe", 256, None),
])
def test_the_reference_is_milabenchs_figure_for_the_part(gpu_check: ModuleType, gpu, batch,
                                                          milabench):
    ref = gpu_check.reference_for(gpu)
    rate = ref.milabench.items_per_s if ref.milabench is not None else None
    assert (ref.batch, rate) == (batch, milabench)
    if milabench:
        assert ref.peak == DATASHEET_BF16_DENSE and ref.milabench.batch_size == batch


def test_the_reference_rows_print_the_ratios_and_judge_the_bare_loop(gpu_check: ModuleType):
    ref = gpu_check.reference_for("NVIDIA H100 80GB HBM3")
    per_image = 30.63e9  # resnet50's forward and backward at 244 px, about
    figure, ok = gpu_check.resnet_reference_row(3890.0, 3950.0, ref, dry_run=False,
                                                flops_per_image=per_image)
    assert ok is True
    assert f"project/bare {3890 / 3950:.3f}" in figure
    # One configuration (the milabench suite's resnet50-noio at milabench's batch): the ratio
    # to milabench's published figure, and its TFLOP/s at the same FLOPs per image.
    assert f"milabench H100 {MILABENCH_H100_BS248:,.1f} img/s" in figure
    assert f"project/milabench {3890 / MILABENCH_H100_BS248:.3f}, not slow" in figure
    assert f"{MILABENCH_H100_BS248 * per_image / 1e12:,.1f} TFLOP/s" in figure
    assert f"project 3,890.0 img/s ({3890 * per_image / 1e12:,.1f} TFLOP/s)" in figure
    # Below 0.95 of milabench's figure: slow, said; the row judges the project against the
    # bare loop on the same GPU, not the machine.
    figure, ok = gpu_check.resnet_reference_row(3500.0, 3550.0, ref, dry_run=False)
    assert ok is True and f"project/milabench {3500 / MILABENCH_H100_BS248:.3f}, slow" in figure
    assert "TFLOP/s" not in figure  # no FLOPs counted: no TFLOP/s
    assert gpu_check.resnet_reference_row(3000.0, 3300.0, ref, dry_run=False)[1] is False
    none = gpu_check.resnet_reference_row(3000.0, 3010.0, gpu_check.reference_for(
        "NVIDIA A100-SXM4-80GB"), dry_run=False)[0]
    assert "milabench: no published resnet50-noio figure for NVIDIA A100-SXM4-80GB" in none
    figure, ok = gpu_check.matmul_reference_row(760.0, 770.0, ref, dry_run=False)
    assert ok is True and f"project/peak {760 / DATASHEET_BF16_DENSE:.3f}" in figure
    assert "milabench" not in figure  # no milabench file holds a matmul figure to compare
    # Past the datasheet's dense peak: an error of measurement, never a figure that passes.
    figure, ok = gpu_check.matmul_reference_row(1100.0, 1090.0, ref, dry_run=False)
    assert ok is False and "error of measurement" in figure


def test_the_reference_suite_runs_the_milabench_suites_resnet50_noio(gpu_check: ModuleType,
                                                                    tmp_path: Path):
    """The project's run is the shipped milabench suite's resnet50-noio at the reference batch
    (244 px fixed batch, soft labels, plain SGD, tf32-fp16, channels_last), every other
    argument the suite's, and matmul bf16 8192^3, as the workloads' own parsers read it."""
    from pytest_dlbench.suite.argv import fill_all
    from pytest_dlbench.suite.locate import find_suite
    from pytest_dlbench.suite.resolve import resolve_suite
    from pytest_dlbench.workloads import matmul, vision

    path = tmp_path / "reference.yaml"
    path.write_text(gpu_check.reference_suite(248, quick=True))
    specs = {s.name: s for s in resolve_suite(path).enabled}
    resnet = vision.make_parser().parse_args(list(specs["resnet50-noio"].args))
    assert (resnet.model, resnet.batch_size, resnet.precision) == ("resnet50", 248, "tf32-fp16")
    assert resnet.channels_last and resnet.fixed_batch and resnet.soft_labels
    assert (resnet.image_size, resnet.momentum, resnet.fused, resnet.lr) == (244, 0, False, 0.01)
    shipped = {s.name: s for s in resolve_suite(find_suite("milabench")).enabled}
    suite = vision.make_parser().parse_args(
        fill_all(shipped["resnet50-noio"].args, {}))  # auto_batch(256) -> 256
    assert {**vars(suite), "batch_size": 248} == vars(resnet)
    mm = matmul.make_parser().parse_args(list(specs["matmul-bf16"].args))
    assert (mm.m, mm.n, mm.k, mm.dtype) == (8192, 8192, 8192, "bf16")


def test_the_reference_runs_on_the_first_visible_gpu(gpu_check: ModuleType):
    """In the PCI bus's order, NVML's: CUDA's default puts the fastest GPU first, and the
    telemetry would sample another GPU than the one the rows ran on."""
    assert gpu_check.one_gpu_env({"CUDA_VISIBLE_DEVICES": "3, 5"})["CUDA_VISIBLE_DEVICES"] == "3"
    assert gpu_check.one_gpu_env({"PATH": "/bin"}) == {
        "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_the_bare_loop_takes_the_milabench_suites_step(gpu_check: ModuleType):
    """The bare loop's recipe (written with torch alone) is the milabench suite's resnet50-noio
    as its workload reads it: the settings it hard-codes are the suite's, the ones it reads
    (image side, learning rate, classes) come from it; on the CPU (tiny) its labels are soft
    and its optimizer plain SGD."""
    noio = gpu_check.milabench_noio()
    assert (noio.image_size, noio.lr, noio.classes) == (244, 0.01, 1000)
    assert (noio.momentum, noio.fused, noio.soft_labels, noio.channels_last, noio.precision) == (
        0, False, True, True, "tf32-fp16")
    step = gpu_check.bare_training_step(4, device="cpu", tiny=True, noio=noio)
    assert step.labels.dtype.is_floating_point and tuple(step.labels.shape) == (4, 10)
    group = step.optimizer.param_groups[0]
    assert (group["lr"], group["momentum"], bool(group.get("fused"))) == (0.01, 0, False)
    step()
    assert step.last_loss is not None


def test_a_bare_loop_whose_loss_is_not_finite_is_no_reference(gpu_check: ModuleType):
    """The bare loop's rate is a training rate only while its loss is finite (an H200 run,
    2026-11-27: fused SGD's unwritten momentum made the project's resnet50 NaN at step 3)."""
    ref = gpu_check.reference_for("NVIDIA H200")
    figure, ok = gpu_check.resnet_reference_row(4800.0, 4900.0, ref, dry_run=False,
                                                bare_loss=float("nan"))
    assert ok is False and "bare loop's loss is nan" in figure
    _, ok = gpu_check.resnet_reference_row(4800.0, 4900.0, ref, dry_run=False, bare_loss=6.9)
    assert ok is True
