"""Expanding ``matrix`` entries into one benchmark per combination."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from typing import Any

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.suite.argv import fill_placeholders

__all__ = ["MAX_JOBS", "expand_matrices"]

#: The most benchmarks one matrix may generate (a product of long lists grows fast).
MAX_JOBS = 10_000


def _values(value: Any) -> list[Any]:
    # A string is one value (milabench iterates its characters).
    return list(value) if isinstance(value, list) else [value]


def _combinations(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(matrix)
    # itertools.product varies its last argument fastest; the suite format wants the first key
    # fastest, so the keys go in reversed.
    reversed_values = [_values(matrix[k]) for k in reversed(keys)]
    return [
        dict(zip(keys, reversed(combo), strict=True))
        for combo in itertools.product(*reversed_values)
    ]


def _format_argv(argv: Any, context: dict[str, str]) -> Any:
    """The string values of an argv (also inside lists and appends) formatted with a combination."""
    if isinstance(argv, str):
        return fill_placeholders(argv, context)
    if isinstance(argv, dict):
        return {k: _format_argv(v, context) for k, v in argv.items()}
    if isinstance(argv, list):
        return [_format_argv(v, context) for v in argv]
    return argv


def expand_matrices(
    entries: dict[str, dict[str, Any]],
    origins: dict[str, str],
    warn: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Replace each matrix entry, in place in the key order, by its generated jobs.

    ``origins`` maps entry names to the file that defined them; generated jobs are added to it.
    Two benchmarks with the same name are an error naming both origins.
    """
    defined_by = {n: origins.get(n, "?") for n, e in entries.items() if "matrix" not in e}
    result: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        if "matrix" not in entry:
            result[name] = entry
            continue
        where = origins.get(name)
        matrix, job = entry.get("matrix"), entry.get("job")
        if not isinstance(matrix, dict) or not matrix:
            raise SuiteError("'matrix' must be a non-empty mapping", file=where, bench=name)
        if not isinstance(job, dict) or not isinstance(job.get("name"), str):
            raise SuiteError(
                "a matrix entry needs a 'job' mapping with a 'name'", file=where, bench=name
            )
        ignored = sorted(set(entry) - {"matrix", "job"})
        if ignored:
            warn(
                f"{where}: {name}: keys of a matrix entry other than matrix and job are "
                f"ignored: {', '.join(ignored)}"
            )
        count = math.prod(len(_values(v)) for v in matrix.values())
        if count > MAX_JOBS:
            raise SuiteError(
                f"'matrix' makes {count} combinations, more than {MAX_JOBS}", file=where,
                bench=name,
            )
        for combo in _combinations(matrix):
            context = {k: str(v) for k, v in combo.items()}
            job_name = fill_placeholders(job["name"], context)
            this = f"{where} (matrix '{name}')"
            if job_name in defined_by:
                raise SuiteError(
                    f"duplicate benchmark name: defined by {defined_by[job_name]} and by {this}",
                    bench=job_name,
                )
            defined_by[job_name] = this
            generated = copy.deepcopy(job)
            del generated["name"]
            if "argv" in generated:
                generated["argv"] = _format_argv(generated["argv"], context)
            # A sweep over nodes or slots (docs/time-to-train.md): `plan: {nodes: '{nodes}'}`.
            if isinstance(generated.get("plan"), dict):
                generated["plan"] = _format_argv(generated["plan"], context)
            generated["matrix_values"] = combo
            result[job_name] = generated
            origins[job_name] = where or ""
    return result
