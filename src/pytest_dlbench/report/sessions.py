"""What ``dlbench baseline`` says of the baseline it merged: per benchmark, its sessions, runs,
figure, and the drift between sessions the noise model will use (results/noise.py)."""

from __future__ import annotations

from pytest_dlbench.report.format import number
from pytest_dlbench.results.noise import session_drift
from pytest_dlbench.results.sessions import session_count
from pytest_dlbench.results.summary import SuiteSummary

__all__ = ["render_sessions"]


def render_sessions(merged: SuiteSummary, path: str) -> str:
    """``base.json: 3 sessions merged`` and a table: benchmark, sessions, runs, perf, drift
    between sessions (its source when it is not the sessions' own)."""
    rows = [("benchmark", "sessions", "runs", "perf", "drift between sessions")]
    most = 0
    for bench in merged.benchmarks:
        k = session_count(bench)
        most = max(most, k)
        drift = session_drift(bench)
        said = f"{drift.cv:.1%}" + ("" if k >= 2 else f" ({drift.source})")
        rows.append((bench.name, str(k), str(len(bench.rates)),
                     f"{number(bench.perf)} {bench.units}" if bench.perf is not None else "-",
                     said))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{path}: {most} sessions merged into one baseline"]
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    lines.append("A comparison with this baseline judges each side with this drift on top of "
                 "its runs' noise (docs/reports.md, 'The noise between runs').")
    return "\n".join(lines)
