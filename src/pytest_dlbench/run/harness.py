"""Running one benchmark in this process: its run context, and a harness that records how it
ended in the stream, whatever happens (an exception, a NaN loss, an OOM, Ctrl-C).

Used by the child process of a benchmark (and by ``--bench-isolation=inline``, and by the
``bench`` fixture of an ordinary test). No pytest here: the plugin turns outcomes into reports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import DlbenchError, one_line
from pytest_dlbench.core.numbers import DEFAULT_UNITS
from pytest_dlbench.core.protocol import Env, Outcome, Status
from pytest_dlbench.measure.bench import Bench, NonFiniteLoss
from pytest_dlbench.measure.flops import count_step_flops
from pytest_dlbench.measure.machine import machine_meta
from pytest_dlbench.measure.monitor.usage import ValidationError
from pytest_dlbench.measure.stream import Event, Stream, StreamWriteError
from pytest_dlbench.profile import finish_profile
from pytest_dlbench.profile.window import ProfiledWindow
from pytest_dlbench.run import barrier
from pytest_dlbench.run.devices import placeholder_context
from pytest_dlbench.run.exit_reason import exit_reason, stderr_tail
from pytest_dlbench.run.launch.rank import RankInfo, open_rank_stream
from pytest_dlbench.suite import BenchSpec, fill_all
from pytest_dlbench.suite.presets import run_dimensions

__all__ = ["RunContext", "classify_exception", "execute", "launch_facts", "start_run"]


@dataclass
class RunContext:
    spec: BenchSpec
    device_index: int
    repeat: int | None
    path: Path
    stream: Stream
    args: list[str]
    data_dir: Path
    run_name: str
    items_scale: int = 1  # an njobs job's world size: its reporting rank counts for all
    profile: Any = None  # a ProfileConfig: profile after the scored steps (docs/profiling.md)
    bench: Any = None
    outcome: Outcome | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def make_bench(self, device: Any) -> Any:
        """The ``Bench`` handed to the benchmark function; writes the ``meta`` record."""
        profiled = None
        if self.profile is not None:
            profiled = ProfiledWindow(self.profile)
        self.stream.write(Event.META, **machine_meta(device))
        self.bench = Bench(
            name=self.spec.name,
            args=list(self.args),
            device=device,
            stream=self.stream,
            skip=self.spec.skip,
            stop=self.spec.stop,
            data_dir=self.data_dir,
            units=self.spec.units or DEFAULT_UNITS,
            items_scale=self.items_scale,
            start_barrier=self._start_barrier(),
            profiled=profiled,
        )
        return self.bench

    def _start_barrier(self) -> Callable[[], dict[str, Any]] | None:
        """The replicas' start barrier, when the parent set one up (per_gpu under xdist)."""
        address = os.environ.get(Env.BARRIER)
        key = os.environ.get(Env.BARRIER_KEY)
        parties = int(os.environ.get(Env.BARRIER_PARTIES, "0") or 0)
        if not address or not key or parties < 2:
            return None
        timeout = min(self.spec.max_duration, 300.0)
        return lambda: barrier.wait(address, key, parties, timeout=timeout)

    def finish_bench(self) -> None:
        """Read the last window (a NaN there fails the run), then count the FLOPs of one step
        of the watched model: after the scored steps, never inside them."""
        if self.bench is None:
            return
        self.bench.close()
        if self.bench.watched is not None:
            model, example = self.bench.watched
            count = count_step_flops(model, example,
                                     items_per_example=self.bench.items_per_example)
            self.stream.write(Event.FLOPS, **count.record())

    def finish_profile(self, scored_rate: Callable[[Any], float | None] | None = None,
                       ) -> list[Path]:
        """Build and write the profile reports of a profiled run (never fails the run: a
        report that cannot be made is a one-line note in it). ``scored_rate``: the results'
        score of the run's records, for the speed report (profile.finish.ScoredRate)."""
        if self.bench is None or not self.profile:
            return []
        return finish_profile(self.bench, self.path.parent, self.path, data_dir=self.data_dir,
                              scored_rate=scored_rate)

    def flush_bench(self) -> None:
        """After a failure: write the last measured window if it can still be read (before
        ``end``; an error reading it is the failure already being recorded)."""
        if self.bench is not None:
            with contextlib.suppress(Exception):
                self.bench.close()

    def arm_deadline(self) -> None:
        """End this process at the deadline its parent set (:data:`Env.DEADLINE`): the parent
        normally stops it earlier, at ``max_duration``; past the deadline the parent is gone
        (killed, or a torchrun agent that died), and nobody else would."""
        try:
            deadline = float(os.environ.get(Env.DEADLINE, ""))
        except ValueError:
            return
        timer = threading.Timer(max(0.0, deadline - time.time()), self._deadline_passed)
        timer.daemon = True
        timer.name = "dlbench-deadline"
        timer.start()

    def _deadline_passed(self) -> None:
        reason = (f"timeout: ran past its deadline (max_duration {self.spec.max_duration:g} s) "
                  "with no parent process to stop it")
        # The writer refuses a second end: a run that ended already keeps its own.
        with contextlib.suppress(Exception):
            self.stream.write(Event.END, status=Status.TIMEOUT, reason=reason,
                              time=time.time(), writer="deadline")
        # This process's group: its workers, and the other ranks of a torchrun job with it.
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os._exit(124)

    def close(self) -> None:
        if self.bench is not None:
            # Already closed on the normal path; after a failure the last window may not be
            # readable (that is why the run failed), and the end record is already written.
            with contextlib.suppress(Exception):
                self.bench.close()
        self.stream.close()


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def classify_exception(exc: BaseException, stderr: list[str] | None = None) -> Outcome:
    """How a run that raised ``exc`` ended; ``stderr``: the last lines it wrote there (the
    cause of a ``SystemExit``, run/exit_reason.py)."""
    if isinstance(exc, ValidationError | StreamWriteError):
        return Outcome(Status.FAIL, str(exc))
    if isinstance(exc, NonFiniteLoss):
        return Outcome(Status.NAN, one_line(exc))
    if isinstance(exc, SystemExit):
        # argparse exits with status 2 on a bad argument; its message is the last error line.
        return Outcome(Status.FAIL, exit_reason(exc, stderr))
    if _is_oom(exc):
        return Outcome(Status.OOM, f"out of memory: {one_line(exc)}")
    return Outcome(Status.FAIL, one_line(exc))


