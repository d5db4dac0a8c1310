"""A ``--bench-against`` run's paired comparison: the base side (``base/``) and the candidate ran
each benchmark in ABBA rounds on the same slot; round ``r`` on device ``k`` is one pair, and its
log ratio cancels the load both runs shared. Per benchmark the pairs go to a test of
results/judge/stats.TESTS, at the last round (the fixed design) or at the first interim look where
the core's ``judge_look`` fires (the sequential design: repeated confidence intervals); a
change whose busy runs are all on one side is in doubt. The score combines the benchmarks'
mean log ratios. docs/reports.md, "Against a git revision" and "Stopping early". Pure
functions over two summaries: ``dlbench report`` recomputes the verdicts the run gave.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench import layout
from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.core.numbers import weighted_geomean
from pytest_dlbench.results.figures.busy import busy_share
from pytest_dlbench.results.figures.scoring import load_run, summarize_bench, summarize_dir
from pytest_dlbench.results.judge.causes import BUSY_DOUBT
from pytest_dlbench.results.judge.comparison import BenchComparison, Comparison, units_note
from pytest_dlbench.results.judge.defaults import PAIRED_RATE, PAIRED_RATES, PAIRED_TEST
from pytest_dlbench.results.judge.stats import (
    PAIRED_TESTS,
    PairedStats,
    combined_paired,
    combined_paired_var,
    p_in_direction,
    paired_stats,
    quantile_stats,
)
from pytest_dlbench.results.judge.verdict import (
    ALPHA,
    CHANGED,
    INCOMPARABLE,
    TOLERANCE,
    UNSURE,
    Evidence,
    Rule,
    judge,
    judge_doubted,
    judge_doubted_score,
    judge_look,
    judge_probe,
    judge_score,
    judge_unmatched,
)
from pytest_dlbench.results.model.run_result import TOTAL_TIME
from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

__all__ = ["ALL_ROUNDS", "CLEAR", "DESIGNS", "FIRST_LOOK", "FIXED", "LOOK_EVERY", "SEQUENTIAL",
           "Judgement", "Pair", "Stop", "compare_paired", "design_of", "evidence_of", "first_stop",
           "judge_paired_run", "judge_rounds", "looks", "paired_doubt", "paired_with_doubts",
           "pairs_of", "stop_before", "summarize_paired_dir"]

@dataclass(frozen=True)
class Pair:
    """One round of one benchmark on one device: both sides' rates."""

    device: int
    round: int
    base: float
    candidate: float

    @property
    def log_ratio(self) -> float:
        return math.log(self.candidate / self.base)


def pairs_of(
    base: BenchSummary | None, candidate: BenchSummary | None, rate: str = PAIRED_RATE
) -> list[Pair]:
    """The rounds where both sides succeeded, matched by (device, repeat). ``rate`` is what a
    run contributes: ``window`` (its scored rate) or ``median`` (its median step rate)."""
    if rate not in PAIRED_RATES:
        raise ValueError(f"unknown paired rate {rate!r}: one of {', '.join(PAIRED_RATES)}")
    if base is None or candidate is None:
        return []

    def figure(run: Any) -> float | None:
        return run.median_rate if rate == "median" else run.rate

    def rates(bench: BenchSummary) -> dict[tuple[int, int], float]:
        figures = {(r.device, r.repeat or 0): figure(r) for r in bench.runs if r.ok}
        return {key: float(v) for key, v in figures.items() if v is not None and v > 0}

    b, c = rates(base), rates(candidate)
    return [Pair(device, rnd, b[(device, rnd)], c[(device, rnd)])
            for device, rnd in sorted(b.keys() & c.keys())]


def evidence_of(stats: PairedStats) -> Evidence:
    """What one benchmark's pairs say, as the verdict core (results/judge/verdict.py) takes it."""
    return Evidence(stats.ratio, stats.p, stats.ci, log_var=stats.log_var,
                    log_mean=stats.log_mean, paired=True, rounds=stats.n)


# -- the sequential design: stop a benchmark's rounds once its verdict is clear ----------------
#: The designs of a paired run (``against.json``'s ``design``): ``sequential`` stops a
#: benchmark early when its verdict is clear; ``fixed`` runs every round (``--bench-fixed-rounds``,
#: and every run directory written before the sequential design existed).
SEQUENTIAL = "sequential"
FIXED = "fixed"
DESIGNS = (SEQUENTIAL, FIXED)

