"""Suite resolution: milabench-dialect YAML files into frozen ``BenchSpec`` objects.

Plain Python, no pytest: ``resolve_suite(path)`` is everything the plugin and the CLI need.
"""

from __future__ import annotations

from ..errors import SuiteError
from .argv import fill_all, fill_placeholders, render_argv
from .locate import available_suites, find_suite, suite_dirs
from .merge import DELETE, merge
from .resolve import ResolvedSuite, SuiteWarning, parse_override, resolve_suite, select_specs
from .spec import BenchSpec
from .system import Node, SystemConfig, load_system, local_system

__all__ = [
    "DELETE",
    "BenchSpec",
    "Node",
    "ResolvedSuite",
    "SuiteError",
    "SuiteWarning",
    "SystemConfig",
    "available_suites",
    "fill_all",
    "fill_placeholders",
    "find_suite",
    "load_system",
    "local_system",
    "merge",
    "parse_override",
    "render_argv",
    "resolve_suite",
    "select_specs",
    "suite_dirs",
]
