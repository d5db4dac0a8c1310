"""The HTML report: one self-contained file (``--bench-html=PATH``, ``dlbench report --html``).

Everything the page needs is inline: the style sheet, and the plots as SVG (report/plots.py).
No script, font or image is fetched when the page is viewed, so the file can be mailed,
attached to a CI run or opened offline.

The input is a :class:`~pytest_dlbench.results.model.summary.SuiteSummary` and, optionally, a
:class:`~pytest_dlbench.results.judge.comparison.Comparison`. They become a :class:`View` of
formatted rows (core/numbers.py) that the jinja2 template (templates/report.html.j2) only lays out.
jinja2 and matplotlib are imported inside the functions that use them, which keeps importing
this module cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench import __version__
from pytest_dlbench.core.numbers import DASH, byte_size, column, gap, percent, significant
from pytest_dlbench.core.output_files import write_atomic
from pytest_dlbench.report.confirm import confirmation_lines
from pytest_dlbench.report.history import history_section
from pytest_dlbench.report.html_compare import (
    ComparisonView,
    GateBanner,
    comparison_view,
    gate_banner,
)
from pytest_dlbench.report.html_profiles import ProfileView, profile_views
from pytest_dlbench.report.plots import draw_plots
from pytest_dlbench.report.terminal import score_label
from pytest_dlbench.results.figures import (
    MAX_STD_PENALTY,
    busy_note,
    compile_rows,
    counted_as_zero,
    flops_notes,
    no_mfu_reason,
)
from pytest_dlbench.results.history import report_series
from pytest_dlbench.results.model import Figure, shown_figures

#: The TFLOP/s and MFU cells of a figure past a ceiling (its reason is the cell's title).
ERROR = "error"

if TYPE_CHECKING:
    from jinja2 import Environment

    from pytest_dlbench.results.judge import Comparison, Confirmation
    from pytest_dlbench.results.model import BenchSummary, RunResult, SuiteSummary

__all__ = ["View", "render_html", "write_html"]

# -- view model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchRow:
    """One benchmark of the results table."""

    name: str
    units: str
    weight: str
    n: int
    fail: int
    perf: str
    total: str
    std: str
    std_pct: str
    perf_adj: str
    std_source: str  # where std comes from (the cell's tooltip)
    incomplete: bool
    unscored: bool
    never_ran: bool
    unreliable: str | None
    busy: str | None  # some runs taken while other processes used the CPU (results/busy)
    #: the cells of the second group of columns (:data:`View.detail_columns`): TFLOP/s, MFU,
    #: precision, time-to-train, peak memory, energy, as results/model/figures.py declares them
    details: tuple[Cell, ...] = ()
    #: too few observations (an external command that ended early), and milabench's figure of a
    #: voir benchmark ("" for others): docs/suites.md
    warnings: tuple[str, ...] = ()
    milabench: str = ""

    @property
    def has_fail(self) -> bool:
        return self.fail > 0


@dataclass(frozen=True)
class Cell:
    """One cell of a declared figure: its text, its tooltip, its class."""

    text: str
    title: str = ""
    css: str = ""


@dataclass(frozen=True)
class Column:
    """The header of a declared figure's column: its text, its tooltip (what it is, in which
    unit: results/model/figures.py), its class."""

    text: str
    title: str
    css: str = ""


@dataclass(frozen=True)
class RunRow:
    """One run of the runs table (and of the failures table when it failed)."""

    bench: str
    label: str
    status: str
    reason: str
    rate: str
    units: str
    steady: int
    warmup: int
    path: str
    ok: bool
    skipped: bool = False


@dataclass(frozen=True)
class CompileView:
    """One compiled benchmark against its eager sibling (results/figures/compiled.py)."""

    bench: str
    eager: str
    mode: str
    backend: str
    seconds: str
    graphs: str
    graph_breaks: str
    speedup: str
    note: str  # cached, recompiled in the loop, failed
    # Why the speed-up is in doubt (results/figures/compiled.speedup_doubt), "" if not.
    doubt: str = ""


@dataclass(frozen=True)
class DeviceCell:
    value: str
    rel: str  # the gap to the row's fastest device
    worst: bool


@dataclass(frozen=True)
class DeviceRow:
    name: str
    units: str
    cells: list[DeviceCell]


@dataclass
class View:
    """Everything the template shows, already formatted (the template only lays it out)."""

    title: str
    suite: str | None
    run_dir: str | None
    score: str
    incomplete: list[str]
    n_scored: int
    failure_rate: str
    price: str | None
    price_per_score: str | None
    benchmarks: list[BenchRow]
    failed_runs: list[RunRow]
    runs: list[RunRow]
    devices: list[int]
    device_rows: list[DeviceRow]
    comparison: ComparisonView | None
    # Inline SVGs (markupsafe.Markup once drawn), filled in by render_html.
    rate_plots: list[str]
    profiles: list[ProfileView]
    #: the declared figures beyond the main columns that some benchmark has
    #: (results/model/figures.py), and the lines saying why a TFLOP/s or MFU cell is empty
    detail_columns: list[Column] = dataclasses.field(default_factory=list)
    flops_notes: list[str] = dataclasses.field(default_factory=list)
    compiled: list[CompileView] = dataclasses.field(default_factory=list)
    device_plot: str | None = None
    distribution_plot: str | None = None
    has_time_to_train: bool = False  # a total_time_secs column (docs/time-to-train.md)
    gate: GateBanner | None = None  # the gate's verdict and the exit status, at the top
    #: The rule perf_adj is computed with (results/figures/scoring.py), as the page states it.
    perf_adj_rule: str = ""
    #: ``--bench-confirm``: (first pass, confirmation) lines of each confirmed benchmark.
    confirmation: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: The score card's label: ``Score``, or a subset's (report/terminal.score_label).
    score_label: str = "Score"
    #: A subset's score (-k, -m, --bench-select): which weighted benchmarks it leaves out.
    subset: str | None = None
    #: milabench's score (``--bench-score=milabench``), and its benchmarks counted as 0.
    milabench_score: str | None = None
    milabench_zero: list[str] = dataclasses.field(default_factory=list)
    milabench_left_out: int = 0


def _std_source(bench: BenchSummary) -> str:
    """Where ``std`` comes from, as the summary says (reference/scoring.md): the run rates, or
    one run's blocks."""
    count = len(bench.noise_samples)
    if bench.noise_from == "runs":
        return f"std over the rates of {count} runs"
    if bench.noise_from == "blocks":
        return f"std over {count} blocks of the single run's window"
    return ""