#: The first interim look and the rounds between looks: a bootstrap interval of fewer rounds
#: is meaningless, and the permutation test's smallest p (2**-k) lets futility stop at 4 or 5,
#: a change from 6 (docs/reports.md, "Stopping early").
FIRST_LOOK = 4
LOOK_EVERY = 1

#: Why a benchmark's rounds ended (``Stop.reason``).
CLEAR = "clear"  # the rule fired at an interim look
ALL_ROUNDS = "all rounds"  # the last look: the fixed design's verdict


@dataclass(frozen=True)
class Stop:
    """Where a benchmark's rounds stopped and why: after ``rounds`` of ``of`` rounds, with the
    verdict ``word`` (REGRESSED, IMPROVED or UNCHANGED) for ``reason`` (CLEAR or ALL_ROUNDS)."""

    rounds: int
    of: int
    word: str
    reason: str

    @property
    def early(self) -> bool:
        return self.rounds < self.of

    def describe(self) -> str:
        """``stopped after 4 of 10 rounds (clear)``, or ``10 of 10 rounds``."""
        if self.early:
            return f"stopped after {self.rounds} of {self.of} rounds ({self.reason})"
        return f"{self.rounds} of {self.of} rounds"


def looks(rounds: int) -> tuple[int, ...]:
    """The rounds after which a benchmark is judged: every :data:`LOOK_EVERY` from
    :data:`FIRST_LOOK` before the last, and the last (``looks(10) == (4, 5, ..., 10)``)."""
    return (*range(FIRST_LOOK, rounds, LOOK_EVERY), rounds)


def first_stop(
    look_at: Callable[[int], PairedStats | None],
    rounds: int,
    *,
    final: Callable[[PairedStats | None], str],
    tolerance: float,
    alpha: float,
    available: int | None = None,
) -> tuple[Stop, PairedStats | None] | None:
    """Walk the looks of a benchmark of ``rounds`` rounds: ``look_at(k)`` is what its first k
    rounds say; ``final`` the fixed design's verdict of the last look. The first interim look
    where the core's ``judge_look`` fires is the Stop; else the last look's. Only the looks within
    ``available`` rounds (those that ran) are taken: None when the rule has not fired by then
    and the last round did not run (more rounds are needed, or the run was interrupted)."""
    have = rounds if available is None else min(available, rounds)
    for k in looks(rounds):
        if k > have:
            return None
        stats = look_at(k)
        if k == rounds:
            return Stop(k, rounds, final(stats), ALL_ROUNDS), stats
        word = judge_look(evidence_of(stats) if stats is not None else None,
                          Rule(tolerance, alpha))
        if word is not None:
            return Stop(k, rounds, word, CLEAR), stats
    return None


# -- a whole run ------------------------------------------------------------------------------
def _paired_adj(base: BenchSummary | None, cand: BenchSummary) -> tuple[float, float]:
    """(candidate, base) perf_adj over the rounds both sides completed: a
    round that failed, was cut short or never ran on one side is no round of the comparison,
    so its failure cannot move the adj ratio (a base round's crash read 1.333 where every pair
    was 1.000)."""
    if base is None:
        return cand.perf_adj, 0.0

    def done(bench: BenchSummary) -> set[tuple[int, int]]:
        return {(r.device, r.repeat or 0) for r in bench.runs if r.ok}

    both = done(base) & done(cand)

    def adj(bench: BenchSummary) -> float:
        runs = [r for r in bench.runs if (r.device, r.repeat or 0) in both]
        return summarize_bench(bench.name, runs, bench.manifest_entry).perf_adj if runs else 0.0

    return adj(cand), adj(base)


def _pairs_stats(base: BenchSummary | None, cand: BenchSummary, pairs: Sequence[Pair], *,
                 test: str, alpha: float) -> PairedStats | None:
    """What ``pairs`` say, by the paired test ``test``; None without any pair."""
    if not pairs:
        return None
    if test == "quantile":
        base_steps, cand_steps = _round_steps(base, cand, pairs)
        return quantile_stats(base_steps, cand_steps, alpha=alpha)
    return paired_stats([p.log_ratio for p in pairs], test=test, alpha=alpha)


