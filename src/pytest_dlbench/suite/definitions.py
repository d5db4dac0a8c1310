"""A suite entry's ``definition``, resolved: a Python callable, an external command, or a
milabench benchmark folder run through voir (docs/suites.md, docs/time-to-train.md).

- ``module:function`` stays as written; ``file.py:function`` and folders are made absolute
  against the file the ``definition`` was written in;
- ``{command: [...], parser: ...}`` is an external command: :data:`EXTERNAL_RUNNER`;
- a folder holding ``main.py`` and ``voirfile.py`` (milabench's ``../benchmarks/torchvision``),
  or ``{voir: FOLDER, script: main.py}``, runs through voir: :data:`VOIR_RUNNER`.

Pure Python: what runs them is run/external.py and run/voir.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import SuiteError, quoted
from pytest_dlbench.suite.loader import Located
from pytest_dlbench.suite.logparsers import VOIR, LogParseError, make_parser

__all__ = [
    "EXTERNAL_KEYS",
    "EXTERNAL_RUNNER",
    "RENAMED_WORKLOADS",
    "VOIR_FILES",
    "VOIR_KEYS",
    "VOIR_RUNNER",
    "plain_value",
    "renamed_workload",
    "resolve_definition",
    "voir_folder",
]


def plain_value(value: Any) -> Any:
    """``value`` as plain JSON-able data: YAML's located strings as plain strings."""
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_value(v) for v in value]
    if isinstance(value, Located):
        return str(value)
    return value


#: The built-in function that runs an external command (``definition: {command: [...]}``).
EXTERNAL_RUNNER = "pytest_dlbench.run.external:main"
EXTERNAL_KEYS = ("command", "parser", "cwd", "prepare")
#: The built-in function that runs a milabench benchmark folder through voir (a folder with
#: ``main.py`` and ``voirfile.py``, or ``definition: {voir: FOLDER, script: main.py}``).
VOIR_RUNNER = "pytest_dlbench.run.voir:main"
VOIR_KEYS = ("voir", "script")
#: What makes a folder a milabench benchmark that runs through voir.
VOIR_FILES = ("main.py", "voirfile.py")


#: Built-in workload modules renamed since users' suites were written (``flops`` also named what
#: measure/flops.py counts, ``loader`` what suite/loader.py does): a definition naming the old
#: module resolves to the new one, the same benchmark under one name. The only home of the old
#: names: no module is kept under them.
RENAMED_WORKLOADS = {
    "pytest_dlbench.workloads.flops": "pytest_dlbench.workloads.matmul",
    "pytest_dlbench.workloads.loader": "pytest_dlbench.workloads.dataloader",
}


def renamed_workload(definition: str) -> str:
    """``definition`` with a renamed workload's old module replaced by its new one (the function,
    if named, stays); any other definition as it is."""
    target, colon, function = definition.rpartition(":") if ":" in definition else (
        definition, "", "")
    new = RENAMED_WORKLOADS.get(target)
    return definition if new is None else f"{new}{colon}{function}"


def voir_folder(definition: str | None) -> Path | None:
    """The folder a resolved ``definition`` names when it holds ``main.py`` and
    ``voirfile.py`` (a milabench benchmark that runs through voir), else None."""
    if definition is None or ":" in definition:
        return None
    path = Path(definition)
    if path.is_absolute() and path.is_dir() and all((path / f).is_file() for f in VOIR_FILES):
        return path
    return None


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
        return renamed_workload(value)
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
            raise fail(f"'command' items must be strings or numbers, got {quoted(part)}")
        text = str(part)
        if "{suite_dir}" in text:
            text = text.replace("{suite_dir}", _suite_dir(part, origin))
        words.append(text)
    if "parser" not in value:
        raise fail("an external command needs a 'parser' (a ready one, e.g. 'open_clip', or "
                   "a mapping with a 'regex'): it is how its steps are read")
    parser = value["parser"]
    try:
        if parser != VOIR:  # voir's data channel: no regex to check
            make_parser(parser)
    except LogParseError as exc:
        raise fail(str(exc)) from None
    result: dict[str, Any] = {"command": words, "parser": plain_value(parser)}
    cwd = value.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise fail("'cwd' must be a path")
        result["cwd"] = cwd.replace("{suite_dir}", _suite_dir(cwd, origin))
    prepare = value.get("prepare")
    if prepare is not None:
        result["prepare"] = _resolve_definition(prepare, origin=origin, name=name)
    return result


def _voir(value: Any, *, origin: str, name: str, script: Any = "main.py") -> dict[str, Any]:
    """A voir definition (``{voir: FOLDER, script: main.py}``, or a folder ``definition``) as
    plain values: the folder made absolute against the file it was written in, which must
    hold the script; ``command`` is ``voir SCRIPT`` (the runner adds ``--config``)."""
    def fail(message: str) -> SuiteError:
        return SuiteError(f"definition: {message}", file=origin, bench=name)

    if not isinstance(value, str) or not value.strip():
        raise fail("'voir' must be a folder (a path, relative to this file)")
    if not isinstance(script, str) or not script.strip() or "/" in script:
        raise fail(f"'script' must be a file name in the folder, got {quoted(script)}")
    base = value.origin.parent if isinstance(value, Located) else Path(origin).parent
    folder = (base / value).resolve()
    if not folder.is_dir():
        raise fail(f"the voir folder {folder} is not there")
    if not (folder / script).is_file():
        raise fail(f"the voir folder {folder} has no {script}")
    return {"voir": str(folder), "script": str(script), "parser": VOIR, "cwd": str(folder),
            "command": ["voir", str(script)]}


def resolve_definition(
    value: Any, *, origin: str, name: str
) -> tuple[str | None, dict[str, Any] | None]:
    """``(definition, command)`` of an entry: the callable to run and, for the built-in
    runners, what they run (``BenchSpec.command``)."""
    if isinstance(value, dict) and "voir" in value:
        unknown = sorted(set(value) - set(VOIR_KEYS))
        if unknown:
            raise SuiteError(f"definition: unknown keys {unknown} (a voir definition has "
                             f"{', '.join(VOIR_KEYS)})", file=origin, bench=name)
        return VOIR_RUNNER, _voir(value["voir"], origin=origin, name=name,
                                  script=value.get("script", "main.py"))
    if isinstance(value, dict):
        return EXTERNAL_RUNNER, _external(value, origin=origin, name=name)
    definition = _resolve_definition(value, origin=origin, name=name)
    folder = voir_folder(definition)
    if folder is not None:  # milabench's own entries: a benchmark folder
        return VOIR_RUNNER, _voir(str(folder), origin=origin, name=name)
    return definition, None