def _bench_row(b: BenchSummary, incomplete: list[str],
               details: tuple[Cell, ...] = ()) -> BenchRow:
    """``details``: its cells of the declared figures' columns (:func:`_detail_cells`)."""
    return BenchRow(
        name=b.name,
        units=b.units,
        weight=significant(b.weight, 3, zeros=False),
        n=b.n,
        fail=b.fail,
        perf=significant(b.perf),
        total=significant(b.total),
        std=significant(b.std, 3),
        std_pct=percent(b.std_pct, space=True, missing=DASH),
        perf_adj=significant(b.perf_adj),
        std_source=_std_source(b),
        incomplete=b.name in incomplete,
        unscored=b.weight <= 0 or not b.enabled,
        never_ran=b.n == 0,
        unreliable=b.unreliable,
        busy=busy_note(b),
        details=details,
        warnings=b.warnings,
        milabench=significant(b.milabench_perf) if b.milabench_perf is not None else "",
    )


#: The HTML page's header of a declared figure, where it differs from the terminal's.
_HEADERS = {"total_time_secs": "total_time_secs ↓"}
#: The declared figures written as text, left-aligned.
_LEFT = {"text"}


def _detail_columns(figures: list[Figure]) -> list[Column]:
    def title(f: Figure) -> str:
        if f.key == "total_time_secs":
            return "time-to-train: lower is better"
        return f"{f.source} ({f.unit})" if f.unit else f.source

    return [Column(_HEADERS.get(f.column, f.column), title(f), "l" if f.fmt in _LEFT else "")
            for f in figures]


def _detail_cells(f: Figure, benches: tuple[BenchSummary, ...]) -> list[Cell]:
    """The page's cells of one declared figure, a benchmark each (the page's notation: a
    space before %, four significant digits, ``—`` for none)."""
    values = [f.value(b) for b in benches]
    if f.fmt == "tflops":
        # A TFLOP/s past a ceiling is an error of measurement (peaks.with_mfu): its reason is
        # the cell's title and a line under the table, never the figure.
        texts = column(values, missing=DASH)
        return [Cell(text if v is not None else ERROR if b.mfu_error else DASH,
                     b.mfu_error or b.flops_reason or "")
                for text, v, b in zip(texts, values, benches, strict=True)]
    if f.fmt == "mfu":
        # An MFU above 100 % is an error of measurement: its reason, never the figure; an MFU
        # of "—" has its reason on hover and under the table (no peak known for the device...).
        return [Cell(ERROR if b.mfu_error else _percent_text(v),
                     b.mfu_error or no_mfu_reason(b) or b.peak_source or b.flops_reason or "")
                for v, b in zip(values, benches, strict=True)]
    if f.fmt == "seconds":  # time-to-train: empty for the benchmarks measured otherwise
        return [Cell((f"{significant(v)} s" if v is not None else DASH)
                     if b.lower_is_better else "", css="time-to-train")
                for v, b in zip(values, benches, strict=True)]
    css = "l" if f.fmt in _LEFT else ""
    return [Cell(_HTML_CELLS[f.fmt](v) if v is not None else DASH, css=css) for v in values]


