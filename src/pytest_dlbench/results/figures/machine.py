"""What a machine's facts mean (docs/machine.md): whether it is ready to benchmark, what
differs between a run's machine and its baseline's, and ``dlbench machine``'s text.

The facts themselves (host, CPU, GPUs, versions, git commit, the state that changes numbers on
the same hardware) are probed on the machine by :mod:`pytest_dlbench.measure.machine`.
:func:`readiness_problems` names what is off in a state; a run warns once at
its start (``--bench-require-ready``: an error), and ``dlbench machine`` prints it all
(:func:`render_state`). :func:`machine_differences` compares two summaries' machines: a
comparison across machines is worth a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_dlbench.measure import machine as facts

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = [
    "baseline_warnings",
    "machine_differences",
    "load_threshold",
    "readiness_error",
    "readiness_problems",
    "readiness_warning",
    "render_state",
    "state_differences",
]

#: A 1-minute load average above ``LOAD_OWN + max(LOAD_FLOOR, LOAD_PER_CORE x cores)`` is a busy
#: machine (docs/machine.md). ``LOAD_OWN``: the one core your own previous run kept busy, which
#: the 1-minute average still counts for a minute after it ended (back-to-back runs, a run
#: right after ``pip install``, would otherwise warn about themselves).
LOAD_OWN = 1.0
LOAD_FLOOR = 1.0
LOAD_PER_CORE = 0.1


def load_threshold(cores: int) -> float:
    """The 1-minute load above which a machine of ``cores`` cores is busy."""
    return LOAD_OWN + max(LOAD_FLOOR, LOAD_PER_CORE * cores)


def readiness_problems(state: Mapping[str, Any]) -> list[str]:
    """What is off in ``state`` (a :func:`machine_state`), one short phrase each; ``[]`` for a
    machine ready to benchmark. An unknown fact is not a problem: it is shown, not judged.

    Off: a CPU governor other than ``performance``, turbo on, ASLR not fully on (as pyperf: each
    benchmark runs in its own process, and repeats in new processes average over memory
    layouts instead of measuring one), a 1-minute load above :func:`load_threshold`, other
    processes on a GPU, a GPU slowed down (thermal, power brake: ``slowdown``), persistence
    mode off. Whether clocks are locked is shown and compared, not judged: NVML cannot see an
    ``nvidia-smi -lgc`` lock on an idle GPU, and a locked GPU is the one to benchmark on. The
    power limit, ECC and versions are facts to compare (:func:`state_differences`), not judged:
    a lowered power cap is a common way to steady a GPU."""
    out = []
    governor = state.get("governor")
    if governor and governor != "performance":
        out.append(f"CPU governor {governor}")
    if state.get("turbo") is True:
        out.append("turbo on")
    level = state.get("aslr")
    if isinstance(level, int) and level != 2:
        out.append(f"ASLR {_ASLR.get(level, level)}")
    load, cores = state.get("load"), state.get("cores") or 1
    if load and load[0] > load_threshold(cores):
        out.append(f"load {load[0]:.1f} on {cores} cores")
    for gpu in state.get("gpus") or []:
        name = f"GPU {gpu.get('index')}"
        processes = gpu.get("processes")
        if processes:
            n = len(processes)
            out.append(f"{name}: {n} other process{'es' if n > 1 else ''}")
        slowdown = gpu.get("slowdown")
        if slowdown:
            out.append(f"{name} slowed down: {', '.join(map(str, slowdown))}")
        if gpu.get("persistence") is False:
            out.append(f"{name} persistence mode off")
    return out


def readiness_warning(problems: list[str]) -> str:
    """The one line a run on a machine that is not ready starts with."""
    return (f"dlbench: warning: machine not ready: {', '.join(problems)} "
            "(numbers may be noisy; see dlbench machine)")


def readiness_error(problems: list[str]) -> str:
    """``--bench-require-ready``'s usage error."""
    return f"machine not ready: {', '.join(problems)} (--bench-require-ready; see dlbench machine)"


