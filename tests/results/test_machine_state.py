"""The machine's state (governor, turbo, ASLR, load, GPU clocks...) from a fake /sys and a fake
NVML: what is read, what counts as not ready, what differs between two machines, the
``dlbench machine`` command and the run's start warning."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.cli import main
from pytest_dlbench.measure import machine as probe  # the facts, read from /sys, /proc, NVML
from pytest_dlbench.measure.machine import machine_info, machine_meta, machine_state
from pytest_dlbench.measure.monitor.nvml import gpu_state
from pytest_dlbench.results.figures import (
    machine,
    machine_differences,
    readiness_problems,
    render_state,
    state_differences,
)


def fake_tree(tmp_path: Path, *, governors: list[str] | None = None, no_turbo: str | None = None,
              boost: str | None = None, aslr: str | None = "2") -> None:
    cpu, proc = tmp_path / "cpu", tmp_path / "proc"
    for i, governor in enumerate(governors or []):
        path = cpu / f"cpu{i}" / "cpufreq" / "scaling_governor"
        path.parent.mkdir(parents=True)
        path.write_text(governor + "\n")
    if no_turbo is not None:
        (cpu / "intel_pstate").mkdir(parents=True)
        (cpu / "intel_pstate" / "no_turbo").write_text(no_turbo + "\n")
    if boost is not None:
        (cpu / "cpufreq").mkdir(parents=True, exist_ok=True)
        (cpu / "cpufreq" / "boost").write_text(boost + "\n")
    if aslr is not None:
        (proc / "sys" / "kernel").mkdir(parents=True)
        (proc / "sys" / "kernel" / "randomize_va_space").write_text(aslr + "\n")


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(probe, "SYS_CPU", str(tmp_path / "cpu"))
    monkeypatch.setattr(probe, "PROC", str(tmp_path / "proc"))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: "no GPU"
    return tmp_path


def test_a_tuned_machine(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(tree, governors=["performance"] * 4, no_turbo="1", aslr="2")
    monkeypatch.setattr(probe, "load_average", lambda: [0.05, 0.1, 0.2])
    state = machine_state()
    assert (state["governor"], state["turbo"], state["aslr"]) == ("performance", False, 2)
    assert state["gpus"] == [] and "nvidia-ml-py" in state["reason"]
    assert readiness_problems(state) == []
    assert render_state(state).endswith("\nready")


def test_an_untuned_machine(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(tree, governors=["powersave", "performance"], boost="1", aslr="0")
    monkeypatch.setattr(probe, "load_average", lambda: [3.5, 2.0, 1.0])
    monkeypatch.setattr(probe.os, "cpu_count", lambda: 4)
    state = machine_state()
    assert state["governor"] == "mixed: performance, powersave" and state["turbo"] is True
    assert readiness_problems(state) == [
        "CPU governor mixed: performance, powersave", "turbo on", "ASLR off (0)",
        "load 3.5 on 4 cores"]


def test_missing_files_are_unknown_not_errors(tree: Path) -> None:
    fake_tree(tree, aslr=None)  # a container: no cpufreq, no intel_pstate, no /proc/sys
    state = machine_state()
    assert (state["governor"], state["turbo"], state["aslr"]) == (None, None, None)
    text = render_state(state)
    assert "CPU governor  unknown (no cpufreq)" in text and "ASLR          unknown" in text
    assert "GPUs          no GPU: nvidia-ml-py is not installed" in text


def test_this_machine_never_fails() -> None:
    state = machine_state()  # the real /proc and /sys, whatever they hold
    assert isinstance(readiness_problems(state), list)
    assert render_state(state).splitlines()[0].startswith("CPU governor")


# -- GPUs, from a fake NVML --------------------------------------------------------------------
class Proc:
    def __init__(self, pid: int) -> None:
        self.pid = pid


class FakeNvml:
    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM = 0, 1

    def __init__(self, *, app: int = 1410, default: int = 1410, reasons: int = 0,
                 persistence: int = 1, limit: int = 400_000, pids: tuple[int, ...] = ()):
        self.app, self.default, self.reasons = app, default, reasons
        self.persistence, self.limit, self.pids = persistence, limit, pids

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"
    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040
    def nvmlDeviceGetCount(self) -> int:
        return 1
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i
    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA A100-SXM4-80GB"
    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1275
    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1410
    def nvmlDeviceGetApplicationsClock(self, h: int, kind: int) -> int:
        return self.app
    def nvmlDeviceGetDefaultApplicationsClock(self, h: int, kind: int) -> int:
        return self.default
    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self.reasons
    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self.persistence
    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return self.limit
    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return 400_000
    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return [1, 1]
    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Proc]:
        return [Proc(p) for p in self.pids]
    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Proc]:
        return []


def test_gpu_state_of_a_ready_gpu() -> None:
    state = gpu_state(FakeNvml(reasons=0x2))  # a clocks setting holds the clocks
    assert (state["driver"], state["cuda"], state["reason"]) == ("550.54.15", "12.4", "")
    (gpu,) = state["gpus"]
    assert gpu == {
        "index": 0, "name": "NVIDIA A100-SXM4-80GB", "sm_clock_mhz": 1275,
        "max_sm_clock_mhz": 1410, "app_clock_mhz": 1410, "default_app_clock_mhz": 1410,
        "clocks_locked": True, "persistence": True, "power_limit_w": 400.0,
        "default_power_limit_w": 400.0, "ecc": True, "processes": [], "slowdown": [],
    }
    assert readiness_problems({"gpus": state["gpus"]}) == []


def test_gpu_state_of_a_busy_untuned_gpu() -> None:
    state = gpu_state(FakeNvml(persistence=0, limit=300_000, pids=(4242, 77)), ignore_pids=[77])
    (gpu,) = state["gpus"]
    # No clocks setting seen: perhaps none, perhaps -lgc (NVML cannot tell): not judged.
    assert gpu["processes"] == [4242] and gpu["clocks_locked"] is None
    assert readiness_problems({"gpus": state["gpus"]}) == [
        "GPU 0: 1 other process", "GPU 0 persistence mode off"]
    # a lowered power cap is shown and compared, not judged
    text = render_state({**state, "load": [0.0, 0.0, 0.0], "cores": 8})
    assert "GPU 0 clocks           not seen locked (SM 1275 MHz of 1410)" in text
    assert "GPU 0 slowdown         none" in text
    assert "GPU 0 other processes  4242" in text
    assert text.splitlines()[-1].startswith("not ready: GPU 0: 1 other process")


def test_applications_clocks_moved_from_their_default_are_locked() -> None:
    (gpu,) = gpu_state(FakeNvml(app=1095, default=1410))["gpus"]
    assert gpu["clocks_locked"] is True


# nvmlClocksEventReason* bits
IDLE, SETTING, POWER_CAP, THERMAL_HW = 0x1, 0x2, 0x4, 0x40


def test_clocks_locked_with_lgc_on_an_idle_gpu_are_ready() -> None:
    # `nvidia-smi -lgc 1755`: applications clocks untouched, and an idle GPU reports "idle",
    # not "clocks setting". The state a benchmark wants must not be "not ready".
    (gpu,) = gpu_state(FakeNvml(reasons=IDLE))["gpus"]
    assert gpu["clocks_locked"] is not False and gpu["slowdown"] == []
    assert readiness_problems({"gpus": [gpu]}) == []


def test_clocks_locked_with_lgc_on_a_busy_gpu_are_locked() -> None:
    (gpu,) = gpu_state(FakeNvml(reasons=SETTING | POWER_CAP))["gpus"]
    assert gpu["clocks_locked"] is True
    assert readiness_problems({"gpus": [gpu]}) == []  # a power cap steadies a GPU


def test_a_thermally_slowed_gpu_is_not_ready() -> None:
    (gpu,) = gpu_state(FakeNvml(reasons=SETTING | THERMAL_HW | 0x80))["gpus"]
    assert gpu["slowdown"] == ["thermal slowdown (hardware)", "power brake"]
    assert readiness_problems({"gpus": [gpu]}) == [
        "GPU 0 slowed down: thermal slowdown (hardware), power brake"]
    assert "GPU 0 slowdown         thermal slowdown (hardware), power brake" in render_state(
        {"gpus": [gpu]})


def test_require_ready_accepts_an_lgc_locked_gpu(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake_tree(tree, governors=["performance"], no_turbo="1", aslr="2")
    monkeypatch.setattr(probe, "load_average", lambda: [0.0, 0.0, 0.0])
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(reasons=IDLE))  # idle, -lgc locked
    assert main(["machine", "--require-ready"]) == 0, capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(reasons=IDLE | THERMAL_HW))
    assert main(["machine", "--require-ready"]) == 4
    assert capsys.readouterr().out.endswith(
        "\nnot ready: GPU 0 slowed down: thermal slowdown (hardware)\n")


def test_an_nvml_that_answers_nothing_gives_unknowns() -> None:
    class Mute:
        def nvmlInit(self) -> None: ...
        def nvmlShutdown(self) -> None: ...
        def nvmlDeviceGetCount(self) -> int:
            return 1
        def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
            return i

    state = gpu_state(Mute())
    (gpu,) = state["gpus"]
    assert gpu["index"] == 0
    assert all(v is None for k, v in gpu.items() if k != "index")
    assert readiness_problems(state) == []  # unknown is shown, not judged


# -- two machines ------------------------------------------------------------------------------
def test_state_differences() -> None:
    now = {"governor": "powersave", "turbo": True, "aslr": 1, "load": [5.0], "driver": "550",
           "cuda": "12.4", "gpus": [{"index": 0, "clocks_locked": False, "persistence": True,
                                     "power_limit_w": 300.0, "ecc": True}]}
    then = {"governor": "performance", "turbo": False, "aslr": 2, "load": [0.0],
            "driver": "535", "cuda": "12.2", "gpus": [{"index": 0, "clocks_locked": True,
                                                       "persistence": True,
                                                       "power_limit_w": 400.0, "ecc": False}]}
    assert state_differences(now, then) == [
        "CPU governor powersave vs performance", "turbo on vs off", "ASLR partial vs full",
        "driver 550 vs 535", "CUDA 12.4 vs 12.2", "GPU 0 clocks not locked vs locked",
        "GPU 0 power limit 300 W vs 400 W", "GPU 0 ECC on vs off"]
    assert state_differences(now, now) == []
    assert state_differences(now, {"governor": None, "aslr": 1}) == []  # unknown / the same


def test_compare_warns_when_the_states_differ() -> None:
    def side(governor: str) -> dict[str, Any]:
        return {"machine": {"cpu": "x", "gpus": [], "state": {"governor": governor}},
                "versions": {}}

    assert machine_differences(side("powersave"), side("performance")) == [
        "CPU governor powersave vs performance"]
    from pytest_dlbench.results.figures import baseline_warnings
    from pytest_dlbench.results.model import SuiteSummary

    def saved(governor: str) -> SuiteSummary:  # a summary read back: what its file says
        return SuiteSummary((), None, (), 0.0, provenance=side(governor))

    assert baseline_warnings(saved("powersave"), saved("performance")) == (
        "baseline machine differs: CPU governor powersave vs performance",)


def test_the_state_is_in_the_meta_record_and_the_machine_section() -> None:
    assert set(machine_meta()["state"]) >= {"governor", "turbo", "aslr", "load", "gpus",
                                            "driver", "cuda"}
    assert set(machine_info()["state"]) >= {"governor", "turbo", "aslr", "load", "gpus"}


# -- dlbench machine ---------------------------------------------------------------------------
def test_dlbench_machine(tree: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    fake_tree(tree, governors=["performance"], no_turbo="1", aslr="1")
    monkeypatch.setattr(probe, "load_average", lambda: [0.0, 0.0, 0.0])
    assert main(["machine"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == ["CPU governor  performance", "turbo         off",
                                    "ASLR          partial (1)"]
    assert out.endswith("\nnot ready: ASLR partial (1)\n")
    assert main(["machine", "--require-ready"]) == 4
    capsys.readouterr()
    assert main(["machine", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["aslr"] == 1 and data["problems"] == ["ASLR partial (1)"]
    fake_tree(tree / "ready", governors=["performance"], no_turbo="1", aslr="2")
    monkeypatch.setattr(probe, "SYS_CPU", str(tree / "ready" / "cpu"))
    monkeypatch.setattr(probe, "PROC", str(tree / "ready" / "proc"))
    assert main(["machine", "--require-ready"]) == 0
    assert capsys.readouterr().out.endswith("\nready\n")


# -- the run's start ---------------------------------------------------------------------------
SUITE = "toy:\n  definition: pytest_dlbench.workloads.toy:main\n"


@pytest.fixture
def not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "readiness_problems", lambda state: ["turbo on", "ASLR on"])


QUICK = "quick:\n  definition: defs.py:quick\n  voir: {options: {skip: 1, stop: 4}}\n"
QUICK_DEFS = ("def quick(bench):\n"
              "    for _ in bench.iterate(range(8), batch_size=1):\n        pass\n")


def test_a_machine_that_is_not_ready_warns_once(pytester: pytest.Pytester, not_ready: None):
    pytester.makefile(".yaml", suite=QUICK)
    pytester.makepyfile(defs=QUICK_DEFS)
    args = ("--bench-suite=suite.yaml", "--bench-isolation=inline", "--bench-base=out")
    result = pytester.runpytest_inprocess(*args)
    line = ("dlbench: warning: machine not ready: turbo on, ASLR on (numbers may be noisy; "
            "see dlbench machine)")
    assert result.stdout.lines.count(line) == 1
    assert result.ret == 0
    quiet = pytester.runpytest_inprocess(*args, "-q")
    assert quiet.stdout.lines.count(line) == 1  # no header: the line stands alone


def test_collect_only_does_not_judge_the_machine(pytester: pytest.Pytester,
                                                 not_ready: None) -> None:
    # issue 25 item 4: nothing is measured, so whether the machine is ready does not matter.
    pytester.makefile(".yaml", suite=SUITE)
    for extra in ((), ("-q",), ("--bench-require-ready",)):
        result = pytester.runpytest_inprocess("--bench-suite=suite.yaml", "--collect-only",
                                              "--bench-base=out", *extra)
        assert result.ret == 0
        assert "machine not ready" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("load", "cores", "busy"), [
    ([1.2, 1.0, 0.9], 2, False),  # issue 25 item 4: one core of your own last run
    ([1.9, 1.0, 0.9], 8, False),
    ([2.1, 1.0, 0.9], 2, True),
    ([6.5, 1.0, 0.9], 64, False),  # 1 + 6.4
    ([7.5, 1.0, 0.9], 64, True),
])
def test_the_load_threshold(load: list[float], cores: int, busy: bool) -> None:
    problems = readiness_problems({"load": load, "cores": cores})
    assert problems == ([f"load {load[0]:.1f} on {cores} cores"] if busy else [])
    assert machine.load_threshold(cores) == 1 + max(1, cores / 10)


def test_require_ready_is_a_usage_error(pytester: pytest.Pytester, not_ready: None) -> None:
    pytester.makefile(".yaml", suite=SUITE)
    result = pytester.runpytest_inprocess("--bench-suite=suite.yaml", "--bench-require-ready",
                                          "--bench-base=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: machine not ready: turbo on, ASLR on "
                                 "(--bench-require-ready; see dlbench machine)"])


def test_a_ready_machine_says_nothing(pytester: pytest.Pytester,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "readiness_problems", lambda state: [])
    pytester.makefile(".yaml", suite=SUITE)
    result = pytester.runpytest_inprocess("--bench-suite=suite.yaml", "--collect-only",
                                          "--bench-require-ready", "--bench-base=out")
    assert result.ret == 0
    assert "machine not ready" not in result.stdout.str()
