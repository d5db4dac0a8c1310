"""What runs during the profiled window: torch.profiler, the CUDA memory history, region names.

:class:`Bench` makes one :class:`Capture` when it is given a :class:`ProfileConfig` that needs a
window, starts it once the scored observations are done, calls :meth:`Capture.step` after every
profiled step and :meth:`Capture.stop` at the end. Nothing here raises into the benchmark: a
profiler that cannot start or stop becomes a one-line note in the reports it feeds, and the run
goes on.

The window's steps are numbered ``k = 0, 1, ...`` and follow the :class:`WindowPlan`: first the
*timed* phase (the timer alone, for the time report), then the *profiler* phase, where
torch.profiler runs its schedule (wait 0, ``warmup``, ``active``, no repeat) and, on CUDA, the
memory history records from ``snapshot.warmup`` steps in until the snapshot is taken
``snapshot.steps`` steps later.

torch is imported when the profiler starts, never at import. ``profiler_factory`` and
``cuda_memory`` replace ``torch.profiler.profile`` and ``torch.cuda.memory`` (tests).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import one_line
from pytest_dlbench.profile.config import PROFILER_REPORTS, ProfileConfig

__all__ = ["SNAPSHOT_MAX_ENTRIES", "Capture", "rank_from_env"]

#: Allocation events kept by the CUDA memory history (the PyTorch docs' example value).
SNAPSHOT_MAX_ENTRIES = 100_000


def rank_from_env(env: Any = None) -> int:
    """This process's rank in a job: ``RANK`` (torchrun), 0 when unset or not a number."""
    value = (env if env is not None else os.environ).get("RANK", "0")
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _device_type(device: Any) -> str:
    return getattr(device, "type", None) or str(device or "cpu").split(":", 1)[0]