def _rounds_ran(*benches: BenchSummary | None) -> int:
    """How many rounds ran on the sides (the last round's index + 1), failed ones too."""
    repeats = [(r.repeat or 0) for b in benches if b is not None for r in b.runs]
    return max(repeats) + 1 if repeats else 0


def judge_rounds(
    base: BenchSummary | None, cand: BenchSummary, *, rounds: int | None, design: str,
    tolerance: float, alpha: float, test: str, rate: str,
) -> tuple[PairedStats | None, list[Pair], Stop | None]:
    """(the statistics the verdict uses, their pairs, where the rounds stopped) of one
    benchmark. The sequential design: the first look where its rule fires, or the last round
    (:func:`first_stop`). The fixed design, or a sequential run cut short before its rule
    fired (interrupted): every pair, and a Stop only for the fixed design."""
    pairs = pairs_of(base, cand, rate)
    ran = _rounds_ran(base, cand)
    rule = Rule(tolerance, alpha)
    if design == SEQUENTIAL and rounds and pairs:

        def look_at(k: int) -> PairedStats | None:
            return _pairs_stats(base, cand, [p for p in pairs if p.round < k], test=test,
                                alpha=alpha)

        def final(s: PairedStats | None) -> str:
            return judge(evidence_of(s), rule).word if s else ""

        found = first_stop(look_at, rounds, final=final, tolerance=tolerance, alpha=alpha,
                           available=ran)
        if found is not None:
            stop, stats = found
            return stats, [p for p in pairs if p.round < stop.rounds], stop
    stats = _pairs_stats(base, cand, pairs, test=test, alpha=alpha)
    if design == FIXED and stats is not None:
        word = judge(evidence_of(stats), rule).word
        return stats, pairs, Stop(ran, max(rounds or 0, ran), word, ALL_ROUNDS)
    return stats, pairs, None


def _compare_bench(
    name: str, base: BenchSummary | None, cand: BenchSummary, *, tolerance: float, alpha: float,
    test: str, rate: str, rounds: int | None = None, design: str = FIXED,
) -> tuple[BenchComparison, PairedStats | None, Stop | None]:
    s, pairs, stop = judge_rounds(base, cand, rounds=rounds, design=design,
                                  tolerance=tolerance, alpha=alpha, test=test, rate=rate)
    cur_adj, base_adj = _paired_adj(base, cand)
    note = reason = ""
    if s is None:  # no pair: the core names the side that has no run
        base_ran = base is not None and bool(base.rates)
        word = judge_unmatched(current_ran=bool(cand.rates), reference_ran=base_ran).word
        ratio: float | None = 0.0 if base_ran and not cand.rates else None
        if not base_ran:
            note = "no base run succeeded" if base is not None and base.n else "no base run"
        p = None
    else:
        ratio, p = s.ratio, s.p
        if stop is not None and stop.reason == CLEAR:
            word = stop.word
        else:
            judged = judge(evidence_of(s), Rule(tolerance, alpha))
            word, reason = judged.word, judged.reason
        if s.n < 2:
            note = "one pair: no test (--bench-rounds 2 or more)"
        elif stop is not None and stop.early:
            note = stop.describe()
    comparison = BenchComparison(
        name=name,
        units=cand.units,
        weight=cand.weight,
        current=cand.perf or 0.0,
        baseline=(base.perf or 0.0) if base is not None else 0.0,
        ratio=ratio,
        verdict=word,
        p_value=p,
        samples=(len(pairs), len(pairs)),
        current_adj=cur_adj,
        baseline_adj=base_adj,
        adj_ratio=cur_adj / base_adj if cur_adj > 0 and base_adj > 0 else None,
        ci=s.ci if s is not None else None,
        note=note,
        reason=reason,
    )
    return comparison, s, stop


