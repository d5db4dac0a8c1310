"""docs/running.md (compile and precision) and docs/machine.md: the examples are the files and
the outputs are what the code prints."""

from __future__ import annotations

import json
import re

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.measure.machine import machine_state
from pytest_dlbench.results.figures import readiness_error, readiness_warning, render_state
from pytest_dlbench.suite import resolve_suite
from pytest_dlbench.suite.presets import COMPILE_MODES, PRECISIONS, eager_key, run_dimensions

DOCS = REPO_ROOT / "docs"
RUNNING = (DOCS / "running.md").read_text()
MACHINE = (DOCS / "machine.md").read_text()
SUITE = DOCS / "examples" / "compile" / "compile-suite.yaml"
GPU_NODE = DOCS / "examples" / "machine" / "gpu-node.json"


def _section(page: str, title: str) -> str:
    return page.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_yaml_on_the_page_is_the_example() -> None:
    section = _section(RUNNING, "Compile and precision")
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    assert block in SUITE.read_text()
    assert "examples/compile/compile-suite.yaml" in section


def test_the_page_lists_every_preset_and_mode() -> None:
    section = _section(RUNNING, "Compile and precision")
    for name in PRECISIONS:
        assert f"`--precision {name}`" in section
    for mode in COMPILE_MODES:
        assert f"`{mode}`" in section


def test_the_example_makes_eager_and_compiled_siblings() -> None:
    suite = resolve_suite(SUITE)
    assert [s.name for s in suite.specs] == ["mlp-none", "mlp-default", "mlp-bf16"]
    eager, compiled, bf16 = suite.specs
    assert run_dimensions(eager.definition, eager.args) == {"precision": "fp32", "compile": None}
    assert run_dimensions(compiled.definition, compiled.args)["compile"] == {
        "mode": "default", "backend": "inductor"}
    assert eager_key(eager.to_dict()) == eager_key(compiled.to_dict())
    assert eager_key(bf16.to_dict()) != eager_key(eager.to_dict())  # another precision


def _blocks(page: str, command: str) -> list[str]:
    return re.findall(rf"```\n\$ {re.escape(command)}\n(.*?)```", page, flags=re.S)


def test_the_gpu_node_output_is_what_dlbench_machine_prints() -> None:
    state = json.loads(GPU_NODE.read_text())
    assert render_state(state) + "\n" in _blocks(MACHINE, "dlbench machine")


def test_this_machines_output_has_the_shape_of_the_page() -> None:
    first = _blocks(MACHINE, "dlbench machine")[0]
    keys = [line.split("  ")[0] for line in first.splitlines() if line and "  " in line]
    here = render_state(machine_state())
    assert [line.split("  ")[0] for line in here.splitlines()[:6]] == keys[:6]


def test_the_start_of_run_lines_are_the_code_s() -> None:
    problems = ["load 4.3 on 2 cores"]
    assert f"\n{readiness_warning(problems)}\n" in MACHINE
    assert f"\nERROR: {readiness_error(problems)}\n" in MACHINE


@pytest.mark.slow
def test_the_example_suite_runs(pytester: pytest.Pytester) -> None:
    (pytester.path / "compile-suite.yaml").write_text(SUITE.read_text())
    result = pytester.runpytest_subprocess("--bench-suite=compile-suite.yaml",
                                           "--bench-base=out", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 3, result.stdout.str()
    assert outcomes.get("failed", 0) == 0
    # The second table (what only some benchmarks have) holds precision and compile.
    header = next(line for line in result.stdout.lines
                  if line.startswith("bench ") and "precision" in line)
    assert {"precision", "compile", "graphs", "breaks", "speedup"} <= set(header.split())
    row = [line for line in result.stdout.lines if line.startswith("mlp-default ")][1]
    # The speed-up over mlp-none; "?" marks it in doubt when either side was unreliable
    # (a loaded machine), which is the product's rule, not a failure of the example.
    assert re.search(r" \d+\.\d\dx\??( |$)", row), row
