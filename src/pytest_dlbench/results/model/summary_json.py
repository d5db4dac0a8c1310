"""The saved summary's versions: what a file must say to be one, the migrations of older versions
and the types of the current one, checked once, one line naming the key.

``SuiteSummary.to_dict`` writes the current version and ``SuiteSummary.from_dict`` reads any
version through :func:`checked` (pyperf's ``_json_load(version, ...)`` beside ``_as_json``).
Plain dicts in, plain dicts out: the types live in results/model/summary.py. pydantic is imported
lazily (core/schema.py): a run that never reads a summary back never loads it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from pytest_dlbench.core.numbers import is_integer

__all__ = [
    "GATE",
    "MIGRATIONS",
    "PROVENANCE",
    "SCHEMA",
    "VERSION",
    "SummaryFormatError",
    "checked",
    "migrate",
]

SCHEMA = "pytest-dlbench/summary"
VERSION = 1
#: What a saved summary records of where it was measured (results/figures/machine.py, the baseline).
PROVENANCE = ("created", "machine", "versions", "commit")


#: Where a saved run records its gate's verdict against the baseline it was compared with
#: (``--bench-save`` with ``--bench-compare``). Never read back: a baseline is its figures,
#: and a verdict belongs to the pair of runs it judged.
GATE = "gate"


class SummaryFormatError(ValueError):
    """Data that is not a usable saved summary; the message is one line, naming the key."""


# -- migrations -------------------------------------------------------------------------------
#: version -> function turning that version's dict into the next version's. Empty: version 1 is
#: the first released format (the pre-release version 0 is no longer read).
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Apply the migrations from ``data["version"]`` up to :data:`VERSION` (a new dict)."""
    version = data.get("version")
    while version != VERSION:
        step = (MIGRATIONS.get(version)  # ``false`` is no version 0
                if is_integer(version) else None)
        if step is None:
            raise ValueError(f"unknown summary version {version!r}")
        data = step(data)
        if data.get("version") == version:
            raise ValueError(f"migration from version {version} did not advance")
        version = data.get("version")
    return data


# -- the current version's types --------------------------------------------------------------
def _device_key(value: Any) -> Any:
    if not (isinstance(value, str) and value.isdigit()):
        raise ValueError(f"must be a device number, got {value!r}")
    return value


@functools.cache  # building the pydantic models takes ~0.1 s: once per process
def _schema() -> Any:
    """The typed shape of a (migrated) summary: every key that ``from_dict`` reads."""
    from typing import Annotated

    from pydantic import PlainValidator

    from pytest_dlbench.core.schema import Bool, Int, Loose, Map, Num, Str

    Device = Annotated[Any, PlainValidator(_device_key)]

    class Timing(Loose):
        steps: Int | None = None
        total_time_secs: Num | None = None
        items: Num | None = None
        throughput_avg: Num | None = None
        time_per_iteration_secs: Num | None = None
        done_percent: Num | None = None

    class Run(Loose):
        device: Int | None = None
        repeat: Int | None = None
        status: Str | None = None
        reason: Str | None = None
        rate: Num | None = None
        block_rates: list[Num | None] | None = None
        path: Str | None = None
        telemetry: Map | None = None
        compiled: Map | None = None
        notes: list[Str] | None = None
        warnings: list[Str] | None = None
        voir: Bool | None = None
        nnodes: Int | None = None
        timing: Timing | None = None

    class Bench(Loose):
        perf_adj: Num | None
        weight: Num | None
        n: Int
        fail: Int
        units: Str | None = None
        enabled: Bool | None = None
        method: Str | None = None
        perf: Num | None = None
        total: Num | None = None
        std: Num | None = None
        std_pct: Num | None = None
        unreliable: Str | None = None
        tflops: Num | None = None
        mfu: Num | None = None
        peak_source: Str | None = None
        mfu_error: Str | None = None
        per_device: dict[Device, Num | None] | None = None
        rates: list[Num | None] | None = None
        samples: list[Num | None] | None = None
        telemetry: Map | None = None
        precision: Str | None = None
        compile: Map | None = None
        metric: Str | None = None
        world_size: Int | None = None
        milabench_perf: Num | None = None
        sessions: list[list[Num | None]] | None = None
        runs: list[Run] | None = None

    class Subset(Loose):  # a -k, -m or --bench-select subset's score (results/model/summary.py)
        weighted: Int | None = None
        of: Int | None = None
        left_out: list[Str] | None = None

    class Milabench(Loose):  # --bench-score=milabench (results/figures/milabench_score.py)
        score: Num | None = None
        benchmarks: dict[str, Num | None] | None = None
        left_out: dict[str, Num] | None = None

    class Summary(Loose):
        version: Int
        suite: Str | None = None
        run_dir: Str | None = None
        score: Num | None = None
        subset: Subset | None = None
        milabench_score: Milabench | None = None
        incomplete: list[Str] | None = None
        failure_rate: Num | None = None
        machine: Map | None = None
        benchmarks: dict[str, Bench]

    return Summary


def checked(data: Any) -> dict[str, Any]:
    """``data`` as the current version, its types checked (validated, not converted).

    Raises :class:`SummaryFormatError`: not a pytest-dlbench summary, a version newer than this
    package reads, or ``invalid summary: <key>: <what is wrong>``.
    """
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        raise SummaryFormatError(f'not a pytest-dlbench summary (no "schema": "{SCHEMA}")')
    version = data.get("version")
    if is_integer(version) and version > VERSION:
        raise SummaryFormatError(
            f"summary version {version} is newer than this pytest-dlbench reads ({VERSION})"
        )
    from pydantic import ValidationError

    from pytest_dlbench.core.schema import first_error

    try:
        current = migrate(dict(data))
        _schema().model_validate(current)
    except ValidationError as exc:
        raise SummaryFormatError(f"invalid summary: {first_error(exc)}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SummaryFormatError(f"invalid summary: {exc}") from None
    return current