def paired_doubt(base: BenchSummary | None, candidate: BenchSummary) -> str | None:
    """A ``--bench-against`` verdict in doubt: the busy runs all on one side. ABBA rounds share
    a steady or bursty neighbour between the sides (every run busy, or some of each), which the
    pairing cancels; only load that hit one side's runs and none of the other's can masquerade
    as a change of code."""
    if base is None:
        return None
    (b_busy, b_ok, _), (c_busy, c_ok, _) = busy_share(base), busy_share(candidate)
    for side, (busy, ok), other in (("base", (b_busy, b_ok), c_busy),
                                    ("candidate", (c_busy, c_ok), b_busy)):
        if ok and other == 0 and 2 * busy >= ok:
            return (f"{BUSY_DOUBT} during {busy} of the {side} side's {ok} runs and "
                    "none of the other side's")
    return None


def paired_with_doubts(
    comparison: Comparison, base: SuiteSummary | None, candidate: SuiteSummary
) -> Comparison:
    """A ``--bench-against`` comparison whose regressed or improved benchmarks in doubt
    (:func:`paired_doubt`) are inconclusive instead; the rest as the pairs judged them. The
    score follows, as a saved baseline's does: regressed or improved with a weighted
    benchmark in doubt, it is inconclusive (else a one-benchmark suite would still exit 6
    on its score)."""
    candidates = {b.name: b for b in candidate.benchmarks}
    bases = {b.name: b for b in base.benchmarks} if base is not None else {}
    rows, doubted = [], []
    for row in comparison.benchmarks:
        cand = candidates.get(row.name)
        doubt = paired_doubt(bases.get(row.name), cand) if cand is not None else None
        judged = judge_doubted(row.verdict, row.ratio, doubt)  # only a change doubts
        if judged is not None:
            row = dataclasses.replace(row, verdict=judged.word, reason=judged.reason,
                                      doubts=(doubt,) if doubt is not None else ())
            doubted.append(row)
        rows.append(row)
    if not doubted:
        return comparison
    changes: dict[str, object] = {"benchmarks": tuple(rows)}
    score = judge_doubted_score(comparison.score_verdict,
                                        [row.name for row in doubted if row.weight > 0])
    if score is not None:
        changes["score_verdict"], changes["score_reason"] = score.word, score.reason
        changes["score_doubts"] = tuple(d for row in doubted if row.weight > 0
                                        for d in row.doubts)
    return dataclasses.replace(comparison, **changes)  # type: ignore[arg-type]


def _refused(cand: BenchSummary, base: BenchSummary, note: str) -> BenchComparison:
    """The row of a benchmark whose two sides cannot be compared (``note`` says why)."""
    return BenchComparison(
        name=cand.name, units=cand.units, weight=cand.weight, current=cand.perf or 0.0,
        baseline=base.perf or 0.0, ratio=None, p_value=None,
        samples=(0, 0), current_adj=cand.perf_adj, baseline_adj=base.perf_adj, note=note,
        verdict=judge_unmatched(current_ran=bool(cand.rates), reference_ran=bool(base.rates),
                                refused=note).word)


def _round_steps(
    base: BenchSummary | None, cand: BenchSummary, pairs: Sequence[Pair]
) -> tuple[list[list[float]], list[list[float]]]:
    """The steady step rates of both runs of each pair (a time-to-train run: its rate)."""

    def steps(bench: BenchSummary | None) -> dict[tuple[int, int], list[float]]:
        out: dict[tuple[int, int], list[float]] = {}
        for r in bench.runs if bench is not None else ():
            if r.ok:
                timed = r.metric == TOTAL_TIME or not r.steady
                out[(r.device, r.repeat or 0)] = ([float(r.rate or 0.0)] if timed
                                                  else [v for _, v in r.steady])
        return out

    b, c = steps(base), steps(cand)
    keys = [(p.device, p.round) for p in pairs]
    return [b[k] for k in keys], [c[k] for k in keys]


