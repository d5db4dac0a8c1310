"""gate_power's run directories written with the real writer (a paired run of ``gp``, a busy
run): what the tests of benchmarks/gate_power*.py and gate_pool.py share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from _runs import steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.results.judge import SEQUENTIAL

JITTER = (0.01, -0.01, 0.005, -0.005, 0.0, 0.008, -0.008, 0.003, -0.003, 0.0)  # a step's


def busy_stream(folder: Path, bench: str, rate: float, *, repeat: int | None) -> None:
    """A run at ``rate`` whose monitor saw another process use a core all along (4 cores, the
    run's affinity all of them): results/figures/busy.py judges it busy."""
    name = f"{bench}.D0" + (f".R{repeat}" if repeat is not None else "") + ".data"
    spec = {"name": bench, "weight": 1.0, "enabled": True, "plan": {"method": "per_gpu"},
            "tags": [], "skip": 2, "stop": 10}
    with StreamWriter(folder / name) as stream:
        stream.write("config", spec=spec, device=0, repeat=repeat)
        stream.write("meta", host="test", torch="0", device_name="cpu", state={"cores": 4})
        t = 1000.0
        for step, (items, seconds) in enumerate([(10, 5.0)] * 2 + steady_at(rate, jitter=JITTER)):
            t += seconds
            stream.write("rate", value=items / seconds, units="items/s", step=step,
                         warmup=step < 2, time=t, items=items, seconds=seconds)
            # 100 % of one core for the run, 50 % of 4 cores for the machine: 1 core outside.
            stream.write("telemetry", time=t, cpu_percent=100.0, system_cpu_percent=50.0)
        stream.write("end", status="ok", reason="", time=t)


def paired_run(folder: Path, base: Sequence[float], cand: Sequence[float], *,
               design: str = SEQUENTIAL, rounds: int = 10, busy_base: bool = False) -> Path:
    """A --bench-against run directory of ``gp``: round r's base and candidate rates, its
    against.json as the plugin writes it (quantile test, window rate)."""
    run = folder / "run"
    layout.base_dir(run).mkdir(parents=True)
    for r, (b, c) in enumerate(zip(base, cand, strict=True)):
        if busy_base:
            busy_stream(layout.base_dir(run), "gp", b, repeat=r)
        else:
            write_run(layout.base_dir(run), "gp", steady_at(b, jitter=JITTER), repeat=r)
        write_run(run, "gp", steady_at(c, jitter=JITTER), repeat=r)
    layout.write_against(run, {"rev": "HEAD", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "quantile", "rate": "window",
                               "design": design, "warnings": []})
    return run
