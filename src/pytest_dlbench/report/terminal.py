"""The terminal report: the benchmark table, the score line, failures, the comparison (with a
baseline, or paired) and the tables beside them (report/terminal_tables.py: compiled, scaling,
sweep, and with -v the devices).

Output depends only on the summary, the comparison and the arguments (no terminal probing, no
clock), so it is golden-tested at a fixed width.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pytest_dlbench.core.numbers import (
    MISSING,
    byte_size,
    column,
    fixed,
    number,
    p_value,
    percent,
    printable,
    printable_lines,
    significant,
    time_figure,
)
from pytest_dlbench.layout import Against
from pytest_dlbench.report import columns as cols
from pytest_dlbench.report.terminal_tables import (
    compile_columns,
    compile_lines,
    device_rows,
    fitted_name_width,
    gpu_matrix,
    scaling_lines,
    sweep_lines,
    table,
)
from pytest_dlbench.report.voir_lines import observation_lines
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import no_score_reason
from pytest_dlbench.results.figures import busy_note, compile_rows, counted_as_zero, flops_notes
from pytest_dlbench.results.judge import INCONCLUSIVE, Comparison
from pytest_dlbench.results.model import Figure, RunResult, SuiteSummary, shown_figures

__all__ = [
    "ci_text",
    "inconclusive_lines",
    "render_comparison",
    "render_paired",
    "bench_tables",
    "render_summary",
    "milabench_score_line",
    "score_label",
    "score_line",
    "score_text",
    "verdict_rule",
    "drift_line",
]


# -- the parts --------------------------------------------------------------------------------
def _figure_cells(f: Figure, benches: list[Any]) -> list[str]:
    """The terminal's cells of one declared figure (results/model/figures.py), a benchmark
    each: the format is the terminal's, the figure and its value the declaration's."""
    values = [f.value(b) for b in benches]
    if f.fmt == "tflops":
        # One format for the column (2.18e-05 above 8.16e-04, never above 0.000816). Past a
        # ceiling (peaks.with_mfu), an error of measurement, never the figure.
        cells = column(values)
        return [cell if v is not None else "error" if b.mfu_error else MISSING
                for cell, v, b in zip(cells, values, benches, strict=True)]
    if f.fmt == "mfu":
        # An MFU above 100 % is an error of measurement: no figure, its reason below.
        return ["error" if b.mfu_error else _percent_cell(v)
                for v, b in zip(values, benches, strict=True)]
    return [_CELLS[f.fmt](v) for v in values]


def _percent_cell(value: float | None) -> str:
    """A figure already in percent (the declaration's unit), as ``numbers.percent`` writes a
    fraction: ``12.3%``."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:.1f}%"


def _energy_cell(joules: float | None) -> str:
    return MISSING if joules is None else f"{number(joules / 1000)} kJ"


#: The terminal's notation of each format of the declaration (results/model/figures.FORMATS).
_CELLS: dict[str, Any] = {
    "rate": number,
    "percent": _percent_cell,
    "weight": lambda v: f"{v:g}",
    "count": str,
    "text": lambda v: MISSING if v is None else str(v),
    "seconds": lambda v: seconds(v),
    "bytes": byte_size,
    "energy": _energy_cell,
}


def _bench_rows(summary: SuiteSummary, comparison: Comparison | None) -> list[dict[str, str]]:
    """One row a benchmark: every declared figure its table shows (results/model/figures.py),
    the compile columns, and the comparison's."""
    benches = list(summary.benchmarks)
    rows: list[dict[str, Any]] = [{"bench": b.name} for b in benches]
    for f in shown_figures(benches, "main", "verbose", "details"):
        for row, cell in zip(rows, _figure_cells(f, benches), strict=True):
            row[f.column] = cell
    compiled = {r.bench: r for r in compile_rows(summary)}
    for row, b in zip(rows, benches, strict=True):
        if compiled:
            row.update(compile_columns(b, compiled.get(b.name)))
        if comparison is not None:
            c = comparison.get(b.name)
            # A saved baseline's perf ratio, beside the perf it divides: "ratio" keeps the
            # compact table within 80 columns (the other tables say "perf ratio").
            row["ratio"] = fixed(c.ratio, 3) if c else MISSING
            row["verdict"] = c.verdict if c else ("new" if b.n else "-")
            row["adj ratio"] = fixed(c.adj_ratio, 3) if c else MISSING
    return [{k: printable(v) for k, v in row.items()} for row in rows]


#: The time-to-train column (docs/time-to-train.md); shown only when a benchmark has one.
TIME_COLUMN = "total_time_secs"


def seconds(value: float | None) -> str:
    """A duration in seconds at four significant digits, with its unit: ``0.0112 s``,
    ``80.11 s``, ``1,234 s`` (two decimals printed a 0.0112 s time-to-train as ``0.01 s``)."""
    return MISSING if value is None else f"{time_figure(value)} s"


def _has_time_to_train(summary: SuiteSummary) -> bool:
    return any(b.lower_is_better for b in summary.benchmarks)


def _time_to_train_line(summary: SuiteSummary) -> list[str]:
    if not _has_time_to_train(summary):
        return []
    return [
        f"{TIME_COLUMN}: time-to-train, lower is better (the steps' seconds summed, the first "
        "skipped); its perf, perf_adj and score entry are the equivalent throughput (items / "
        f"{TIME_COLUMN})"
    ]


#: Where the docs say which CPU settings give stable figures.
STABLE_CPU_DOCS = "docs/running.md, Stable figures on a CPU"


def busy_lines(summary: SuiteSummary) -> list[str]:
    """``busy: toy (2 of 3 runs while ...)``, one line a benchmark (results/figures/busy.busy_note's
    words), and where the docs say how to get stable figures."""
    lines = [printable(f"busy: {b.name} ({note})") for b in summary.benchmarks
             if (note := busy_note(b)) is not None]
    if lines:
        lines.append(f"  for stable figures on a CPU: {STABLE_CPU_DOCS}")
    return lines


def score_line(
    summary: SuiteSummary, comparison: Comparison | None = None, price: float | None = None
) -> str:
    label = score_label(summary)
    if summary.score is None:
        line = f"{label}: - ({no_score_reason(summary)})"
    else:
        line = f"{label}: {score_text(summary.score)}"
    if comparison is not None:
        line += f" ({_score_comparison(comparison)})"
    if price is not None and summary.score:
        line += f"  price/score: {score_text(price / summary.score)}"
    return line


def milabench_score_line(summary: SuiteSummary) -> str | None:
    """``milabench score: 1,234 (...)``, milabench's score beside the seed's when
    ``--bench-score=milabench`` asked for it (results/figures/milabench_score.py); None
    otherwise."""
    if summary.milabench is None:
        return None
    unscored = counted_as_zero(summary)
    line = (f"milabench score: {score_text(summary.milabench.score)} (milabench's report: "
            "exp(Σ w·log(score + 1) / Σ w), each benchmark's score the sum of its devices' "
            "mean step rates × (1 − fail/n))")
    if unscored:
        line += f"; counted as 0: {', '.join(unscored)}"
    left_out = len(summary.milabench.left_out)
    if left_out:
        line += (f"; {left_out} weighted benchmark{'s' if left_out != 1 else ''} of the suite "
                 "not selected, counted as 0 as milabench counts them")
    return line


def score_label(summary: SuiteSummary) -> str:
    """``score``, or ``score of 3 of the suite's 13 weighted benchmarks`` when the run selected
    a subset of them (``-k``, ``-m``, ``--bench-select``:
    results/model/summary.SuiteSummary.subset): a subset's score is never said as the suite's."""
    if not summary.subset:
        return "score"
    return (f"score of {len(summary.weighted)} of the suite's {summary.suite_weighted_count} "
            "weighted benchmarks")


def score_text(score: float | None) -> str:
    """A score as every report writes it: four significant figures (the HTML page's), so a
    TFLOP/s suite's is not ``0.06`` and a big one is ``102,152``, not ``102151.82``."""
    return significant(score, 4, missing=MISSING)


def ci_text(ci: tuple[float, float] | None, digits: int = 3) -> str:
    """``[0.881, 0.912]``, or ``-`` without an interval."""
    if ci is None:
        return MISSING
    return f"[{fixed(ci[0], digits)}, {fixed(ci[1], digits)}]"


def _score_comparison(comparison: Comparison) -> str:
    """``rate ratio 0.909 [0.874, 0.945], regressed; adj score ratio 1.346``: the rate ratio
    the verdict judged (with its interval), the verdict beside it, then the perf_adj score
    ratio (milarun), shown and not judged."""
    adj = f"adj score ratio {fixed(comparison.score_ratio, 3)}"
    if comparison.score_rate_ratio is None:
        return f"{comparison.score_verdict}; {adj}"
    text = f"rate ratio {fixed(comparison.score_rate_ratio, 3)}"
    if comparison.score_ci is not None:
        text += f" {ci_text(comparison.score_ci)}"
    return f"{text}, {comparison.score_verdict}; {adj}"


def _incomplete_line(summary: SuiteSummary) -> str | None:
    if not summary.incomplete:
        return None
    parts = []
    for name in summary.incomplete:
        bench = summary.get(name)
        why = "not run" if bench is None or bench.n == 0 else "every run failed"
        if bench is not None and bench.skipped:
            why = "skipped"
        if bench is not None and bench.n and bench.fail < bench.n:
            why = "perf_adj is 0"
        parts.append(f"{printable(name)} ({why})")
    line = f"incomplete: {', '.join(parts)}"
    return line + ("; the score is over the other benchmarks" if summary.score else "")


def _unscored_rate(run: RunResult) -> str:
    """A failed run's rate, when it measured one: the figure was taken (a load check fails a
    whole window), so it is shown beside the failure, though ``perf`` counts only runs that
    succeeded."""
    if run.rate is None or not math.isfinite(run.rate):
        return ""
    return f" (it measured {significant(run.rate)} {printable(run.units)}, not scored)"


def _failure(run: RunResult) -> str:
    """A failed run's label, why it failed and what it measured: ``x[D0-R2]: crash: boom``."""
    # Reasons usually start with their status already ("crash: killed by SIGSEGV").
    why = run.reason if run.reason.startswith(run.status) else f"{run.status}: {run.reason or '-'}"
    return f"{printable(run.label)}: {printable(why)}{_unscored_rate(run)}"


def _failure_lines(summary: SuiteSummary) -> list[str]:
    runs = summary.failed_runs
    skipped = summary.skipped_runs
    total = len(summary.runs) - len(skipped)
    lines = [f"failure rate: {percent(summary.failure_rate)} ({len(runs)} of {total} runs)"]
    for r in runs:
        lines.append(f"  failed {_failure(r)}")
    for r in skipped:
        lines.append(f"  skipped {printable(r.label)}: {printable(r.reason or '-')}")
    # Lines of the streams left out (corrupt, or of the wrong type): a few, then a count.
    notes = summary.notes
    lines += [f"  note: {printable(note)}" for note in notes[:5]]
    if len(notes) > 5:
        lines.append(f"  ... and {len(notes) - 5} more lines left out")
    return lines


def _comparison_lines(comparison: Comparison) -> list[str]:
    lines = []
    if comparison.only_current:
        lines.append(f"only in this run: {', '.join(comparison.only_current)}")
    if comparison.only_baseline:
        lines.append(f"only in the baseline: {', '.join(comparison.only_baseline)}")
    lines.append(verdict_rule(comparison))
    drift = drift_line(comparison)
    if drift:
        lines.append(drift)
    lines += inconclusive_lines(comparison)
    lines += [f"warning: {printable(warning)}" for warning in comparison.warnings]
    return lines


#: The drift sources a "between sessions" line names; the rest are counted.
_SHOWN_DRIFT_SOURCES = 2


def drift_line(comparison: Comparison) -> str | None:
    """The drift between sessions a saved-baseline verdict assumed, one line: each source with
    its figure (a range over the benchmarks), and how to measure it where it was the default
    (results/judge/noise.py, results/judge/history_drift.py). None without one (a paired
    comparison)."""
    by_source: dict[str, list[float]] = {}
    assumed = False
    for c in comparison.benchmarks:
        if c.drift is not None:
            by_source.setdefault(c.drift.source, []).append(c.drift.cv)
            assumed = assumed or c.drift.assumed
    if not by_source:
        return None
    groups = sorted(by_source.items(), key=lambda item: -len(item[1]))
    parts = []
    for source, cvs in groups[:_SHOWN_DRIFT_SOURCES]:
        low, high = min(cvs), max(cvs)
        figure = f"±{low:.1%}" if f"{low:.1%}" == f"{high:.1%}" else f"±{low:.1%} to {high:.1%}"
        parts.append(f"{figure} a session ({source})")
    if len(groups) > _SHOWN_DRIFT_SOURCES:
        parts.append(f"{len(groups) - _SHOWN_DRIFT_SOURCES} more sources")
    line = "between sessions: " + "; ".join(parts)
    if assumed:
        line += "; measure this machine's with --bench-autosave or dlbench baseline"
    return printable(line)


def inconclusive_lines(comparison: Comparison) -> list[str]:
    """Why each inconclusive verdict is one, and what to do (the HTML banner and the JSON say
    the same: results/gate.py's advice); none when every verdict is conclusive."""
    if not comparison.inconclusive:
        return []
    lines = [printable(f"inconclusive: {c.name}: {c.reason}") for c in comparison.benchmarks
             if c.verdict == INCONCLUSIVE]
    if comparison.score_verdict == INCONCLUSIVE:
        lines.append(printable(f"inconclusive: the score: {comparison.score_reason}"))
    if comparison.compared_nothing:
        names = ", ".join(c.name for c in comparison.benchmarks if c.weight > 0) or ", ".join(
            c.name for c in comparison.benchmarks)
        lines.append(printable(f"inconclusive: the gate: none of {names} could be compared"))
    status = "" if comparison.regressed else f" (exit status {gate.EXIT_INCONCLUSIVE})"
    # The cause the verdicts gave (results/judge/comparison.Comparison.inconclusive_causes), and its
    # remedy: a busy machine is not "noise too large", nor is a run cut short.
    lines.append(f"{comparison.inconclusive_why}{status}: {comparison.inconclusive_advice}")
    return lines


def verdict_rule(comparison: Comparison) -> str:
    """The rule the verdicts follow, one line: the verdict core's own words
    (``Comparison.rule``, results/judge/verdict.py)."""
    return comparison.rule


# -- the report -------------------------------------------------------------------------------
def _bench_value(comparison: Comparison | None) -> Any:
    """``value(bench, key)`` for :func:`~pytest_dlbench.report.columns.sort_items`."""
    def value(b: Any, key: str) -> float | str | None:
        if key == "ratio":
            c = comparison.get(b.name) if comparison is not None else None
            return c.ratio if c else None
        return {"name": b.name, "perf": b.perf, "perf_adj": b.perf_adj, "std%": b.std_pct,
                "weight": b.weight, "fail": b.fail}.get(key)
    return value


def _main_columns(comparison: Comparison | None, verbosity: int) -> tuple[str, ...]:
    """The compact table's columns (report/columns.py): 80 columns wide for the common case."""
    compared = comparison is not None
    main = (*cols.MAIN, *(cols.COMPARE if compared else ()))
    if verbosity > 0:  # wider than 80: cut into blocks there, the compact columns first
        main += (*cols.VERBOSE, *(cols.VERBOSE_COMPARE if compared else ()))
    return main


def bench_tables(summary: SuiteSummary, comparison: Comparison | None = None, *,
                 verbosity: int = 0, width: int = 100, columns: tuple[str, ...] | None = None,
                 sort: str | None = None) -> list[str]:
    """The benchmark table, and a second one with the columns only some benchmarks have
    (TFLOP/s, MFU, precision, compile, peak memory, energy, time-to-train) when one has them.
    ``columns`` (``--bench-columns``): one table of exactly those; ``sort``: the rows' order."""
    benches = cols.sort_items(summary.benchmarks, sort, _bench_value(comparison))
    ordered = dataclasses.replace(summary, benchmarks=tuple(benches))
    rows = _bench_rows(ordered, comparison)
    if comparison is not None:
        for row, b in zip(rows, benches, strict=True):
            c = comparison.get(b.name)
            row["p"] = p_value(c.p_value if c else None)
    left = ["bench", "units", "verdict", "precision"]
    if columns is not None:
        return [table([cols.select(row, columns, missing=MISSING) for row in rows], width,
                      left=left)]
    main = [cols.select(row, _main_columns(comparison, verbosity)) for row in rows]
    out = [table(main, width, left=left)]
    details = [c for c in cols.DETAILS if any(c in row for row in rows)]
    if details:  # its names shortened as the first table's, not to another length
        out += ["", table([cols.select(row, details) for row in rows], width, left=left,
                          name_width=fitted_name_width(main, width))]
    return out


def render_summary(
    summary: SuiteSummary,
    comparison: Comparison | None = None,
    *,
    verbosity: int = 0,
    width: int = 100,
    price: float | None = None,
    columns: tuple[str, ...] | None = None,
    sort: str | None = None,
) -> str:
    """The report as text (no trailing newline), fitted to ``width`` (names shortened in the
    middle, never wrapped); text from the runs shown escaped (numbers.printable).

    ``verbosity < 0``: the score line only (and what made it incomplete). ``0``: the compact
    table, the second table when a benchmark has its columns, score, failures, incomplete
    benchmarks. ``> 0``: also n, fail, total (adj ratio and p when comparing), per-device rows
    and the device matrix. ``columns``/``sort``: ``--bench-columns``/``--bench-sort``.
    """
    line = score_line(summary, comparison, price)
    milabench = milabench_score_line(summary)  # milabench's score, under the seed's
    if verbosity < 0:
        if summary.incomplete:
            line += f"; incomplete: {', '.join(summary.incomplete)}"
        return printable_lines(line + (f"\n{milabench}" if milabench else ""))
    if milabench:
        line += "\n" + milabench
    if not summary.benchmarks:
        return printable_lines("no benchmark results\n" + line)
    out = bench_tables(summary, comparison, verbosity=verbosity, width=width, columns=columns,
                       sort=sort)
    out += ["", line]
    out += _time_to_train_line(summary)
    incomplete = _incomplete_line(summary)
    if incomplete:
        out.append(incomplete)
    out += [printable(f"unreliable: {b.name} ({b.unreliable})") for b in summary.benchmarks
            if b.unreliable]
    out += busy_lines(summary)
    out += flops_notes(summary.benchmarks)
    out += observation_lines(summary)  # too few observations, milabench's figure
    out += _failure_lines(summary)
    out += compile_lines(summary)
    if comparison is not None:
        out += _comparison_lines(comparison)
    out += scaling_lines(summary, width)
    out += sweep_lines(summary, width)
    if verbosity > 0:
        devices = device_rows(summary)
        out += ["", "per device", table(devices, width, left=["bench"]) if devices else "  -", ""]
        out += gpu_matrix(summary, width)
    return printable_lines("\n".join(out))


def _compared_value(c: Any, key: str) -> float | str | None:
    """A compared benchmark's figure for ``--bench-sort`` (the current side's)."""
    return {"name": c.name, "perf": c.current, "ratio": c.ratio, "weight": c.weight}.get(key)


def render_comparison(comparison: Comparison, *, verbosity: int = 0, width: int = 100,
                      sort: str | None = None) -> str:
    """Two summaries side by side (``dlbench compare``): baseline and current perf, ratio and
    verdict; with ``-v`` the perf_adj ratio, p and samples too (the first block at 80 columns
    is the compact one)."""
    cs, bs = comparison.current_score, comparison.baseline_score
    line = (f"score: {score_text(cs)} vs baseline {score_text(bs)} "
            f"({_score_comparison(comparison)})")
    if verbosity < 0:
        return printable_lines(line)
    rows = []
    for c in cols.sort_items(comparison.benchmarks, sort, _compared_value):
        row = {
            "bench": c.name,
            "baseline": number(c.baseline),
            "current": number(c.current),
            "units": c.units,
            comparison.ratio_name: fixed(c.ratio, 3),
            "verdict": c.verdict,
            "weight": f"{c.weight:g}",
        }
        if any(x.metric == TIME_COLUMN for x in comparison.benchmarks):
            ttt = c.metric == TIME_COLUMN
            row["baseline time"] = seconds(c.baseline_time) if ttt else MISSING
            row["current time"] = seconds(c.current_time) if ttt else MISSING
        if verbosity > 0:
            row["adj ratio"] = fixed(c.adj_ratio, 3)
            row["p"] = p_value(c.p_value)
            row[f"{100 * (1 - 2 * comparison.alpha):g}% CI"] = ci_text(c.ci)
            row["samples"] = f"{c.samples[0]}/{c.samples[1]}"
        rows.append(row)
    out = []
    if rows:
        out += [table(rows, width, left=["bench", "verdict", "units"]), ""]
    out.append(line)
    out += _comparison_lines(comparison)
    return printable_lines("\n".join(out))


def paired_title(comparison: Comparison) -> str:
    """``against main (1a2b3c4d5e): 6 rounds, base and candidate in ABBA order``."""
    against = comparison.against or Against()
    sha = (against.sha or "")[:10]
    rounds: int | str | None = against.rounds
    if against.design == "sequential":  # results/judge/paired.py: it may stop early
        rounds = f"up to {rounds}"
    return (f"against {against.rev} ({sha}): {rounds} rounds, base and candidate "
            f"alternating in {against.order or 'ABBA'} order")


def render_paired(
    comparison: Comparison,
    base: SuiteSummary | None = None,
    *,
    verbosity: int = 0,
    width: int = 100,
    sort: str | None = None,
    label: str = "score",
) -> str:
    """A ``--bench-against`` run: per benchmark the base and candidate rates, the ratio of the
    pairs, its interval and the verdict (with ``-v`` p, the pairs and the perf_adj ratio), then
    the score and the base side's failed runs. ``verbosity < 0``: the score line only.
    ``label``: the candidate's :func:`score_label` (a subset's score says so)."""
    level = f"{100 * (1 - 2 * comparison.alpha):g}% CI"
    cs, bs = comparison.current_score, comparison.baseline_score
    score = (f"{label}: {score_text(cs)} vs base {score_text(bs)} "
             f"({_score_comparison(comparison)})")
    if verbosity < 0:
        return printable_lines(score)
    rows = []
    for c in cols.sort_items(comparison.benchmarks, sort, _compared_value):
        row = {
            "bench": c.name,
            "base": number(c.baseline or None),
            "candidate": number(c.current or None),
            "units": c.units,
            comparison.ratio_name: fixed(c.ratio, 3),
            level: ci_text(c.ci),
            "verdict": c.verdict,
        }
        if verbosity > 0:
            row.update({"p": p_value(c.p_value), "pairs": str(c.samples[0]),
                        "adj ratio": fixed(c.adj_ratio, 3)})
        rows.append(row)
    out = [paired_title(comparison)]
    if rows:
        out.append(table(rows, width, left=["bench", "verdict", "units"]))
    out += ["", score]
    for c in comparison.benchmarks:
        if c.note:
            out.append(f"  {printable(c.name)}: {printable(c.note)}")
    if comparison.only_current:
        out.append(f"only on the candidate side: {', '.join(comparison.only_current)}")
    if comparison.only_baseline:
        out.append(f"only on the base side: {', '.join(comparison.only_baseline)}")
    if base is not None:
        for r in base.failed_runs:
            out.append(f"  base side failed {_failure(r)}")
    out.append(verdict_rule(comparison))
    out += inconclusive_lines(comparison)
    out += [f"warning: {printable(warning)}" for warning in comparison.warnings]
    return printable_lines("\n".join(out))
