"""gate_power's cells: what each trial's exit status means, and one row per cell (mode x
neighbour x slowdown) with the share of each outcome, the rounds used and the cost.

Pure: trials are any objects with ``mode``, ``neighbour``, ``slowdown``, ``status``,
``rounds`` (or None), ``minutes`` and ``reason``; nothing here runs or reads a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGRESSED = 6  # results.gate.EXIT_REGRESSED
INCONCLUSIVE = 9  # results.gate.EXIT_INCONCLUSIVE
OUTCOMES = ("regressed", "inconclusive", "passed", "other")


def outcome(status: int, *, regressed: int = REGRESSED, inconclusive: int = INCONCLUSIVE) -> str:
    """What a pytest exit status says about a trial: regressed (6), inconclusive (9), passed (0),
    or other (a failed run, a usage error, an interruption: not a verdict)."""
    if status == regressed:
        return "regressed"
    if status == inconclusive:
        return "inconclusive"
    return "passed" if status == 0 else "other"


@dataclass(frozen=True)
class CellKey:
    mode: str
    neighbour: float  # duty cycle, %
    slowdown: float  # %


@dataclass(frozen=True)
class Cell:
    key: CellKey
    trials: int
    counts: dict[str, int]  # by OUTCOMES
    mean_rounds: float | None  # over the trials that know their rounds
    minutes_per_trial: float
    reasons: tuple[str, ...]  # the distinct reasons of the "other" trials

    def share(self, name: str) -> float:
        return self.counts[name] / self.trials if self.trials else 0.0


def cells(trials: Iterable[Any], **statuses: int) -> list[Cell]:
    """One cell per (mode, neighbour, slowdown) that has trials, in that order."""
    groups: dict[CellKey, list[Any]] = {}
    for t in trials:
        groups.setdefault(CellKey(t.mode, t.neighbour, t.slowdown), []).append(t)
    out = []
    for key in sorted(groups, key=lambda k: (k.mode, k.neighbour, k.slowdown)):
        chosen = groups[key]
        counts = dict.fromkeys(OUTCOMES, 0)
        for t in chosen:
            counts[outcome(t.status, **statuses)] += 1
        rounds = [t.rounds for t in chosen if t.rounds is not None]
        reasons = dict.fromkeys(t.reason or f"exit {t.status}" for t in chosen
                                if outcome(t.status, **statuses) == "other")
        out.append(Cell(key, len(chosen), counts,
                        sum(rounds) / len(rounds) if rounds else None,
                        sum(t.minutes for t in chosen) / len(chosen), tuple(reasons)))
    return out


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def cell_rows(found: Sequence[Cell]) -> list[list[str]]:
    """The table's header and one row per cell."""
    rows = [["mode", "neighbour", "slowdown", "trials", "regressed", "inconclusive", "passed",
             "other", "mean rounds", "min/trial"]]
    for c in found:
        rows.append([
            c.key.mode, f"{c.key.neighbour:g} %", f"{c.key.slowdown:g} %", str(c.trials),
            *(_pct(c.share(name)) for name in OUTCOMES),
            "-" if c.mean_rounds is None else f"{c.mean_rounds:.1f}",
            f"{c.minutes_per_trial:.2f}",
        ])
    return rows


def other_lines(found: Sequence[Cell]) -> list[str]:
    """Why the "other" trials failed, per cell (each reason once)."""
    return [f"other in {c.key.mode} / neighbour {c.key.neighbour:g} % / {c.key.slowdown:g} %: "
            + "; ".join(c.reasons) for c in found if c.reasons]


# -- rounds, counted from a run directory's stream names -----------------------------------------
_STREAM = re.compile(r"^(?P<bench>.+)\.D\d+(?:\.R(?P<repeat>\d+))?\.data$")


def rounds_used(names: Iterable[str], bench: str) -> int:
    """The runs of ``bench`` among a run directory's stream file names: its distinct repeats
    (``.R<r>``), or its streams when they have none (one run, or one per device)."""
    repeats = set()
    plain = 0
    for name in names:
        match = _STREAM.match(Path(name).name)
        if match is None or match["bench"] != bench:
            continue
        if match["repeat"] is None:
            plain += 1
        else:
            repeats.add(int(match["repeat"]))
    return len(repeats) + plain


def rounds_in(run_dir: str | Path, bench: str) -> int | None:
    """:func:`rounds_used` of a run directory (the candidate side of a paired run); None when
    it holds no stream of ``bench``."""
    names = [p.name for p in Path(run_dir).glob("*.data")]
    found = rounds_used(names, bench)
    return found or None


def confirmations_in(run_dir: str | Path, bench: str) -> int:
    """The confirmation rounds (``--bench-confirm``) a saved-baseline run gave ``bench``: its
    ``confirm/<k>/`` folders holding a stream of it."""
    folder = Path(run_dir) / "confirm"
    if not folder.is_dir():
        return 0
    return sum(1 for k in folder.iterdir()
               if k.is_dir() and rounds_used([p.name for p in k.glob("*.data")], bench))
