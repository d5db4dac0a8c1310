"""``BenchSpec``: one benchmark after every layer, inheritance and override is applied."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_dlbench.errors import SuiteError
from pytest_dlbench.suite.argv import render_argv
from pytest_dlbench.suite.loader import Located

__all__ = [
    "BenchSpec",
    "build_spec",
    "misspelled_keys",
    "name_problem",
    "DEFAULT_STOP",
    "DEFAULT_SKIP",
]

DEFAULT_STOP = 60
DEFAULT_SKIP = 5
DEFAULT_MAX_DURATION = 600.0
PLAN_METHODS = ("per_gpu", "njobs")

# Keys whose misspelling earns a warning. Unknown keys that are not close to one are kept quietly.
KNOWN_KEYS = {
    "": (
        "definition", "inherits", "tags", "group", "install_group", "plan", "argv", "env",
        "max_duration", "voir", "validation", "weight", "enabled", "matrix", "job", "name",
        "num_machines", "requires_capabilities", "capabilities", "units", "matrix_values",
    ),
    "plan": ("method", "n", "slots"),
    "voir": ("options",),
    "voir.options": ("stop", "skip", "interval"),
    "validation": ("usage",),
    "validation.usage": ("gpu_load_threshold", "gpu_mem_threshold"),
}


@dataclass(frozen=True)
class BenchSpec:
    """What to run and how; built once by the resolver, never changed afterwards."""

    name: str
    definition: str | None
    origin: str
    tags: tuple[str, ...] = ()
    group: str | None = None
    weight: float = 0.0
    enabled: bool = True
    plan: dict[str, Any] = field(default_factory=lambda: {"method": "per_gpu"})
    argv: Any = None
    env: dict[str, str] = field(default_factory=dict)
    max_duration: float = DEFAULT_MAX_DURATION
    stop: int = DEFAULT_STOP
    skip: int = DEFAULT_SKIP
    interval: Any = None
    validation: dict[str, Any] = field(default_factory=dict)
    units: str | None = None
    args: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def is_njobs(self) -> bool:
        """One job over all device slots, launched with torchrun (seed 000, "Execution Plan")."""
        return self.plan.get("method") == "njobs"

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON; :meth:`from_json` gives an equal spec back (the parent
        hands this to the child process that runs the benchmark)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchSpec:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name in ("tags", "args"):
            values[name] = tuple(values.get(name) or ())
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The resolver's JSON view: every merged key, then the normalised fields over them."""
        data = {k: _plain(v) for k, v in self.config.items() if k != "matrix_values"}
        data.update(
            name=self.name,
            definition=self.definition,
            origin=self.origin,
            tags=list(self.tags),
            group=self.group,
            weight=self.weight,
            enabled=self.enabled,
            plan=_plain(self.plan),
            argv=_plain(self.argv),
            env=dict(self.env),
            max_duration=self.max_duration,
            stop=self.stop,
            skip=self.skip,
            args=list(self.args),
        )
        if "matrix_values" in self.config:
            data["matrix"] = _plain(self.config["matrix_values"])
        return data


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Located):
        return str(value)
    return value


def misspelled_keys(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, closest known key) for each unknown key that looks like a typo of a known one."""
    found: list[tuple[str, str]] = []
    for prefix, known in KNOWN_KEYS.items():
        node: Any = config
        for part in prefix.split(".") if prefix else []:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        for key in node:
            if not isinstance(key, str) or key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            if close:
                found.append((f"{prefix}.{key}" if prefix else key, close[0]))
    return found


#: A benchmark name becomes a file name (``<name>.D0.data``, ``specs/<name>.json``) and an item id
#: (``<name>[D0]``): at most this many bytes, so that the longest file name stays under 255.
MAX_NAME_BYTES = 200
_ID_CHARACTERS = "[]:"  # pytest item ids: name[D0], path::name[D0]


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a benchmark's name, or None when it can.

    A name is one safe file-name component: milabench's letters, digits, ``-``, ``_`` and ``.``
    (``ddp.scaling.2``) and most other characters are fine; path separators, a leading dot
    (``..``, hidden files), control characters and the characters of pytest item ids are not.
    """
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    if not name:
        return "is empty"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if name.startswith("."):
        return "starts with '.'"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return "contains a control character"
    if any(0xD800 <= ord(c) < 0xE000 for c in name):
        return "is not valid Unicode (a lone surrogate)"
    if any(c in _ID_CHARACTERS for c in name):
        return "contains '[', ']' or ':' (they separate pytest item ids)"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    return None


