"""A noisy neighbour for gate_power: processes on the same machine that stream memory in random
bursts at a set duty cycle, as another tenant's job does on a shared CI runner.

A CPU-only neighbour hardly slows a one-thread training step that has its own core; one that
streams memory (copies of arrays larger than the last-level cache) takes the memory bandwidth and
the cache from it, and slowed the toy MLP by 5-17 % here (issue 26). Each process is on for a
random burst (exponential, mean ``burst_s``), then off for a random time whose mean is that
burst's length times (1 - duty) / duty, so that over a long run the fraction of time on is the
duty cycle (renewal-reward: E[on] / (E[on] + E[off]) = duty).

    python benchmarks/neighbour.py --duty 25          # one neighbour process, until killed

gate_power starts them with :class:`Neighbour` (a context manager) before a trial and stops them
after it on every exit path: a normal end, an exception, Ctrl-C (they run in their own session,
so the terminal's SIGINT reaches only gate_power, which then stops them) and the death of
gate_power itself (Linux ``PR_SET_PDEATHSIG``, and a check of the parent between bursts).
"""

from __future__ import annotations

import argparse
import os
import random
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

FALLBACK_CACHE_BYTES = 64 << 20  # when neither /sys nor lscpu says
READY = "ready"  # what a neighbour prints once its arrays are allocated and touched
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0

Command = Callable[[int], Sequence[str]]  # process index -> its argv


# -- the cache it must overflow ------------------------------------------------------------------
def parse_size(text: str) -> int | None:
    """``32768K``, ``32 MiB``, ``1M`` or plain bytes to bytes; None when unreadable."""
    text = text.strip().split("(")[0].strip().replace(" ", "").upper().removesuffix("B")
    text = text.removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" and text else text
    try:
        return int(float(digits) * scale)
    except ValueError:
        return None


