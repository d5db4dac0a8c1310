"""docs/profiling.md: its examples are the files, and they parse to what the page says."""

from __future__ import annotations

import re
from typing import Any

import yaml
from _paths import REPO_ROOT

from pytest_dlbench.profile import ProfileConfig

ROOT = REPO_ROOT
PAGE = (ROOT / "docs" / "profiling.md").read_text()
EXAMPLES = ROOT / "docs" / "examples" / "profiling"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE, flags=re.S)


def test_yaml_and_python_on_the_page_are_the_example_files() -> None:
    suite = (EXAMPLES / "profile-suite.yaml").read_text()
    (yaml_block,) = blocks("yaml")
    assert yaml_block in suite
    script = (EXAMPLES / "standalone_timer.py").read_text()
    assert any(block in script for block in blocks("python"))


def _merged(entry: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in defaults.items()}
    for name, value in (entry or {}).items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = {**out[name], **value}
        else:
            out[name] = value
    return out


def test_the_suite_example_profiles_one_benchmark() -> None:
    suite = yaml.safe_load((EXAMPLES / "profile-suite.yaml").read_text())
    defaults = suite["_defaults"]["profile"]
    resnet18 = ProfileConfig.from_mapping(_merged(suite["resnet18"]["profile"], defaults))
    assert resnet18.enabled_reports == ("speed", "time", "memory", "system", "summary", "trace")
    assert (resnet18["memory"].warmup, resnet18["memory"].steps, resnet18["memory"].top) == (
        2, 5, 10)
    assert resnet18["time"].verbose and resnet18["time"].steps == 10
    assert resnet18["trace"].trace_rank0_only
    resnet50 = ProfileConfig.from_mapping(_merged(suite["resnet50"].get("profile"), defaults))
    assert not resnet50  # keys only: nothing on until --bench-profile
    cli = ProfileConfig.merge(ProfileConfig.parse_cli("memory"), resnet50)
    assert cli.enabled_reports == ("memory",) and cli["memory"].top == 10


def test_the_error_lines_on_the_page_are_the_real_ones() -> None:
    for text, fn in [
        ("sped", lambda: ProfileConfig.parse_cli("sped")),
        ("steps", lambda: ProfileConfig.from_mapping({"memory": {"steps": 0}})),
        ("step", lambda: ProfileConfig.from_mapping({"memory": {"step": 4}})),
    ]:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001
            assert str(exc) in PAGE, (text, str(exc))
        else:
            raise AssertionError(text)
