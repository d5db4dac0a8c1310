"""``BenchSpec``: one benchmark after every layer, inheritance and override is applied."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.core.numbers import is_integer, is_number
from pytest_dlbench.suite.argv import render_argv
from pytest_dlbench.suite.definitions import VOIR_FILES, plain_value, resolve_definition
from pytest_dlbench.suite.interval import IntervalError, parse_interval

__all__ = [
    "BenchSpec",
    "build_spec",
    "ignored_keys",
    "misspelled_keys",
    "name_problem",
    "porting_error",
    "DEFAULT_STOP",
    "DEFAULT_SKIP",
    "IGNORED_KEYS",
    "METRICS",
]

DEFAULT_STOP = 60
DEFAULT_SKIP = 5
DEFAULT_MAX_DURATION = 600.0
PLAN_METHODS = ("per_gpu", "njobs")
#: What a benchmark reports (docs/time-to-train.md): the steady-state throughput (default), or
#: MMoCLIP's time-to-train, ``total_time_secs`` (lower is better).
METRICS = ("throughput", "total_time_secs")

# Keys whose misspelling earns a warning. Unknown keys that are not close to one are kept quietly.
KNOWN_KEYS = {
    "": (
        "definition", "inherits", "tags", "group", "install_group", "plan", "argv", "env",
        "max_duration", "voir", "validation", "weight", "enabled", "matrix", "job", "name",
        "num_machines", "requires_capabilities", "capabilities", "units", "matrix_values",
        "profile", "metric", "url", "server", "client", "use_deepspeed",
    ),
    "plan": ("method", "n", "slots", "nodes"),
    "voir": ("options",),
    "voir.options": ("stop", "skip", "interval", "gpu_poll"),
    "validation": ("usage",),
    "validation.usage": ("gpu_load_threshold", "gpu_mem_threshold"),
}

# milabench keys that are accepted, kept (dlbench resolve shows them) and have no effect here:
# what milabench does with each, and why it does nothing here. One warning per key and suite.
IGNORED_KEYS = {
    "install_group": "milabench's shared virtual environment; benchmarks run in pytest's own",
    "url": "where milabench's gated-model helper sends you; nothing is downloaded here",
    "server": "argv of milabench's vLLM server; only 'argv' reaches a benchmark here",
    "client": "argv of milabench's vLLM client; only 'argv' reaches a benchmark here",
    "use_deepspeed": "a flag of milabench's accelerate launcher; njobs runs under torchrun here",
    "voir.options.gpu_poll": "voir's GPU polling period; telemetry uses voir.options.interval",
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
    #: and ``definition`` the built-in runner (suite/definitions.py). A voir definition's has
    #: ``voir`` (the folder), ``script``, ``parser: voir`` and ``cwd`` (the folder) too.
    command: dict[str, Any] | None = None

    @property
    def is_njobs(self) -> bool:
        """One job over all device slots, launched with torchrun (milabench, "Execution Plan")."""
        return self.plan.get("method") == "njobs"

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON; :meth:`from_json` gives an equal spec back (the parent
        hands this to the child process that runs the benchmark)."""
        return {f.name: plain_value(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchSpec:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name in ("tags", "args"):
            values[name] = tuple(values.get(name) or ())
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The resolver's JSON view: every merged key, then the normalised fields over them."""
        data = {k: plain_value(v) for k, v in self.config.items() if k != "matrix_values"}
        data.update(
            name=self.name,
            definition=self.definition,
            origin=self.origin,
            tags=list(self.tags),
            group=self.group,
            weight=self.weight,
            enabled=self.enabled,
            plan=plain_value(self.plan),
            argv=plain_value(self.argv),
            env=dict(self.env),
            max_duration=self.max_duration,
            stop=self.stop,
            skip=self.skip,
            args=list(self.args),
        )
        if self.metric is not None:
            data["metric"] = self.metric
        if self.command is not None:
            data["command"] = plain_value(self.command)
        if "matrix_values" in self.config:
            data["matrix"] = plain_value(self.config["matrix_values"])
        return data


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


def ignored_keys(config: dict[str, Any]) -> list[str]:
    """The keys of :data:`IGNORED_KEYS` that a benchmark's merged mapping has."""
    found = []
    for path in IGNORED_KEYS:
        node: Any = config
        for part in path.split("."):
            node = node.get(part, None) if isinstance(node, dict) else None
            if node is None:
                break
        else:
            found.append(path)
    return found


def porting_error(spec: BenchSpec) -> str | None:
    """The one-line error for a definition that names a folder this run cannot use, else None.

    milabench's ``definition`` is a folder (``../benchmarks/torchvision``: main.py,
    voirfile.py, prepare.py); one that holds ``main.py`` and ``voirfile.py`` runs through voir
    (:data:`VOIR_RUNNER`). Any other folder (one that is not there: the suite outside a
    milabench checkout) cannot run.
    """
    if spec.definition is None or ":" in spec.definition:
        return None  # ``module:function``, ``file.py:function``, the built-in runners
    path = Path(spec.definition)  # a path is absolute by now; a module name is not
    folder = path.is_dir() or (not path.exists() and not path.suffix)
    if not path.is_absolute() or path.suffix == ".py" or not folder:
        return None  # a module, a file.py, or another file that load_definition reports
    written = spec.config.get("definition", spec.definition)
    missing = [name for name in VOIR_FILES if not (path / name).is_file()]
    where = f"{path} has no {' and no '.join(missing)}" if path.is_dir() else (
        f"{path} is not there (is the suite in a milabench checkout?)")
    return (
        f"{spec.name}: definition '{written}' names a milabench benchmark folder, but {where}: "
        "a folder with main.py and voirfile.py runs through voir; else set 'definition' to a "
        "Python function (module:function, file.py:function) or an external command "
        "({command: [...], parser: ...}), see 'Porting a milabench suite' in docs/suites.md"
    )


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
            f"{what} {quoted(name)} {problem}: a name is used as a file name "
            "(use letters, digits, '-', '_' and '.')",
            file=origin,
        )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env(env: dict[Any, Any], *, origin: str, name: str) -> None:
    """Variable names a shell takes as they are (a node launcher's ssh command puts them in a
    remote shell's command line) and values a process environment can hold."""
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise SuiteError(f"'env' key {quoted(key)} is not a variable name (letters, digits and "
                             "'_', not starting with a digit)", file=origin, bench=name)
        if value is not None and "\0" in str(value):
            raise SuiteError(f"'env.{key}' contains a NUL character", file=origin, bench=name)


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
    for key in ("n", "slots", "nodes"):
        count = plan.get(key)
        if count is not None and (not is_integer(count) or count < 1):
            raise SuiteError(f"'plan.{key}' must be a positive integer, got {quoted(count)}",
                             file=origin, bench=name)
    if plan.get("nodes") is not None and plan["method"] != "njobs":
        raise SuiteError("'plan.nodes' needs 'method: njobs' (one job over the nodes)",
                         file=origin, bench=name)
    return plan


def _number(config: dict, key: str, default: float, *, origin: str, name: str) -> float:
    value = config.get(key, default)
    if value is None:
        return default
    if not is_number(value):
        raise SuiteError(f"'{key}' must be a number, got {quoted(value)}", file=origin, bench=name)
    return float(value)


def _count(options: dict, key: str, default: int, *, origin: str, name: str) -> int:
    value = options.get(key, default)
    if value is None:
        return default
    if not is_integer(value) or value < 0:
        raise SuiteError(
            f"'voir.options.{key}' must be a non-negative integer, got {quoted(value)}",
            file=origin,
            bench=name,
        )
    return value


def _check_requirements(config: dict[str, Any], *, origin: str, name: str) -> None:
    """The shapes of milabench's ``requires_capabilities`` and ``num_machines`` (suite/capability.py
    checks them against the run)."""
    conditions = config.get("requires_capabilities")
    if conditions is not None and not isinstance(conditions, str) and (
        not isinstance(conditions, list) or not all(isinstance(c, str) for c in conditions)
    ):
        raise SuiteError("'requires_capabilities' must be a list of strings", file=origin,
                         bench=name)
    machines = config.get("num_machines")
    if machines is not None and (not is_integer(machines) or machines < 1):
        raise SuiteError(f"'num_machines' must be a positive integer, got {quoted(machines)}",
                         file=origin, bench=name)


def build_spec(name: str, config: dict[str, Any], origin: str) -> BenchSpec:
    """Validate the merged mapping of one benchmark and normalise it into a ``BenchSpec``."""
    _check_name(name, config, origin)
    tags = config.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SuiteError("'tags' must be a list of strings", file=origin, bench=name)
    enabled = config.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SuiteError(f"'enabled' must be true or false, got {quoted(enabled)}", file=origin,
                         bench=name)
    plan = _plan(config, origin=origin, name=name)
    env = config.get("env") or {}
    if not isinstance(env, dict):
        raise SuiteError("'env' must be a mapping", file=origin, bench=name)
    _check_env(env, origin=origin, name=name)
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
            f"'max_duration' must be positive and finite (seconds), got {quoted(max_duration)}",
            file=origin, bench=name,
        )
    weight = _number(config, "weight", 0.0, origin=origin, name=name)
    if not (math.isfinite(weight) and weight >= 0):
        raise SuiteError(
            f"'weight' must be a finite number >= 0, got {quoted(weight)}", file=origin, bench=name
        )
    try:
        parse_interval(options.get("interval"))
    except IntervalError as exc:
        raise SuiteError(f"voir.options.interval: {exc}", file=origin, bench=name) from None
    definition, command = resolve_definition(config.get("definition"), origin=origin, name=name)
    _check_requirements(config, origin=origin, name=name)
    metric = config.get("metric")
    if metric is not None and metric not in METRICS:
        raise SuiteError(f"'metric' must be one of {', '.join(METRICS)}, got {quoted(metric)}",
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
        args=tuple(args),
        config=config,
        metric=metric,
        command=command,
    )
