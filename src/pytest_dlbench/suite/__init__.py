"""Suite resolution: milabench-dialect YAML files into frozen ``BenchSpec`` objects.

Plain Python, no pytest: ``resolve_suite(path)`` is everything the plugin and the CLI need.
"""

from __future__ import annotations

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.suite.argv import fill_all, fill_placeholders, render_argv
from pytest_dlbench.suite.locate import available_suites, find_suite, suite_dirs
from pytest_dlbench.suite.merge import DELETE, merge
from pytest_dlbench.suite.resolve import (
    ResolvedSuite,
    SuiteWarning,
    parse_override,
    resolve_suite,
    select_specs,
)
from pytest_dlbench.suite.spec import BenchSpec
from pytest_dlbench.suite.system import Node, SystemConfig, load_system, local_system

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
