"""Option definitions shared by the pytest plugin and the ``dlbench`` command."""

from __future__ import annotations

from typing import Any

__all__ = ["SUITE_OPTIONS", "RUN_OPTIONS"]

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
