"""Option definitions shared by the pytest plugin and the ``dlbench`` command."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["REPORT_OPTIONS", "RUN_OPTIONS", "SUITE_OPTIONS", "results_base"]


def results_base(config: Any) -> Path:
    """``--bench-base``, else ``$DLBENCH_BASE``, else ``.dlbench``; relative to where pytest was
    started (a pytest ``Config``)."""
    base = Path(
        config.getoption("bench_base") or os.environ.get("DLBENCH_BASE") or ".dlbench"
    )
    return base if base.is_absolute() else Path(config.invocation_params.dir) / base

# (flag, argparse keyword arguments). pytest's parser.addoption takes the same keywords.
SUITE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "--bench-system",
        dict(
            metavar="FILE",
            default=None,
            help="system config (YAML with a top-level 'system:') describing the nodes; its keys "
            "are available as {placeholders}",
        ),
    ),
    (
        "--bench-override",
        dict(
            action="append",
            default=[],
            metavar="BENCH.KEY=VALUE",
            help="override a resolved value, applied as the last layer; repeatable. "
            "Examples: resnet50.argv.--batch-size=32, '*.voir.options.stop=10'",
        ),
    ),
    (
        "--bench-select",
        dict(
            action="append",
            default=[],
            metavar="NAMES",
            help="run only benchmarks whose name, group or tag is in this comma-separated list",
        ),
    ),
    (
        "--bench-exclude",
        dict(
            action="append",
            default=[],
            metavar="NAMES",
            help="skip benchmarks whose name, group or tag is in this comma-separated list",
        ),
    ),
]

RUN_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "--bench-base",
        dict(
            metavar="DIR",
            default=None,
            help="results directory (default: $DLBENCH_BASE or .dlbench); run streams go to "
            "DIR/runs/<run-name>.<time>/",
        ),
    ),
    (
        "--bench-run-name",
        dict(metavar="NAME", default=None, help="name of this run (default: the suite name)"),
    ),
    (
        "--bench-repeat",
        dict(type=int, default=1, metavar="N", help="run each benchmark N times"),
    ),
    (
        "--bench-cpus-per-slot",
        dict(
            type=int,
            default=None,
            metavar="K",
            help="without GPUs, give each device slot K cores (with -n auto: one worker per K "
            "cores); with GPUs, the cores each GPU's slot gets",
        ),
    ),
    (
        "--bench-isolation",
        dict(
            choices=("process", "inline"),
            default="process",
            help="'process' (default) runs each benchmark in a child process so a crash, hang or "
            "out-of-memory fails that benchmark only; 'inline' runs it in the pytest process "
            "(for --pdb and debugging)",
        ),
    ),
]

REPORT_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "--bench-save",
        dict(metavar="PATH", default=None, help="write the run's JSON summary (a baseline)"),
    ),
    (
        "--bench-compare",
        dict(
            metavar="PATH",
            default=None,
            help="compare with a saved summary; exit status 6 when performance regressed",
        ),
    ),
    (
        "--bench-tolerance",
        dict(
            metavar="PCT",
            default=None,
            help="smallest change that counts as a regression or an improvement, e.g. 5%% or "
            "0.05 (default: see docs/reports.md)",
        ),
    ),
    (
        "--bench-require-baseline",
        dict(
            action="store_true",
            default=False,
            help="a missing --bench-compare file is an error (exit status 7), not a warning",
        ),
    ),
    ("--bench-html", dict(metavar="PATH", default=None, help="write a self-contained HTML report")),
    (
        "--bench-export",
        dict(
            metavar="PATH",
            default=None,
            help="write github-action-benchmark's customBiggerIsBetter JSON",
        ),
    ),
    (
        "--bench-price",
        dict(type=float, default=None, metavar="DOLLARS", help="add price/score to the report"),
    ),
]
