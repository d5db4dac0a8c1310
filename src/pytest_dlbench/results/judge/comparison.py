"""The rows every comparison returns, a saved baseline's (results/judge/saved.py) and a paired
run's (results/judge/paired.py): one :class:`BenchComparison` per benchmark and the
:class:`Comparison` of the run, with what they say in JSON and why the inconclusive verdicts
are (results/judge/causes.py). docs/reports.md, "Baselines and the regression gate".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.layout import Against
from pytest_dlbench.results.judge import causes
from pytest_dlbench.results.judge.noise import Drift
from pytest_dlbench.results.judge.stats import BETWEEN_RUNS, TESTS, describe_test
from pytest_dlbench.results.judge.verdict import (
    FAILED,
    INCOMPARABLE,
    INCONCLUSIVE,
    REGRESSED,
    Rule,
)
from pytest_dlbench.results.model.run_result import THROUGHPUT, TOTAL_TIME

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import BenchSummary

__all__ = ["BenchComparison", "Comparison", "units_note"]


def _as_json(row: Any, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass's fields as its JSON says them: tuples as lists, mappings as dicts."""
    return {f.name: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
            for f in dataclasses.fields(row) if f.name not in leave_out
            for v in (getattr(row, f.name),)}


@dataclass(frozen=True)
class BenchComparison:
    name: str
    units: str
    weight: float
    current: float  # perf: the rate the verdict judges (0 when no run succeeded)
    baseline: float  # the baseline's perf
    ratio: float | None  # current / baseline: the verdict's size
    verdict: str
    p_value: float | None  # one-sided, in the direction of the ratio; None when not testable
    samples: tuple[int, int]  # (current, baseline) sample sizes; paired: (pairs, pairs)
    # perf_adj (milarun: the rate less its spread and failures) and its ratio, shown beside.
    current_adj: float | None = None
    baseline_adj: float | None = None
    adj_ratio: float | None = None
    # A confidence interval of ``ratio`` (paired comparisons), at the level ``1 - 2 alpha`` so
    # that its upper end is below 1 exactly when the one-sided test is significant.
    ci: tuple[float, float] | None = None
    note: str = ""  # why there is no verdict, one line (paired: "not in the suite at main")
    # Time-to-train benchmarks (docs/time-to-train.md): their times, lower is better. The
    # verdict is the one of their equivalent throughput (perf_adj): a longer time is a lower
    # throughput, so a time that grew beyond the tolerance is a regression.
    metric: str = THROUGHPUT
    current_time: float | None = None
    baseline_time: float | None = None
    #: Why the verdict is what it is, one line (an inconclusive one: what made it so).
    reason: str = ""
    #: Where each side's noise came from (a saved baseline: results/judge/noise.py), one phrase.
    noise: str = ""
    #: The drift between sessions the verdict assumed (a saved baseline: results/judge/noise.py).
    drift: Drift | None = None
    #: What puts a side's figure in doubt, one phrase each (a std% flagged unreliable, a busy
    #: machine: results/judge/noise.doubts, results/judge/paired.paired_doubt); () when nothing
    #: does.
    doubts: tuple[str, ...] = ()

    @property
    def time_ratio(self) -> float | None:
        """current / baseline total_time_secs (above 1 is slower); None if not both."""
        if self.current_time is None or not self.baseline_time:
            return None
        return self.current_time / self.baseline_time

    def to_dict(self) -> dict[str, Any]:
        data = _as_json(self, leave_out=("metric", "current_time", "baseline_time"))
        data["drift"] = _drift_dict(self.drift)
        if self.metric == TOTAL_TIME:
            data.update(metric=self.metric, lower_is_better=True,
                        current_time=self.current_time, baseline_time=self.baseline_time,
                        time_ratio=self.time_ratio)
        return data


