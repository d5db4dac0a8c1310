"""gate_power's trials judged again from their kept run directories (no new run), by the
product's own functions: the detection per slowdown by exit status, the same runs judged as the
product judged them, and by other rules (tests, rates, round counts, tolerances), the noise the
gate worked against, and the paired targets.

- **Paired, as the product judged**: :func:`pytest_dlbench.results.evaluation.evaluate` on the
  run directory, as pytest and ``dlbench report`` do: the run's own design, round bound, test and
  rate from its ``against.json`` (sequential: the first clear look is the verdict; fixed: every
  round), the busy-side doubt (results/judge/paired.py ``paired_with_doubts``: inconclusive), and
  the exit status it decides (``results.evaluation.judged``). Its counts are the exit-status row's;
  where a trial's exit status and this judgement disagree, the report warns.
- **Paired, other rules**: ``compare_paired`` with the design named in the row: the fixed rule
  on the first k rounds, other tests, rates and tolerances ("fixed rule": a trial that the
  sequential gate stopped before round k has fewer rounds to judge, counted beneath the table),
  and the sequential rule at the product's defaults where the runs' own rule is not that one.
- **Saved, as the product judged**: ``evaluate`` with the baseline file: the first pass and its
  ``--bench-confirm`` confirmation runs (``confirm/<k>/``, results/judge/confirm.py's rule); then
  the first pass alone, and other tolerances with the confirmation runs the trial made (at the
  product's tolerance: a benchmark suspected only at another tolerance has none).

Every row counts the outcome its exit status would be (``evaluation.judged``: the benchmark's
verdict or the score's, as the gate fails on either): regressed (6), inconclusive (9, its own
outcome), passed (0), anything else (a failed run) neither. A cell reads ``k/n P %`` regressed,
then ``, m inconcl.`` when some were inconclusive. The benchmark's own verdict word stays in
:class:`Judged` (gate_power keeps it per trial).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_dlbench import layout
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate, judged
from pytest_dlbench.results.figures import summarize_dir, summarize_runs

# What no public function gives: evaluate() judges a paired run by its own design and every
# round, so the other rules (the first k rounds, another design) re-run compare_paired (with
# its busy-side doubt) on the rounds kept; the pairs themselves (pairs_of) and against.json's
# design (design_of) are read as it reads them.
from pytest_dlbench.results.judge import (
    FIXED,
    PAIRED_RATE,
    PAIRED_RATES,
    PAIRED_TEST,
    PAIRED_TESTS,
    ROUNDS,
    SEQUENTIAL,
    TOLERANCE,
    Comparison,
    compare,
    compare_paired,
    design_of,
    pairs_of,
)
from pytest_dlbench.results.judge import (
    PAIRED_RATE as gate_PAIRED_RATE,
)
from pytest_dlbench.results.judge import (
    PAIRED_TEST as gate_PAIRED_TEST,
)
from pytest_dlbench.results.model import BenchSummary, SuiteSummary, load_baseline

TARGETS = {0: ("<=", 0.05), 5: (">=", 0.80), 10: (">=", 0.95)}  # paired mode
BENCH = "gp"  # gate_power's one benchmark
VERDICTS = (gate.OK, gate.EXIT_REGRESSED, gate.EXIT_INCONCLUSIVE)


def outcome_of(status: int) -> str:
    """The outcome an exit status says: regressed, inconclusive, passed, or other."""
    return {gate.EXIT_REGRESSED: "regressed", gate.EXIT_INCONCLUSIVE: "inconclusive",
            gate.OK: "passed"}.get(status, "other")


@dataclass(frozen=True)
class Judged:
    """One run directory judged offline: the exit status the judgement gives, and the
    benchmark's row of the comparison."""

    status: int  # evaluation.judged's of the comparison (1: a failed run, 7/4: no baseline)
    verdict: str = ""  # the benchmark's verdict ("" when it has none)
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    #: Paired: the (base, candidate) rates of the rounds the verdict used (the sequential
    #: stop's), the rounds used and the rounds that ran.
    pairs: list[tuple[float, float]] = field(default_factory=list)
    rounds: int | None = None
    ran: int | None = None
    #: Saved: the confirmation of the benchmark (results/judge/confirm.py: held, not held, not
    #: confirmed), "" when none was read.
    confirmation: str = ""

    @property
    def outcome(self) -> str:
        return outcome_of(self.status)