def _on_off(value: Any, on: str = "on", off: str = "off") -> str:
    return "unknown" if value is None else (on if value else off)


# Looked up with whatever a state says (an int, None when unknown).
_ASLR: Mapping[object, str] = {0: "off (0)", 1: "partial (1)", 2: "full (2)"}


def render_state(state: Mapping[str, Any]) -> str:
    """``dlbench machine``: one fact a line, then ``ready`` or ``not ready: ...``."""
    load, cores = state.get("load"), state.get("cores")
    lines = [
        ("CPU governor", state.get("governor") or "unknown (no cpufreq)"),
        ("turbo", _on_off(state.get("turbo"))),
        ("ASLR", _ASLR.get(state.get("aslr"), "unknown")),
        ("load average", (", ".join(f"{x:.2f}" for x in load) if load else "unknown")
         + (f" on {cores} cores" if cores else "")),
        ("driver", state.get("driver") or "-"),
        ("CUDA", state.get("cuda") or "-"),
    ]
    gpus = state.get("gpus") or []
    if not gpus:
        why = state.get("reason")
        lines.append(("GPUs", "no GPU" + (f": {why}" if why else "")))
    for gpu in gpus:
        i = gpu.get("index")
        # None: NVML shows no lock, which may be an -lgc lock on an idle GPU (nvml.py)
        locked = gpu.get("clocks_locked")
        clocks = "not seen locked" if locked is None else _on_off(locked, "locked", "not locked")
        sm, top = gpu.get("sm_clock_mhz"), gpu.get("max_sm_clock_mhz")
        if sm is not None:
            clocks += f" (SM {sm} MHz" + (f" of {top}" if top is not None else "") + ")"
        limit, default = gpu.get("power_limit_w"), gpu.get("default_power_limit_w")
        power = "unknown" if limit is None else f"{limit:g} W"
        if limit is not None and default is not None:
            power += f" (default {default:g} W)"
        processes = gpu.get("processes")
        others = ("unknown" if processes is None
                  else ", ".join(str(p) for p in processes) if processes else "none")
        slowdown = gpu.get("slowdown")
        slowed = ("unknown" if slowdown is None
                  else ", ".join(map(str, slowdown)) if slowdown else "none")
        lines += [
            (f"GPU {i}", str(gpu.get("name") or "unknown")),
            (f"GPU {i} clocks", clocks),
            (f"GPU {i} slowdown", slowed),
            (f"GPU {i} persistence", _on_off(gpu.get("persistence"))),
            (f"GPU {i} power limit", power),
            (f"GPU {i} ECC", _on_off(gpu.get("ecc"))),
            (f"GPU {i} other processes", others),
        ]
    width = max(len(k) for k, _ in lines)
    out = [f"{k.ljust(width)}  {v}" for k, v in lines]
    problems = readiness_problems(state)
    out += ["", f"not ready: {', '.join(problems)}" if problems else "ready"]
    return "\n".join(out)


# -- two machines ------------------------------------------------------------------------------
def _gpu_names(machine: Mapping[str, Any]) -> list[str] | None:
    """The GPU names of a ``machine`` section, without the vendor prefix; None if unrecorded."""
    gpus = machine.get("gpus")
    if not isinstance(gpus, list):
        return None
    names = [str(g.get("name") or "?") if isinstance(g, Mapping) else "?" for g in gpus]
    return [n.removeprefix("NVIDIA ") for n in names]