class Capture:
    """The profiled window of one run (module docstring)."""

    def __init__(
        self,
        config: ProfileConfig,
        *,
        device: Any = None,
        rank: int | None = None,
        profiler_factory: Callable[..., Any] | None = None,
        cuda_memory: Any = None,
        snapshot_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config
        self.device = device
        self.cuda = _device_type(device) == "cuda"
        self.rank = rank if rank is not None else rank_from_env()
        self._profiler_factory = profiler_factory
        self._cuda_memory = cuda_memory
        self.plan = config.plan(cuda=self.cuda)
        self.total_steps = self.plan.total
        self.timed = self.plan.timed  # steps of the timed phase
        self.warmup, self.active = self.plan.profiler_warmup, self.plan.profiler_steps
        #: report name -> one line saying why it is missing or partial
        self.notes: dict[str, str] = {}
        if config.enabled("snapshot") and not self.cuda:
            self.notes["snapshot"] = "snapshot needs CUDA; skipped"
        #: the torch profiler (kept after it stopped: the reports read it at the end)
        self.prof: Any = None
        #: where ``_dump_snapshot`` writes the snapshot; without one it is kept in memory
        self.snapshot_path = Path(snapshot_path) if snapshot_path is not None else None
        #: the pickle written (``snapshot_path`` once dumped), or None
        self.snapshot_file: Path | None = None
        #: ``torch.cuda.memory._snapshot()`` when there is no ``snapshot_path``, or None
        self.snapshot: Any = None
        self.k = 0  # profiled steps completed
        self.first_step: int | None = None  # bench index of the window's first step
        self.started = False
        self.stopped = False
        self._profiling = False
        self._profiler_started = False
        self._recording_history = False
        self._timer: Any = None
        self._thread = threading.get_ident()
        self._ranges: dict[str, Any] = {}
        self._record_function: Any = None

    # -- phases ------------------------------------------------------------------------------
    def phase(self, k: int) -> str:
        """``timed``, then torch.profiler's ``warmup`` and ``active``, then ``after``."""
        if k < self.timed:
            return "timed"
        j = k - self.timed
        if j < self.warmup:
            return "warmup"
        if j < self.warmup + self.active:
            return "active"
        return "after"

    @property
    def profiled_steps(self) -> int:
        """Steps torch.profiler recorded (its active phase) so far."""
        if not self._profiler_started:
            return 0
        return max(0, min(self.k - self.timed, self.warmup + self.active) - self.warmup)

    @property
    def wants_profiler(self) -> bool:
        return any(self.config.enabled(n) for n in PROFILER_REPORTS) and self.active > 0

    @property
    def wants_snapshot(self) -> bool:
        return self.cuda and self.config.enabled("snapshot") and self.plan.snapshot_steps > 0

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot is not None or self.snapshot_file is not None

    # -- the window --------------------------------------------------------------------------
    def start(self, *, timer: Any = None, first_step: int | None = None) -> None:
        """Start the window (outside any timed step). ``timer``: its regions are named in the
        trace while the profiler records."""
        if self.started:
            return
        self.started = True
        self.first_step = first_step
        self._timer = timer
        self._transitions()

    def step(self) -> str:
        """After each profiled step (outside any timed step); returns that step's phase."""
        phase = self.phase(self.k)
        self.k += 1
        if self._profiling:
            try:
                self.prof.step()
            except Exception as exc:  # noqa: BLE001 - a profiler failure is a note, not a failure
                self._profiler_failed(exc)
            if self._profiling and self.k >= self.timed + self.warmup + self.active:
                self._stop_profiler()
        self._transitions()
        return phase

    def _transitions(self) -> None:
        """Start what begins before step ``k`` and take what ends after step ``k - 1``."""
        k = self.k
        if k == self.timed and self.wants_profiler and not self._profiler_started:
            self._start_profiler()
        if self.wants_snapshot:
            if k == self.timed + self.plan.snapshot_warmup:
                self._start_history()
            if k == self.timed + self.plan.snapshot_warmup + self.plan.snapshot_steps:
                self._take_snapshot()

    @property
    def finished(self) -> bool:
        return self.stopped or self.k >= self.total_steps

    def stop(self) -> None:
        """End the window (idempotent), at its end or when the run stops before it."""
        if self.stopped:
            return
        self.stopped = True
        cut = self.k < self.total_steps
        if self._profiling:
            self._stop_profiler()
        if self._recording_history:
            # Cut short before ``steps`` steps: what was recorded is still worth a snapshot.
            taken = self.k - self.timed - self.plan.snapshot_warmup
            self._take_snapshot()
            self.notes.setdefault(
                "snapshot", f"snapshot after {taken} of {self.plan.snapshot_steps} steps "
                            "(the run ended first)")
        if self.wants_snapshot and not self.has_snapshot:
            self.notes.setdefault(
                "snapshot", f"snapshot: none taken, the run ended after {self.k} of "
                            f"{self.total_steps} profiled steps")
        if cut:
            note = (f"the run ended after {self.k} of the {self.total_steps} profiled steps; "
                    f"torch.profiler recorded {self.profiled_steps} of {self.active}")
            for name in PROFILER_REPORTS:
                if self.config.enabled(name):
                    self.notes.setdefault(name, note)
            if self.config.enabled("time") and self.k < self.timed:
                self.notes.setdefault(
                    "time", f"the run ended after {self.k} of the {self.timed} timed steps")

    # -- torch.profiler ----------------------------------------------------------------------
    def _start_profiler(self) -> None:
        self._profiler_started = True
        try:
            factory = self._profiler_factory
            kwargs: dict[str, Any] = {}
            if factory is None:
                import torch
                from torch.profiler import ProfilerActivity, profile, schedule

                activities = [ProfilerActivity.CPU]
                if self.cuda:
                    activities.append(ProfilerActivity.CUDA)
                else:
                    # Kineto logs a CUDA device-count error on machines without a GPU: noise.
                    os.environ.setdefault("KINETO_LOG_LEVEL", "5")
                kwargs["activities"] = activities
                kwargs["schedule"] = schedule(wait=0, warmup=self.warmup, active=self.active,
                                              repeat=1)
                factory = profile
                self._record_function = torch.autograd.profiler.record_function
            else:
                kwargs["schedule"] = (0, self.warmup, self.active)
            memory = self.config["memory"]
            # The memory timeline needs stacks; they cost a lot, so only for that plot.
            with_stack = bool(memory.enabled and memory.extra_plots and self.cuda)
            with warnings.catch_warnings():
                # "Profiler won't be using warmup": the user asked for warmup 0.
                warnings.filterwarnings("ignore", message=".*warmup.*")
                prof = factory(profile_memory=True, record_shapes=True, with_stack=with_stack,
                               **kwargs)
                prof.start()
        except Exception as exc:  # noqa: BLE001
            self._profiler_failed(exc, starting=True)
            return
        self.prof = prof
        self._profiling = True
        if self._timer is not None and self._record_function is not None:
            self._timer.on_region = self._on_region

    def _stop_profiler(self) -> None:
        self._profiling = False
        self._unhook()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.prof.stop()
        except Exception as exc:  # noqa: BLE001
            self._profiler_failed(exc)

    def _unhook(self) -> None:
        if self._timer is not None and self._timer.on_region == self._on_region:
            self._timer.on_region = None
        for rf in self._ranges.values():
            with contextlib.suppress(Exception):
                rf.__exit__(None, None, None)
        self._ranges.clear()

    def _profiler_failed(self, exc: BaseException, *, starting: bool = False) -> None:
        self._profiling = False
        self._unhook()
        what = "could not start" if starting else "failed"
        for name in PROFILER_REPORTS:
            if self.config.enabled(name):
                self.notes.setdefault(name, f"torch.profiler {what}: {one_line(exc)}")

    def _on_region(self, key: str, opening: bool) -> None:
        """Name the timer's regions in the trace (only those of the thread that started the
        window: a DDP hook opens ``comm`` in autograd's thread)."""
        if threading.get_ident() != self._thread:
            return
        if opening:
            rf = self._record_function(key)
            rf.__enter__()
            self._ranges[key] = rf
        else:
            rf = self._ranges.pop(key, None)
            if rf is not None:
                rf.__exit__(None, None, None)

    # -- CUDA memory snapshot ----------------------------------------------------------------
    def _memory(self) -> Any:
        if self._cuda_memory is None:
            import torch.cuda.memory

            self._cuda_memory = torch.cuda.memory
        return self._cuda_memory

    def _start_history(self) -> None:
        if self._recording_history or self.has_snapshot:
            return
        try:
            self._memory()._record_memory_history(max_entries=SNAPSHOT_MAX_ENTRIES)
            self._recording_history = True
        except Exception as exc:  # noqa: BLE001
            self.notes["snapshot"] = f"snapshot could not start: {one_line(exc)}"

    def _take_snapshot(self) -> None:
        if not self._recording_history:
            return
        memory = self._memory()
        try:
            if self.snapshot_path is not None:
                self.snapshot_path.parent.mkdir(parents=True, exist_ok=True)
                memory._dump_snapshot(str(self.snapshot_path))
                self.snapshot_file = self.snapshot_path
            else:
                self.snapshot = memory._snapshot()
        except Exception as exc:  # noqa: BLE001
            self.notes["snapshot"] = f"snapshot failed: {one_line(exc)}"
        finally:
            self._recording_history = False
            with contextlib.suppress(Exception):
                memory._record_memory_history(enabled=None)
