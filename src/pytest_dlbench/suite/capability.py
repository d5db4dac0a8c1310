"""milabench's ``requires_capabilities`` and ``num_machines``, checked against this run.

milabench ``eval``s each condition of ``requires_capabilities`` with its system configuration as
the globals, and skips the benchmark when one is false. Here a condition is read by a small
grammar and evaluated over a few facts; nothing is ever ``eval``-ed::

    condition  := and ('or' and)*
    and        := not ('and' not)*
    not        := 'not' not | comparison
    comparison := value (('<' | '<=' | '>' | '>=' | '==' | '!=' | 'in' | 'not' 'in') value)*
    value      := NUMBER | 'STRING' | "STRING" | True | False | None
                | 'len' '(' condition ')' | NAME ('[' value ']')* | '(' condition ')'

The names (milabench's, with this project's meaning):

- ``gpu['count']``: the device slots of this run (GPUs; without one, groups of CPU cores);
- ``nodes``: the system file's nodes (one local node without ``--bench-system``);
- ``arch``: the system file's ``arch``, else ``cuda`` or ``cpu``;
- every other top-level key of the system file's ``system:`` mapping.

``${..KEY}`` and ``${KEY}`` (milabench's OmegaConf interpolation, as in
``len(nodes) >= ${..num_machines}``) are the benchmark's own ``KEY``.
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_dlbench.core.errors import quoted
from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.suite.spec import BenchSpec
from pytest_dlbench.suite.system import SystemConfig

__all__ = ["RunFacts", "CapabilityError", "evaluate", "skip_reason"]


class CapabilityError(ValueError):
    """A condition this grammar cannot read or evaluate."""


@dataclass(frozen=True)
class RunFacts:
    """What a condition may look at: the run's device slots and the system's nodes."""

    slots: int
    nodes: tuple[dict[str, Any], ...] = ({"name": "local", "ip": "127.0.0.1", "main": True},)
    arch: str = "cpu"
    system: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, system: SystemConfig, *, slots: int, gpus: bool) -> RunFacts:
        nodes = tuple(
            {"name": n.name, "ip": n.ip, "port": n.port, "user": n.user, "main": n.main}
            for n in system.nodes
        )
        arch = system.arch or ("cuda" if gpus else "cpu")
        return cls(slots=slots, nodes=nodes, arch=arch, system=system.placeholders())

    def names(self) -> dict[str, Any]:
        gpu = self.system.get("gpu")
        gpu = dict(gpu) if isinstance(gpu, Mapping) else {}
        return {**self.system, "gpu": {**gpu, "count": self.slots}, "nodes": list(self.nodes),
                "arch": self.arch}


# -- reading a condition ----------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<string>'[^'\\]*'|\"[^\"\\]*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><=|>=|==|!=|[<>()\[\]]))"
)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}
_CONSTANTS = {"True": True, "False": False, "None": None}
_KEYWORDS = {"and", "or", "not", "in", "len", *_CONSTANTS}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise CapabilityError(f"cannot read {text[pos:].strip()!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


#: Bounds on a condition, text someone else wrote: nested deeper, the parser and the evaluator
#: (both recursive) would hit Python's recursion limit; a longer number, int()'s digit limit.
MAX_DEPTH = 50
MAX_DIGITS = 18


class _Parser:
    """Recursive descent over the tokens, building nested tuples (never Python code)."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0

    @contextlib.contextmanager
    def nested(self, levels: int = 1) -> Iterator[None]:
        self.depth += levels
        if self.depth > MAX_DEPTH:
            raise CapabilityError(f"nested more than {MAX_DEPTH} deep")
        try:
            yield
        finally:
            self.depth -= levels

    def peek(self, value: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        kind, text = self.tokens[self.pos]
        return value is None or (text == value and kind in ("name", "op"))

    def take(self, value: str | None = None) -> tuple[str, str]:
        if not self.peek(value):
            found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
            raise CapabilityError(f"expected {value or 'a value'}, found {quoted(found)}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def parse(self) -> tuple:
        tree = self.condition()
        if self.pos != len(self.tokens):
            raise CapabilityError(f"unexpected {quoted(self.tokens[self.pos][1])}")
        return tree

    # 'or' and 'and' hold all their operands in one node, not a chain a node deep each: a
    # condition of 3,000 terms stays a flat tree the evaluator walks without recursing.
    def condition(self) -> tuple:
        terms = [self.conjunction()]
        while self.peek("or"):
            self.take()
            terms.append(self.conjunction())
        return ("or", tuple(terms)) if len(terms) > 1 else terms[0]

    def conjunction(self) -> tuple:
        terms = [self.negation()]
        while self.peek("and"):
            self.take()
            terms.append(self.negation())
        return ("and", tuple(terms)) if len(terms) > 1 else terms[0]

    def negation(self) -> tuple:
        if self.peek("not"):
            self.take()
            with self.nested():
                return ("not", self.negation())
        return self.comparison()

    def comparison(self) -> tuple:
        left = self.value()
        pairs = []
        while True:
            if self.peek("not") and self.pos + 1 < len(self.tokens) and \
                    self.tokens[self.pos + 1][1] == "in":
                self.pos += 2
                pairs.append(("not in", self.value()))
            elif any(self.peek(op) for op in _COMPARE):
                pairs.append((self.take()[1], self.value()))
            else:
                break
        return ("compare", left, tuple(pairs)) if pairs else left

    def value(self) -> tuple:
        kind, text = self.take()
        if kind == "number":
            if len(text.replace(".", "")) > MAX_DIGITS:
                raise CapabilityError(f"a number of more than {MAX_DIGITS} digits")
            return ("const", float(text) if "." in text else int(text))
        if kind == "string":
            return ("const", text[1:-1])
        if kind == "op" and text == "(":
            with self.nested():
                tree = self.condition()
            self.take(")")
            return tree
        if kind == "name" and text in _CONSTANTS:
            return ("const", _CONSTANTS[text])
        if kind == "name" and text == "len":
            self.take("(")
            with self.nested():
                tree = self.condition()
            self.take(")")
            return ("len", tree)
        if kind == "name" and text not in _KEYWORDS:
            tree = ("name", text)
            items = 0
            while self.peek("["):
                self.take()
                items += 1  # each one a level of the tree the evaluator recurses into
                with self.nested(items):
                    tree = ("item", tree, self.condition())
                self.take("]")
            return tree
        raise CapabilityError(f"unexpected {quoted(text)}")


def _show(tree: tuple) -> str:
    """A node as the condition writes it (for messages)."""
    kind = tree[0]
    if kind == "const":
        return repr(tree[1])
    if kind == "name":
        return tree[1]
    if kind == "item":
        return f"{_show(tree[1])}[{_show(tree[2])}]"
    if kind == "len":
        return f"len({_show(tree[1])})"
    return "(...)"


def _eval(tree: tuple, names: Mapping[str, Any]) -> Any:
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "name":
        if tree[1] not in names:
            raise CapabilityError(f"'{tree[1]}' is not known here (known: {', '.join(names)})")
        return names[tree[1]]
    if kind == "item":
        container, key = _eval(tree[1], names), _eval(tree[2], names)
        try:
            return container[key]
        except (KeyError, IndexError, TypeError):
            raise CapabilityError(f"{_show(tree)} is not known here") from None
    if kind == "len":
        value = _eval(tree[1], names)
        if not hasattr(value, "__len__"):
            raise CapabilityError(f"{_show(tree)}: {_show(tree[1])} has no length")
        return len(value)
    if kind == "not":
        return not _eval(tree[1], names)
    if kind == "and":
        return all(_eval(term, names) for term in tree[1])
    if kind == "or":
        return any(_eval(term, names) for term in tree[1])
    left = _eval(tree[1], names)
    for op, right_tree in tree[2]:
        right = _eval(right_tree, names)
        try:
            if not _COMPARE[op](left, right):
                return False
        except TypeError:
            raise CapabilityError(
                f"cannot compare {type(left).__name__} with {type(right).__name__} ({op})"
            ) from None
        left = right
    return True


def evaluate(condition: str, facts: RunFacts) -> bool:
    """Whether one condition holds for ``facts`` (:class:`CapabilityError` if unreadable)."""
    return bool(_eval(_Parser(condition).parse(), facts.names()))


# -- the reason a benchmark is skipped ----------------------------------------------------------
_INTERPOLATION = re.compile(r"\$\{(?:\.\.)?([A-Za-z_][A-Za-z0-9_]*)\}")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _needs(tree: tuple, facts: RunFacts) -> tuple[str, str] | None:
    """("needs 2 GPUs", "this run has 1 device slot") for ``gpu['count'] > 1``, and the same
    for nodes with ``len(nodes) >= 2``; None for other conditions."""
    if tree[0] != "compare" or len(tree[2]) != 1:
        return None
    left, ((op, right),) = tree[1], tree[2]
    flipped = {"<": ">", "<=": ">=", "==": "=="}
    if left[0] == "const" and op in flipped:
        left, right, op = right, left, flipped[op]
    if right[0] != "const" or not is_integer(right[1]):
        return None
    bound = right[1] + 1 if op == ">" else right[1] if op in (">=", "==") else None
    if bound is None:
        return None
    fact = _show(left)
    if fact == "gpu['count']":
        have = _plural(facts.slots, "device slot")
        return f"needs {_plural(bound, 'GPU')}", f"this run has {have}"
    if fact == "len(nodes)":
        have = _plural(len(facts.nodes), "node")
        return f"needs {_plural(bound, 'node')}", f"the system has {have}"
    return None


def _conditions(spec: BenchSpec) -> list[str]:
    value = spec.config.get("requires_capabilities")
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _interpolate(condition: str, spec: BenchSpec) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in spec.config:
            raise CapabilityError(f"${{{key}}}: the benchmark has no '{key}'")
        return repr(spec.config[key]) if isinstance(spec.config[key], str) else \
            str(spec.config[key])

    return _INTERPOLATION.sub(value, condition)


#: The most of a condition a skip reason quotes: a hostile one can be 200,000 characters.
SHOWN_CHARS = 60


def _shown(condition: str) -> str:
    """``condition``, or its first :data:`SHOWN_CHARS` characters and an ellipsis."""
    return condition if len(condition) <= SHOWN_CHARS else condition[:SHOWN_CHARS] + "…"


def skip_reason(spec: BenchSpec, facts: RunFacts) -> str | None:
    """Why ``spec`` cannot run with ``facts`` (one line), or None when it can."""
    for written in _conditions(spec):
        try:
            condition = _interpolate(written, spec)
            tree = _Parser(condition).parse()
            if bool(_eval(tree, facts.names())):
                continue
        except CapabilityError as exc:
            return f"requires_capabilities {_shown(written)!r} cannot be checked here: {exc}"
        needs = _needs(tree, facts)
        if needs is not None:
            return f"{needs[0]} (requires_capabilities: {condition}), {needs[1]}"
        return (
            f"requires_capabilities not met: {condition} (this run has "
            f"{_plural(facts.slots, 'device slot')}, {_plural(len(facts.nodes), 'node')}, "
            f"arch {facts.arch})"
        )
    machines = spec.config.get("num_machines")
    if is_integer(machines) and machines > len(facts.nodes):
        return (
            f"needs {_plural(machines, 'machine')} (num_machines: {machines}), the system has "
            f"{_plural(len(facts.nodes), 'node')} (describe them with --bench-system)"
        )
    return None
