"""gate_power's trials judged again from their kept streams (no new run): the detection per
slowdown by exit status, other tests, rates, round counts and tolerances, the noise the gate
worked against, and the paired targets."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dlbench.results import gate
from pytest_dlbench.results.compare import compare
from pytest_dlbench.results.paired import compare_paired
from pytest_dlbench.results.scoring import load_run, summarize_runs
from pytest_dlbench.results.stats import REGRESSED
from pytest_dlbench.run import layout

TARGETS = {0: ("<=", 0.05), 5: (">=", 0.80), 10: (">=", 0.95)}  # paired mode


def _summary(run_dir: Path, rounds: int | None = None):
    runs = [load_run(p) for p in layout.stream_paths(run_dir)]
    if rounds is not None:
        runs = [r for r in runs if (r.repeat or 0) < rounds]
    return summarize_runs(runs, layout.read_manifest(run_dir), run_dir=str(run_dir))


def judge_paired(run: Path | str, *, rounds: int, test: str, tolerance: float,
                 rate: str = "window"):
    """(verdict, ratio, ci, p, pairs) of the first ``rounds`` rounds of a paired run."""
    run = Path(run)
    cand, base = _summary(run, rounds), _summary(layout.base_dir(run), rounds)
    comparison = compare_paired(cand, base, tolerance=tolerance, test=test, rate=rate)
    b = comparison.get("gp")
    if b is None:
        return None
    from pytest_dlbench.results.paired import pairs_of

    pairs = [(p.base, p.candidate) for p in pairs_of(base.get("gp"), cand.get("gp"), rate)]
    return b.verdict, b.ratio, b.ci, b.p_value, pairs


def judge_saved(run: Path | str, baseline: Path | str, *, tolerance: float):
    from pytest_dlbench.results.baseline import load_summary

    comparison = compare(_summary(Path(run)), load_summary(baseline), tolerance=tolerance)
    return comparison.get("gp")


# -- the report -----------------------------------------------------------------------------------
def rate_cell(trials: Sequence[Any], slowdown: float, hit) -> str:
    chosen = [t for t in trials if t.slowdown == slowdown]
    if not chosen:
        return "-"
    k = sum(1 for t in chosen if hit(t))
    return f"{k}/{len(chosen)} {100 * k / len(chosen):.0f} %"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def offline_report(trials: Sequence[Any], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    """Detection per slowdown for each mode (exit 6), the same streams judged again offline,
    the noise seen, the paired targets: the report of one neighbour level's trials."""
    slowdowns = args.slowdowns
    rounds = getattr(args, "rounds", None) or gate.ROUNDS  # None: the product's default
    head = ["mode", "runs/side", "trials", *[f"{s:g} %" if s else "0 % (false alarms)"
                                             for s in slowdowns], "min/trial"]
    rows = [head]

    def row(label: str, runs: int, chosen: list[Any], hit, minutes: str) -> None:
        n = len({t.rep for t in chosen})
        rows.append([label, str(runs), str(n),
                     *[rate_cell(chosen, s, hit) for s in slowdowns], minutes])

    def mean_minutes(chosen: list[Any]) -> str:
        return f"{sum(t.minutes for t in chosen) / len(chosen):.1f}" if chosen else "-"

    verdicts = (gate.OK, gate.REGRESSED, getattr(gate, "INCONCLUSIVE", 9))
    paired = [t for t in trials if t.mode == "paired"]
    saved = [t for t in trials if t.mode == "saved"]
    # What the trials' exit statuses were judged with: the defaults of the code that ran them.
    ran = facts.get("gate") or {"test": "t", "rate": "window", "tolerance": 0.03}
    if paired:
        row(f"paired --bench-against, {ran['test']}, {ran['rate']} rate, {rounds} rounds "
            "(exit 6)", rounds, paired, lambda t: t.detected, mean_minutes(paired))
    if saved:
        row(f"saved --bench-compare, {args.repeats} runs a side (exit 6)", args.repeats, saved,
            lambda t: t.detected, mean_minutes(saved))
    # The same streams judged again: other tests and rates, fewer rounds, other tolerances.
    offline: list[tuple[str, int, list[Any]]] = []

    def rejudge(test: str, rate: str, k: int, tol: float) -> None:
        judged = []
        for t in paired:
            j = judge_paired(t.run_dir, rounds=k, test=test, tolerance=tol, rate=rate)
            judged.append(argparse.Namespace(rep=t.rep, slowdown=t.slowdown,
                                             verdict=j[0] if j else ""))
        how = f"{test}, {rate} rate" if test != "quantile" else f"{test} (steps pooled)"
        offline.append((f"  paired, {how}, first {k} rounds, tolerance {tol:.0%}", k, judged))

    if paired:
        for test in gate.PAIRED_TESTS:
            # The quantile test pools the steps: what a run contributes does not apply.
            for rate in gate.PAIRED_RATES if test != "quantile" else gate.PAIRED_RATES[:1]:
                for k in sorted({4, rounds, *args.also_rounds}):
                    if k <= rounds:
                        rejudge(test, rate, k, gate.TOLERANCE)
                for tol in args.tolerances:
                    if tol != gate.TOLERANCE:
                        rejudge(test, rate, rounds, tol)
    for tol in args.tolerances:
        if tol == gate.TOLERANCE:
            continue
        judged = []
        for t in saved:
            b = judge_saved(t.run_dir, t.baseline, tolerance=tol)
            judged.append(argparse.Namespace(rep=t.rep, slowdown=t.slowdown,
                                             verdict=b.verdict if b is not None else ""))
        if judged:
            offline.append((f"  saved, tolerance {tol:.0%}", args.repeats, judged))
    if offline:
        rows.append(["offline, the same runs judged again:", "", "",
                     *["" for _ in slowdowns], ""])
        for label, runs, judged in offline:
            row(label, runs, judged, lambda t: t.verdict == REGRESSED, "")
    lines = [table(rows)]
    lines += noise_lines(paired, saved)
    errors = [t for t in trials if t.status not in verdicts]
    if errors:
        lines.append(f"errors: {len(errors)} trials exited with no verdict (a failed run): "
                     + ", ".join(f"{t.mode} rep {t.rep} {t.slowdown:g} %" for t in errors[:5]))
    mismatch = sum(1 for t in trials if t.verdict and t.status in (0, gate.REGRESSED)
                   and (t.verdict == REGRESSED) != t.detected)
    if mismatch:
        lines.append(f"warning: {mismatch} trials whose exit status and recomputed verdict "
                     "disagree")
    if paired:
        met = []
        for s, (op, level) in TARGETS.items():
            chosen = [t for t in paired if t.slowdown == s]
            if not chosen:
                continue
            rate = sum(t.detected for t in chosen) / len(chosen)
            ok = rate <= level if op == "<=" else rate >= level
            met.append(f"{s:g} % {op} {level:.0%}: {'met' if ok else 'NOT met'} "
                            f"({rate:.0%})")
        lines += ["", "paired targets: " + "; ".join(met)]
        if len({t.rep for t in paired}) < 20:
            lines.append("(fewer than 20 repetitions: the rates are too coarse to judge "
                         "the targets)")
    total = sum(t.minutes for t in trials)
    lines.append(f"cost: paired {rounds} runs per side per trial, saved {args.repeats} "
                 f"runs per side per trial; {total:.1f} minutes of pytest in all")
    return "\n".join(lines)


