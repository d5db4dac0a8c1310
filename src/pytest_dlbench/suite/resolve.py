"""From suite files to ``BenchSpec``s: layers, matrix, inheritance, ``*``, overrides, selection."""

from __future__ import annotations

import contextlib
import warnings as _warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.suite.loader import iter_layers
from pytest_dlbench.suite.matrix import expand_matrices
from pytest_dlbench.suite.merge import DELETE, finalize, merge
from pytest_dlbench.suite.spec import (
    IGNORED_KEYS,
    BenchSpec,
    build_spec,
    ignored_keys,
    misspelled_keys,
)

__all__ = ["ResolvedSuite", "resolve_suite", "parse_override", "select_specs", "SuiteWarning"]

STAR = "*"
#: The most layers a suite may have: a file included twice by each of a chain of files (not a
#: cycle) would otherwise make exponentially many.
MAX_LAYERS = 1000


class SuiteWarning(UserWarning):
    """Something in a suite that is probably a mistake but not an error."""


@dataclass
class ResolvedSuite:
    path: Path
    specs: list[BenchSpec]
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def enabled(self) -> list[BenchSpec]:
        return [s for s in self.specs if s.enabled]

    @property
    def disabled(self) -> list[BenchSpec]:
        return [s for s in self.specs if not s.enabled]

    def __getitem__(self, name: str) -> BenchSpec:
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(name)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``resnet50.argv.--batch-size=32`` -> (["resnet50", "argv", "--batch-size"], 32).

    The value is read as YAML, so ``32`` is a number, ``null`` cancels and ``!delete`` removes.
    """
    shown = text if len(text) <= 80 else text[:77] + "..."  # echoed in errors
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise SuiteError(
            f"--bench-override {shown!r}: expected BENCH.KEY[.KEY...]=VALUE "
            "(BENCH may be '*' for every benchmark)"
        )
    from pytest_dlbench.suite.loader import _SuiteLoader  # the same safe loader as suite files

    loader = _SuiteLoader(raw)
    try:
        value = loader.get_single_data()
    except Exception as exc:  # noqa: BLE001 - any YAML problem is a bad option value
        if isinstance(exc, SuiteError):
            problem = exc.message
        else:
            problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        problem = " ".join(str(problem).split())  # one line, whatever PyYAML wrote
        raise SuiteError(
            f"--bench-override {shown!r}: value is not valid YAML ({problem})"
        ) from None
    finally:
        loader.dispose()
    return parts, value


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    return nested


def _resolve_inheritance(
    entries: dict[str, dict[str, Any]], origins: dict[str, str]
) -> dict[str, dict[str, Any]]:
    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if name in resolved:
            return resolved[name]
        entry = entries[name]
        parent = entry.get("inherits")
        if parent is None:
            result = entry
        else:
            if not isinstance(parent, str):
                raise SuiteError(
                    "'inherits' takes one benchmark name", file=origins.get(name), bench=name
                )
            if parent in chain:
                cycle = " -> ".join([*chain[chain.index(parent) :], parent])
                raise SuiteError(f"inheritance cycle: {cycle}", file=origins.get(name), bench=name)
            if parent not in entries:
                raise SuiteError(
                    f"inherits '{parent}', which is not defined", file=origins.get(name),
                    bench=name,
                )
            base = resolve(parent, (*chain, parent))
            result = merge(base, entry, bench=name, file=origins.get(name))
            tags = _tag_list(base, parent, origins) + _tag_list(entry, name, origins)
            if tags:
                result["tags"] = sorted(set(tags))
        resolved[name] = result
        return result

    for name in entries:
        resolve(name, (name,))
    return resolved


def _tag_list(entry: dict[str, Any], name: str, origins: dict[str, str]) -> list[str]:
    tags = entry.get("tags") or []
    if isinstance(tags, dict) and set(tags) == {"append"}:
        tags = tags["append"]  # an {append: [...]} left for the parent: tags are a union anyway
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SuiteError("'tags' must be a list of strings", file=origins.get(name), bench=name)
    return tags


def _apply_override(
    config: dict[str, Any], keys: list[str], value: Any, text: str, bench: str, path: Path
) -> dict[str, Any]:
    try:
        return merge(config, _nest(keys, value), bench=bench, file=path)
    except SuiteError as exc:
        raise SuiteError(
            f"--bench-override {quoted(text)}: {exc.message}", file=exc.file, bench=bench
        ) from None


def _split_target(parts: list[str], known: set[str]) -> list[str]:
    for cut in range(len(parts) - 1, 1, -1):
        if ".".join(parts[:cut]) in known:
            return [".".join(parts[:cut]), *parts[cut:]]
    return parts


def _matrix_job_names(entries: dict[str, Any]) -> set[str]:
    """Names the matrix entries will generate (overrides are parsed before the expansion)."""
    names: set[str] = set()
    for entry in entries.values():
        if isinstance(entry, dict) and "matrix" in entry:
            with contextlib.suppress(Exception):  # a bad matrix is reported by the expansion
                names.update(expand_matrices({"m": entry}, {}, lambda _: None))
    return names


def resolve_suite(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    emit_warnings: bool = False,
) -> ResolvedSuite:
    """Resolve a suite file into its public benchmarks (disabled ones included, templates not)."""
    path = Path(path).resolve()
    notes: list[str] = []
    entries: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for count, layer in enumerate(iter_layers(path), 1):
        if count > MAX_LAYERS:
            raise SuiteError(
                f"more than {MAX_LAYERS} layers through 'include' (files included many times?)",
                file=path,
            )
        for name, value in layer.entries.items():
            if value is DELETE:
                entries.pop(name, None)
                continue
            entries[name] = merge(entries.get(name, {}), value, bench=name, file=layer.path)
            origins[name] = str(layer.path)

    parsed = [(text, *parse_override(text)) for text in overrides]
    # A benchmark name may itself contain dots (``ddp.scaling.2``): the target is the longest
    # dotted prefix that names an entry or a matrix job, else the first part.
    known = set(entries) | _matrix_job_names(entries)
    parsed = [(text, _split_target(parts, known), value) for text, parts, value in parsed]
    for text, (target, *keys), value in parsed:
        if target.startswith("_"):
            if target not in entries:
                raise SuiteError(
                    f"--bench-override {quoted(text)}: no template named '{target}'", file=path
                )
            entries[target] = _apply_override(entries[target], keys, value, text, target, path)

    entries = expand_matrices(entries, origins, notes.append)
    entries = _resolve_inheritance(entries, origins)
    star = entries.pop(STAR, None)
    public = {n: e for n, e in entries.items() if not n.startswith("_")}
    if star is not None:
        star = {k: v for k, v in star.items() if k != "inherits"}
        star_file = origins.get(STAR)
        public = {n: merge(e, star, bench=n, file=star_file) for n, e in public.items()}

    for text, (target, *keys), value in parsed:
        if target.startswith("_"):
            continue
        names = list(public) if target == STAR else [target]
        if target != STAR and target not in public:
            raise SuiteError(
                f"--bench-override {quoted(text)}: no benchmark named '{target}'", file=path
            )
        for name in names:
            public[name] = _apply_override(public[name], keys, value, text, name, path)

    specs = []
    ignored: dict[str, int] = {}
    for name, merged in public.items():
        origin = origins.get(name, str(path))
        # A fresh copy per benchmark (merges share untouched sub-trees), appends left over as lists.
        config = finalize(merged)
        typos = [
            f"unknown key '{key}', did you mean '{close}'?"
            for key, close in misspelled_keys(config)
        ]
        notes.extend(f"{origin}: {name}: {typo}" for typo in typos)
        for key in ignored_keys(config):
            ignored[key] = ignored.get(key, 0) + 1
        try:
            spec = build_spec(name, config, origin)
        except SuiteError as exc:
            if not typos:
                raise
            # The error may well come from the typo: say so.
            raise SuiteError(
                f"{exc.message} ({'; '.join(typos)})", file=exc.file, bench=exc.bench
            ) from None
        if spec.definition is None and spec.enabled:
            # milabench keeps such an entry and never selects it; the plugin deselects it.
            why = "; ".join(typos) or "milabench never selects such an entry either"
            notes.append(f"{origin}: {name}: no 'definition', nothing to run: deselected ({why})")
        specs.append(spec)
    for key, count in ignored.items():
        where = f"in {count} benchmark{'' if count == 1 else 's'}"
        notes.append(f"{path}: '{key}' ({where}) has no effect here: {IGNORED_KEYS[key]}")
    if emit_warnings:
        for note in notes:
            _warnings.warn(note, SuiteWarning, stacklevel=2)
    return ResolvedSuite(path=path, specs=specs, warnings=notes)


def select_specs(
    specs: Iterable[BenchSpec], select: Iterable[str] = (), exclude: Iterable[str] = ()
) -> list[BenchSpec]:
    """milabench's --select/--exclude: each word matches a name, a group or a tag."""

    def words(values: Iterable[str]) -> set[str]:
        return {w.strip() for v in values for w in v.split(",") if w.strip()}

    chosen, dropped = words(select), words(exclude)

    def matches(spec: BenchSpec, wanted: set[str]) -> bool:
        return spec.name in wanted or spec.group in wanted or bool(wanted & set(spec.tags))

    return [
        s for s in specs
        if (not chosen or matches(s, chosen)) and not matches(s, dropped)
    ]

