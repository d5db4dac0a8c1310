"""Does the baseline gate catch real slowdowns, and only them?

A step does a fixed amount of CPU work (``--units`` single-threaded ``--size``² matmuls); a
candidate does 0 %, 3 %, 5 % or 10 % more per step. Each repetition ("pair") measures a fresh
baseline side and one candidate side per slowdown, each side ``--repeats`` runs of
``--skip``/``--stop`` steps timed by ``Bench``; every side is summarized with
``scoring.summarize_runs`` and judged with ``compare.compare`` at its DEFAULT settings. Printed:
the detection rate per slowdown (the 0 % row is the false-alarm rate) and the run time.

Measurement modes (see benchmarks/README.md, "detection", for what each one shows):

- ``--interleave steps`` (default): the sides of a pair advance one step at a time in a
  shuffled round-robin, each with its own clock that runs only during its own steps, so a burst
  of load from other processes hits every side alike (paired A/B benchmarking).
  ``--interleave runs``: whole runs alternate, as separate benchmark runs would.
- ``--clock cpu`` (default): the thread's CPU time (``time.thread_time``): the work, without the
  time this thread spent descheduled by other processes on a shared machine.
  ``--clock wall``: ``time.perf_counter``, what the plugin measures on CPU.

    python benchmarks/detection.py [--pairs 40] [--repeats 5] [--clock cpu|wall] ...
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.measure.timing import CpuBackend, Timer
from pytest_dlbench.results.figures import run_from_records, summarize_runs
from pytest_dlbench.results.judge import ALPHA, REGRESSED, TOLERANCE, compare
from pytest_dlbench.results.model import RunResult

TARGETS = {10: 0.95, 5: 0.80}  # slowdown % -> minimum detection rate
FALSE_ALARMS = 0.05  # maximum rate of "regressed" at 0 %


class SideClock:
    """A clock that advances only between resume() and pause(): one side's own steps."""

    def __init__(self, source: Callable[[], float]) -> None:
        self.source = source
        self.total = 0.0
        self.since: float | None = None

    def __call__(self) -> float:
        if self.since is None:
            return self.total
        return self.total + self.source() - self.since

    def resume(self) -> None:
        self.since = self.source()

    def pause(self) -> None:
        self.total += self.source() - self.since  # type: ignore[operator]
        self.since = None


def make_work(size: int) -> Callable[[int], None]:
    import torch

    torch.set_num_threads(1)  # one core: the other is left to the machine's other tenants
    torch.manual_seed(0)
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)

    def work(units: int) -> None:
        for _ in range(units):
            torch.mm(a, b, out=out)

    return work


@dataclass
class Run:
    """One run of one side in progress."""

    name: str
    units: int
    clock: SideClock
    stream: NullStream = field(default_factory=NullStream)
    bench: Bench | None = None
    steps: Iterator[int] | None = None


def _start(name: str, units: int, args: argparse.Namespace, source: Callable[[], float],
           repeat: int) -> Run:
    run = Run(name, units, SideClock(source))
    spec = {"name": "detection", "weight": 1.0, "enabled": True, "plan": {"method": "per_gpu"},
            "units": "steps/s"}
    run.stream.write("config", spec=spec, device=0, repeat=repeat)
    run.bench = Bench(name=name, stream=run.stream, skip=args.skip, stop=args.stop,
                      timer=Timer(CpuBackend(clock=run.clock)), units="steps/s")
    run.steps = run.bench.iterate(iter(int, 1), batch_size=1)  # endless; Bench stops it
    return run


def _advance(run: Run, work: Callable[[int], None]) -> bool:
    """One step of ``run`` on its own clock; False once its Bench has its window."""
    run.clock.resume()
    try:
        next(run.steps)  # type: ignore[arg-type]
    except StopIteration:
        run.clock.pause()
        return False
    work(run.units)
    run.clock.pause()
    return True


def _finish(run: Run) -> RunResult:
    run.bench.close()  # type: ignore[union-attr]
    run.stream.write("end", status="ok", reason="")
    return run_from_records(run.stream.records)


