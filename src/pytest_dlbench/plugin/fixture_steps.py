"""The warm-up and steady steps of a test that uses the ``bench`` fixture (no suite).

Decided, first match wins: ``$DLBENCH_FIXTURE_STEPS`` (a child ``pytest NODEID`` its parent
started: a round of ``--bench-against``, a confirmation, a bisect step, so that both sides of a
pair run the same steps whatever each tree's marker says), the test's
``@pytest.mark.bench_steps(warmup=W, steps=S)`` (a field it leaves out comes from below),
``--bench-fixture-steps=W,S``, else :data:`~pytest_dlbench.options.FIXTURE_STEPS`.

A bad marker is found at collection (one line naming the marker and the test, exit status 4),
before any test runs; a bad option is argparse's (options.parse_fixture_steps).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_dlbench.options import FIXTURE_STEPS, fixture_steps_problem

__all__ = ["MARKER", "MARKER_HELP", "check_markers", "item_steps", "steps_env"]

MARKER = "bench_steps"
#: The marker's line in ``pytest --markers``.
MARKER_HELP = (f"{MARKER}(warmup={FIXTURE_STEPS[0]}, steps={FIXTURE_STEPS[1]}): the warm-up and "
               "steady steps of this test's bench fixture (wins over --bench-fixture-steps)")


def _steps_error(message: str) -> pytest.UsageError:
    """A ``bench_steps`` marker whose values cannot be used: a usage error (exit status 4),
    its text one line (plugin.usage_error's escaping of the node id)."""
    from pytest_dlbench.core.numbers import printable

    return pytest.UsageError(printable(message))


def _marker_values(marker: Any, where: str) -> dict[str, object]:
    """The fields a ``bench_steps`` marker gives: ``(W, S)``, ``(warmup=W, steps=S)`` or
    either alone by keyword."""
    args, kwargs = tuple(marker.args), dict(marker.kwargs)
    unknown = sorted(set(kwargs) - {"warmup", "steps"})
    if unknown or len(args) > 2 or (len(args) >= 1 and "warmup" in kwargs) or \
            (len(args) == 2 and "steps" in kwargs):
        raise _steps_error(f"{where}: takes warmup and steps, as (warmup=W, steps=S) or (W, S); "
                         f"got {_call(args, kwargs)}")
    values = dict(zip(("warmup", "steps"), args, strict=False))
    values.update(kwargs)
    return values


def _call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return "(" + ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())]) + ")"


def _marker_where(item: pytest.Item) -> str:
    return f"@pytest.mark.{MARKER} on {item.nodeid}"


def item_steps(item: pytest.Item, config: pytest.Config) -> tuple[int, int]:
    """``(warmup, steps)`` of ``item``'s ``bench`` fixture (the module docstring's order)."""
    from_parent = os.environ.get(_env_name())
    if from_parent:
        from pytest_dlbench.options import parse_fixture_steps

        return parse_fixture_steps(from_parent)
    warmup, steps = config.getoption("bench_fixture_steps", None) or FIXTURE_STEPS
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return warmup, steps
    where = _marker_where(item)
    values = {"warmup": warmup, "steps": steps, **_marker_values(marker, where)}
    problem = fixture_steps_problem(values["warmup"], values["steps"])
    if problem is not None:
        raise _steps_error(f"{where}: {problem}")
    return int(str(values["warmup"])), int(str(values["steps"]))


def check_markers(items: list[pytest.Item], config: pytest.Config) -> None:
    """Every ``bench_steps`` marker of the collected tests: a bad one is a usage error."""
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item_steps(item, config)


def _env_name() -> str:
    from pytest_dlbench.core.protocol import Env

    return Env.FIXTURE_STEPS


def steps_env(steps: tuple[int, int]) -> dict[str, str]:
    """The variable that hands ``steps`` to a child ``pytest NODEID``."""
    return {_env_name(): f"{steps[0]},{steps[1]}"}