def compare_paired(
    candidate: SuiteSummary,
    base: SuiteSummary,
    *,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    test: str = PAIRED_TEST,
    rate: str = PAIRED_RATE,
    against: layout.Against | None = None,
    warnings: Sequence[str] = (),
) -> Comparison:
    """The paired verdicts of a ``--bench-against`` run: ``candidate`` (the run directory) and
    ``base`` (its ``base/`` folder), each benchmark's runs paired by device and round.

    A benchmark the candidate ran and the base did not (not in the suite at the base revision)
    is in ``only_current``, with no verdict; the reverse is in ``only_baseline``."""
    rule = Rule(tolerance, alpha)  # refuses levels no verdict can be made with
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}: one of {', '.join(PAIRED_TESTS)}")
    if rate not in PAIRED_RATES:
        raise ValueError(f"unknown paired rate {rate!r}: one of {', '.join(PAIRED_RATES)}")
    design, rounds = design_of(against)
    bases = {b.name: b for b in base.benchmarks}
    base_names = {name for name, b in bases.items() if b.n}
    benches: list[BenchComparison] = []
    terms: list[tuple[float, PairedStats]] = []
    only_current: list[str] = []
    stops: dict[str, dict[str, Any]] = {}
    for cand in candidate.benchmarks:
        if cand.n == 0:
            continue  # selected but never ran (interrupted): the summary says so
        if cand.name not in base_names:
            only_current.append(cand.name)
            continue
        base_bench = bases.get(cand.name)
        refused = units_note(cand, base_bench, "on the base side") if base_bench else None
        if base_bench is not None and refused is not None:
            benches.append(_refused(cand, base_bench, refused))  # no ratio of items/s to TFLOP/s
            continue
        b, s, stop = _compare_bench(cand.name, base_bench, cand, tolerance=tolerance,
                                    alpha=alpha, test=test, rate=rate, rounds=rounds,
                                    design=design)
        benches.append(b)
        if stop is not None:
            stops[cand.name] = {"rounds_used": stop.rounds, "rounds": stop.of,
                                "stopped": stop.reason}
        if s is not None and cand.scored and base_bench is not None and base_bench.scored:
            terms.append((cand.weight, s))
    cand_names = {b.name for b in candidate.benchmarks if b.n}
    only_baseline = tuple(n for n in sorted(base_names) if n not in cand_names)
    rate_ratio, score_ci, score_ps = combined_paired(terms, alpha)
    score_p = p_in_direction(rate_ratio, score_ps) if rate_ratio is not None else None
    weighted = {b.verdict for b in benches if b.weight > 0}
    score_found = (Evidence(rate_ratio, score_p, score_ci, log_var=combined_paired_var(terms),
                            paired=True) if rate_ratio is not None else None)
    score = judge_score(score_found, weighted, rule)
    scored = {b.name for b in benches if b.adj_ratio and b.weight > 0}
    score_ratio = weighted_geomean(
        (b.adj_ratio or 0.0, b.weight) for b in benches if b.name in scored
    )
    # Load on one side's runs only: a change in doubt is inconclusive, not regressed.
    return paired_with_doubts(Comparison(
        benchmarks=tuple(benches),
        only_current=tuple(only_current),
        only_baseline=only_baseline,
        current_score=candidate.score,
        baseline_score=base.score,
        score_ratio=score_ratio,
        score_verdict=score.word,
        score_reason=score.reason,
        score_p_value=score_p,
        tolerance=tolerance,
        alpha=alpha,
        # A pair refused (units) is said where every report shows warnings, as a saved
        # baseline's comparison says it.
        warnings=(*warnings, *(f"{b.name}: {b.note}" for b in benches
                               if b.verdict == INCOMPARABLE and b.note.startswith("not compared"))),
        score_rate_ratio=rate_ratio,
        score_ci=score_ci,
        test=test,
        pair_rate=rate,
        against=(dataclasses.replace(against, design=design, stops=stops)
                 if against is not None else None),
    ), base, candidate)


def design_of(against: layout.Against | None) -> tuple[str, int | None]:
    """(design, rounds) of a paired run as its ``against.json`` says: a run directory written
    before the sequential design (no ``design``) ran every round."""
    info = against or layout.Against()
    design = info.design or FIXED
    if design not in DESIGNS:
        raise ValueError(
            f"against.json: unknown design {quoted(design)}: one of {', '.join(DESIGNS)}")
    rounds = info.rounds
    return design, rounds if rounds is not None and rounds > 0 else None


