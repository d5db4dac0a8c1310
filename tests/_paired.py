"""A paired run directory written with the real writer (both sides, ``against.json``) and its
verdicts: what the paired gate's tests and the pages that show its table share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _runs import steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.results.judge import summarize_paired_dir

# Per round, a load factor both runs of the round share (a drift and two bursts): large
# between rounds, small within a pair.
LOAD = (1.0, 0.80, 0.95, 0.60, 1.0, 0.90)
WOBBLE = (0.004, -0.003, 0.002, -0.004, 0.003, -0.002)


def paired_run(tmp: Path, benches: dict[str, tuple[float, float]], *, rounds: int = 6,
               base_only: tuple[str, ...] = (), weight: float = 1.0) -> Path:
    """A run directory with its base side: ``{name: (base rate, candidate rate)}``, each round
    scaled by ``LOAD`` on both sides, the candidate with a small wobble of its own."""
    run = tmp / "run"
    base = layout.base_dir(run)
    base.mkdir(parents=True, exist_ok=True)
    for name, (b, c) in benches.items():
        for r in range(rounds):
            load = LOAD[r % len(LOAD)]
            write_run(base, name, steady_at(b * load), repeat=r, weight=weight)
            write_run(run, name, steady_at(c * load * (1 + WOBBLE[r % 6])), repeat=r,
                      weight=weight)
    for name in base_only:
        for r in range(rounds):
            write_run(base, name, steady_at(10.0), repeat=r, weight=weight)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "t", "warnings": []})
    return run


def judge(run: Path, **kw: Any) -> Any:
    """``summarize_paired_dir``'s ``(bench, base, comparison)`` of a run known to be paired."""
    result = summarize_paired_dir(run, **kw)
    assert result is not None
    return result