def _percent_text(value: float | None) -> str:
    """A figure already in percent, as ``numbers.percent`` writes a fraction here: ``41.2 %``."""
    return DASH if value is None or not math.isfinite(value) else f"{value:.1f} %"


#: The page's notation of each format of the declaration (results/model/figures.FORMATS).
_HTML_CELLS: dict[str, Callable[[Any], str]] = {
    "rate": significant,
    "percent": _percent_text,
    "weight": lambda v: significant(v, 3, zeros=False),
    "count": str,
    "text": str,
    "bytes": byte_size,
    "energy": lambda v: f"{significant(v / 1000, 3)} kJ",
}


def _run_row(run: RunResult) -> RunRow:
    return RunRow(
        bench=run.bench,
        # The run's device slot and repeat, as in the pytest item id.
        label=f"D{run.device}" if run.repeat is None else f"D{run.device} R{run.repeat}",
        status=run.status,
        reason=run.reason,
        rate=significant(run.rate),
        units=run.units,
        steady=len(run.steady),
        warmup=len(run.warmup),
        path=run.path or "",
        ok=run.ok,
        skipped=run.skipped,
    )


def _compile_views(summary: SuiteSummary) -> list[CompileView]:
    views = []
    for row in compile_rows(summary):
        notes = []
        if row.cached:
            notes.append("compiled from the cache")
        if row.loop_graphs:
            notes.append(f"{row.loop_graphs} graph(s) compiled inside the timed loop")
        if row.failed:
            notes.append(row.failed)
        if row.doubt:
            notes.append(f"speed-up in doubt: {row.doubt}")
        views.append(CompileView(
            bench=row.bench,
            eager=row.eager or DASH,
            mode=row.mode or DASH,
            backend=row.backend or DASH,
            seconds=f"{significant(row.seconds, 3)} s" if row.seconds is not None else DASH,
            graphs=str(row.graphs) if row.graphs is not None else DASH,
            graph_breaks=str(row.graph_breaks) if row.graph_breaks is not None else DASH,
            speedup=f"× {significant(row.speedup, 3)}" if row.speedup is not None else DASH,
            note="; ".join(notes),
            doubt=row.doubt or "",
        ))
    return views


def _device_rows(benches: tuple[BenchSummary, ...], devices: list[int]) -> list[DeviceRow]:
    """Each benchmark's mean rate per device, when the suite ran on two devices or more."""
    if len(devices) < 2:
        return []
    rows = []
    for b in benches:
        per = b.per_device
        if not per:
            continue
        best, worst = max(per.values()), min(per.values())
        cells = [
            DeviceCell(
                value=significant(per.get(d)),
                # Relative to the best device: the lowest cell of a row is the laggard.
                rel=gap(per[d], best) if d in per else "",
                worst=d in per and len(per) >= 2 and per[d] == worst,
            )
            for d in devices
        ]
        rows.append(DeviceRow(b.name, b.units, cells))
    return rows


def perf_adj_rule() -> str:
    """``perf_adj`` as results/figures/scoring.py computes it, std% capped at its
    MAX_STD_PENALTY."""
    return f"perf_adj = perf × (1 − min(std%, {100 * MAX_STD_PENALTY:g} %)) × (1 − fail/n)"


