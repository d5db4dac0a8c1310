"""``BenchSpec``: one benchmark after every layer, inheritance and override is applied."""

from __future__ import annotations

import difflib
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
    "DEFAULT_STOP",
    "DEFAULT_SKIP",
    "EXTERNAL_RUNNER",
    "METRICS",
]

DEFAULT_STOP = 60
DEFAULT_SKIP = 5
DEFAULT_MAX_DURATION = 600.0
PLAN_METHODS = ("per_gpu", "njobs")
#: What a benchmark reports (docs/time-to-train.md): the steady-state throughput (default), or
#: seed 004's time-to-train, ``total_time_secs`` (lower is better).
METRICS = ("throughput", "total_time_secs")
#: The built-in function that runs an external command (``definition: {command: [...]}``).
EXTERNAL_RUNNER = "pytest_dlbench.run.external:main"
EXTERNAL_KEYS = ("command", "parser", "cwd", "prepare")

# Keys whose misspelling earns a warning. Unknown keys that are not close to one are kept quietly.
KNOWN_KEYS = {
    "": (
        "definition", "inherits", "tags", "group", "install_group", "plan", "argv", "env",
        "max_duration", "voir", "validation", "weight", "enabled", "matrix", "job", "name",
        "num_machines", "requires_capabilities", "capabilities", "units", "matrix_values",
        "profile", "metric",
    ),
    "plan": ("method", "n", "slots", "nodes"),
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
    #: ``throughput`` or ``total_time_secs`` (None: throughput, not said)
    metric: str | None = None
    #: an external command (``definition: {command: ...}``): ``command``, ``parser``, ``cwd``,
    #: ``prepare``. ``args`` is then the whole command line (command, then the rendered argv)
    #: and ``definition`` the built-in runner, :data:`EXTERNAL_RUNNER`.
    command: dict[str, Any] | None = None

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
        if self.metric is not None:
            data["metric"] = self.metric
        if self.command is not None:
            data["command"] = _plain(self.command)
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


def _suite_dir(value: Any, origin: str) -> str:
    base = value.origin.parent if isinstance(value, Located) else Path(origin).parent
    return str(base.resolve())


def _external(value: dict, *, origin: str, name: str) -> dict[str, Any]:
    """Validate an external command's definition (docs/time-to-train.md) into plain values:
    ``command`` a list of strings with ``{suite_dir}`` filled (the folder of the file the
    string was written in), ``parser`` as given (checked), ``prepare`` resolved like a
    definition, ``cwd`` as given (launch-time placeholders are filled by the runner)."""
    from pytest_dlbench.measure.logparse import LogParseError, make_parser

    def fail(message: str) -> SuiteError:
        return SuiteError(f"definition: {message}", file=origin, bench=name)

    unknown = sorted(set(value) - set(EXTERNAL_KEYS))
    if unknown:
        raise fail(f"unknown keys {unknown} (an external command has "
                   f"{', '.join(EXTERNAL_KEYS)})")
    command = value.get("command")
    if isinstance(command, str):
        import shlex

        located = command
        command = [Located(part, located.origin) if isinstance(located, Located) else part
                   for part in shlex.split(command)]
    if not isinstance(command, list) or not command:
        raise fail("'command' must be a non-empty list (or a command line string)")
    words = []
    for part in command:
        if isinstance(part, bool) or not isinstance(part, str | int | float):
            raise fail(f"'command' items must be strings or numbers, got {part!r}")
        text = str(part)
        if "{suite_dir}" in text:
            text = text.replace("{suite_dir}", _suite_dir(part, origin))
        words.append(text)
    if "parser" not in value:
        raise fail("an external command needs a 'parser' (a ready one, e.g. 'open_clip', or "
                   "a mapping with a 'regex'): it is how its steps are read")
    parser = value["parser"]
    try:
        make_parser(parser)
    except LogParseError as exc:
        raise fail(str(exc)) from None
    result: dict[str, Any] = {"command": words, "parser": _plain(parser)}
    cwd = value.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise fail("'cwd' must be a path")
        result["cwd"] = cwd.replace("{suite_dir}", _suite_dir(cwd, origin))
    prepare = value.get("prepare")
    if prepare is not None:
        result["prepare"] = _resolve_definition(prepare, origin=origin, name=name)
    return result


def _plan(config: dict, *, origin: str, name: str) -> dict[str, Any]:
    plan = config.get("plan") or {"method": "per_gpu"}
    if not isinstance(plan, dict) or plan.get("method", "per_gpu") not in PLAN_METHODS:
        raise SuiteError(
            f"'plan.method' must be one of {', '.join(PLAN_METHODS)}", file=origin, bench=name
        )
    plan = {"method": "per_gpu", **plan}
    # Counts may come formatted from a matrix (`nodes: '{nodes}'` gives "4").
    for key in ("n", "slots", "nodes"):
        value = plan.get(key)
        if isinstance(value, str) and value.strip().isdigit():
            plan[key] = int(value)
    nodes = plan.get("nodes")
    if nodes is not None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise SuiteError(f"'plan.nodes' must be a positive integer, got {nodes!r}",
                             file=origin, bench=name)
        if plan["method"] != "njobs":
            raise SuiteError("'plan.nodes' needs 'method: njobs' (one job over the nodes)",
                             file=origin, bench=name)
    return plan


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
    tags = config.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SuiteError("'tags' must be a list of strings", file=origin, bench=name)
    enabled = config.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SuiteError(f"'enabled' must be true or false, got {enabled!r}", file=origin,
                         bench=name)
    plan = _plan(config, origin=origin, name=name)
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
    if max_duration <= 0:
        raise SuiteError("'max_duration' must be positive", file=origin, bench=name)
    from pytest_dlbench.measure.monitor import IntervalError, parse_interval

    try:
        parse_interval(options.get("interval"))
    except IntervalError as exc:
        raise SuiteError(f"voir.options.interval: {exc}", file=origin, bench=name) from None
    raw_definition = config.get("definition")
    command = None
    if isinstance(raw_definition, dict):
        command = _external(raw_definition, origin=origin, name=name)
        definition: str | None = EXTERNAL_RUNNER
    else:
        definition = _resolve_definition(raw_definition, origin=origin, name=name)
    if definition is None and enabled:
        raise SuiteError("no 'definition': nothing to run", file=origin, bench=name)
    metric = config.get("metric")
    if metric is not None and metric not in METRICS:
        raise SuiteError(f"'metric' must be one of {', '.join(METRICS)}, got {metric!r}",
                         file=origin, bench=name)
    args = render_argv(config.get("argv"), bench=name, file=origin)
    if command is not None:
        args = [*command["command"], *args]
    group = config.get("group")
    units = config.get("units")
    return BenchSpec(
        name=name,
        definition=definition,
        origin=origin,
        tags=tuple(sorted(set(tags))),
        group=str(group) if group is not None else None,
        weight=_number(config, "weight", 0.0, origin=origin, name=name),
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
        args=tuple(args),
        config=config,
        metric=metric,
        command=command,
    )
