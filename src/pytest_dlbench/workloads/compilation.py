"""``torch.compile`` in a training workload: its options (``--compile``), the compiled step,
the warm-up that compiles before the timed loop, and the ``compile`` records (what dynamo and
inductor did, and any recompilation during the loop).

A compiler failure is a :class:`CompileError` with the compiler's own reason in one line.
torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import DlbenchError, one_line
from pytest_dlbench.measure.stream import Event
from pytest_dlbench.suite.presets import DEFAULT_BACKEND, EAGER

if TYPE_CHECKING:
    import torch

__all__ = [
    "COMPILE_MAX_STEPS",
    "COMPILE_MIN_STEPS",
    "CompileError",
    "CompileOptions",
    "compile_function",
    "compile_reason",
    "compile_stats",
    "compile_warmup",
    "counters_snapshot",
    "note_late_compiles",
]


#: Compiled steps run before the timed loop: at least this many (graphs compiled by a second
#: call are common), until a step compiles nothing new, at most ``COMPILE_MAX_STEPS``.
COMPILE_MIN_STEPS = 2
COMPILE_MAX_STEPS = 10
_CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class CompileOptions:
    """``torch.compile`` settings of a run; ``mode`` None is eager."""

    mode: str | None = None
    backend: str = DEFAULT_BACKEND

    @property
    def enabled(self) -> bool:
        return self.mode is not None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CompileOptions:
        mode = getattr(args, "compile", EAGER)
        backend = getattr(args, "compile_backend", DEFAULT_BACKEND)
        return cls(None if mode in (None, EAGER) else mode, backend)

    def describe(self) -> str:
        return f"mode {self.mode}, backend {self.backend}"


class CompileError(DlbenchError, RuntimeError):
    """``torch.compile`` failed: the compiler's reason, in one line."""

    def __init__(self, options: CompileOptions, exc: BaseException) -> None:
        self.options = options
        super().__init__(f"torch.compile failed ({options.describe()}): {compile_reason(exc)}")


def compile_reason(exc: BaseException) -> str:
    """The innermost error of a dynamo/inductor failure as ``Type: first line``.

    ``BackendCompilerFailed`` says only "backend='inductor' raised:"; the backend's own error
    (a C++ compiler message, an unsupported operator) is its ``inner_exception``.
    """
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return one_line(exc)


def _is_compile_failure(exc: BaseException) -> bool:
    """An error of dynamo, AOTAutograd or inductor (not an out-of-memory or a data error)."""
    module = type(exc).__module__ or ""
    return module.startswith(("torch._dynamo", "torch._inductor", "torch._functorch"))


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def counters_snapshot() -> dict[str, dict[str, int]]:
    """dynamo's and inductor's counters now, for :func:`compile_stats` to compare with later."""
    return {k: dict(v) for k, v in _counters().items()}


def _delta(before: dict[str, dict[str, int]], group: str) -> dict[str, int]:
    now = _counters().get(group) or {}
    old = before.get(group) or {}
    return {k: v - old.get(k, 0) for k, v in now.items() if v - old.get(k, 0)}


def _graphs() -> int:
    return int(_counters()["stats"]["unique_graphs"])


def _break_reason(text: str) -> str:
    """A graph break's reason: the first line of dynamo's message."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def compile_stats(before: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What dynamo and inductor did since ``before`` (a :func:`counters_snapshot`)."""
    breaks = _delta(before, "graph_break")
    reasons: dict[str, int] = {}
    for text, n in breaks.items():
        reason = _break_reason(text)
        reasons[reason] = reasons.get(reason, 0) + n
    inductor = _delta(before, "inductor")
    aot = _delta(before, "aot_autograd")
    return {
        "graphs": _delta(before, "stats").get("unique_graphs", 0),
        "graph_breaks": sum(breaks.values()),
        "break_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5]),
        "frames": _delta(before, "frames").get("ok", 0),
        "cache_hits": inductor.get("fxgraph_cache_hit", 0) + aot.get("autograd_cache_hit", 0),
        "cache_misses": inductor.get("fxgraph_cache_miss", 0) + aot.get("autograd_cache_miss", 0),
    }


def compile_function(
    fn: Callable[..., Any], options: CompileOptions, device: torch.device
) -> Callable[..., Any]:
    """``torch.compile(fn)`` with ``options``; a bad mode or backend is a :class:`CompileError`.

    With CUDA graphs (reduce-overhead, max-autotune on a GPU) each call starts a new graph step
    and its output is copied: a replay overwrites the previous outputs, and the loss is kept
    until the window is read.
    """
    import torch

    try:
        compiled = torch.compile(fn, mode=options.mode, backend=options.backend)
    except Exception as exc:  # noqa: BLE001 - InvalidBackend, a bad mode: the compiler's reason
        raise CompileError(options, exc) from exc
    if device.type != "cuda" or options.mode not in _CUDAGRAPH_MODES:
        return compiled

    def step(*args: Any, **kwargs: Any) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        out = compiled(*args, **kwargs)
        return out.clone() if isinstance(out, torch.Tensor) else out

    return step


def compile_warmup(
    bench: Any,
    batches: Iterator[Any],
    run_step: Callable[[Any], None],
    options: CompileOptions,
) -> dict[str, Any]:
    """Run compiled steps before the timed loop until nothing new compiles; write the
    ``compile`` record (its ``start``/``end`` wall times bound every compilation of the warm-up;
    the timed loop's observations all come after ``end``) and return it.

    A dynamo or inductor failure is a :class:`CompileError` with the compiler's one-line reason.
    """
    before = counters_snapshot()
    timer = bench.timer
    sync = timer.backend.synchronize
    sync()
    start_wall, t0 = timer.wall_clock(), time.perf_counter()
    steps = 0
    try:
        while steps < COMPILE_MAX_STEPS:
            graphs = _graphs()
            try:
                batch = next(batches)
            except StopIteration:
                raise ValueError("the data ran out while compiling") from None
            run_step(batch)
            sync()
            steps += 1
            if steps >= COMPILE_MIN_STEPS and _graphs() == graphs:
                break
    except CompileError:
        raise
    except Exception as exc:
        if _is_compile_failure(exc):
            raise CompileError(options, exc) from exc
        raise
    seconds = time.perf_counter() - t0
    record = {
        "phase": "warmup",
        "mode": options.mode,
        "backend": options.backend,
        "seconds": seconds,
        "start": start_wall,
        "end": start_wall + seconds,
        "steps": steps,
        **compile_stats(before),
    }
    bench.stream.write(Event.COMPILE, **record)
    return record


def note_late_compiles(bench: Any, since: dict[str, dict[str, int]]) -> None:
    """A ``compile`` record (phase ``loop``) when graphs were compiled during the timed loop
    (a recompile: a shape or a guard changed), so the report can say so."""
    stats = compile_stats(since)
    if stats["graphs"] or stats["graph_breaks"]:
        bench.stream.write(Event.COMPILE, phase="loop", time=bench.timer.wall_clock(), **stats)
