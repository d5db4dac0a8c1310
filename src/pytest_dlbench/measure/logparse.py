"""Observations read from a training script's output: one matching log line is one step.

An external command (docs/time-to-train.md) is timed by itself and says so in its log. The
suite's ``parser:`` is a :class:`~pytest_dlbench.suite.logparsers.LogParser` (a regular
expression whose named groups say what a line holds: their table is in suite/logparsers.py);
here its lines become steps.

Each line is searched (``re.search``), so the pattern need not match the whole line. Items come
from ``items``, else the ``samples`` difference, else ``rate x seconds``, else the parser's
``items_per_step``; seconds from ``seconds``, else ``items / rate``.

With OpenCLIP's ``--log-every-n-steps 1`` each of its lines is one step, and
:func:`total_time_secs` of its ``Batch (t)`` values is what MMoCLIP's
``grep | tail -n +2 | awk`` recipe prints.

Pure Python, no torch: the runner (run/external.py) and the tests use it alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# The parser declarations belong to the suite (suite/logparsers.py), which validates them.
from pytest_dlbench.suite.logparsers import LogParser

__all__ = [
    "LogStep",
    "StepReader",
    "recipe_format",
    "total_time_secs",
]


@dataclass(frozen=True)
class LogStep:
    """One step read from a log line."""

    seconds: float
    items: float | None  # None: the line says nothing about items
    loss: float | None = None
    percent: float | None = None
    line: int = 0  # 1-based line number in the output


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


class StepReader:
    """Feeds lines through a parser, keeping what a step depends on (the ``samples`` count)."""

    def __init__(self, parser: LogParser) -> None:
        self.parser = parser
        self.lines = 0
        self.steps = 0
        self._samples: float | None = None

    def feed(self, line: str) -> LogStep | None:
        """The step this line reports, or None."""
        self.lines += 1
        match = self.parser.pattern.search(line)
        if match is None:
            return None
        groups = match.groupdict()
        seconds = _float(groups.get("seconds"))
        rate = _float(groups.get("rate"))
        items = _float(groups.get("items"))
        samples = _float(groups.get("samples"))
        if items is None and samples is not None:
            previous = self._samples
            # A new epoch (or the first line) starts the count again.
            items = samples - previous if previous is not None and samples > previous else samples
        if samples is not None:
            self._samples = samples
        if items is None and rate is not None and seconds is not None:
            items = rate * seconds
        if items is None:
            items = self.parser.items_per_step
        if seconds is None and rate and items is not None:
            seconds = items / rate
        if seconds is None or not math.isfinite(seconds) or seconds < 0:
            return None
        self.steps += 1
        return LogStep(
            seconds=seconds,
            items=items,
            loss=_float(groups.get("loss")),
            percent=_float(groups.get("percent")),
            line=self.lines,
        )

    def read(self, lines: Iterable[str]) -> list[LogStep]:
        return [s for s in (self.feed(line) for line in lines) if s is not None]


def total_time_secs(seconds: Iterable[float]) -> float | None:
    """Seed 004's metric: the step durations summed in order, skipping the first step (it
    includes the start-up). A plain running sum, as awk's ``sum += $1``: the same number to
    the last bit. None with fewer than two steps."""
    values = list(seconds)
    if len(values) < 2:
        return None
    total = 0.0
    for value in values[1:]:
        total += value
    return total


def recipe_format(value: float) -> str:
    """How awk prints a number in ``print "total_time_secs:"sum`` (CONVFMT ``%.6g``, integral
    values as integers)."""
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return f"{value:.6g}"