def noise_lines(paired: Sequence[Any], saved: Sequence[Any]) -> list[str]:
    """The noise the gate worked against: within a round (the spread of the pairs' log ratios
    over sqrt 2, one run's share), and between runs minutes apart (saved mode)."""
    import math
    import statistics

    lines = []
    for rate in gate.PAIRED_RATES:
        spreads = []
        for t in paired:
            judged = judge_paired(t.run_dir, rounds=10**6, test="t", tolerance=gate.TOLERANCE,
                                  rate=rate)
            d = [math.log(c / b) for b, c in (judged[4] if judged else []) if b > 0 and c > 0]
            if len(d) >= 2:
                spreads.append(statistics.stdev(d) / math.sqrt(2))
        if spreads:
            lines.append(f"noise within a round (paired, one run, {rate} rate): median "
                         f"{100 * statistics.median(spreads):.1f} %, max "
                         f"{100 * max(spreads):.1f} % (docs/reports.md: the smallest regression "
                         "caught at that noise)")
    if saved:
        from pytest_dlbench.results.scoring import summarize_dir

        cvs = []
        for t in saved:
            b = summarize_dir(t.run_dir).get("gp")
            if b is not None and b.std_pct is not None:
                cvs.append(b.std_pct)
        if cvs:
            lines.append(f"noise between runs of one side (saved mode, std%): median "
                         f"{100 * statistics.median(cvs):.1f} %")
    return lines
