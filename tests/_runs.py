"""Writing run streams for the scoring, report and CLI tests (with the real StreamWriter)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.measure.stream import StreamWriter

Obs = tuple[float, float]  # (items, seconds)


def write_run(
    run_dir: Path,
    bench: str,
    steady: Sequence[Obs] | Sequence[float] = ((10, 1.0),) * 10,
    *,
    device: int = 0,
    repeat: int | None = None,
    warmup: Sequence[Obs] = ((10, 5.0),) * 2,
    status: str | None = "ok",
    reason: str = "",
    weight: float = 1.0,
    method: str = "per_gpu",
    units: str | None = None,
    enabled: bool = True,
    log_rate: bool = False,
    losses: Sequence[float] = (),
) -> Path:
    """One stream ``<bench>.D<device>[.R<repeat>].data``; ``status=None`` writes no ``end``.

    ``steady`` holds (items, seconds) pairs, or plain values with ``log_rate=True`` (records
    with a value and no items/seconds, as ``Bench.log_rate`` writes them).
    """
    name = f"{bench}.D{device}" + (f".R{repeat}" if repeat is not None else "") + ".data"
    path = Path(run_dir) / name
    spec: dict[str, Any] = {
        "name": bench, "weight": weight, "enabled": enabled, "plan": {"method": method},
        "tags": [], "skip": len(warmup), "stop": len(steady),
    }
    if units is not None:
        spec["units"] = units
    unit = units or "items/s"
    path.unlink(missing_ok=True)  # one stream is one run: written afresh
    with StreamWriter(path) as stream:
        stream.write("config", spec=spec, device=device, repeat=repeat)
        stream.write("meta", host="test", torch="0", device_name="cpu")
        t = 1000.0
        for step, (items, seconds) in enumerate(warmup):
            t += seconds
            stream.write("rate", value=items / seconds, units=unit, step=step, warmup=True,
                         time=t, items=items, seconds=seconds)
        for i, obs in enumerate(steady):
            step = len(warmup) + i
            if log_rate:
                t += 1.0
                stream.write("rate", value=float(obs), units=unit, step=step,  # type: ignore[arg-type]
                             warmup=False, time=t)
            else:
                items, seconds = obs  # type: ignore[misc]
                t += seconds
                stream.write("rate", value=items / seconds, units=unit, step=step,
                             warmup=False, time=t, items=items, seconds=seconds)
        for step, loss in enumerate(losses):
            stream.write("loss", value=loss, step=step)
        if status is not None:
            stream.write("end", status=status, reason=reason, time=t)
    return path


def steady_at(rate: float, n: int = 10, jitter: Sequence[float] = ()) -> list[Obs]:
    """``n`` observations of 1 s each at ``rate`` items/s, times (1 + jitter[i]) if given."""
    factors = list(jitter) + [0.0] * (n - len(jitter))
    return [(rate * (1 + f), 1.0) for f in factors[:n]]


def write_manifest(run_dir: Path, benchmarks: dict[str, dict[str, Any]], suite: str = "t") -> None:
    entries = {
        name: {"weight": 1.0, "enabled": True, "units": None, "plan": {"method": "per_gpu"},
               **entry}
        for name, entry in benchmarks.items()
    }
    (Path(run_dir) / "manifest.json").write_text(
        json.dumps({"version": 1, "suite": suite, "benchmarks": entries}), encoding="utf-8"
    )


def quiet_sessions(summary: Any, sessions: int = 5) -> Any:
    """A baseline saved in ``sessions`` sessions that agreed exactly (``dlbench baseline``):
    the noise model's drift between sessions at its floor (results/judge/noise.py), as on a quiet,
    dedicated machine, instead of the default a single session is judged with."""
    from pytest_dlbench.results.history import merge_sessions

    return merge_sessions([summary] * sessions)