def _check_name(name: str, config: dict[str, Any], origin: str) -> None:
    problem = name_problem(name)
    if problem is not None:
        what = "matrix job name" if "matrix_values" in config else "benchmark name"
        # repr: a name with a newline or an escape sequence must not break the line.
        raise SuiteError(
            f"{what} {name!r} {problem}: a name is used as a file name "
            "(use letters, digits, '-', '_' and '.')",
            file=origin,
        )


def _resolve_definition(value: Any, *, origin: str, name: str) -> str | None:
    """``module:function`` stays; a path is made absolute against the file it was written in."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SuiteError("'definition' must be a non-empty string", file=origin, bench=name)
    # Split as load_definition does: the function follows the last ':'.
    target, _, function = value.rpartition(":") if ":" in value else (value, "", "")
    looks_like_path = target.endswith(".py") or "/" in target or target.startswith(".")
    if not looks_like_path:
        return value
    base = value.origin.parent if isinstance(value, Located) else Path(origin).parent
    resolved = (base / target).resolve()
    return f"{resolved}:{function}" if function else str(resolved)


def _number(config: dict, key: str, default: float, *, origin: str, name: str) -> float:
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SuiteError(f"'{key}' must be a number, got {value!r}", file=origin, bench=name)
    return float(value)


def _count(options: dict, key: str, default: int, *, origin: str, name: str) -> int:
    value = options.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SuiteError(
            f"'voir.options.{key}' must be a non-negative integer, got {value!r}",
            file=origin,
            bench=name,
        )
    return value


def build_spec(name: str, config: dict[str, Any], origin: str) -> BenchSpec:
    """Validate the merged mapping of one benchmark and normalise it into a ``BenchSpec``."""
    _check_name(name, config, origin)
    tags = config.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SuiteError("'tags' must be a list of strings", file=origin, bench=name)
    enabled = config.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SuiteError(f"'enabled' must be true or false, got {enabled!r}", file=origin,
                         bench=name)
    plan = config.get("plan") or {"method": "per_gpu"}
    if not isinstance(plan, dict) or plan.get("method", "per_gpu") not in PLAN_METHODS:
        raise SuiteError(
            f"'plan.method' must be one of {', '.join(PLAN_METHODS)}", file=origin, bench=name
        )
    plan = {"method": "per_gpu", **plan}
    env = config.get("env") or {}
    if not isinstance(env, dict):
        raise SuiteError("'env' must be a mapping", file=origin, bench=name)
    voir = config.get("voir") or {}
    options = voir.get("options") if isinstance(voir, dict) else None
    options = options or {}
    if not isinstance(options, dict):
        raise SuiteError("'voir.options' must be a mapping", file=origin, bench=name)
    validation = config.get("validation") or {}
    if not isinstance(validation, dict):
        raise SuiteError("'validation' must be a mapping", file=origin, bench=name)
    max_duration = _number(config, "max_duration", DEFAULT_MAX_DURATION, origin=origin,
                           name=name)
    # NaN compares false with everything: `<= 0` alone would let .nan through and turn the
    # timeout off; .inf would turn it off too.
    if not (math.isfinite(max_duration) and max_duration > 0):
        raise SuiteError(
            f"'max_duration' must be positive and finite (seconds), got {max_duration!r}",
            file=origin, bench=name,
        )
    weight = _number(config, "weight", 0.0, origin=origin, name=name)
    if not (math.isfinite(weight) and weight >= 0):
        raise SuiteError(
            f"'weight' must be a finite number >= 0, got {weight!r}", file=origin, bench=name
        )
    from pytest_dlbench.measure.monitor import IntervalError, parse_interval

    try:
        parse_interval(options.get("interval"))
    except IntervalError as exc:
        raise SuiteError(f"voir.options.interval: {exc}", file=origin, bench=name) from None
    definition = _resolve_definition(config.get("definition"), origin=origin, name=name)
    if definition is None and enabled:
        raise SuiteError("no 'definition': nothing to run", file=origin, bench=name)
    group = config.get("group")
    units = config.get("units")
    return BenchSpec(
        name=name,
        definition=definition,
        origin=origin,
        tags=tuple(sorted(set(tags))),
        group=str(group) if group is not None else None,
        weight=weight,
        enabled=enabled,
        plan=plan,
        argv=config.get("argv"),
        env={str(k): "" if v is None else str(v) for k, v in env.items()},
        max_duration=max_duration,
        stop=_count(options, "stop", DEFAULT_STOP, origin=origin, name=name),
        skip=_count(options, "skip", DEFAULT_SKIP, origin=origin, name=name),
        interval=options.get("interval"),
        validation=validation,
        units=str(units) if units is not None else None,
        args=tuple(render_argv(config.get("argv"), bench=name, file=origin)),
        config=config,
    )
