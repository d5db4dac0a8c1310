"""The files a report can be written to, shared by the pytest run and ``dlbench report``."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["write_outputs"]


def write_outputs(
    summary: Any,
    *,
    comparison: Any = None,
    save: str | PathLike[str] | None = None,
    html: str | PathLike[str] | None = None,
    export: str | PathLike[str] | None = None,
    price: float | None = None,
    suite: str | None = None,
) -> list[str]:
    """Write the JSON summary, the HTML page and the dashboard export that were asked for;
    return one line per file written, for the user."""
    written: list[str] = []
    if save:
        from pytest_dlbench.results.baseline import save_summary

        written.append(f"summary saved: {save_summary(summary, save, suite=suite)}")
    if html:
        from pytest_dlbench.report.html import write_html  # lazily: jinja2 and matplotlib are heavy

        path: Path = write_html(summary, html, comparison=comparison, price=price)
        written.append(f"HTML report: {path}")
    if export:
        from pytest_dlbench.report.export import export_benchmark_action

        written.append(f"benchmark-action JSON: {export_benchmark_action(summary, export)}")
    return written
