"""The log parsers a suite names: an external command's ``parser:`` (docs/time-to-train.md).

A :class:`LogParser` is a regular expression whose *named groups* say what a line holds:

| group | meaning |
| --- | --- |
| ``seconds`` | the step's duration (what ``total_time_secs`` sums) |
| ``items`` | items (samples) of the step |
| ``samples`` | items done so far in the epoch: a step's items are the difference with |
|             | the previous line's (on the first line of an epoch: the value itself) |
| ``rate`` | items per second as printed |
| ``loss`` | the training loss (a NaN fails the run) |
| ``percent`` | how much of the run is done, 0-100 (``done_percent_last``) |

A pattern needs ``seconds`` or ``rate``. How its lines become steps is measure/logparse.py's
job (``StepReader``); the declaration lives here, with the suite, so that a suite whose parser
cannot be used fails when it is resolved, before anything runs.

:data:`OPEN_CLIP` reads OpenCLIP's ``Train Epoch: ... Batch (t): X, Y/s, Z/s/gpu ...`` lines
(MMoCLIP).

Pure Python, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.core.numbers import is_number

__all__ = [
    "GROUPS", "OBSERVATIONS", "OPEN_CLIP", "PARSERS", "VOIR", "LogParseError", "LogParser",
    "make_parser",
]

#: ``parser: voir``: not a regular expression over the output but voir's data channel, a pipe
#: of JSON lines (run/voir_data.py); the runner opens it (run/external.py).
VOIR = "voir"
#: The ``source`` of the ``warning`` record of an external command that ended before its
#: ``skip + stop`` observations (run/external.py); the results show it (results/figures/scoring.py).
OBSERVATIONS = "observations"

#: The named groups a parser may use (others are allowed and ignored).
GROUPS = ("seconds", "items", "samples", "rate", "loss", "percent")

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


class LogParseError(DlbenchError, ValueError):
    """A parser declaration that cannot be used (bad regex, no timing group, unknown name)."""


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
            raise LogParseError(f"parser {quoted(self.name)}: bad regex: {exc}") from None
        groups = set(pattern.groupindex)
        if not groups & {"seconds", "rate"}:
            raise LogParseError(
                f"parser {quoted(self.name)}: the regex needs a named group (?P<seconds>...) or "
                f"(?P<rate>...); it has {sorted(groups) or 'none'}"
            )
        if "seconds" not in groups and not groups & {"items", "samples"} and not (
            self.items_per_step
        ):
            raise LogParseError(
                f"parser {quoted(self.name)}: with only a rate, the items of a step are unknown: "
                "add (?P<seconds>...), (?P<items>...) or (?P<samples>...), or items_per_step"
            )
        if self.items_per_step is not None and not self.items_per_step > 0:
            raise LogParseError(f"parser {quoted(self.name)}: items_per_step must be positive")
        object.__setattr__(self, "pattern", pattern)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "regex": self.regex}
        if self.items_per_step is not None:
            data["items_per_step"] = self.items_per_step
        return data


#: OpenCLIP's training log line (open_clip_train/train.py), e.g.
#: ``Train Epoch: 0 [ 32768/3200000 (1%)] Data (t): 0.029 Batch (t): 6.655, 2461.78/s,
#: 76.9308/s/gpu LR: ... Loss: 9.7031 (9.7031)``. Everything but ``Batch (t): X`` is optional,
#: so that every line MMoCLIP's grep finds is a step here too.
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
    if value == VOIR:
        raise LogParseError(f"parser {VOIR!r} reads voir's data channel, not the output: the "
                            "runner opens it (definition: {voir: FOLDER} or parser: voir)")
    if isinstance(value, str):
        parser = PARSERS.get(value)
        if parser is None:
            raise LogParseError(
                f"unknown parser {quoted(value)}; ready parsers: {', '.join(sorted(PARSERS))} "
                f"and {VOIR} (or give a mapping with a 'regex')"
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
        if items is not None and not is_number(items):
            raise LogParseError(f"parser: items_per_step must be a number, got {quoted(items)}")
        return LogParser(str(value.get("name") or "regex"), regex,
                         float(items) if items is not None else None)
    raise LogParseError(f"parser must be a name or a mapping with a 'regex', got {quoted(value)}")
