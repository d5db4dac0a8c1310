"""gate_power's benchmarks: what one step does, and how a slowdown of X % is injected exactly.

- ``spin``: UNITS multiply-adds of pure Python per step; ``--extra-pct=X`` runs X % more of them.
  A CPU neighbour hardly slows it; a memory-streaming one hardly either (it lives in the cache).
- ``mlp``: the smoke suite's toy MLP (``pytest_dlbench.workloads.toy``'s sizes: 32 features, 64
  hidden, batch 64, SGD on an MSE loss), one thread (``torch.set_num_threads(1)``, and gate_power
  runs pytest with ``OMP_NUM_THREADS=1``). A step is STEPS whole training steps (forward,
  backward, optimizer step) on cycled batches, STEPS a multiple of 100; ``--extra-pct=X`` runs
  STEPS * (1 + X/100) of them, all of one shape, so the step costs X % more, less only the
  per-step bookkeeping of ``bench.iterate`` (microseconds against tens of milliseconds).
  ``--check-slowdown`` measures it (:func:`measure_slowdown`).

Each benchmark is one source text, written into the scratch repository as ``gp_bench.py`` and
also run in this process (``load``) to calibrate it and to check the injected slowdown, so the
code measured here is the code the children run.
"""

from __future__ import annotations

import statistics
import textwrap
import time
from collections.abc import Callable
from typing import Any

WORKLOADS = ("spin", "mlp")
#: The argument that sets a step's base work, by workload.
WORK_ARG = {"spin": "--units", "mlp": "--steps"}

SPIN = textwrap.dedent(
    '''
    """gate_power's CPU benchmark: UNITS multiply-adds of pure Python per step."""
    import argparse


    def make_step(extra_pct=0.0, units=10_000):
        n = int(round(units * (1 + extra_pct / 100)))

        def step():
            total = 0
            for i in range(n):
                total += i * i

        return step


    def main(bench):
        parser = argparse.ArgumentParser()
        parser.add_argument("--units", type=int, required=True)
        parser.add_argument("--extra-pct", type=float, default=0.0)
        args = parser.parse_args(list(bench.args))
        step = make_step(args.extra_pct, args.units)
        bench.set_units("steps/s")
        for _ in bench.iterate(range(10**9), batch_size=1):
            step()
    '''
)

MLP = textwrap.dedent(
    '''
    """gate_power's real training step: the toy MLP (32 features, 64 hidden, batch 64), one
    thread; a step is STEPS training steps, and --extra-pct=X runs X % more of them."""
    import argparse

    BATCH, FEATURES, HIDDEN, BATCHES = 64, 32, 64, 8


    def make_step(extra_pct=0.0, steps=100, seed=0):
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                    torch.nn.Linear(HIDDEN, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs = torch.randn(BATCHES, BATCH, FEATURES)
        targets = inputs.sum(dim=2, keepdim=True) + 0.1 * torch.randn(BATCHES, BATCH, 1)
        n = int(round(steps * (1 + extra_pct / 100)))
        state = {"i": 0}

        def step():
            for _ in range(n):
                k = state["i"] = (state["i"] + 1) % BATCHES
                loss = torch.nn.functional.mse_loss(model(inputs[k]), targets[k])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

        return step


    def main(bench):
        parser = argparse.ArgumentParser()
        parser.add_argument("--steps", type=int, required=True)
        parser.add_argument("--extra-pct", type=float, default=0.0)
        args = parser.parse_args(list(bench.args))
        step = make_step(args.extra_pct, args.steps)
        bench.set_units("items/s")
        for _ in bench.iterate(range(10**9), batch_size=args.steps * BATCH):
            step()
    '''
)

SOURCES = {"spin": SPIN, "mlp": MLP}


def load(workload: str) -> dict[str, Any]:
    """The benchmark's module namespace, run here (torch imported only by ``mlp``'s make_step)."""
    namespace: dict[str, Any] = {"__name__": f"gp_bench_{workload}"}
    exec(compile(SOURCES[workload], f"<gate_power {workload}>", "exec"), namespace)
    return namespace


def _median_seconds(step: Callable[[], None], tries: int = 7) -> float:
    step()  # warm-up: first-call allocations, torch's lazy initialisation
    times = []
    for _ in range(tries):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def calibrate(workload: str, step_ms: float) -> int:
    """The base work (``--units`` or ``--steps``) of a step that takes about ``step_ms`` here;
    for ``mlp`` a multiple of 100, so 3, 5 and 10 % more are whole training steps."""
    make_step = load(workload)["make_step"]
    if workload == "spin":
        units = 10_000
        per_unit = _median_seconds(make_step(0.0, units)) / units
        return max(1000, int(step_ms / 1000 / per_unit))
    per_step = _median_seconds(make_step(0.0, 100)) / 100
    return max(100, int(round(step_ms / 1000 / per_step / 100)) * 100)


def measure_slowdown(workload: str, work: int, extra_pct: float,
                     pairs: int = 31) -> tuple[float, float]:
    """The injected slowdown as measured here, in percent: steps at 0 % and at ``extra_pct`` %
    timed in alternation (ABAB, so a spell of load hits both), ``pairs`` times, on this
    thread's CPU clock (one thread: time the scheduler gives to others is not counted). The
    median of the per-pair ratios, and half their quartile range (the check's own noise)."""
    make_step = load(workload)["make_step"]
    base, slow = make_step(0.0, work), make_step(extra_pct, work)
    base(), slow()
    ratios = []
    for _ in range(pairs):
        spent = []
        for step in (base, slow):
            start = time.thread_time()
            step()
            spent.append(time.thread_time() - start)
        ratios.append(spent[1] / spent[0])
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return 100 * (median - 1), 100 * (q3 - q1) / 2