def _summary(run_dir: Path, rounds: int | None = None) -> SuiteSummary:
    """The run's summary, of its first ``rounds`` rounds (None: every one)."""
    summary = summarize_dir(run_dir)
    if rounds is None:
        return summary
    runs = [r for r in summary.runs if (r.repeat or 0) < rounds]
    return summarize_runs(runs, layout.read_manifest(run_dir), run_dir=str(run_dir))


def run_rule(run: Path | str) -> tuple[str, int | None, str, str] | None:
    """(design, rounds, test, rate) of a paired run, as its against.json says; None without
    one (not a --bench-against run: it failed before its rounds began)."""
    against = layout.read_against(run)
    if against is None:
        return None
    design, rounds = design_of(against)
    return design, rounds, against.test or gate_PAIRED_TEST, against.rate or gate_PAIRED_RATE


def _ran(*benches: BenchSummary | None) -> int | None:
    """The rounds that ran (the last round's index + 1), failed ones too; None: none ran."""
    repeats = [(r.repeat or 0) for b in benches if b is not None for r in b.runs]
    return max(repeats) + 1 if repeats else None


def judge_paired(run: Path | str, *, design: str | None = None, rounds: int | None = None,
                 test: str | None = None, rate: str | None = None,
                 tolerance: float = TOLERANCE, bench: str = BENCH) -> Judged:
    """A ``--bench-against`` run directory judged again. With nothing asked (the defaults): as
    the product judged it (``evaluate``: its own design, bound, test and rate). Else by the rule
    asked, the rest the run's own: ``design`` FIXED judges every one of the first ``rounds``
    rounds; SEQUENTIAL stops at the first clear look of a bound of ``rounds``. The busy-side
    doubt applies to both (inconclusive). No against.json: status 4, no verdict."""
    run = Path(run)
    rule = run_rule(run)
    if rule is None:
        return Judged(gate.USAGE_ERROR)
    own_design, own_rounds, own_test, own_rate = rule
    rate = rate or own_rate
    comparison: Comparison | None
    if (design, rounds, test or own_test, rate) == (None, None, own_test, own_rate):
        product = evaluate(run, EvaluateOptions(tolerance=tolerance))
        cand, base = product.summary, product.base_summary
        comparison, status = product.comparison, product.status
    else:
        bound = rounds or own_rounds
        against = replace(layout.read_against(run) or layout.Against(),
                          design=design or own_design, rounds=bound)
        cand, base = _summary(run, bound), _summary(layout.base_dir(run), bound)
        comparison = compare_paired(cand, base, tolerance=tolerance, test=test or own_test,
                                    rate=rate, against=against)
        status = judged(run, cand, comparison=comparison).status
    base_bench = base.get(bench) if base is not None else None
    ran = _ran(cand.get(bench), base_bench)
    stops = comparison.against.stops if comparison and comparison.against else None
    stop = (stops or {}).get(bench)
    used = int(stop["rounds_used"]) if stop else ran
    pairs = [(p.base, p.candidate) for p in pairs_of(base_bench, cand.get(bench), rate)
             if used is None or p.round < used]
    row = comparison.get(bench) if comparison is not None else None
    if row is None:
        return Judged(status, pairs=pairs, rounds=used, ran=ran)
    return Judged(status, row.verdict, row.ratio, row.ci, row.p_value, pairs, used, ran)


def sequential_on_same_rounds(run: Path | str, *, bench: str = BENCH) -> Judged | None:
    """A paired run that ran every round (its own design fixed) judged by the sequential rule
    at the product's defaults over its first rounds, as the plugin would have stopped it: the
    verdict and the rounds it would have used. None for a run of another design (its rounds
    stopped where its own rule said) or with no against.json."""
    rule = run_rule(run)
    if rule is None or rule[0] != FIXED:
        return None
    return judge_paired(run, design=SEQUENTIAL, rounds=rule[1], test=PAIRED_TEST,
                        rate=PAIRED_RATE, bench=bench)