def last_level_cache_bytes(sys_cpu: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The size of cpu0's last-level cache: /sys, else lscpu, else 64 MiB."""
    best: tuple[int, int] | None = None  # (level, bytes)
    for index in sorted(sys_cpu.glob("index*")):
        try:
            level = int((index / "level").read_text())
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if size and (best is None or level > best[0]):
            best = (level, size)
    if best is not None:
        return best[1]
    try:
        out = subprocess.run(["lscpu", "-C=NAME,ONE-SIZE", "-B"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    sizes = [parse_size(line.split()[1]) for line in out.splitlines()[1:] if len(line.split()) > 1]
    known = [s for s in sizes if s]
    return max(known) if known else FALLBACK_CACHE_BYTES


def default_procs(cpus: int | None = None) -> int:
    """One neighbour per core but one (the benchmark's one thread keeps a core of its own, so the
    neighbour competes for memory and cache, not for a time slice); at least one."""
    return max(1, (cpus or os.cpu_count() or 1) - 1)


# -- the duty cycle (pure: a clock, a sleep and the work are passed in) --------------------------
def burst_lengths(mean_on_s: float, rng: random.Random) -> Iterator[float]:
    """The length of each burst: exponential, mean ``mean_on_s``."""
    while True:
        yield rng.expovariate(1 / mean_on_s)


def off_after(on_s: float, duty: float, rng: random.Random) -> float:
    """The pause after a burst that lasted ``on_s``: random, with mean on_s * (1 - duty) / duty.
    Drawn from the burst's real length (the last copy overshoots the drawn one), so the long-run
    fraction on is the duty cycle however long a copy takes."""
    return on_s * (1 - duty) / duty * rng.expovariate(1.0)


def run_duty_cycle(duty: float, *, work: Callable[[], None], clock: Callable[[], float],
                   sleep: Callable[[float], None], rng: random.Random, mean_on_s: float = 0.5,
                   keep_going: Callable[[], bool] = lambda: True,
                   until: float | None = None) -> tuple[float, float]:
    """Bursts of ``work()`` calls and pauses until ``keep_going()`` is false or the clock passes
    ``until``; returns (seconds on, seconds in all)."""
    if not 0 < duty <= 1:
        raise ValueError(f"duty must be in (0, 1], got {duty}")
    start = clock()
    on_total = 0.0
    lengths = burst_lengths(mean_on_s, rng)
    while keep_going() and (until is None or clock() < until):
        burst_start = clock()
        length = next(lengths)
        while clock() - burst_start < length:
            work()
        on = clock() - burst_start
        on_total += on
        if duty < 1:
            sleep(off_after(on, duty, rng))
    return on_total, clock() - start


# -- one neighbour process -----------------------------------------------------------------------
def stream_memory(array_bytes: int) -> Callable[[], None]:
    """One copy of an array of ``array_bytes`` into another: both allocated and touched now."""
    import numpy as np

    source = np.ones(max(1, array_bytes // 8), dtype=np.float64)
    target = np.empty_like(source)
    np.copyto(target, source)

    def copy() -> None:
        np.copyto(target, source)

    return copy


def neighbour_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one memory-streaming neighbour process")
    parser.add_argument("--duty", type=float, required=True, help="percent of the time on")
    parser.add_argument("--bytes", type=int, default=None,
                        help="bytes per array (default: twice the last-level cache)")
    parser.add_argument("--burst-s", type=float, default=0.5, help="mean burst length")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    parent = os.getppid()
    work = stream_memory(args.bytes or 2 * last_level_cache_bytes())
    print(READY, flush=True)
    if args.duty <= 0:
        return 0
    run_duty_cycle(min(1.0, args.duty / 100), work=work, clock=time.monotonic, sleep=time.sleep,
                   rng=random.Random(args.seed), mean_on_s=args.burst_s,
                   keep_going=lambda: os.getppid() == parent)  # orphaned: stop
    return 0


def neighbour_command(duty_pct: float, *, burst_s: float = 0.5, array_bytes: int | None = None,
                      seed: int = 0) -> Command:
    """The argv of neighbour process ``i`` (each its own random stream)."""
    script = str(Path(__file__).resolve())

    def argv(i: int) -> list[str]:
        cmd = [sys.executable, script, f"--duty={duty_pct:g}", f"--burst-s={burst_s:g}",
               f"--seed={seed * 1000 + i}"]
        return cmd + ([f"--bytes={array_bytes}"] if array_bytes else [])

    return argv


# -- a group of them, started and stopped by gate_power ------------------------------------------
def _pdeathsig() -> Callable[[], None] | None:
    """The product's 'die with the parent' (Linux); None elsewhere or without the package."""
    try:
        from pytest_dlbench.run.process import pdeathsig_setter
    except ImportError:
        return None
    return pdeathsig_setter()


class NeighbourFailed(RuntimeError):
    """A neighbour process that exited or said nothing before it was ready."""


class Neighbour:
    """``procs`` neighbour processes at ``duty_pct`` % for the ``with`` block; none at 0 %."""

    def __init__(self, duty_pct: float, procs: int, command: Command,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.duty_pct, self.procs, self.command = duty_pct, procs, command
        self.start_timeout_s = start_timeout_s
        self.processes: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Neighbour:
        if self.duty_pct <= 0:
            return self
        try:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}  # numpy's copies: one thread each
            for i in range(self.procs):
                self.processes.append(subprocess.Popen(
                    list(self.command(i)), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                    text=True, env=env, start_new_session=True, preexec_fn=_pdeathsig()))
            for process in self.processes:
                self._wait_ready(process)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], self.start_timeout_s)
        line = process.stdout.readline().strip() if ready else ""
        if line != READY:
            raise NeighbourFailed(f"neighbour pid {process.pid} not ready after "
                                  f"{self.start_timeout_s:g} s (exit {process.poll()}, "
                                  f"said {line!r})")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate, then kill what is left after a grace period, and reap every one."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        self.processes = []


if __name__ == "__main__":
    raise SystemExit(neighbour_main())
