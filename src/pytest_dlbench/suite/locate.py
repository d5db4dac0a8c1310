"""Finding a suite by name: the working tree's ``bench_suites/`` first, then the package's."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from pytest_dlbench.core.errors import SuiteError

__all__ = ["find_suite", "suite_dirs", "available_suites"]

SUITE_DIR = "bench_suites"


def suite_dirs(root: Path | None = None) -> list[Path]:
    """Where named suites are looked up, in order."""
    dirs = []
    if root is not None:
        dirs.append(Path(root) / SUITE_DIR)
    dirs.append(Path.cwd() / SUITE_DIR)
    # Suites shipped inside the installed package (the wheel maps bench_suites/ there); in an
    # editable install the source tree's bench_suites/ is two levels above the package.
    package = Path(__file__).resolve().parent.parent
    dirs.append(package / SUITE_DIR)
    dirs.append(package.parent.parent / SUITE_DIR)
    unique: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in unique:
            unique.append(d.resolve())
    return unique


def available_suites(dirs: Sequence[Path]) -> list[str]:
    return sorted({p.stem for d in dirs for p in d.glob("*.yaml")})


def find_suite(name_or_path: str, root: Path | None = None) -> Path:
    """A path (anything with a separator or a .yaml/.yml suffix) or a suite name."""
    candidate = Path(name_or_path)
    looks_like_path = candidate.suffix in (".yaml", ".yml") or len(candidate.parts) > 1
    if looks_like_path:
        for base in ([Path(root)] if root else []) + [Path.cwd()]:
            path = candidate if candidate.is_absolute() else base / candidate
            if path.is_file():
                return path.resolve()
        raise SuiteError("suite file not found", file=name_or_path)
    dirs = suite_dirs(root)
    for d in dirs:
        for suffix in (".yaml", ".yml"):
            path = d / f"{name_or_path}{suffix}"
            if path.is_file():
                return path
    names = available_suites(dirs)
    listing = ", ".join(names) if names else "none found"
    close = difflib.get_close_matches(name_or_path, names, n=1)  # a typo: tni for tiny
    guess = f" (did you mean '{close[0]}'?)" if close else ""
    raise SuiteError(f"unknown suite '{name_or_path}'{guess}; available suites: {listing}")
