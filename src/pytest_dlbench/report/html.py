"""The HTML report: one self-contained file (``--bench-html=PATH``, ``dlbench report --html``).

Everything the page needs is inline: the style sheet, and the plots as SVG drawn by matplotlib
(Agg-free object API, no pyplot state). No script, font or image is fetched when the page is
viewed, so the file can be mailed, attached to a CI run or opened offline.

Why matplotlib SVG rather than plotly: a plotly page inlines its ~4 MB library; matplotlib's SVGs
are a few tens of kB each, deterministic (fixed hash salt, no date), and their text stays text.

The input is a :class:`pytest_dlbench.results.scoring.SuiteSummary` and, optionally, a
:class:`pytest_dlbench.results.compare.Comparison`. They are read by attribute name only (with
``getattr`` defaults for optional fields), so this module imports neither; jinja2 and matplotlib
are imported inside the functions that use them, which keeps importing this module cheap.
"""

from __future__ import annotations

import functools
import io
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["render_html", "write_html"]

# Colour-blind-friendly: Okabe-Ito without its yellow (unreadable on white), then three of
# Paul Tol's colours, so a node of up to 10 devices has one colour per device.
_PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#000000",
    "#882255",
    "#44AA99",
    "#999933",
)
_WARMUP_COLOUR = "#9ca3af"
_FAIL_COLOUR = "#b91c1c"

# matplotlib settings for every figure: text as <text> (small, selectable, searchable), a fixed
# hash salt (clip-path ids do not change between runs), and no mathtext, so a benchmark name
# with "$" in it is drawn as written instead of failing to parse.
_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "pytest-dlbench",
    "text.parse_math": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e5e7eb",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "legend.frameon": False,
    "legend.fontsize": 8,
}


# -- formatting ---------------------------------------------------------------------------------


def _num(value: float | None, *, digits: int = 4, zeros: bool = True) -> str:
    """A number for a table cell: thousands separators for big ones, ``digits`` significant.

    ``zeros`` keeps trailing zeros ("157.0", not "157") so a column reads at one precision.
    """
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    # Compared after rounding, so 999.96 becomes "1,000" rather than "1000.".
    if abs(float(f"{value:.{digits}g}")) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:#.{digits}g}" if zeros else f"{value:.{digits}g}"


def _pct(value: float | None, *, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:.{digits}f} %"


def _gap(value: float, best: float) -> str:
    """``value``'s gap to ``best`` as "-8.6 %"; blank for the best itself."""
    if value >= best or not best:
        return ""
    gap = (value / best - 1.0) * 100
    return f"{gap:.1f} %" if gap <= -0.05 else "-<0.1 %"  # never "-0.0 %"


def _run_label(run: Any) -> str:
    """``D0`` or ``D0 R1``: the run's device slot and repeat, as in the pytest item id."""
    repeat = getattr(run, "repeat", None)
    return f"D{run.device}" if repeat is None else f"D{run.device} R{repeat}"


def _ok(run: Any) -> bool:
    return getattr(run, "status", "ok") == "ok"


def _std_source(bench: Any) -> str:
    """Where ``std`` comes from (reference/scoring.md): the run rates, or one run's blocks."""
    ok = [r for r in bench.runs if _ok(r) and r.rate is not None]
    if len(ok) >= 2:
        return f"std over the rates of {len(ok)} runs"
    if ok:
        return f"std over {len(ok[0].block_rates)} blocks of the single run's window"
    return ""


# -- plots --------------------------------------------------------------------------------------