def judge_saved(run: Path | str, baseline: Path | str, *, tolerance: float = TOLERANCE,
                confirm: bool = True, bench: str = BENCH) -> Judged:
    """A saved-baseline trial judged again: ``confirm``, as the product judged it (``evaluate``
    with the baseline file: the first pass, then the confirmation runs the run directory keeps
    under confirm/<k>/, by results/judge/confirm.py's rule); else the first pass alone."""
    loaded = load_baseline(str(baseline))
    if loaded.summary is None:  # gone or unreadable: no verdict
        return Judged(loaded.status)
    record = None
    if confirm:
        product = evaluate(run, EvaluateOptions(tolerance=tolerance, baseline=loaded,
                                                baseline_path=str(baseline)))
        comparison, status = product.comparison, product.status
        if product.confirmation is not None:
            record = product.confirmation.get(bench)
    else:
        summary = summarize_dir(run)
        comparison = compare(summary, loaded.summary, tolerance=tolerance)
        status = judged(run, summary, comparison=comparison).status
    row = comparison.get(bench) if comparison is not None else None
    if row is None:
        return Judged(status)
    return Judged(status, row.verdict, row.ratio, row.ci, row.p_value,
                  confirmation=record.outcome if record is not None else "")


def all_pairs(run: Path | str, rate: str, bench: str = BENCH) -> list[tuple[float, float]]:
    """Every (base, candidate) pair of rates of a paired run, stopped or not."""
    run = Path(run)
    cand, base = _summary(run), _summary(layout.base_dir(run))
    return [(p.base, p.candidate) for p in pairs_of(base.get(bench), cand.get(bench), rate)]


# -- the report -----------------------------------------------------------------------------------
def rate_cell(trials: Sequence[Any], slowdown: float) -> str:
    """``k/n P %`` regressed of the trials at ``slowdown`` (each with an ``outcome``), then
    ``, m inconcl.`` when some were inconclusive."""
    chosen = [t for t in trials if t.slowdown == slowdown]
    if not chosen:
        return "-"
    n = len(chosen)
    k = sum(1 for t in chosen if t.outcome == "regressed")
    m = sum(1 for t in chosen if t.outcome == "inconclusive")
    return f"{k}/{n} {100 * k / n:.0f} %" + (f", {m} inconcl." if m else "")


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def rule_label(design: str, test: str, rate: str, rounds: int | None, tolerance: float) -> str:
    """``sequential rule, quantile (steps pooled), up to 10 rounds, tolerance 3 %``."""
    how = f"{test}, {rate} rate" if test != "quantile" else f"{test} (steps pooled)"
    many = "every" if rounds is None else str(rounds)
    span = f"up to {many} rounds" if design == SEQUENTIAL else f"first {many} rounds"
    return f"{design} rule, {how}, {span}, tolerance {tolerance:.0%}"


def _as(trial: Any, judged: Judged) -> argparse.Namespace:
    return argparse.Namespace(rep=trial.rep, slowdown=trial.slowdown, outcome=judged.outcome)


