"""What ``dlbench baseline`` says of the baseline it merged: per benchmark, its sessions, runs,
figure, and the drift between sessions the noise model will use (results/judge/noise.py)."""

from __future__ import annotations

from pytest_dlbench.core.numbers import number
from pytest_dlbench.report.terminal_tables import table
from pytest_dlbench.results.judge import session_drift
from pytest_dlbench.results.model import SuiteSummary

__all__ = ["render_sessions"]


def render_sessions(merged: SuiteSummary, path: str, width: int = 100) -> str:
    """``base.json: 3 sessions merged`` and a table: benchmark, sessions, runs, perf, drift
    between sessions (its source when it is not the sessions' own)."""
    rows = []
    for bench in merged.benchmarks:
        drift = session_drift(bench)
        rows.append({
            "bench": bench.name,
            "sessions": str(bench.session_count),
            "runs": str(len(bench.rates)),
            "perf": f"{number(bench.perf)} {bench.units}" if bench.perf is not None else "-",
            "drift between sessions": f"{drift.cv:.1%}" + (
                "" if bench.session_count >= 2 else f" ({drift.source})"),
        })
    most = max((b.session_count for b in merged.benchmarks), default=0)
    return "\n".join([
        f"{path}: {most} sessions merged into one baseline",
        table(rows, width, left=["bench"]),
        "A comparison with this baseline judges each side with this drift on top of its runs' "
        "noise (docs/reports.md, 'The noise between runs').",
    ])