def stop_before(
    run_dir: str | PathLike[str],
    name: str,
    *,
    devices: Sequence[int],
    before: int,
    rounds: int,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    test: str = PAIRED_TEST,
    rate: str = PAIRED_RATE,
) -> Stop | None:
    """Whether round ``before`` of benchmark ``name`` (and the rounds after it) need not run:
    the Stop of its sequential rule over the rounds before it, as :func:`compare_paired` will
    judge them, when the rule fired at a look; None while more rounds are needed. Only once
    every slot in ``devices`` has finished those rounds on the candidate side (xdist runs a
    round on every slot at once; without workers a slot's rounds run ahead of the next's)."""
    if before < FIRST_LOOK or before >= rounds:
        return None
    sides = {}
    for side in ("candidate", "base"):
        folder = layout.side_dir(run_dir, side)
        paths = [layout.stream_path(folder, name, d, r) for d in devices for r in range(before)]
        found = [p for p in paths if p.is_file()]
        if not found or (side == "candidate" and len(found) < len(paths)):
            return None
        sides[side] = summarize_bench(name, [load_run(p) for p in found])
    _, _, stop = judge_rounds(sides["base"], sides["candidate"], rounds=rounds,
                              design=SEQUENTIAL, tolerance=tolerance, alpha=alpha, test=test,
                              rate=rate)
    return stop if stop is not None and stop.reason == CLEAR else None


def summarize_paired_dir(
    run_dir: str | PathLike[str],
    *,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    test: str | None = None,
    rate: str | None = None,
) -> tuple[SuiteSummary, SuiteSummary, Comparison] | None:
    """(candidate summary, base summary, paired comparison) of a ``--bench-against`` run
    directory, None when it is not one. ``test`` and ``rate`` default to the run's."""
    against = layout.read_against(run_dir)
    if against is None:
        return None
    base_dir = layout.base_dir(run_dir)
    candidate = summarize_dir(run_dir)
    base = summarize_dir(base_dir) if base_dir.is_dir() else SuiteSummary((), None, (), 0.0)
    try:
        comparison = compare_paired(
            candidate, base, tolerance=tolerance, alpha=alpha,
            test=test or against.test or PAIRED_TEST,
            rate=rate or against.rate or PAIRED_RATE, against=against,
            warnings=against.warnings,
        )
    except ValueError as exc:  # a design, test or rate the file names that no code has
        if test is not None or rate is not None:
            raise
        raise DlbenchError(f"{Path(run_dir) / layout.AGAINST}: {exc}") from None
    return candidate, base, comparison


# -- a step of dlbench bisect ------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    word: str  # CHANGED, SAME or UNSURE
    ratio: float | None  # candidate rate / GOOD's (above 1 is faster)
    ci: tuple[float, float] | None
    p: float | None
    pairs: int
    verdict: str  # the paired test's word (regressed, improved, unchanged, failed...)

    @property
    def decided(self) -> bool:
        """Whether the step is decided (CHANGED or SAME): bisect reads this, never the words."""
        return self.word != UNSURE

    @property
    def changed(self) -> bool:
        """Whether the step claims a change beyond the tolerance from GOOD."""
        return self.word == CHANGED

    def closer_to(self, changed_ratio: float) -> bool:
        """Whether the ratio is nearer (in log) to ``changed_ratio`` than to 1: how an
        unsure step is decided when no more rounds are allowed."""
        if self.ratio is None or self.ratio <= 0 or changed_ratio <= 0:
            return False
        return abs(math.log(self.ratio) - math.log(changed_ratio)) < abs(math.log(self.ratio))


def judge_paired_run(run_dir: str | PathLike[str], bench: str, *,
                     tolerance: float = TOLERANCE, alpha: float = ALPHA) -> Judgement | None:
    """One step of ``dlbench bisect``: the judgement of ``bench`` in a ``--bench-against`` run
    directory of a commit against GOOD (the core's ``judge_probe``); None when the run has no
    verdict for it (not paired, or the benchmark did not run on both sides)."""
    paired = summarize_paired_dir(run_dir, tolerance=tolerance, alpha=alpha)
    if paired is None:
        return None
    row = next((b for b in paired[2].benchmarks if b.name == bench), None)
    if row is None or row.ratio is None:
        return None
    ci = (float(row.ci[0]), float(row.ci[1])) if row.ci is not None else None
    word = judge_probe(row.verdict)
    return Judgement(word=word, ratio=row.ratio, ci=ci,
                     p=row.p_value, pairs=row.samples[0] if row.samples else 0,
                     verdict=row.verdict)
