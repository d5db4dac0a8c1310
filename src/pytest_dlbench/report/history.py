"""A results history shown: ``dlbench history``'s text and the HTML report's history section
(each benchmark's rate per commit, its steps marked, the run being reported highlighted).

The series and their steps are computed in :mod:`pytest_dlbench.results.history.records`; this
module only formats them.
"""

from __future__ import annotations

import html as _html
from collections.abc import Sequence
from os import PathLike
from typing import Any

from pytest_dlbench.core.numbers import fixed, p_value, percent, significant
from pytest_dlbench.results.history import BenchSeries, Entry, Step

__all__ = ["history_section", "render_history", "series_dicts", "step_line"]


def step_line(series: BenchSeries, step: Step) -> str:
    """One step: its commit range, size, confidence and the commits on each side."""
    word = "slower" if step.ratio < 1 else "faster"
    return (f"step at {series.step_range(step)}: x{fixed(step.ratio, 3)} "
            f"({percent(step.ratio - 1, 1)}, {word}), confidence "
            f"{percent(step.confidence, 1)} (p {p_value(step.p)}), "
            f"{step.n_before} commit{'s' if step.n_before != 1 else ''} before, "
            f"{step.n_after} after")


def render_history(
    series: Sequence[BenchSeries], entries: Sequence[Entry], problems: Sequence[str], *,
    folder: str | PathLike[str], verbose: bool = False,
) -> str:
    """``dlbench history``: per machine and benchmark, its rate per commit (the first commit's
    ratio beside it) and its steps; ``verbose`` lists every commit, else the last ten and each
    step's commits."""
    machines = sorted({e.machine for e in entries})
    lines = [f"history {folder}: {len(entries)} saved run{'s' if len(entries) != 1 else ''}, "
             f"{len(machines)} machine{'s' if len(machines) != 1 else ''}"]
    lines += [f"warning: {p}" for p in problems]
    if not series:
        lines.append("no benchmark with a rate in the runs selected")
        return "\n".join(lines)
    for s in series:
        lines.append("")
        lines.append(f"{s.bench}  [{s.machine}]  {len(s.points)} commit"
                     f"{'s' if len(s.points) != 1 else ''}, {s.units}")
        shown = _shown_points(s, verbose)
        lines.append(f"  {'commit':<12} {'date':<10} {'rate':>10} {'vs first':>9} {'runs':>4}")
        first = s.points[0].rate
        last_shown = -1
        marks = {step.index for step in s.steps}
        for i in shown:
            if i > last_shown + 1:
                lines.append(f"  {'...':<12}")
            p = s.points[i]
            mark = "  <- step" if i in marks else ""
            lines.append(f"  {p.short:<12} {(p.date or '')[:10]:<10} "
                         f"{significant(p.rate, missing='-'):>10} {fixed(p.rate / first, 3):>9} "
                         f"{p.runs:>4}{mark}")
            last_shown = i
        if not s.steps:
            lines.append("  no step")
        for step in s.steps:
            lines.append(f"  {step_line(s, step)}")
    return "\n".join(lines)


def _shown_points(s: BenchSeries, verbose: bool) -> list[int]:
    n = len(s.points)
    if verbose or n <= 12:
        return list(range(n))
    keep = set(range(n - 10, n)) | {0}
    for step in s.steps:
        keep |= {step.index - 1, step.index}
    return sorted(keep)


def series_dicts(series: Sequence[BenchSeries]) -> list[dict[str, Any]]:
    """``dlbench history --json``: every series, its points and steps."""
    return [{
        "bench": s.bench, "machine": s.machine, "units": s.units,
        "points": [{"commit": p.commit, "date": p.date, "rate": p.rate, "runs": p.runs,
                    "files": [str(e.path) for e in p.entries]} for p in s.points],
        "steps": [{"range": s.step_range(st), "from": s.points[st.index - 1].commit,
                   "to": s.points[st.index].commit, "ratio": st.ratio, "p": st.p,
                   "confidence": st.confidence, "before": st.n_before, "after": st.n_after}
                  for st in s.steps],
    } for s in series]


