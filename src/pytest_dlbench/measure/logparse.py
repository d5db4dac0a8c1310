"""Observations read from a training script's output: one matching log line is one step.

An external command (docs/time-to-train.md) is timed by itself and says so in its log. A
:class:`LogParser` is a regular expression whose *named groups* say what a line holds:

| group | meaning |
| --- | --- |
| ``seconds`` | the step's duration (what ``total_time_secs`` sums) |
| ``items`` | items (samples) of the step |
| ``samples`` | items done so far in the epoch: a step's items are the difference with |
|             | the previous line's (on the first line of an epoch: the value itself) |
| ``rate`` | items per second as printed |
| ``loss`` | the training loss (a NaN fails the run) |
| ``percent`` | how much of the run is done, 0-100 (``done_percent_last``) |

Each line is searched (``re.search``), so the pattern need not match the whole line. Items come
from ``items``, else the ``samples`` difference, else ``rate x seconds``, else the parser's
``items_per_step``; seconds from ``seconds``, else ``items / rate``. A pattern needs ``seconds``
or ``rate``.

:data:`OPEN_CLIP` reads OpenCLIP's ``Train Epoch: ... Batch (t): X, Y/s, Z/s/gpu ...`` lines
(seed 004); with ``--log-every-n-steps 1`` each is one step, and :func:`total_time_secs` of its
``Batch (t)`` values is what seed 004's ``grep | tail -n +2 | awk`` recipe prints.

Pure Python, no torch: the runner (run/external.py) and the tests use it alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_dlbench.errors import DlbenchError

__all__ = [
    "GROUPS",
    "OPEN_CLIP",
    "PARSERS",
    "LogParser",
    "LogParseError",
    "LogStep",
    "StepReader",
    "make_parser",
    "recipe_format",
    "total_time_secs",
]

#: The named groups a parser may use (others are allowed and ignored).
GROUPS = ("seconds", "items", "samples", "rate", "loss", "percent")

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


class LogParseError(DlbenchError, ValueError):
    """A parser declaration that cannot be used (bad regex, no timing group, unknown name)."""


@dataclass(frozen=True)
class LogStep:
    """One step read from a log line."""

    seconds: float
    items: float | None  # None: the line says nothing about items
    loss: float | None = None
    percent: float | None = None
    line: int = 0  # 1-based line number in the output


@dataclass(frozen=True)
class LogParser:
    """A named regular expression (see the module docstring for its groups)."""

    name: str
    regex: str
    items_per_step: float | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            pattern = re.compile(self.regex)
        except re.error as exc:
            raise LogParseError(f"parser {self.name!r}: bad regex: {exc}") from None
        groups = set(pattern.groupindex)
        if not groups & {"seconds", "rate"}:
            raise LogParseError(
                f"parser {self.name!r}: the regex needs a named group (?P<seconds>...) or "
                f"(?P<rate>...); it has {sorted(groups) or 'none'}"
            )
        if "seconds" not in groups and not groups & {"items", "samples"} and not (
            self.items_per_step
        ):
            raise LogParseError(
                f"parser {self.name!r}: with only a rate, the items of a step are unknown: "
                "add (?P<seconds>...), (?P<items>...) or (?P<samples>...), or items_per_step"
            )
        if self.items_per_step is not None and not self.items_per_step > 0:
            raise LogParseError(f"parser {self.name!r}: items_per_step must be positive")
        object.__setattr__(self, "pattern", pattern)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "regex": self.regex}
        if self.items_per_step is not None:
            data["items_per_step"] = self.items_per_step
        return data

    def reader(self) -> StepReader:
        return StepReader(self)


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


#: OpenCLIP's training log line (open_clip_train/train.py), e.g.
#: ``Train Epoch: 0 [ 32768/3200000 (1%)] Data (t): 0.029 Batch (t): 6.655, 2461.78/s,
#: 76.9308/s/gpu LR: ... Loss: 9.7031 (9.7031)``. Everything but ``Batch (t): X`` is optional,
#: so that every line seed 004's grep finds is a step here too.
OPEN_CLIP = LogParser(
    "open_clip",
    r"(?:\[\s*(?P<samples>\d+)/\d+ \((?P<percent>\d+(?:\.\d+)?)%\)\].*?)?"
    r"Batch \(t\): (?P<seconds>\d+\.\d+)"
    rf"(?:, (?P<rate>{_NUMBER})/s(?:, {_NUMBER}/s/gpu)?)?"
    rf"(?:.*\sLoss: (?P<loss>{_NUMBER}|nan|inf|-inf))?",
)

#: Ready parsers, by the name a suite gives as ``parser: NAME``.
PARSERS: dict[str, LogParser] = {OPEN_CLIP.name: OPEN_CLIP}


def make_parser(value: Any) -> LogParser:
    """A parser from a suite's ``parser:``: a ready parser's name, or a mapping with ``regex``
    (and optionally ``items_per_step`` and ``name``)."""
    if isinstance(value, LogParser):
        return value
    if isinstance(value, str):
        parser = PARSERS.get(value)
        if parser is None:
            raise LogParseError(
                f"unknown parser {value!r}; ready parsers: {', '.join(sorted(PARSERS))} "
                "(or give a mapping with a 'regex')"
            )
        return parser
    if isinstance(value, Mapping):
        unknown = set(value) - {"regex", "items_per_step", "name"}
        if unknown:
            raise LogParseError(f"parser: unknown keys {sorted(unknown)} "
                                "(known: regex, items_per_step, name)")
        regex = value.get("regex")
        if not isinstance(regex, str) or not regex:
            raise LogParseError("parser: a mapping needs a 'regex' string")
        items = value.get("items_per_step")
        if items is not None and (isinstance(items, bool) or not isinstance(items, int | float)):
            raise LogParseError(f"parser: items_per_step must be a number, got {items!r}")
        return LogParser(str(value.get("name") or "regex"), regex,
                         float(items) if items is not None else None)
    raise LogParseError(f"parser must be a name or a mapping with a 'regex', got {value!r}")


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