def offline_report(trials: Sequence[Any], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    """Detection per slowdown for each mode (exit status), the same runs judged again offline
    (as the product judged them, then by other rules), the noise seen, the paired targets: the
    report of one neighbour level's trials."""
    slowdowns = args.slowdowns
    rounds = getattr(args, "rounds", None) or ROUNDS  # None: the product's default
    tol = TOLERANCE
    head = ["mode", "runs/side", "trials", *[f"{s:g} %" if s else "0 % (false alarms)"
                                             for s in slowdowns], "min/trial"]
    rows = [head]

    def row(label: str, runs: int | str, chosen: Sequence[Any], minutes: str = "") -> None:
        n = len({t.rep for t in chosen})
        rows.append([label, str(runs), str(n), *[rate_cell(chosen, s) for s in slowdowns],
                     minutes])

    def mean_minutes(chosen: list[Any]) -> str:
        return f"{sum(t.minutes for t in chosen) / len(chosen):.1f}" if chosen else "-"

    def by_status(chosen: list[Any]) -> list[argparse.Namespace]:
        return [argparse.Namespace(rep=t.rep, slowdown=t.slowdown, outcome=outcome_of(t.status))
                for t in chosen]

    paired = [t for t in trials if t.mode == "paired"]
    saved = [t for t in trials if t.mode == "saved"]
    # As the product judged: the reference for the exit statuses (the mismatch warning).
    paired_own = [judge_paired(t.run_dir) for t in paired]
    saved_own = [judge_saved(t.run_dir, t.baseline) for t in saved]
    rules = {rule for t in paired if (rule := run_rule(t.run_dir)) is not None}
    if len(rules) == 1:
        design, bound, test, rate = next(iter(rules))
        own = rule_label(design, test, rate, bound, tol)
    else:
        own = "each run's own rule (against.json)"
    defaults = (SEQUENTIAL, rounds, PAIRED_TEST, PAIRED_RATE)
    at_defaults = " (the product's defaults)"
    if paired:
        row("paired --bench-against (exit status)", rounds, by_status(paired),
            mean_minutes(paired))
    if saved:
        row(f"saved --bench-compare, {args.repeats} runs a side (exit status)", args.repeats,
            by_status(saved), mean_minutes(saved))
    offline: list[tuple[str, int | str, list[argparse.Namespace]]] = []
    if paired:
        offline.append((f"  paired as the product judged: {own}"
                        + (at_defaults if rules == {defaults} else ""), rounds,
                        [_as(t, j) for t, j in zip(paired, paired_own, strict=True)]))

    def rejudge(label: str, k: int, **how: Any) -> None:
        offline.append((f"  paired, {label}", k,
                        [_as(t, judge_paired(t.run_dir, **how)) for t in paired]))

    if paired and rules != {defaults}:
        rejudge(rule_label(SEQUENTIAL, PAIRED_TEST, PAIRED_RATE, rounds, tol)
                + at_defaults, rounds, design=SEQUENTIAL, rounds=rounds,
                test=PAIRED_TEST, rate=PAIRED_RATE)
    if paired:
        for test in PAIRED_TESTS:
            # The quantile test pools the steps: what a run contributes does not apply.
            for rate in PAIRED_RATES if test != "quantile" else PAIRED_RATES[:1]:
                for k in sorted({4, rounds, *args.also_rounds}):
                    if k <= rounds:
                        rejudge(rule_label(FIXED, test, rate, k, tol), k, design=FIXED,
                                rounds=k, test=test, rate=rate)
                for other in args.tolerances:
                    if other != tol:
                        rejudge(rule_label(FIXED, test, rate, rounds, other), rounds,
                                design=FIXED, rounds=rounds, test=test, rate=rate,
                                tolerance=other)
    if saved:
        offline.append((f"  saved as the product judged: first pass and its confirmations, "
                        f"tolerance {tol:.0%}", args.repeats,
                        [_as(t, j) for t, j in zip(saved, saved_own, strict=True)]))
        offline.append((f"  saved, first pass alone (no confirmation), tolerance {tol:.0%}",
                        args.repeats, [_as(t, judge_saved(t.run_dir, t.baseline, confirm=False))
                                       for t in saved]))
        for other in args.tolerances:
            if other != tol:
                offline.append((
                    f"  saved, tolerance {other:.0%}, the confirmations the trial ran "
                    f"(at {tol:.0%})", args.repeats,
                    [_as(t, judge_saved(t.run_dir, t.baseline, tolerance=other))
                     for t in saved]))
    if offline:
        rows.append(["offline, the same runs judged again:", "", "",
                     *["" for _ in slowdowns], ""])
        for label, runs, judged in offline:
            row(label, runs, judged)
    lines = [table(rows),
             "cells: regressed k/n (exit status 6, or the status the row's judgement gives), "
             "then how many were inconclusive (9) when any; the rest passed or failed"]
    stopped = sum(1 for j in paired_own if j.ran is not None and j.ran < rounds)
    if stopped:
        lines.append(f"fixed-rule rows judge the rounds that ran: {stopped} of {len(paired)} "
                     f"paired trials stopped before round {rounds} (sequential), so their "
                     "first k rounds may be fewer than k")
    lines += confirmation_lines(saved_own)
    lines += noise_lines(paired, saved)
    errors = [t for t in trials if t.status not in VERDICTS]
    if errors:
        lines.append(f"errors: {len(errors)} trials exited with no verdict (a failed run): "
                     + ", ".join(f"{t.mode} rep {t.rep} {t.slowdown:g} %" for t in errors[:5]))
    own_status = [*zip(paired, paired_own, strict=True), *zip(saved, saved_own, strict=True)]
    mismatch = [(t, j) for t, j in own_status if t.status in VERDICTS and j.status != t.status]
    if mismatch:
        lines.append(f"warning: {len(mismatch)} trials whose exit status and the offline "
                     "judgement as the product judged disagree: " + ", ".join(
                         f"{t.mode} rep {t.rep} {t.slowdown:g} % exit {t.status} vs {j.status}"
                         for t, j in mismatch[:5]))
    if paired:
        lines += target_lines(paired)
    total = sum(t.minutes for t in trials)
    lines.append(f"cost: paired {rounds} runs per side per trial at most, saved {args.repeats} "
                 f"runs per side per trial (and its confirmations); {total:.1f} minutes of "
                 "pytest in all")
    return "\n".join(lines)


def confirmation_lines(saved: Sequence[Judged]) -> list[str]:
    """How the saved trials' first-pass suspicions fared in their confirmation."""
    outcomes = [j.confirmation for j in saved if j.confirmation]
    if not outcomes:
        return []
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in sorted(set(outcomes)))
    return [f"saved confirmations (results/confirm.py): {len(outcomes)} of {len(saved)} trials "
            f"confirmed a first-pass verdict: {counts}"]