# -- the HTML report's section --------------------------------------------------------------
_W, _H, _PAD = 640, 150, 34
_MIN_SPAN = 0.05


def _svg(s: BenchSeries) -> str:
    """A small inline SVG of the series: a line of the rates, each step a dashed vertical
    line, the current run's point ringed."""
    rates = [p.rate for p in s.points]
    lo, hi = min(rates), max(rates)
    # At least +-5 % of the middle rate: a few percent of noise must not fill the plot.
    middle = sorted(rates)[len(rates) // 2]
    lo, hi = min(lo, middle * (1 - _MIN_SPAN)), max(hi, middle * (1 + _MIN_SPAN))
    n = len(rates)

    def x(i: float) -> float:
        return _PAD + (i if n > 1 else 0.5) * (_W - 2 * _PAD) / max(n - 1, 1)

    def y(v: float) -> float:
        return _H - 18 - (v - lo) / (hi - lo) * (_H - 36)

    path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(rates))
    parts = [f'<svg class="history-plot" viewBox="0 0 {_W} {_H}" width="100%" '
             'style="max-width:720px;display:block" '
             f'role="img" aria-label="{_html.escape(s.bench)} per commit">',
             f'<polyline fill="none" stroke="#3465a4" stroke-width="1.5" points="{path}"/>']
    for i, v in enumerate(rates):
        title = _html.escape(f"{s.points[i].short} {s.points[i].date or ''}: "
                             f"{significant(v)} {s.units}")
        ring = ' stroke="#cc0000" stroke-width="2.5" r="5"' if i == s.current else ' r="2.5"'
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" fill="#3465a4"{ring}>'
                     f"<title>{title}</title></circle>")
    for step in s.steps:
        at = x(step.index - 0.5)
        parts.append(f'<line class="step" x1="{at:.1f}" x2="{at:.1f}" y1="6" y2="{_H - 12}" '
                     'stroke="#cc0000" stroke-dasharray="4 3"/>')
    parts.append(f'<text x="2" y="14" font-size="10">{_html.escape(significant(hi))}</text>')
    for i in {0, n - 1}:  # the first and the last commit under their points
        anchor = "start" if i == 0 else "end"
        parts.append(f'<text x="{x(i):.1f}" y="{_H - 2}" font-size="9" text-anchor="{anchor}">'
                     f"{_html.escape(s.points[i].short)}</text>")
    parts.append(f'<text x="2" y="{_H - 4}" font-size="10">'
                 f"{_html.escape(significant(lo))}</text>")
    parts.append("</svg>")
    return "".join(parts)


def history_section(series: Sequence[BenchSeries], folder: str | PathLike[str]) -> str:
    """The HTML report's history section (escaped here: it is inserted as markup), or "" when
    no benchmark has a history."""
    shown = [s for s in series if s.points]
    if not shown:
        return ""
    out = ['<section id="history"><h2>History</h2>',
           f'<p class="muted">Rate per commit from <code>{_html.escape(str(folder))}</code> '
           "(docs/history.md); dashed lines: steps; ringed: this run.</p>"]
    for s in shown:
        out.append(f"<h3>{_html.escape(s.bench)} <span class=\"muted\">"
                   f"[{_html.escape(s.machine)}] {_html.escape(s.units)}</span></h3>")
        out.append(_svg(s))
        lines = [step_line(s, step) for step in s.steps] or ["no step"]
        # A file whose figures of this benchmark were left out (not finite positive rates).
        lines += [f"warning: {note}" for note in s.notes]
        out.append("<ul>" + "".join(f"<li>{_html.escape(t)}</li>" for t in lines) + "</ul>")
    out.append("</section>")
    return "\n".join(out)
