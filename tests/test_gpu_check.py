"""benchmarks/gpu_check.sh, the first thing run on a lent GPU machine: its table comes out
whatever happens, one row per check, and its --dry-run (fake GPUs, fake pytest runs) runs here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _procs import child_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
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
    # The output directory is the path given, never "--quick"; the table is saved there too.
    assert (out / "gpu_check.txt").read_text() == done.stdout
    assert not (ROOT / "--quick").exists() and not (tmp_path / "--quick").exists()
    assert "quick)" in next(x for x in done.stdout.splitlines() if x.startswith("gpu_check  "))
    # Per-GPU benchmarks ran on both (fake) GPUs at once: one pytest with -n 2.
    assert "2 runs on 2 devices" in _row(table, "  smoke toy")
    assert "fake GPUs" in (out / "smoke.log").read_text()
    # A benchmark that skipped itself: skipped rows, its telemetry is not a failure.
    assert "skipped" in _row(table, "  smoke clip-tiny-openclip").split()
    assert "skipped" in _row(table, "telemetry smoke clip-tiny-openclip.D0").split()
    assert "ok" in _row(table, "telemetry smoke toy.D1").split()


def test_an_unknown_option_is_refused_by_the_script(tmp_path: Path):
    done = _run_sh("--dry-run", "--quik", str(tmp_path))
    assert done.returncode == 2 and "unknown option --quik" in done.stderr


def test_arguments_in_any_order(gpu_check: ModuleType, tmp_path: Path):
    for argv in (["--quick", str(tmp_path)], [str(tmp_path), "--quick"],
                 ["--dry-run", "--quick", str(tmp_path)]):
        args = gpu_check.parse_args(argv)
        assert args.out == tmp_path and args.quick, argv
    assert gpu_check.parse_args(["--quick"]).out == gpu_check.DEFAULT_OUT


def test_a_timeout_in_one_step_still_prints_the_table_with_a_fail_row(
        gpu_check: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    real_run = gpu_check.pytest_run

    def smoke_hangs(out, name, args, timeout, *, dry_run=False):
        if name == "smoke":
            raise subprocess.TimeoutExpired(["pytest"], timeout)
        return real_run(out, name, args, timeout, dry_run=dry_run)

    monkeypatch.setattr(gpu_check, "pytest_run", smoke_hangs)
    monkeypatch.setattr(gpu_check, "timer_rows", lambda table, rounds, setup: None)
    status = gpu_check.main(["--dry-run", str(tmp_path)])
    table = _table(capsys.readouterr().out)
    assert status == 1
    smoke = _row(table, "pytest --bench-suite=smoke")
    assert "FAIL" in smoke.split() and f"timed out after {gpu_check.SMOKE_TIMEOUT_S:g} s" in smoke
    # The steps after it ran: the standard subset and its telemetry have their rows.
    assert "ok" in _row(table, "standard: resnet50, matmul-bf16").split()
    assert "FAIL" in _row(table, "telemetry smoke").split()  # no run directory
    assert "ok" in _row(table, "telemetry standard resnet50.D0").split()


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
