"""The plots of the HTML report, drawn by matplotlib as inline SVG.

Why matplotlib SVG rather than plotly: a plotly page inlines its ~4 MB library; matplotlib's SVGs
are a few tens of kB each, deterministic (fixed hash salt, no date), and their text stays text.
Figures are made with the object API (no pyplot state); matplotlib is imported inside the
functions that draw, so importing this module is cheap.
"""

from __future__ import annotations

import io
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.numbers import in_range

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from pytest_dlbench.results.model import BenchSummary, RunResult

__all__ = ["Plots", "draw_plots"]


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
_PERF_COLOUR = "#111827"
_BASELINE_COLOUR = "#b45309"

# matplotlib settings for every figure: text as <text> (small, selectable, searchable), a fixed
# hash salt (clip-path ids do not change between runs), and no mathtext, so a benchmark name
# with "$" in it is drawn as written instead of failing to parse.
_RC: dict[RcKeyType, Any] = {
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


def _observations(run: RunResult) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(time, rate) of a run's warm-up and steady steps, those no axis can hold (a failed run's
    rate of 1e308) left out: its reason already says so."""
    warm = [(float(t), float(r)) for t, r in run.warmup if in_range(r) and in_range(t)]
    steady = [(float(t), float(r)) for t, r in run.steady if in_range(r) and in_range(t)]
    return warm, steady


def _device_colour(device: int) -> str:
    """One colour per device slot, the same in every plot of the page."""
    return _PALETTE[device % len(_PALETTE)]


def _rate_plot(bench: BenchSummary, prefix: str, baseline: float | None = None) -> str | None:
    fig = rate_figure(bench, baseline)
    return _to_svg(fig, prefix) if fig is not None else None


def rate_figure(bench: BenchSummary, baseline: float | None = None) -> Figure | None:
    """Rate over time of each run of one benchmark, the warm-up shaded, its perf and the
    baseline's perf (a comparison) as horizontal lines; ``None`` if no data.

    Runs are coloured by device (repeats of a device share its colour), so a slow device reads
    the same here as in the per-device plot. The legend is below the axes, never over a line.
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
    by_device: dict[int, list[RunResult]] = {}
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
        if not run.ok:
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
        failed = [r.status for r in device_runs if not r.ok]
        notes += [
            f"{failed.count(s)} {s}" if len(device_runs) > 1 else s for s in sorted(set(failed))
        ]
        label = f"D{device}" + (f" ({', '.join(notes)})" if notes else "")
        handles.append(Line2D([], [], color=_device_colour(device), lw=1.3, label=label))
    perf = bench.perf
    if perf is not None and math.isfinite(perf):
        ax.axhline(perf, color=_PERF_COLOUR, lw=0.9, ls=":")
        handles.append(Line2D([], [], color=_PERF_COLOUR, lw=0.9, ls=":", label="perf"))
    if baseline is not None and math.isfinite(baseline) and baseline > 0:
        # pytest-benchmark's compare histogram: both sides on one axis.
        ax.axhline(baseline, color=_BASELINE_COLOUR, lw=1.1, ls="-.")
        handles.append(Line2D([], [], color=_BASELINE_COLOUR, lw=1.1, ls="-.",
                              label="baseline perf"))
    if warm_ends:
        handles.append(Patch(color=_WARMUP_COLOUR, alpha=0.35, lw=0, label="warm-up"))
    if any(not r.ok for r in runs):
        handles.append(
            Line2D([], [], color=_FAIL_COLOUR, marker="x", ls="", mew=2, label="failed run ends")
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("observation" if by_index else "seconds since the run's first observation")
    ax.set_ylabel(bench.units)
    ax.set_title(bench.name, loc="left")
    if len(handles) <= 8:  # below the axes, where it cannot hide the lines
        fig.legend(handles=handles, loc="outside lower center",
                   ncols=len(handles) if len(handles) <= 5 else 4)
    else:  # many devices: beside the axes
        fig.legend(handles=handles, loc="outside right upper", ncols=1 + len(handles) // 13)
    return fig


def _device_plot(benchmarks: Sequence[BenchSummary], prefix: str) -> str | None:
    """Per-device perf of each benchmark, as % above or below the mean over its devices.

    Relative, so benchmarks with different units share one axis and a slow device stands out
    as the bar that points left in every row (milarun's "GPU comparisons"). ``None`` when no
    benchmark ran on two devices or more.
    """
    rows = [b for b in benchmarks if len(b.per_device) >= 2]
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


def _distribution_plot(benchmarks: Sequence[BenchSummary], prefix: str) -> str | None:
    """Box plot of each benchmark's steady-state step rates, in % of the benchmark's median.

    Relative, so benchmarks of any scale and unit share one axis and what shows is the spread
    (the noise that ``std%`` penalizes). Only successful runs; ``None`` when there is no data.
    """
    names, data = [], []
    for bench in benchmarks:
        rates = [r for run in bench.runs if run.ok for _, r in _observations(run)[1]]
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


@dataclass
class Plots:
    """The page's SVGs: one rate plot per benchmark with observations, and the two summaries
    (None when there is nothing to draw)."""

    rates: list[str]
    devices: str | None
    distribution: str | None


def draw_plots(benchmarks: Sequence[BenchSummary],
               baselines: Mapping[str, float] | None = None) -> Plots:
    """Every plot of the report of ``benchmarks``, with the report's matplotlib settings;
    ``baselines``: a baseline's perf by benchmark name, drawn on its rate plot."""
    import matplotlib

    baselines = baselines or {}
    with matplotlib.rc_context(_RC):
        rates = [_rate_plot(bench, f"r{i}-", baselines.get(bench.name))
                 for i, bench in enumerate(benchmarks)]
        return Plots(
            rates=[svg for svg in rates if svg is not None],
            devices=_device_plot(benchmarks, "d-"),
            distribution=_distribution_plot(benchmarks, "h-"),
        )
