"""docs/suites.md and docs/examples/: every example resolves, to what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.cli import main
from pytest_dlbench.suite import SuiteError, fill_all, load_system, resolve_suite

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PAGE = (DOCS / "suites.md").read_text()
SUITE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def test_there_are_examples() -> None:
    names = {p.name for p in SUITE_FILES}
    assert {"suite-basic.yaml", "suite-matrix.yaml", "suite-layers.yaml"} <= names


@pytest.mark.parametrize("path", SUITE_FILES, ids=lambda p: p.name)
def test_every_example_resolves_without_warnings(path: Path) -> None:
    suite = resolve_suite(path)
    assert suite.specs
    assert suite.warnings == []
    assert f"examples/{path.name}" in PAGE  # each example is shown on the page


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", PAGE, flags=re.S)


@pytest.mark.parametrize("index", range(len(_yaml_blocks())))
def test_yaml_on_the_page_is_the_example_files(index: int) -> None:
    block = _yaml_blocks()[index]
    first, _, rest = block.partition("\n")
    if re.fullmatch(r"# [\w/.-]+\.yaml", first):  # "# common/defaults.yaml": the file's name
        assert rest in (EXAMPLES / first[2:]).read_text()
    else:
        texts = [p.read_text() for p in EXAMPLES.rglob("*.yaml")]
        assert any(block in text for text in texts), block


def test_basic() -> None:
    suite = resolve_suite(EXAMPLES / "suite-basic.yaml")
    assert [s.name for s in suite.specs] == ["toy", "toy-wide"]
    wide = suite["toy-wide"]
    assert wide.definition == "pytest_dlbench.workloads.toy:main"
    assert wide.tags == ("sanity", "wide")
    assert wide.args == ("--batch-size", "32", "--hidden", "256")
    assert (wide.weight, suite["toy"].weight) == (1, 0)
    assert (wide.skip, wide.stop, wide.max_duration) == (3, 20, 120)


def test_basic_text_output_is_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "suite-basic.yaml"
    assert main(["resolve", str(path)]) == 0
    out = capsys.readouterr().out.replace(str(EXAMPLES), "/path/to/docs/examples")
    block = PAGE.split("$ dlbench resolve docs/examples/suite-basic.yaml\n", 2)[2]
    assert out == block.split("```", 1)[0]


def test_layers() -> None:
    suite = resolve_suite(EXAMPLES / "suite-layers.yaml")
    toy = suite["toy"]
    assert toy.args == ("--batch-size", "64", "--features", "32", "--hidden", "128")
    assert (toy.skip, toy.stop) == (3, 40)
    assert toy.env == {"OMP_NUM_THREADS": "2"}
    assert toy.tags == ("sanity",)
    assert suite["toy-list"].args == ("--batch-size", "16", "--seed", "1")


def test_star() -> None:
    suite = resolve_suite(EXAMPLES / "suite-star.yaml")
    assert [(s.name, s.max_duration) for s in suite.specs] == [("toy-a", 60), ("toy-b", 60)]
    assert all(s.env == {"DLBENCH_SUITE": "star"} for s in suite.specs)


def test_matrix() -> None:
    suite = resolve_suite(EXAMPLES / "suite-matrix.yaml")
    assert [s.name for s in suite.specs] == [
        "toy-bs16-h64", "toy-bs64-h64", "toy-bs16-h256", "toy-bs64-h256",
    ]  # fmt: skip
    spec = suite["toy-bs64-h256"]
    assert " ".join(spec.args) == "--features 32 --batch-size 64 --hidden 256 --lr 0.05"
    assert spec.argv["--batch-size"] == "64"  # a string, not 64
    assert spec.tags == ("matrix", "sanity")


def test_argv() -> None:
    suite = resolve_suite(EXAMPLES / "suite-argv.yaml")
    assert list(suite["train"].args) == [
        "resume", "--precision", "fp32", "--batch-size", "64", "--synthetic-data",
        "--layers", "1,2,3", "--trace", "out dir",
    ]  # fmt: skip
    assert suite["raw"].args == ("--batch-size", "64", "--fast")
    assert suite["train"].definition == f"{EXAMPLES / 'my_bench.py'}:main"


def test_placeholders() -> None:
    suite = resolve_suite(EXAMPLES / "suite-placeholders.yaml")
    assert suite["loader"].args == ("--batch-size", "16", "--num-workers", "{n_worker}")
    assert fill_all(suite["loader"].args, {"n_worker": 2})[-1] == "2"
    assert suite["toy-cpu-slot"].env == {"OMP_NUM_THREADS": "{cpu_per_gpu}"}


def test_system_example() -> None:
    system = load_system(EXAMPLES / "system" / "two-nodes.yaml")
    assert system.arch == "cuda"
    assert [(n.name, n.port, n.main) for n in system.nodes] == [
        ("manager", 29400, True), ("worker", None, False),
    ]  # fmt: skip
    assert system.main_node.name == "manager"
    assert system.placeholders()["sshkey"] == "~/.ssh/id_ed25519"


@pytest.mark.parametrize("name", ["false-in-argv", "missing-parent", "clash"])
def test_errors_are_the_page(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "errors" / f"{name}.yaml"
    with pytest.raises(SuiteError):
        resolve_suite(path)
    assert main(["resolve", str(path)]) == 2
    err = capsys.readouterr().err.replace(str(EXAMPLES), "/path/to/docs/examples")
    assert f"$ dlbench resolve docs/examples/errors/{name}.yaml\n{err}" in PAGE


def test_warning_is_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "errors" / "typo.yaml"
    suite = resolve_suite(path)
    assert suite["toy"].weight == 0
    assert suite["toy"].config["weigth"] == 2
    assert main(["resolve", str(path)]) == 0
    err = capsys.readouterr().err.replace(str(EXAMPLES), "/path/to/docs/examples")
    assert f"$ dlbench resolve docs/examples/errors/typo.yaml\n{err}" in PAGE


def test_page_lists_every_placeholder_name() -> None:
    for name in (
        "cpu_count", "gpu_count", "cpu_per_gpu", "n_worker", "device_name", "arch", "ccl",
        "data", "milabench_data", "run_name", "bench_name",
    ):  # fmt: skip
        assert f"| `{name}` |" in PAGE


# The port of milabench's resnet50 ("Porting a milabench suite"): milabench's files are
# included unchanged, the port changes the definition and fits the argv to the workload.
PORT = EXAMPLES / "suite-milabench-port.yaml"
PORT_LAUNCH = [
    "--precision", "tf32-fp16", "--lr", "0.01", "--num-workers", "8", "--model", "resnet50",
    "--batch-size", "256", "--channels-last",
]  # fmt: skip


def test_milabench_port() -> None:
    milabench = resolve_suite(EXAMPLES / "milabench" / "all.yaml")
    assert milabench["resnet50"].definition == str(EXAMPLES / "benchmarks" / "torchvision")
    spec = resolve_suite(PORT)["resnet50"]
    assert spec.definition == "pytest_dlbench.workloads.vision:train"
    assert (spec.weight, spec.enabled, spec.stop, spec.max_duration) == (1, True, 60, 600)
    assert spec.tags == ("classification", "convnet", "monogpu", "resnet", "vision")
    assert fill_all(spec.args, {"n_worker": 4, "data": "/d", "milabench_data": "/d"}) == \
        PORT_LAUNCH  # auto(X, D) is D without the system option cpu.enabled


def test_milabench_port_args_fit_the_workload() -> None:
    from pytest_dlbench.workloads.vision import make_parser

    args = make_parser().parse_args(PORT_LAUNCH)
    assert (args.model, args.batch_size, args.num_workers, args.channels_last) == (
        "resnet50", 256, 8, True,
    )  # fmt: skip
    assert args.data is None


def test_milabench_port_output_is_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", str(PORT), "--launch"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    out = captured.out.replace(str(EXAMPLES), "/path/to/docs/examples")
    assert f"$ dlbench resolve docs/examples/suite-milabench-port.yaml --launch\n{out}```" in PAGE
