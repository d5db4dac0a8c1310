"""The docs' example outputs cannot go stale (issue 25, item 15): each is produced by a real run
here, checked by a test of its own, or marked as illustrative (tests/_doc_outputs.py says how);
the defaults and suites the docs name are the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _doc_outputs import PAGES, ROOT, Block, matches, normalize, output_blocks, run_command

from pytest_dlbench.results.judge import ROUNDS

BLOCKS = output_blocks()
RUN = [b for b in BLOCKS if b.marker and b.marker[0] == "output"]
#: Outputs of a command that stops before anything runs (a usage error): fast.
QUICK = re.compile(r"--collect-only|--bench-compare=bad.json|test_a.py|^dlbench resolve")
#: Outputs of a whole suite's run (the smoke suite on two workers, about a minute): `.ci/run`
#: runs that suite itself before the tests; the page's copy of its table is checked with the
#: release tests (`pytest -m release`, docs/architecture.md).
WHOLE_SUITE = re.compile(r"^pytest --bench-suite=\w+ -n 2$")


def _real_run(block: Block) -> object:
    assert block.marker is not None
    if WHOLE_SUITE.search(block.marker[1]):
        return pytest.param(block, marks=pytest.mark.release, id=block.id)
    return pytest.param(block, id=block.id)


def test_every_example_output_says_where_it_comes_from() -> None:
    unmarked = [b.id for b in BLOCKS if b.marker is None]
    assert not unmarked, ("example outputs without <!-- output: ... -->, <!-- checked: ... --> "
                          f"or <!-- illustrative: ... --> (tests/_doc_outputs.py): {unmarked}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker and b.marker[0] == "checked"],
                         ids=lambda b: b.id)
def test_a_checked_output_names_the_test_that_checks_it(block: Block) -> None:
    assert block.marker is not None
    test = ROOT / block.marker[1]
    assert test.is_file(), f"{block.id}: no {block.marker[1]}"
    assert block.page.name in test.read_text(), f"{test.name} does not read {block.page.name}"


def test_there_are_real_outputs() -> None:
    assert len(RUN) >= 3
    # The one that went stale: run for real by the compile suite's test, which reads the page.
    assert any(b.marker == ("checked", "tests/workloads/test_compile.py")
               and b.text.startswith("$ pytest --bench-suite=smoke -k compile\n") for b in BLOCKS)


def _check_output(block: Block, tmp_path: Path) -> None:
    assert block.marker is not None
    command = block.marker[1]
    expected = block.text.split("\n")
    if expected and expected[0].startswith("$ "):
        prompt = expected[0][2:]
        assert command == prompt or command.endswith((f"&& {prompt}", f"; {prompt}")), (
            f"{block.id}: the prompt is not the command run")
        expected = expected[1:]
    actual = run_command(command, tmp_path).rstrip("\n").split("\n")
    assert matches(expected, actual), (
        f"{block.id}: the page's output is not what `{command}` prints now; it printed:\n"
        + "\n".join(actual))


@pytest.mark.parametrize("block", [b for b in RUN if b.marker and QUICK.search(b.marker[1])],
                         ids=lambda b: b.id)
def test_quick_outputs_are_a_real_run(block: Block, tmp_path: Path) -> None:
    _check_output(block, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("block", [_real_run(b) for b in RUN
                                   if b.marker and not QUICK.search(b.marker[1])])
def test_outputs_are_a_real_run(block: Block, tmp_path: Path) -> None:
    _check_output(block, tmp_path)


def test_matching_rules() -> None:
    page = ["...", "bench  perf  units", "toy   1,234  items/s", "...", "score: 1,234"]
    run = ["header", "x", "bench perf units", "toy 99 items/s", "score: 7"]
    assert matches(page, run)
    assert not matches(page, [*run[:3], "toy 99 TFLOP/s", run[4]])  # a word changed
    assert not matches(["a", "b"], ["a"]) and not matches(["a"], ["a", "b"])
    assert normalize("compile 3.2 s cached  at /tmp/x/.dlbench") == (
        "compile # s at /path/to/.dlbench")
    assert normalize("mlp  0.0001  -  fp32") == normalize("mlp  0.0001  0.41  fp32")
    assert normalize("a 999 µs  1.47 ms 2 s 3.4 GiB") == normalize("a 1.30 ms 12 µs 5 ms 812 MiB")
    assert normalize("perf 12 items/s") != normalize("perf 12 ms")
    # A speed-up in doubt (a side unreliable or busy) is marked as the run's noise has it.
    assert normalize("mlp  1  0   0.51x?") == normalize("mlp  1  0    0.80x")


# -- what the pages say of the options and the suites -------------------------------------------

def test_the_rounds_default_is_the_code_s_everywhere() -> None:
    from pytest_dlbench.options import RUN_OPTIONS

    (help_text,) = [kw["help"] for flag, kw in RUN_OPTIONS if flag == "--bench-rounds"]
    assert f"(default {ROUNDS})" in help_text
    said = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"--bench-rounds`?[^.\n]*?\(?default\s+\**(\d+)", text):
            said.append((page.name, int(match[1])))
    assert said, "no page gives --bench-rounds' default"
    assert all(value == ROUNDS for _, value in said), said


def _suites_named(text: str) -> set[str]:
    return set(re.findall(r"--bench-suite=([\w.-]+)(?=\s|`|$)", text))


def test_every_suite_the_pages_run_exists() -> None:
    """A name is a shipped suite or one the same page shows as ``bench_suites/NAME.yaml``."""
    shipped = {p.stem for p in (ROOT / "bench_suites").glob("*.yaml")}
    wrong = []
    for page in PAGES:
        text = page.read_text()
        for name in _suites_named(text):
            stem = name.removesuffix(".yaml")
            if "/" in name or name.endswith(".yaml") or name.isupper():
                continue  # a path, or a placeholder such as SUITE
            if stem not in shipped and f"bench_suites/{stem}.yaml" not in text:
                wrong.append(f"{page.name}: --bench-suite={name}")
    assert not wrong, wrong