def measure(sides: dict[str, int], args: argparse.Namespace, work: Callable[[int], None],
            source: Callable[[], float], rng: random.Random) -> dict[str, list[RunResult]]:
    """``--repeats`` runs of every side, interleaved by step or by run."""
    results: dict[str, list[RunResult]] = {name: [] for name in sides}
    for repeat in range(args.repeats):
        runs = [_start(n, u, args, source, repeat) for n, u in sides.items()]
        gc.collect()
        if args.interleave == "steps":
            live = list(runs)
            while live:
                rng.shuffle(live)  # no side always right after another (cache, turbo)
                live = [r for r in live if _advance(r, work)]
        else:
            rng.shuffle(runs)
            for run in runs:
                while _advance(run, work):
                    pass
        for run in runs:
            results[run.name].append(_finish(run))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="repetitions of each pair")
    parser.add_argument("--repeats", type=int, default=5, help="runs per side")
    parser.add_argument("--skip", type=int, default=3)
    parser.add_argument("--stop", type=int, default=30)
    parser.add_argument("--size", type=int, default=128, help="matmul size")
    parser.add_argument("--units", type=int, default=100, help="matmuls per baseline step")
    parser.add_argument("--levels", default="0,3,5,10", help="slowdowns to test, in %%")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--interleave", choices=("steps", "runs"), default="steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help="compare()'s tolerance (to explore; the targets use the default)")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="compare()'s alpha (idem)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    defaults = (args.tolerance, args.alpha) == (TOLERANCE, ALPHA)
    source = time.thread_time if args.clock == "cpu" else time.perf_counter
    work = make_work(args.size)
    rng = random.Random(args.seed)
    sides = {"base": args.units} | {f"+{lv}%": round(args.units * (1 + lv / 100))
                                     for lv in levels}
    measure(sides, argparse.Namespace(**{**vars(args), "repeats": 1}), work, source, rng)

    print(f"detection: {args.pairs} pairs, {args.repeats} run(s) per side, skip {args.skip} "
          f"stop {args.stop}, {args.units} x {args.size}^2 matmul per step, clock {args.clock}, "
          f"interleave {args.interleave}; compare(): tolerance {args.tolerance:g}, "
          f"alpha {args.alpha:g}" + (" (defaults)" if defaults else " (NOT the defaults)"))
    detected = {lv: 0 for lv in levels}
    improved0 = 0
    ratios: dict[int, list[float]] = {lv: [] for lv in levels}
    noise: list[float] = []
    start = time.perf_counter()
    for _ in range(args.pairs):
        results = measure(sides, args, work, source, rng)
        base = summarize_runs(results["base"])
        noise.append(base.benchmarks[0].std_pct or 0.0)
        for lv in levels:
            cand = summarize_runs(results[f"+{lv}%"])
            verdict = compare(cand, base, args.tolerance, args.alpha).benchmarks[0]
            ratios[lv].append(verdict.ratio or 0.0)
            detected[lv] += verdict.verdict == REGRESSED
            improved0 += lv == 0 and verdict.verdict == "improved"
    elapsed = time.perf_counter() - start

    ok = True
    print(f"\n{'slowdown':>8} {'ratio':>7} {'median ratio':>12} {'regressed':>9}  target")
    for lv in levels:
        rate = detected[lv] / args.pairs
        if lv == 0:
            target, passed = f"<= {FALSE_ALARMS:.0%} (false alarms)", rate <= FALSE_ALARMS
        elif lv in TARGETS:
            target, passed = f">= {TARGETS[lv]:.0%}", rate >= TARGETS[lv]
        else:
            target, passed = "-", True
        ok &= passed
        mark = "" if target == "-" else ("  ok" if passed else "  MISSED")
        print(f"{lv:>7}% {1 / (1 + lv / 100):>7.3f} {statistics.median(ratios[lv]):>12.3f} "
              f"{rate:>9.0%}  {target}{mark}")
    if 0 in levels:
        print(f"improved at 0%: {improved0 / args.pairs:.0%}")
    print(f"baseline std% (median over pairs): {100 * statistics.median(noise):.2f}%")
    print(f"elapsed: {elapsed:.0f} s for {args.pairs} pairs "
          f"({elapsed / args.pairs / len(sides):.2f} s per side)")
    return 0 if ok or not defaults else 1


if __name__ == "__main__":
    sys.exit(main())