def _write_end(stream: Stream, outcome: Outcome) -> tuple[Outcome, StreamWriteError | None]:
    """Write ``end``; when the stream cannot be written (a full disk) the run fails with one line
    naming the file and the cause, never a traceback."""
    try:
        stream.write(Event.END, status=outcome.status, reason=outcome.reason, time=time.time())
    except StreamWriteError as exc:
        if outcome.ok:
            return Outcome(Status.FAIL, str(exc)), exc
        if str(exc) in outcome.reason:
            return outcome, exc
        return Outcome(outcome.status, f"{outcome.reason} ({exc})"), exc
    return outcome, None


def execute(
    call: Callable[[], Any],
    stream: Stream,
    *,
    final: bool = True,
    skip_types: tuple[type[BaseException], ...] = (),
    before_end: Callable[[], None] | None = None,
) -> tuple[Outcome, BaseException | None]:
    """Run ``call``; on failure write the ``end`` record and return the exception (not raised,
    so the caller decides how to report it). With ``final``, success writes ``end`` too.
    ``skip_types`` end the run as ``skipped`` (a benchmark that cannot run here, e.g. no GPU).
    ``before_end`` runs after a failure, before ``end`` is written: what it writes (the last
    measurements) comes before ``end``, which is always the last record.
    KeyboardInterrupt is recorded, then re-raised."""
    tail = None
    try:
        with stderr_tail() as tail:
            call()
    except KeyboardInterrupt:
        _write_end(stream, Outcome(Status.FAIL, "interrupted"))
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then reported
        if isinstance(exc, skip_types):
            outcome = Outcome(Status.SKIPPED, str(getattr(exc, "msg", "") or exc))
        else:
            outcome = classify_exception(exc, tail.last_lines() if tail else None)
        if before_end is not None:
            with contextlib.suppress(Exception):
                before_end()
        outcome, _ = _write_end(stream, outcome)
        return outcome, exc
    if final:
        return _write_end(stream, Outcome(Status.OK))
    return Outcome(Status.OK), None


def launch_facts() -> dict[str, Any]:
    """When and how the parent launched this child, and when its harness started: the launch
    overhead is ``meta.time - launched`` (benchmarks/startup.py)."""
    launched = os.environ.get(Env.LAUNCHED)
    if not launched:
        return {}  # inline: nothing was launched
    try:
        facts: dict[str, Any] = {"launched": float(launched)}
    except ValueError:
        return {}
    facts["launcher"] = os.environ.get(Env.LAUNCHER) or "fresh"
    facts["started"] = time.time()
    return facts


def start_run(
    spec: BenchSpec,
    *,
    device: int,
    repeat: int | None,
    path: Path,
    data_dir: Path,
    run_name: str,
    system: Any,
    profile: Any = None,
) -> RunContext:
    """Open a benchmark run's stream in this process, write its ``config`` record and fill the
    launch-time placeholders of its arguments. In an njobs rank only the reporting rank writes
    (docs/multinode.md); the others get a stream that keeps nothing."""
    context = placeholder_context(
        system=system, run_name=run_name, bench_name=spec.name, data_dir=data_dir
    )
    rank = RankInfo.from_env()
    stream = open_rank_stream(path, rank)
    stream.write(Event.CONFIG, spec=spec.to_dict(), device=device, repeat=repeat,
                 **run_dimensions(spec.definition, spec.args), **rank.describe(),
                 **launch_facts())
    try:
        args = fill_all(spec.args, context)
    except DlbenchError as exc:  # an argument the suite wrote cannot be filled: its one line
        with contextlib.suppress(StreamWriteError):
            stream.write(Event.END, status=Status.FAIL, reason=one_line(exc), time=time.time())
        raise
    run = RunContext(
        spec=spec,
        device_index=device,
        repeat=repeat,
        path=path,
        stream=stream,
        args=args,
        data_dir=data_dir,
        run_name=run_name,
        items_scale=rank.items_scale,
        profile=profile,
    )
    run.arm_deadline()
    return run
