"""Reading suite files: safe YAML, ``!delete``, duplicate keys, and include order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.suite.merge import DELETE

__all__ = ["Located", "Layer", "load_yaml", "iter_layers"]

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Bounds on one YAML document, checked on its events before anything is built: a suite is a few
#: thousand values nested a few levels deep. The node count is after alias expansion, so an
#: alias bomb ("billion laughs") is refused in milliseconds instead of filling the memory, and
#: the depth keeps PyYAML's composer (recursive C code) and the merge rules off deep recursion.
MAX_NODES = 100_000
MAX_DEPTH = 64
#: The largest suite or system file read (a suite is a few KiB).
MAX_BYTES = 16 << 20


def _check_events(loader: Any, file: str | None) -> None:
    """Refuse a document that is too deep, refers to itself or expands past :data:`MAX_NODES`.

    Walks the parser's events (the composer would build the node graph first: deep nesting
    crashes it, and a self-reference makes a cyclic value the merges would recurse into).
    """
    open_sizes: list[int] = []  # values counted so far in each open collection
    open_anchors: list[str | None] = []
    anchors: dict[str, int] = {}  # expanded size of each finished anchored value
    written = [0]  # values as written in the file, aliases counted as one

    def error(message: str, event: Any) -> SuiteError:
        mark = event.start_mark
        return SuiteError(message, file=file or (mark.name if mark else None),
                          line=mark.line + 1 if mark else None,
                          column=mark.column + 1 if mark else None)

    def add(size: int, event: Any) -> None:
        if open_sizes:
            open_sizes[-1] += size
        if size > MAX_NODES or (open_sizes and open_sizes[-1] > MAX_NODES):
            if written[0] > MAX_NODES:  # as written, without aliases: a file that is too big
                raise error(f"the document has more than {MAX_NODES} values (a suite has a "
                            "few thousand)", event)
            raise error(f"the document expands to more than {MAX_NODES} values through its "
                        "aliases (an alias bomb?)", event)

    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, yaml.NodeEvent):
            written[0] += 1
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_sizes) >= MAX_DEPTH:
                raise error(f"nested deeper than {MAX_DEPTH} levels", event)
            open_sizes.append(1)
            open_anchors.append(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            size, anchor = open_sizes.pop(), open_anchors.pop()
            if anchor is not None:
                anchors[anchor] = size
            add(size, event)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                anchors[event.anchor] = 1
            add(1, event)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise error(f"the alias *{event.anchor} refers to a value that contains it "
                            "(a self-referencing alias)", event)
            add(anchors.get(event.anchor, 1), event)  # an unknown anchor: the composer says so


class Located(str):
    """A string that remembers the file it was written in (for relative ``definition`` paths).

    It survives merging because merges replace scalars whole.
    """

    origin: Path

    def __new__(cls, value: str, origin: Path) -> Located:
        obj = super().__new__(cls, value)
        obj.origin = origin
        return obj

    def __reduce__(self) -> tuple:
        return (Located, (str(self), self.origin))


class _SuiteLoader(_BaseLoader):
    """Safe YAML plus ``!delete``, refusing duplicate keys (PyYAML keeps the last silently),
    alias bombs, self-referencing aliases and deep nesting (:func:`_check_events`)."""

    # The file named in errors: marks of a parser fed with text carry "<unicode string>".
    suite_file: str | None = None

    def __init__(self, text: str) -> None:
        self._text = text
        super().__init__(text)

    def get_single_data(self) -> Any:
        # The events once, on a parser of their own, then the document built as usual.
        checker = _BaseLoader(self._text)
        try:
            _check_events(checker, self.suite_file)
        finally:
            checker.dispose()
        return super().get_single_data()

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            mark = key_node.start_mark
            where: dict[str, Any] = dict(
                file=self.suite_file or mark.name, line=mark.line + 1, column=mark.column + 1
            )
            try:
                hash(key)
            except TypeError:
                raise SuiteError("a mapping key must be a plain value", **where) from None
            if key in seen and key != "<<":
                raise SuiteError(
                    f"duplicate key '{key}' (first at line {seen[key].start_mark.line + 1})",
                    **where,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _construct_delete(loader: yaml.Loader, node: yaml.Node) -> Any:
    return DELETE


_SuiteLoader.add_constructor("!delete", _construct_delete)


def load_yaml(path: Path) -> Any:
    """Parse one file with safe semantics; errors become one line with file:line:column."""
    try:  # a regular file of bounded size: a FIFO never hangs, a huge file is not read
        text = untrusted.read_bytes(path, limit=MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise SuiteError("not a UTF-8 text file", file=path) from None
    except FileNotFoundError:
        raise SuiteError("file not found", file=path) from None
    except untrusted.FileRefused as exc:
        raise SuiteError(f"cannot read: {exc}", file=path) from None
    except OSError as exc:
        raise SuiteError(f"cannot read: {exc.strerror}", file=path) from None
    loader = _SuiteLoader(text)
    loader.suite_file = str(path)
    try:
        return loader.get_single_data()
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        problem = exc.problem or "cannot construct value"
        if "python/" in problem or "constructor for the tag" in problem:
            tag = problem.split("tag", 1)[-1].strip(" '") if "tag" in problem else ""
            problem = f"only plain YAML is allowed, not the tag {tag}".rstrip()
        raise SuiteError(
            problem,
            file=path,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise SuiteError(
            f"YAML syntax error: {problem}",
            file=path,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"YAML error: {exc}", file=path) from None
    finally:
        loader.dispose()


class Layer:
    """One file's content after validation, with its path."""

    def __init__(self, path: Path, entries: dict[str, Any]) -> None:
        self.path = path
        self.entries = entries