@dataclass(frozen=True)
class Comparison:
    benchmarks: tuple[BenchComparison, ...]
    only_current: tuple[str, ...]
    only_baseline: tuple[str, ...]
    current_score: float | None
    baseline_score: float | None
    score_ratio: float | None
    score_verdict: str
    score_p_value: float | None
    tolerance: float
    alpha: float
    baseline_path: str | None = None  # where the baseline came from, for the reports
    # What makes the comparison less meaningful, one line each (the baseline's machine differs).
    warnings: tuple[str, ...] = ()
    # The weighted geometric mean of the benchmarks' rate ratios: what the score verdict judges
    # (``score_ratio`` is the ratio of the perf_adj scores, milarun's figure).
    score_rate_ratio: float | None = None
    score_ci: tuple[float, float] | None = None  # of score_rate_ratio (paired comparisons)
    #: The test behind the verdicts: "between-runs" (a saved baseline, results/judge/noise.py), "t",
    #: "wilcoxon" or "quantile" (paired rounds).
    test: str = BETWEEN_RUNS
    #: Paired comparisons: what each run of a pair contributes, "window" or "median".
    pair_rate: str | None = None
    #: Paired comparisons: the base revision and how it ran (``against.json``, with where
    #: each benchmark's rounds stopped).
    against: Against | None = None
    #: Why the score's verdict is what it is, one line.
    score_reason: str = ""
    #: The doubts on the weighted benchmarks' figures the score's verdict saw.
    score_doubts: tuple[str, ...] = ()

    @property
    def regressions(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.benchmarks if b.verdict == REGRESSED)

    @property
    def regressed(self) -> bool:
        """A benchmark (weighted or not) or the score regressed: the gate's answer."""
        return bool(self.regressions) or self.score_verdict == REGRESSED

    @property
    def inconclusives(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.benchmarks if b.verdict == INCONCLUSIVE)

    @property
    def compared_nothing(self) -> bool:
        """No weighted benchmark (none weighted: no benchmark) was compared: each one's verdict
        is incomparable or failed (no figure on a side). Such a gate cannot pass: every base
        run that failed (a ``command:`` into a git submodule the worktree lacks) would else be
        exit status 0 with nothing said."""
        rows = [b for b in self.benchmarks if b.weight > 0] or list(self.benchmarks)
        return bool(rows) and all(b.verdict in (INCOMPARABLE, FAILED) for b in rows)

    @property
    def inconclusive(self) -> bool:
        """A benchmark or the score is inconclusive, or the gate compared nothing (exit status
        9 unless one regressed or a run failed)."""
        return (bool(self.inconclusives) or self.score_verdict == INCONCLUSIVE
                or self.compared_nothing)

    @property
    def rule(self) -> str:
        """The rule the verdicts followed, one line, as the verdict core describes it (the
        terminal, the HTML and the JSON say this text)."""
        return Rule(self.tolerance, self.alpha).describe(
            describe_test(self.test, self.pair_rate), paired=self.against is not None)

    @property
    def ratio_name(self) -> str:
        """What the ratio each verdict judges is called in every report (``perf ratio``,
        ``p75 ratio``: results/judge/stats.py's table of the tests)."""
        found = TESTS.get(self.test)
        return found.ratio if found is not None else "ratio"

    @property
    def ratio_means(self) -> str:
        """``p75 ratio = the candidate's upper quartile ...``: the judged ratio, one phrase."""
        found = TESTS.get(self.test)
        return f"{self.ratio_name} = {found.ratio_means}" if found is not None else ""

    @property
    def inconclusive_causes(self) -> tuple[str, ...]:
        """Why the inconclusive verdicts are (results/judge/causes.py's causes, in its order): a
        side measured on a busy machine, noise too large for the tolerance, or a paired run that
        ended before its rounds; () when every verdict is conclusive."""
        found: set[str] = {causes.NOTHING_COMPARED} if self.compared_nothing else set()
        for row in self.benchmarks:
            if row.verdict == INCONCLUSIVE:
                found.update(self._row_causes(row))
        if self.score_verdict == INCONCLUSIVE:
            found.update(causes.doubt_cause(d) for d in self.score_doubts)
            if not self.score_doubts:
                found.add(causes.NOISE)
        return tuple(c for c in causes.CAUSES if c in found)

    def _row_causes(self, row: BenchComparison) -> set[str]:
        """An inconclusive row's causes: its doubts; else a paired run with no test (fewer
        than two pairs), or whose rounds ended before the rule could decide (interrupted,
        failed rounds); else the noise."""
        if row.doubts:
            return {causes.doubt_cause(d) for d in row.doubts}
        if self.against is not None and (row.p_value is None or self._cut_short(row)):
            return {causes.FEW_ROUNDS}
        return {causes.NOISE}

    def _stop(self, name: str) -> Mapping[str, Any]:
        """Where a paired benchmark's rounds ended (results/judge/paired.py's ``stops``), {} if
        unknown: a sequential run interrupted before its rule could decide has none."""
        stops = (self.against.stops if self.against is not None else None) or {}
        stop = stops.get(name)
        return stop if isinstance(stop, Mapping) else {}

    def _cut_short(self, row: BenchComparison) -> bool:
        """A paired benchmark whose rounds ended before the planned ones with no decision of
        the rule (interrupted, or rounds that failed)."""
        stop = self._stop(row.name)
        used, planned = stop.get("rounds_used"), stop.get("rounds")
        if isinstance(used, int) and isinstance(planned, int):
            return used < planned and stop.get("stopped") != "clear"  # paired.CLEAR: decided
        asked = self.against.rounds if self.against is not None else None
        return asked is not None and row.samples[0] < asked

    @property
    def rounds_ran(self) -> tuple[int, int, int | None] | None:
        """A paired run's rounds: (the fewest, the most any compared benchmark ran, the rounds
        asked for); None for a saved baseline's comparison or when no benchmark was paired. A
        benchmark stops before the rounds asked when its verdict is clear (the sequential
        design), or when the run was cut short."""
        if self.against is None:
            return None
        ran = []
        for row in self.benchmarks:
            used = self._stop(row.name).get("rounds_used")
            if isinstance(used, int):
                ran.append(used)
            elif row.samples[0]:
                ran.append(row.samples[0])  # interrupted before its rule decided: its pairs
        if not ran:
            return None
        return min(ran), max(ran), self.against.rounds

    @property
    def inconclusive_why(self) -> str:
        """What made the verdicts inconclusive, in words (results/judge/causes.py): the head of the
        closing line, the HTML banner's and its advice's."""
        return causes.inconclusive_why(self.inconclusive_causes)

    @property
    def inconclusive_advice(self) -> str:
        """What to do about the inconclusive verdicts, for their causes: a paired run's rounds
        or a saved baseline's comparison (results/judge/causes.py)."""
        return causes.inconclusive_advice(paired=self.against is not None,
                                          causes=self.inconclusive_causes)

    def get(self, name: str) -> BenchComparison | None:
        return next((b for b in self.benchmarks if b.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {**_as_json(self), "benchmarks": {b.name: b.to_dict() for b in self.benchmarks},
                "against": self.against.to_dict() if self.against is not None else None,
                "regressed": self.regressed, "inconclusive": self.inconclusive,
                "inconclusives": list(self.inconclusives), "rule": self.rule,
                "ratio_name": self.ratio_name, "ratios": self.ratio_keys()}

    def ratio_keys(self) -> dict[str, str]:
        """What each ratio key of the JSON is, and which one the verdicts judge."""
        return {
            "ratio": f"{self.ratio_means}; the one each benchmark's verdict judges",
            "adj_ratio": "perf_adj / baseline perf_adj, shown, not judged",
            "score_rate_ratio": "the weighted combination of the benchmarks' ratios; the "
                                "one the score's verdict judges",
            "score_ratio": "score / baseline score (both of perf_adj), shown, not judged",
        }


def units_note(cur: BenchSummary, base: BenchSummary, other: str = "in the baseline"
               ) -> str | None:
    """Why two sides measured in different units (TFLOP/s against items/s) are no pair
    (``other``: where the second side was measured; a paired run says "on the base side")."""
    if cur.units and base.units and cur.units != base.units:
        return f"not compared: measured in {cur.units} here and in {base.units} {other}"
    return None


def _drift_dict(drift: Drift | None) -> dict[str, Any] | None:
    """The drift as the JSON says it: its cv, degrees of freedom (null: assumed, not
    measured) and source."""
    if drift is None:
        return None
    return {"cv": drift.cv, "df": None if drift.assumed else drift.df, "source": drift.source}