def _view(
    summary: SuiteSummary, comparison: Comparison | None, title: str | None,
    price: float | None, status: int | None = None, link_base: str | PathLike[str] | None = None,
) -> View:
    benches = summary.benchmarks
    incomplete = list(summary.incomplete)
    score = summary.score
    runs = [_run_row(run) for b in benches for run in b.runs]
    devices = sorted({d for b in benches for d in b.per_device})
    scored = [b for b in benches if b.enabled and b.weight > 0 and b.name not in incomplete]
    suite = summary.suite
    # The declared figures of the terminal's second table (results/model/figures.py).
    details = shown_figures(benches, "details")
    default_title = f"pytest-dlbench report: {suite}" if suite else "pytest-dlbench report"
    return View(
        title=title or default_title,
        suite=suite,
        run_dir=summary.run_dir,
        score=significant(score),
        incomplete=incomplete,
        n_scored=len(scored),
        failure_rate=percent(summary.failure_rate, space=True, missing=DASH),
        price=significant(price) if price is not None else None,
        price_per_score=significant(price / score) if price is not None and score else None,
        benchmarks=[_bench_row(b, incomplete, tuple(cells)) for b, cells in
                    zip(benches, zip(*(_detail_cells(f, benches) for f in details),
                                     strict=True) if details else ((),) * len(benches),
                        strict=True)],
        failed_runs=[r for r in runs if not r.ok and not r.skipped],
        runs=runs,
        devices=devices,
        device_rows=_device_rows(benches, devices),
        comparison=comparison_view(comparison) if comparison is not None else None,
        rate_plots=[],
        profiles=profile_views(summary.run_dir, link_base),
        detail_columns=_detail_columns(details),
        flops_notes=flops_notes(benches),
        compiled=_compile_views(summary),
        has_time_to_train=any(b.lower_is_better for b in benches),
        gate=gate_banner(summary, comparison, status),
        perf_adj_rule=perf_adj_rule(),
        score_label=_capitalised(score_label(summary)),
        subset=_subset_note(summary),
        milabench_score=(significant(summary.milabench.score) if summary.milabench else None),
        milabench_zero=counted_as_zero(summary),
        milabench_left_out=len(summary.milabench.left_out) if summary.milabench else 0,
    )



def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _subset_note(summary: SuiteSummary) -> str | None:
    """What a subset's score leaves out (None: the whole suite's score)."""
    if not summary.subset:
        return None
    left = list(summary.left_out)
    shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    return (f"this run selected {len(summary.weighted)} of the suite's "
            f"{summary.suite_weighted_count} weighted benchmarks (-k, -m or --bench-select), "
            f"so its score is theirs, not the suite's; left out: {shown}")


@functools.lru_cache(maxsize=1)
def _environment() -> Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        # Every value is escaped unless marked safe: benchmark names, reasons and paths come
        # from suite files and child processes, and must not inject markup.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


# -- public API ---------------------------------------------------------------------------------
def render_html(
    summary: SuiteSummary,
    *,
    comparison: Comparison | None = None,
    title: str | None = None,
    price: float | None = None,
    status: int | None = None,
    link_base: str | PathLike[str] | None = None,
    history: str | PathLike[str] | None = None,
    confirmation: Confirmation | None = None,
) -> str:
    """The report of ``summary`` as one self-contained HTML document.

    ``comparison`` adds the baseline section (and the baseline's perf on the rate plots);
    ``price`` adds the price/score line (milarun); ``title`` replaces the default page title;
    ``status`` is the run's exit status, which the banner at the top states (by default the
    gate's rule on ``summary`` and ``comparison``); ``link_base``: the folder the page will be
    in, which its links to profile files are relative to (else ``file:`` URIs); ``history``:
    the results history folder (default ``<base>/history``), shown when it exists;
    ``confirmation``: the ``--bench-confirm`` record, listed under the comparison.
    """
    from markupsafe import Markup

    view = _view(summary, comparison, title, price, status, link_base)
    if confirmation is not None:
        view.confirmation = confirmation_lines(confirmation)
    baselines = ({c.name: c.baseline for c in comparison.benchmarks if c.baseline > 0}
                 if comparison is not None else {})
    plots = draw_plots(summary.benchmarks, baselines=baselines)
    # The SVGs are matplotlib's output, with text already XML-escaped by matplotlib.
    view.rate_plots = [Markup(svg) for svg in plots.rates]
    view.device_plot = Markup(plots.devices) if plots.devices is not None else None
    view.distribution_plot = (
        Markup(plots.distribution) if plots.distribution is not None else None
    )
    return _environment().get_template("report.html.j2").render(
        v=view, version=__version__, history=_history_section(summary, history))


# -- the results history (docs/history.md): results/history/records.py computes, report/history.py
# draws
def _history_section(summary: SuiteSummary, folder: str | PathLike[str] | None) -> str | None:
    """Each benchmark's rate per commit with its steps, this run ringed; None: no history."""
    from markupsafe import Markup

    where, series = report_series(summary, folder or None)
    return Markup(history_section(series, where)) if where is not None and series else None


def write_html(
    summary: SuiteSummary,
    path: str | PathLike[str],
    *,
    comparison: Comparison | None = None,
    title: str | None = None,
    price: float | None = None,
    status: int | None = None,
    history: str | PathLike[str] | None = None,
    confirmation: Confirmation | None = None,
) -> Path:
    """Render the report (see :func:`render_html`) to ``path`` (parents created, written
    atomically: the previous report stays whole if this one cannot be written); return it."""
    text = render_html(summary, comparison=comparison, title=title, price=price, status=status,
                       link_base=Path(path).parent, history=history,
                       confirmation=confirmation)
    return write_atomic(path, text)
