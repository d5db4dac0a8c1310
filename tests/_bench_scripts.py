"""The scripts of benchmarks/ imported as modules, for the tests of their pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (registered in sys.modules: dataclasses
    look their module up). benchmarks/ is put on sys.path, as running a script there does: a
    script imports its sibling scripts by name (gate_power imports gate_workloads)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