def _count(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def machine_differences(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """What differs between the machines of two summaries, one short phrase each, this run's
    side first: GPU model (``"GPU H100 vs A100"``), GPU count (``"4 GPUs vs 8"``), CPU model,
    torch version (``"torch 2.11.0 vs 2.14.1"``), then the machine states
    (:func:`state_differences`: governor, turbo, ASLR, driver, CUDA, GPU clocks...).

    Each side holds ``machine`` and ``versions`` as a saved summary does (a loaded summary, or
    :func:`current_machine`); a fact that one side does not record is not compared.
    """
    now, then = current.get("machine") or {}, baseline.get("machine") or {}
    out = []
    gpus_now, gpus_then = _gpu_names(now), _gpu_names(then)
    if gpus_now is not None and gpus_then is not None:
        models_now, models_then = sorted(set(gpus_now)), sorted(set(gpus_then))
        if models_now and models_then and models_now != models_then:
            out.append(f"GPU {'+'.join(models_now)} vs {'+'.join(models_then)}")
        if len(gpus_now) != len(gpus_then):
            out.append(f"{_count(len(gpus_now))} vs {len(gpus_then)}")
    cpu_now, cpu_then = now.get("cpu"), then.get("cpu")
    if cpu_now and cpu_then and cpu_now != cpu_then:
        out.append(f"CPU {cpu_now} vs {cpu_then}")
    torch_now = (current.get("versions") or {}).get("torch")
    torch_then = (baseline.get("versions") or {}).get("torch")
    if torch_now and torch_then and torch_now != torch_then:
        out.append(f"torch {torch_now} vs {torch_then}")
    out += state_differences(now.get("state") or {}, then.get("state") or {})
    return out


def _state_phrase(label: str, now: Any, then: Any, show: Any = str) -> list[str]:
    if now is None or then is None or now == then:
        return []
    return [f"{label} {show(now)} vs {show(then)}"]


def state_differences(now: Mapping[str, Any], then: Mapping[str, Any]) -> list[str]:
    """What differs between two :func:`machine_state` records, one phrase each, this side first
    (``"CPU governor powersave vs performance"``, ``"GPU 0 power limit 500 W vs 700 W"``).
    A fact one side does not know is not compared; the load average, a moment, never is."""
    if not isinstance(now, Mapping) or not isinstance(then, Mapping):
        return []
    on = lambda v: "on" if v else "off"  # noqa: E731
    out = _state_phrase("CPU governor", now.get("governor"), then.get("governor"))
    out += _state_phrase("turbo", now.get("turbo"), then.get("turbo"), on)
    out += _state_phrase("ASLR", now.get("aslr"), then.get("aslr"),
                         lambda v: _ASLR.get(v, str(v)).split(" ")[0])
    out += _state_phrase("driver", now.get("driver"), then.get("driver"))
    out += _state_phrase("CUDA", now.get("cuda"), then.get("cuda"))
    gpus_then = {g.get("index"): g for g in then.get("gpus") or [] if isinstance(g, Mapping)}
    for gpu in now.get("gpus") or []:
        if not isinstance(gpu, Mapping) or gpu.get("index") not in gpus_then:
            continue
        old, name = gpus_then[gpu.get("index")], f"GPU {gpu.get('index')}"
        locked = lambda v: "locked" if v else "not locked"  # noqa: E731
        out += _state_phrase(f"{name} clocks", gpu.get("clocks_locked"),
                             old.get("clocks_locked"), locked)
        out += _state_phrase(f"{name} persistence", gpu.get("persistence"),
                             old.get("persistence"), on)
        out += _state_phrase(f"{name} power limit", gpu.get("power_limit_w"),
                             old.get("power_limit_w"), lambda w: f"{w:g} W")
        out += _state_phrase(f"{name} ECC", gpu.get("ecc"), old.get("ecc"), on)
    return out


def baseline_warnings(current: SuiteSummary, baseline: SuiteSummary) -> tuple[str, ...]:
    """``baseline machine differs: ...`` when both sides say what they ran on. A summary read
    back says what its file says; one scored here ran on this machine, now."""
    base = baseline.provenance
    if base is None or not isinstance(base.get("machine"), Mapping):
        return ()
    now = current.provenance
    if now is None:
        now = facts.current_machine()
    elif not isinstance(now.get("machine"), Mapping):
        return ()
    differences = machine_differences(now, base)
    return (f"baseline machine differs: {', '.join(differences)}",) if differences else ()