def _locate(value: Any, path: Path) -> Any:
    if isinstance(value, str) and not isinstance(value, Located):
        return Located(value, path)
    if isinstance(value, list):
        return [_locate(v, path) for v in value]
    return value


def _locate_definitions(entries: dict[str, Any], path: Path) -> None:
    for value in entries.values():
        if not isinstance(value, dict):
            continue
        for holder in (value, value.get("job")):
            if not isinstance(holder, dict):
                continue
            definition = holder.get("definition")
            if isinstance(definition, str):
                holder["definition"] = Located(definition, path)
            elif isinstance(definition, dict):
                # An external command (docs/time-to-train.md): its strings remember their file,
                # for `{suite_dir}` and a relative `prepare`.
                for key in ("command", "prepare", "cwd"):
                    if key in definition:
                        definition[key] = _locate(definition[key], path)


def _read_layer(path: Path) -> tuple[list[Path], Layer]:
    data = load_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SuiteError("a suite file must be a YAML mapping of benchmark entries", file=path)
    includes = data.pop("include", None)
    if includes is None:
        include_paths: list[Path] = []
    elif isinstance(includes, str):
        include_paths = [path.parent / includes]
    elif isinstance(includes, list) and all(isinstance(i, str) for i in includes):
        include_paths = [path.parent / i for i in includes]
    else:
        raise SuiteError("'include' must be a path or a list of paths", file=path)
    for key, value in data.items():
        if not isinstance(key, str):
            raise SuiteError(f"top-level key {quoted(key)} must be a string", file=path)
        if not isinstance(value, dict) and value is not DELETE:
            kind = "null" if value is None else type(value).__name__
            raise SuiteError(f"top-level value must be a mapping, got {kind}", file=path, bench=key)
    _locate_definitions(data, path)
    return include_paths, Layer(path, data)


def iter_layers(path: Path, _stack: tuple[Path, ...] = ()) -> Iterator[Layer]:
    """Layers in merge order: each file's includes depth-first, in order, then the file itself."""
    path = Path(path).resolve()
    if path in _stack:
        cycle = " -> ".join(p.name for p in (*_stack[_stack.index(path) :], path))
        raise SuiteError(f"include cycle: {cycle}", file=_stack[-1])
    if not path.is_file():
        if _stack:
            raise SuiteError(f"included file not found: {path}", file=_stack[-1])
        raise SuiteError("suite file not found", file=path)
    include_paths, layer = _read_layer(path)
    for include in include_paths:
        yield from iter_layers(include, (*_stack, path))
    yield layer