def target_lines(paired: Sequence[Any]) -> list[str]:
    """The paired targets (:data:`TARGETS`), met or not, by exit status 6."""
    met = []
    for s, (op, level) in TARGETS.items():
        chosen = [t for t in paired if t.slowdown == s]
        if not chosen:
            continue
        rate = sum(1 for t in chosen if t.status == gate.EXIT_REGRESSED) / len(chosen)
        ok = rate <= level if op == "<=" else rate >= level
        met.append(f"{s:g} % {op} {level:.0%}: {'met' if ok else 'NOT met'} ({rate:.0%})")
    lines = ["", "paired targets: " + "; ".join(met)]
    if len({t.rep for t in paired}) < 20:
        lines.append("(fewer than 20 repetitions: the rates are too coarse to judge the targets)")
    return lines


def noise_lines(paired: Sequence[Any], saved: Sequence[Any]) -> list[str]:
    """The noise the gate worked against: within a round (the spread of the pairs' log ratios
    over sqrt 2, one run's share, every round that ran), and between runs minutes apart (saved
    mode)."""
    import math
    import statistics

    lines = []
    for rate in PAIRED_RATES:
        spreads = []
        for t in paired:
            d = [math.log(c / b) for b, c in all_pairs(t.run_dir, rate) if b > 0 and c > 0]
            if len(d) >= 2:
                spreads.append(statistics.stdev(d) / math.sqrt(2))
        if spreads:
            lines.append(f"noise within a round (paired, one run, {rate} rate): median "
                         f"{100 * statistics.median(spreads):.1f} %, max "
                         f"{100 * max(spreads):.1f} % (docs/reports.md: the smallest regression "
                         "caught at that noise)")
    if saved:
        cvs = []
        for t in saved:
            b = summarize_dir(t.run_dir).get(BENCH)
            if b is not None and b.std_pct is not None:
                cvs.append(b.std_pct)
        if cvs:
            lines.append(f"noise between runs of one side (saved mode, std%): median "
                         f"{100 * statistics.median(cvs):.1f} %")
    return lines