_ID_ATTR = re.compile(r'\bid="([^"]+)"')
_ID_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def _scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id of one SVG (and the references to them) with ``prefix``.

    Several SVGs inlined in one page share one id namespace; matplotlib names its groups
    ``figure_1``, ``axes_1``, … in every figure, so without this a ``url(#…)`` or ``<use>`` in
    one plot could pick up another plot's element.
    """
    ids = set(_ID_ATTR.findall(svg))
    svg = _ID_ATTR.sub(lambda m: f'id="{prefix}{m[1]}"', svg)
    return _ID_REF.sub(lambda m: m[1] + (prefix + m[2] if m[2] in ids else m[2]), svg)


def _to_svg(fig: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element ready to inline in HTML."""
    buf = io.StringIO()
    # Date=None keeps the output identical from run to run.
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.05)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # the XML prolog and DOCTYPE are not valid inside HTML
    text = _METADATA.sub("", text)  # RDF metadata: only a creator string and namespace URLs
    # The explicit pt size would pin the plot's width; CSS sizes it (the viewBox keeps the ratio).
    text = re.sub(r'^<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    text = text.replace("<svg", '<svg role="img" class="plot-svg"', 1)
    return _scope_ids(text, prefix)


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.3 s to import

    return Figure(figsize=(width, height), layout="constrained")


def _observations(run: Any) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    warm = [(float(t), float(r)) for t, r in getattr(run, "warmup", ()) or ()]
    steady = [(float(t), float(r)) for t, r in getattr(run, "steady", ()) or ()]
    return warm, steady


def _device_colour(device: int) -> str:
    """One colour per device slot, the same in every plot of the page."""
    return _PALETTE[device % len(_PALETTE)]


def _rate_plot(bench: Any, prefix: str) -> str | None:
    """Rate over time of each run of one benchmark, the warm-up shaded; ``None`` if no data.

    Runs are coloured by device (repeats of a device share its colour), so a slow device reads
    the same here as in the per-device plot.
    """
    runs = [r for r in bench.runs if any(_observations(r))]
    if not runs:
        return None
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig = _new_figure(5.6, 2.7)
    ax: Axes = fig.add_subplot()
    # A stream without usable times (all equal: "time" missing) is drawn against the
    # observation's index instead, so its points do not pile up on one vertical line.
    by_index = any(len({t for t, _ in sum(_observations(r), [])}) < 2 for r in runs)
    warm_ends: list[float] = []
    by_device: dict[int, list[Any]] = {}
    for run in runs:
        by_device.setdefault(run.device, []).append(run)
        colour = _device_colour(run.device)
        warm, steady = _observations(run)
        if by_index:
            warm = [(float(k), r) for k, (_, r) in enumerate(warm)]
            steady = [(float(k + len(warm)), r) for k, (_, r) in enumerate(steady)]
        t0 = min(t for t, _ in warm + steady)  # each run's own clock: runs line up at 0
        if warm:
            warm_ends.append(max(t for t, _ in warm) - t0)
            # Joined to the first steady point, drawn lighter: it is recorded, never scored.
            joined = warm + steady[:1]
            ax.plot(
                [t - t0 for t, _ in joined],
                [r for _, r in joined],
                color=colour,
                alpha=0.45,
                lw=1.0,
                ls="--",
            )
        if steady:
            ax.plot(
                [t - t0 for t, _ in steady],
                [r for _, r in steady],
                color=colour,
                lw=1.3,
                marker="." if len(steady) <= 40 else None,
                ms=3,
            )
        if not _ok(run):
            t_end, r_end = max(warm + steady)
            ax.plot([t_end - t0], [r_end], marker="x", ms=8, mew=2, color=_FAIL_COLOUR)
    if warm_ends:
        # Dark where every run is still warming up, light where only some are: exact for any
        # number of runs (one span per run would darken into a block with many runs).
        lo, hi = min(warm_ends), max(warm_ends)
        ax.axvspan(0, lo, color=_WARMUP_COLOUR, alpha=0.3, lw=0)
        if hi > lo:
            ax.axvspan(lo, hi, color=_WARMUP_COLOUR, alpha=0.13, lw=0)

    handles: list[Any] = []
    for device, device_runs in sorted(by_device.items()):
        notes = [f"{len(device_runs)} runs"] if len(device_runs) > 1 else []
        failed = [r.status for r in device_runs if not _ok(r)]
        notes += [
            f"{failed.count(s)} {s}" if len(device_runs) > 1 else s for s in sorted(set(failed))
        ]
        label = f"D{device}" + (f" ({', '.join(notes)})" if notes else "")
        handles.append(Line2D([], [], color=_device_colour(device), lw=1.3, label=label))
    perf = getattr(bench, "perf", None)
    if perf is not None and math.isfinite(perf):
        ax.axhline(perf, color="#111827", lw=0.9, ls=":")
        handles.append(Line2D([], [], color="#111827", lw=0.9, ls=":", label="perf"))
    if warm_ends:
        handles.append(Patch(color=_WARMUP_COLOUR, alpha=0.35, lw=0, label="warm-up"))
    if any(not _ok(r) for r in runs):
        handles.append(
            Line2D([], [], color=_FAIL_COLOUR, marker="x", ls="", mew=2, label="failed run ends")
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("observation" if by_index else "seconds since the run's first observation")
    ax.set_ylabel(bench.units)
    ax.set_title(bench.name, loc="left")
    if len(handles) <= 8:
        ax.legend(handles=handles, loc="lower right", ncols=min(4, len(handles)))
    else:  # many devices: beside the axes, where it cannot hide the lines
        fig.legend(handles=handles, loc="outside right upper", ncols=1 + len(handles) // 13)
    return _to_svg(fig, prefix)


def _device_plot(benchmarks: Sequence[Any], prefix: str) -> str | None:
    """Per-device perf of each benchmark, as % above or below the mean over its devices.

    Relative, so benchmarks with different units share one axis and a slow device stands out
    as the bar that points left in every row (seed 001's "GPU comparisons"). ``None`` when no
    benchmark ran on two devices or more.
    """
    rows = [b for b in benchmarks if len(getattr(b, "per_device", {}) or {}) >= 2]
    if not rows:
        return None
    devices = sorted({d for b in rows for d in b.per_device})
    fig = _new_figure(9.0, 0.9 + 0.13 * len(rows) * len(devices) + 0.12 * len(rows))
    ax: Axes = fig.add_subplot()
    height = 0.8 / len(devices)
    for j, device in enumerate(devices):
        ys, widths = [], []
        for i, bench in enumerate(rows):
            value = bench.per_device.get(device)
            mean = statistics.fmean(bench.per_device.values())
            if value is None or not mean:
                continue
            ys.append(i - 0.4 + height * (j + 0.5))  # row i, its bars in device order
            widths.append((value / mean - 1.0) * 100)
        ax.barh(ys, widths, height=height * 0.9, color=_device_colour(device), label=f"D{device}")
    ax.axvline(0, color="#111827", lw=0.8)
    ax.set_yticks(range(len(rows)), [b.name for b in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # inverted: first benchmark (and D0 in a row) on top
    ax.set_xlabel("device perf − mean over its devices (% of the mean)")
    ax.grid(axis="y", visible=False)
    # Above the axes, where it cannot hide a bar.
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(10, len(devices)))
    lo, hi = ax.get_xlim()
    bound = max(abs(lo), abs(hi), 1.0)  # symmetric, and never narrower than ±1 %
    ax.set_xlim(-bound * 1.05, bound * 1.05)
    return _to_svg(fig, prefix)


def _distribution_plot(benchmarks: Sequence[Any], prefix: str) -> str | None:
    """Box plot of each benchmark's steady-state step rates, in % of the benchmark's median.

    Relative, so benchmarks of any scale and unit share one axis and what shows is the spread
    (the noise that ``std%`` penalizes). Only successful runs; ``None`` when there is no data.
    """
    names, data = [], []
    for bench in benchmarks:
        rates = [r for run in bench.runs if _ok(run) for _, r in _observations(run)[1]]
        rates = [r for r in rates if math.isfinite(r)]
        if not rates:
            continue
        median = statistics.median(rates)
        if median <= 0:
            continue
        names.append(bench.name)
        data.append([r / median * 100 for r in rates])
    if not data:
        return None
    fig = _new_figure(9.0, 0.7 + 0.32 * len(data))
    ax: Axes = fig.add_subplot()
    ax.boxplot(
        data,
        orientation="horizontal",
        whis=(5, 95),  # whiskers at the 5th/95th percentiles; the points beyond are drawn
        widths=0.6,
        patch_artist=True,
        boxprops={"facecolor": "#dbeafe", "edgecolor": "#1e3a8a"},
        medianprops={"color": "#1e3a8a"},
        flierprops={"marker": ".", "markersize": 3, "markeredgecolor": "#6b7280"},
    )
    ax.set_yticks(range(1, len(names) + 1), names)
    ax.invert_yaxis()  # same order as the table
    ax.axvline(100, color="#111827", lw=0.6, ls=":")
    ax.set_xlabel("steady-state step rate (% of the benchmark's median)")
    ax.grid(axis="y", visible=False)
    return _to_svg(fig, prefix)


# -- view model ---------------------------------------------------------------------------------


@dataclass
class _Plot:
    title: str
    svg: str
    caption: str = ""


@dataclass
class _View:
    """Everything the template shows, already formatted (the template only lays it out)."""

    title: str
    suite: str | None
    run_dir: str | None
    score: str
    score_value: float | None
    incomplete: list[str]
    n_scored: int
    failure_rate: str
    price: str | None
    price_per_score: str | None
    benchmarks: list[dict[str, Any]]
    failed_runs: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    devices: list[int]
    device_rows: list[dict[str, Any]]
    comparison: dict[str, Any] | None
    rate_plots: list[_Plot] = field(default_factory=list)
    device_plot: _Plot | None = None
    distribution_plot: _Plot | None = None


_VERDICT_CLASS = {"regressed": "bad", "improved": "good", "unchanged": "neutral"}


def _number(obj: Any, name: str) -> float | None:
    """``obj.name`` if it is a finite number, else None (comparison fields are read by name)."""
    value = getattr(obj, name, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _first_number(obj: Any, *names: str) -> float | None:
    return next((v for v in (_number(obj, n) for n in names) if v is not None), None)


def _comparison_view(comparison: Any) -> dict[str, Any]:
    rows = []
    for row in getattr(comparison, "rows", ()) or ():
        verdict = str(getattr(row, "verdict", "") or "")
        ratio = _number(row, "ratio")
        p_value = _number(row, "p_value")
        rows.append(
            {
                "name": str(getattr(row, "name", "")),
                # Optional: the perf_adj of each side, when the comparison carries them.
                "baseline": _num(_first_number(row, "baseline", "baseline_perf_adj")),
                "current": _num(_first_number(row, "current", "current_perf_adj", "perf_adj")),
                "ratio": _num(ratio, digits=3),
                "change": _pct(ratio - 1.0) if ratio is not None else "—",
                "verdict": verdict or "—",
                "verdict_class": _VERDICT_CLASS.get(verdict, "other"),
                "p_value": "—" if p_value is None else f"{p_value:.3g}",
            }
        )
    has_values = any(r["baseline"] != "—" or r["current"] != "—" for r in rows)
    score_verdict = str(getattr(comparison, "score_verdict", "") or "")
    tolerance = _number(comparison, "tolerance")
    baseline = getattr(comparison, "baseline_path", None) or getattr(comparison, "source", None)
    return {
        "rows": rows,
        "has_values": has_values,
        "score_ratio": _num(_number(comparison, "score_ratio"), digits=3),
        "score_verdict": score_verdict or "—",
        "score_verdict_class": _VERDICT_CLASS.get(score_verdict, "other"),
        "only_current": [str(n) for n in getattr(comparison, "only_current", ()) or ()],
        "only_baseline": [str(n) for n in getattr(comparison, "only_baseline", ()) or ()],
        "tolerance": _pct(tolerance) if tolerance is not None else None,
        "baseline": str(baseline) if baseline else None,
    }


def _view(summary: Any, comparison: Any | None, title: str | None, price: float | None) -> _View:
    benches: Sequence[Any] = tuple(summary.benchmarks)
    incomplete = [str(n) for n in getattr(summary, "incomplete", ()) or ()]
    score = getattr(summary, "score", None)
    suite = getattr(summary, "suite", None)

    bench_rows = []
    for b in benches:
        weight = float(getattr(b, "weight", 0.0) or 0.0)
        enabled = bool(getattr(b, "enabled", True))
        bench_rows.append(
            {
                "name": b.name,
                "units": b.units,
                "weight": _num(weight, digits=3, zeros=False),
                "n": b.n,
                "fail": b.fail,
                "perf": _num(b.perf),
                "total": _num(getattr(b, "total", None)),
                "std": _num(getattr(b, "std", None), digits=3),
                "std_pct": _pct(getattr(b, "std_pct", None)),
                "perf_adj": _num(getattr(b, "perf_adj", None)),
                "std_source": _std_source(b),
                "incomplete": b.name in incomplete,
                "unscored": weight <= 0 or not enabled,
                "never_ran": b.n == 0,
                "has_fail": b.fail > 0,
            }
        )

    runs, failed = [], []
    for b in benches:
        for run in b.runs:
            row = {
                "bench": b.name,
                "label": _run_label(run),
                "device": run.device,
                "repeat": "—" if run.repeat is None else run.repeat,
                "status": run.status,
                "reason": getattr(run, "reason", "") or "",
                "rate": _num(run.rate),
                "units": getattr(run, "units", b.units),
                "steady": len(getattr(run, "steady", ()) or ()),
                "warmup": len(getattr(run, "warmup", ()) or ()),
                "path": getattr(run, "path", "") or "",
                "ok": _ok(run),
            }
            runs.append(row)
            if not row["ok"]:
                failed.append(row)

    devices = sorted({d for b in benches for d in (getattr(b, "per_device", {}) or {})})
    device_rows = []
    if len(devices) >= 2:
        for b in benches:
            per = getattr(b, "per_device", {}) or {}
            if not per:
                continue
            best = max(per.values())
            device_rows.append(
                {
                    "name": b.name,
                    "units": b.units,
                    "cells": [
                        {
                            "value": _num(per.get(d)),
                            # Relative to the best device: the lowest cell of a row is the laggard.
                            "rel": _gap(per[d], best) if d in per else "",
                            "worst": d in per and len(per) >= 2 and per[d] == min(per.values()),
                        }
                        for d in devices
                    ],
                }
            )

    price_per_score = None
    if price is not None and score:
        price_per_score = _num(price / score)
    scored = [
        b
        for b in benches
        if getattr(b, "enabled", True)
        and (getattr(b, "weight", 0) or 0) > 0
        and b.name not in incomplete
    ]
    default_title = f"pytest-dlbench report: {suite}" if suite else "pytest-dlbench report"
    return _View(
        title=title or default_title,
        suite=suite,
        run_dir=getattr(summary, "run_dir", None),
        score=_num(score),
        score_value=score,
        incomplete=incomplete,
        n_scored=len(scored),
        failure_rate=_pct(getattr(summary, "failure_rate", None)),
        price=_num(price) if price is not None else None,
        price_per_score=price_per_score,
        benchmarks=bench_rows,
        failed_runs=failed,
        runs=runs,
        devices=devices,
        device_rows=device_rows,
        comparison=_comparison_view(comparison) if comparison is not None else None,
    )


def _plots(view: _View, benches: Iterable[Any]) -> None:
    import matplotlib

    benches = tuple(benches)
    with matplotlib.rc_context(_RC):
        for i, bench in enumerate(benches):
            svg = _rate_plot(bench, f"r{i}-")
            if svg is not None:
                view.rate_plots.append(_Plot(bench.name, svg))
        svg = _device_plot(benches, "d-")
        if svg is not None:
            view.device_plot = _Plot("Per-device performance", svg)
        svg = _distribution_plot(benches, "h-")
        if svg is not None:
            view.distribution_plot = _Plot("Distribution of step rates", svg)


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
    summary: Any,
    *,
    comparison: Any | None = None,
    title: str | None = None,
    price: float | None = None,
) -> str:
    """The report of ``summary`` (a ``SuiteSummary``) as one self-contained HTML document.

    ``comparison`` (a ``compare.Comparison``) adds the baseline section; ``price`` adds the
    price/score line (seed 001); ``title`` replaces the default page title.
    """
    from markupsafe import Markup

    view = _view(summary, comparison, title, price)
    _plots(view, summary.benchmarks)
    # The SVGs are matplotlib's output, with text already XML-escaped by matplotlib.
    for plot in [*view.rate_plots, view.device_plot, view.distribution_plot]:
        if plot is not None:
            plot.svg = Markup(plot.svg)
    from pytest_dlbench import __version__

    return _environment().get_template("report.html.j2").render(v=view, version=__version__)


def write_html(
    summary: Any,
    path: str | PathLike[str],
    *,
    comparison: Any | None = None,
    title: str | None = None,
    price: float | None = None,
) -> Path:
    """Render the report (see :func:`render_html`) to ``path`` (parents created); return it."""
    out = Path(path)
    text = render_html(summary, comparison=comparison, title=title, price=price)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
