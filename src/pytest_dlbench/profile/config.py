"""Which profiling reports a run makes, and their settings.

Two sources, merged per benchmark:

- the command line, ``--bench-profile`` (every report) or ``--bench-profile=speed,time``
  (:meth:`ProfileConfig.parse_cli`): it switches reports on;
- a suite's ``profile:`` mapping, in an entry or ``_defaults``
  (:meth:`ProfileConfig.from_mapping`)::

      profile:
        memory: {enabled: true, warmup: 2, steps: 6, top: 20}
        time: {enabled: true, verbose: true}
        trace: true          # shorthand for {enabled: true}

  it switches reports on and sets their keys.

:meth:`ProfileConfig.merge` combines them: a report is on when either says so; the keys are the
mapping's. Every mistake is a :class:`ProfileError` with a one-line message that names the
report or key and what is valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.core.numbers import is_integer

__all__ = [
    "KEYS",
    "PROFILER_REPORTS",
    "REPORTS",
    "WINDOW_REPORTS",
    "ProfileConfig",
    "ProfileError",
    "ReportConfig",
    "WindowPlan",
]

#: Every report, in the order they are built and shown.
REPORTS = ("speed", "time", "memory", "system", "summary", "snapshot", "trace")
#: Reports that need the profiled window of extra steps after the scored ones.
WINDOW_REPORTS = ("speed", "time", "memory", "snapshot", "trace")
#: Reports read from torch.profiler (the time report reads it too when it ran, for ``verbose``).
#: Its window is the first of them that is on's (``memory``, then ``trace``, then ``speed``).
PROFILER_REPORTS = ("speed", "memory", "trace")
#: Keys of one report's mapping.
KEYS = ("enabled", "verbose", "warmup", "steps", "extra_plots", "trace_rank0_only", "top")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class WindowPlan(NamedTuple):
    """The profiled window, in steps after the scored ones, in two phases:

    1. *timed*: ``timed_warmup + timed_steps`` steps with the timer alone, per-step region
       intervals recorded (the time report: no profiler overhead in its figures);
    2. *profiler*: torch.profiler warms up for ``profiler_warmup`` steps then records
       ``profiler_steps`` (speed, memory, trace); the CUDA memory history starts
       ``snapshot_warmup`` steps into this phase and the snapshot is taken ``snapshot_steps``
       later.
    """

    timed_warmup: int = 0
    timed_steps: int = 0
    profiler_warmup: int = 0
    profiler_steps: int = 0
    snapshot_warmup: int = 0
    snapshot_steps: int = 0

    @property
    def timed(self) -> int:
        return self.timed_warmup + self.timed_steps

    @property
    def total(self) -> int:
        profiler = self.profiler_warmup + self.profiler_steps if self.profiler_steps else 0
        snapshot = self.snapshot_warmup + self.snapshot_steps if self.snapshot_steps else 0
        return self.timed + max(profiler, snapshot)


class ProfileError(DlbenchError, ValueError):
    """A bad ``--bench-profile`` value or ``profile:`` mapping; the message is one line."""


@dataclass(frozen=True)
class ReportConfig:
    """The settings of one report; every report accepts every key, and uses those it needs.

    ``warmup``: profiled steps before recording starts (their results are dropped);
    ``steps``: recorded steps; ``top``: operators per table of the memory report;
    ``verbose``: the full report instead of the concise one; ``extra_plots``: the memory
    timeline (GPU only); ``trace_rank0_only``: only rank 0 of a job writes its trace.
    """

    enabled: bool = False
    verbose: bool = False
    warmup: int = 2
    steps: int = 5
    extra_plots: bool = False
    trace_rank0_only: bool = False
    top: int = 20


def _fail(where: str, message: str) -> ProfileError:
    return ProfileError(f"{where}: {message}" if where else message)


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _fail(where, f"expected true or false, got {quoted(value)}")


def _as_int(value: Any, where: str, minimum: int) -> int:
    number: int | None = None
    if is_integer(value):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    if number is None:
        raise _fail(where, f"expected an integer >= {minimum}, got {quoted(value)}")
    if number < minimum:
        raise _fail(where, f"must be >= {minimum}, got {number}")
    return number


_MINIMUM = {"warmup": 0, "steps": 1, "top": 1}


def _report_config(name: str, value: Any, where: str, base: ReportConfig) -> ReportConfig:
    here = f"{where}.{name}" if where else name
    if value is None:
        return base
    if isinstance(value, (bool, str)) and not isinstance(value, Mapping):
        return replace(base, enabled=_as_bool(value, here))
    if not isinstance(value, Mapping):
        raise _fail(here, f"expected a mapping of {', '.join(KEYS)} or true/false, "
                          f"got {type(value).__name__}")
    changes: dict[str, Any] = {}
    for key, item in value.items():
        if key not in KEYS:
            raise _fail(here, f"unknown key {quoted(key)}; valid keys: {', '.join(KEYS)}")
        at = f"{here}.{key}"
        if key in _MINIMUM:
            changes[key] = _as_int(item, at, _MINIMUM[key])
        else:
            changes[key] = _as_bool(item, at)
    return replace(base, **changes)


def _check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or name not in REPORTS:
        raise _fail(where, f"unknown report {quoted(name)}; valid reports: {', '.join(REPORTS)}")
    return name


def _defaults() -> dict[str, ReportConfig]:
    return {name: ReportConfig() for name in REPORTS}


@dataclass(frozen=True)
class ProfileConfig:
    """The seven reports' settings (:class:`ReportConfig`), all present, most switched off."""

    reports: Mapping[str, ReportConfig] = field(default_factory=_defaults)

    def __post_init__(self) -> None:
        merged = _defaults()
        for name, report in self.reports.items():
            merged[_check_name(name, "profile")] = report
        object.__setattr__(self, "reports", merged)

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def all(cls) -> ProfileConfig:
        """Every report on, default settings."""
        return cls({name: ReportConfig(enabled=True) for name in REPORTS})

    @classmethod
    def parse_cli(cls, text: str | None, *, where: str = "--bench-profile") -> ProfileConfig:
        """``--bench-profile`` (``""`` or None: every report) or a comma list of report names."""
        names = [part.strip() for part in (text or "").split(",") if part.strip()]
        if not names:
            return cls.all()
        for name in names:
            _check_name(name, where)
        return cls({name: ReportConfig(enabled=True) for name in names})

    @classmethod
    def from_mapping(cls, value: Any, *, where: str = "profile") -> ProfileConfig:
        """A suite's ``profile:`` value.

        - ``true`` / ``false`` / null: every report on / nothing;
        - ``"speed,time"`` or ``[speed, time]``: those reports on;
        - ``{report: {key: value}}`` or ``{report: true}``: per report (a report is on only
          with ``enabled: true``; its other keys apply whenever it is on, from either source).
        """
        if value is None or value is False:
            return cls()
        if value is True:
            return cls.all()
        if isinstance(value, str):
            return cls.parse_cli(value, where=where)
        if isinstance(value, Iterable) and not isinstance(value, Mapping):
            return cls.parse_cli(",".join(str(v) for v in value), where=where)
        if not isinstance(value, Mapping):
            raise _fail(where, "expected true, a list of reports or a mapping of report: "
                               f"settings, got {type(value).__name__}")
        reports = _defaults()
        for name, item in value.items():
            _check_name(name, where)
            reports[name] = _report_config(name, item, where, reports[name])
        return cls(reports)

    @classmethod
    def merge(cls, cli: ProfileConfig | None, mapping: ProfileConfig | None) -> ProfileConfig:
        """A report is on when the command line or the mapping says so; keys are the mapping's."""
        base = mapping if mapping is not None else cls()
        if cli is None:
            return base
        return cls({
            name: replace(report, enabled=report.enabled or cli.enabled(name))
            for name, report in base.reports.items()
        })

    # -- reading -----------------------------------------------------------------------------
    def __getitem__(self, name: str) -> ReportConfig:
        return self.reports[_check_name(name, "profile")]

    def enabled(self, name: str) -> bool:
        return self[name].enabled

    @property
    def enabled_reports(self) -> tuple[str, ...]:
        return tuple(name for name in REPORTS if self.reports[name].enabled)

    def __bool__(self) -> bool:
        """True when any report is on."""
        return bool(self.enabled_reports)

    def profiler_window(self) -> tuple[int, int]:
        """(warmup, steps) of torch.profiler: the memory report's, else the trace's, else the
        speed report's (the first of them that is on); (0, 0) when none is on."""
        for name in ("memory", "trace", "speed"):
            report = self.reports[name]
            if report.enabled:
                return report.warmup, report.steps
        return 0, 0

    def plan(self, *, cuda: bool) -> WindowPlan:
        """The profiled window's phases (:class:`WindowPlan`)."""
        time = self.reports["time"]
        timed = (time.warmup, time.steps) if time.enabled else (0, 0)
        warmup, steps = self.profiler_window()
        snap = self.reports["snapshot"]
        snapshot = (snap.warmup, snap.steps) if snap.enabled and cuda else (0, 0)
        return WindowPlan(*timed, warmup, steps, *snapshot)

    def window_length(self, *, cuda: bool) -> int:
        """Profiled steps after the scored ones (0: no window)."""
        return self.plan(cuda=cuda).total

    # -- travelling in the run's config record ---------------------------------------------
    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: asdict(self.reports[name]) for name in REPORTS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ProfileConfig:
        """The inverse of :meth:`to_dict` (validated like a suite mapping)."""
        if not data:
            return cls()
        return cls.from_mapping(dict(data), where="profile")
