"""milabench's own suite files (tests/data/milabench_config, copied from milabench) load and run.

The expected values were worked out from milabench's code (milabench/sizer.py,
``new_argument_resolver``; milabench/capability.py; milabench/common.py ``is_selected``):

- each argument is formatted with the launch context, then evaluated when it (or what follows
  its first ``=``) begins with ``auto``: ``auto(X, D)`` gives ``D`` unless the system option
  ``cpu.enabled`` is set, then ``X``; ``auto_batch(D)`` gives ``D`` unless ``sizer.auto`` is set,
  then ``max(1, int(D * mult) + add)``;
- ``{milabench_data}`` is milabench's data folder (``dirs.data``);
- ``requires_capabilities`` conditions are evaluated with the system config (``gpu['count']``,
  ``nodes``), a false one skips the benchmark;
- an entry without ``definition`` is never selected.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO_ROOT, TESTS_DIR

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.run.devices import placeholder_context
from pytest_dlbench.suite import fill_all, load_system, local_system, resolve_suite
from pytest_dlbench.suite.auto import fill_auto
from pytest_dlbench.suite.capability import CapabilityError, RunFacts, evaluate, skip_reason
from pytest_dlbench.suite.spec import IGNORED_KEYS, porting_error

MILABENCH = TESTS_DIR / "data" / "milabench_config"
STANDARD = MILABENCH / "standard.yaml"


@pytest.fixture(scope="module")
def standard():
    return resolve_suite(STANDARD)


def _system(tmp_path: Path, body: str) -> Any:
    path = tmp_path / "system.yaml"
    path.write_text(textwrap.dedent(body))
    return load_system(path)


def _launch(spec: Any, system: Any = None, *, cpus: int = 8, gpus: int = 1) -> list[str]:
    context = placeholder_context(
        system=system, bench_name=spec.name, data_dir="/data", cpus=cpus, gpus=gpus
    )
    return fill_all(spec.args, context)


def _value(args: list[str], key: str) -> str:
    if key in args:
        return args[args.index(key) + 1]
    return next(a.split("=", 1)[1] for a in args if a.startswith(f"{key}="))


# --- counts ---------------------------------------------------------------------------------------


def test_standard_counts(standard) -> None:
    assert len(standard.specs) == 54
    assert len(standard.enabled) == 51
    assert sum(1 for s in standard.enabled if s.weight > 0) == 25
    assert {s.name for s in standard.disabled} == {"dinov2-giant-nodes", "llava-gpus",
                                                   "cleanrljax"}


# --- auto(X, D), auto_batch(D), {milabench_data} ------------------------------------------------


def test_defaults_are_milabench_defaults(standard) -> None:
    # No cpu/sizer options: auto(X, D) -> D, auto_batch(D) -> D (milabench's defaults).
    resnet50 = _launch(standard["resnet50"])
    assert standard["resnet50"].args[standard["resnet50"].args.index("--num-workers") + 1] == \
        "auto({n_worker}, 8)"
    assert _value(resnet50, "--num-workers") == "8"
    assert _value(resnet50, "--batch-size") == "256"
    assert _value(resnet50, "--data") == "/data/FakeImageNet"
    assert _value(_launch(standard["convnext_large-fp32"]), "--batch-size") == "128"
    assert _value(_launch(standard["dqn"]), "--num_envs") == "128"  # auto({cpu_per_gpu}, 128)
    pna = _launch(standard["pna"])
    assert (_value(pna, "--num-workers"), _value(pna, "--batch-size")) == ("0", "4096")
    assert _value(pna, "--root") == "/data"
    # After the first '=': dinov2's and the llm benchmarks' key=value arguments.
    dinov2 = _launch(standard["dinov2-giant-gpus"])
    assert _value(dinov2, "train.batch_size_per_gpu") == "32"
    assert _value(dinov2, "train.dataset_path") == (
        "ImageNet:split=TRAIN:root=/data/FakeImageNet:extra=/data/FakeImageNet"
    )
    lora = _launch(standard["llm-lora-single"])
    assert _value(lora, "batch_size") == "8"
    assert _value(lora, "checkpointer.checkpoint_dir") == "/data/llama3_8B"
    assert not any("auto" in a for s in standard.specs for a in _launch(s))


def test_cpu_enabled_uses_the_slot_facts(standard, tmp_path: Path) -> None:
    system = _system(tmp_path, """
        system:
          options:
            cpu: {enabled: true}
    """)
    # 24 cores, 2 GPUs: cpu_per_gpu 12, n_worker 12 (clamped to 2..16).
    assert _value(_launch(standard["resnet50"], system, cpus=24, gpus=2), "--num-workers") == "12"
    assert _value(_launch(standard["dqn"], system, cpus=24, gpus=2), "--num_envs") == "12"
    assert _value(_launch(standard["pna"], system, cpus=64, gpus=1), "--num-workers") == "16"
    # CPU only: one slot of every core (milabench: cpu_count // max(gpu_count, 1)).
    assert _value(_launch(standard["dqn"], system, cpus=6, gpus=0), "--num_envs") == "6"
    assert _value(_launch(standard["resnet50"], system, cpus=24, gpus=2), "--batch-size") == "256"


def test_cpu_options_n_workers_min_max(standard, tmp_path: Path) -> None:
    system = _system(tmp_path, """
        system:
          options:
            cpu: {enabled: true, n_workers: 5}
    """)
    assert _value(_launch(standard["resnet50"], system, cpus=24, gpus=2), "--num-workers") == "5"
    system = _system(tmp_path, """
        system:
          options:
            cpu: {enabled: true, max: 4}
    """)
    assert _value(_launch(standard["resnet50"], system, cpus=24, gpus=2), "--num-workers") == "4"


@pytest.mark.parametrize(
    ("sizer", "expected"),
    [
        ("{auto: 1, mult: 0.5}", "128"),       # int(256 * 0.5)
        ("{auto: 1, add: 8}", "264"),          # 256 + 8
        ("{auto: 1, mult: 2, add: -16}", "496"),
        ("{auto: 1, batch_size: 64}", "64"),
        ("{auto: 0, mult: 0.5}", "256"),       # sizer.auto off: the default
    ],
)
def test_sizer_options(standard, tmp_path: Path, sizer: str, expected: str) -> None:
    system = _system(tmp_path, f"system:\n  options:\n    sizer: {sizer}\n")
    assert _value(_launch(standard["resnet50"], system), "--batch-size") == expected


def test_auto_batch_never_below_one() -> None:
    assert fill_auto("auto_batch(1)", {"sizer": {"auto": 1, "mult": 0.25}}) == "1"
    assert fill_auto("auto_batch(8)", {"sizer": {"auto": 1, "add": -100}}) == "1"


@pytest.mark.parametrize("text", ["auto_batch(" + "9" * 5000 + ")",
                                  "--batch=auto(" + "9" * 5000 + ", 8)"])
def test_a_number_of_thousands_of_digits_is_one_line_not_a_traceback(text: str) -> None:
    """Issue 40 item 9: int() of 5,000 digits raises ValueError (Python's digit limit)."""
    with pytest.raises(SuiteError, match="more than 18 digits") as info:
        fill_auto(text, {"sizer": {"auto": 1, "mult": 2}, "cpu": {"enabled": True}})
    assert "\n" not in str(info.value) and len(str(info.value)) < 200


def test_a_sized_batch_too_large_to_be_one_is_refused() -> None:
    with pytest.raises(SuiteError, match="not a size"):
        fill_auto("auto_batch(8)", {"sizer": {"auto": 1, "mult": 1e300}})


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_an_infinite_or_nan_sizer_value_is_refused_when_the_system_is_read(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(SuiteError, match="must be a finite number") as info:
        _system(tmp_path, f"system:\n  options:\n    sizer: {{auto: 1, mult: {value}}}\n")
    assert "\n" not in str(info.value)


def test_sizing_from_the_gpu_memory_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SuiteError) as info:
        _system(tmp_path, "system:\n  options:\n    sizer: {auto: 1, multiple: 8}\n")
    message = str(info.value)
    assert "\n" not in message
    assert "sizer.auto" in message and "memory model" in message


@pytest.mark.parametrize(
    "text",
    [
        "auto({n_worker}, 8)",        # an unfilled placeholder: left as milabench leaves it
        "auto(8)",                    # wrong number of arguments
        "auto_batch(8, 9)",
        "auto_batch(x)",
        "auto(1, 2) + 1",
        "expr(1 + 1)",
        "autoaugment",
        "--x=auto(__import__('os'), 1)",
        "a=b=auto(1, 2)",
    ],
)
def test_other_forms_are_left_as_written(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("eval called")

    monkeypatch.setattr("builtins.eval", refuse)
    monkeypatch.setattr("builtins.exec", refuse)
    assert fill_auto(text, {"cpu": {"enabled": True}, "sizer": {"auto": 1, "mult": 2}}) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auto(12, 8)", "12"),
        ("auto( 12 ,8 )", "12"),
        ("--n=auto(12, 8)", "--n=12"),
        ("auto_batch(32)", "64"),
        ("train.batch_size_per_gpu=auto_batch(32)", "train.batch_size_per_gpu=64"),
    ],
)
def test_the_two_forms_with_options(text: str, expected: str) -> None:
    assert fill_auto(text, {"cpu": {"enabled": True}, "sizer": {"auto": 1, "mult": 2}}) == \
        expected


# --- requires_capabilities, num_machines -------------------------------------------------------


def _facts(slots: int = 1, nodes: int = 1, arch: str = "cpu") -> RunFacts:
    return RunFacts(
        slots=slots,
        nodes=tuple({"name": f"n{i}", "ip": f"10.0.0.{i}"} for i in range(nodes)),
        arch=arch,
    )


@pytest.mark.parametrize(
    ("condition", "facts", "expected"),
    [
        ("gpu['count'] > 1", _facts(1), False),
        ("gpu['count'] > 1", _facts(2), True),
        ('gpu["count"] >= 2', _facts(2), True),
        ("len(nodes) >= 2", _facts(nodes=1), False),
        ("len(nodes) >= 2", _facts(nodes=3), True),
        ("'cuda' in arch", _facts(arch="cuda"), True),
        ("arch == 'cuda'", _facts(arch="rocm"), False),
        ("\"cuda\" not in arch", _facts(arch="cpu"), True),
        ("gpu['count'] > 1 and len(nodes) >= 2", _facts(2, 2), True),
        ("gpu['count'] > 1 and len(nodes) >= 2", _facts(2, 1), False),
        ("not (gpu['count'] > 1) or 1 < 2 <= 2", _facts(2), True),
    ],
)
def test_conditions(condition: str, facts: RunFacts, expected: bool) -> None:
    assert evaluate(condition, facts) is expected


@pytest.mark.parametrize(
    "condition",
    ["__import__('os').system('echo hi')", "nodes >= 2", "gpu['capacity'] > 0", "gpu.count > 1",
     "len(nodes) >=", "x > 1", "1 +"],
)
def test_what_cannot_be_read_is_an_error(condition: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.eval", lambda *a, **k: pytest.fail("eval called"))
    with pytest.raises(CapabilityError):
        evaluate(condition, _facts())


def test_skip_reasons_on_one_slot_and_one_node(standard) -> None:
    facts = RunFacts.of(local_system(), slots=1, gpus=False)
    assert skip_reason(standard["resnet152-ddp-gpus"], facts) == (
        "needs 2 GPUs (requires_capabilities: gpu['count'] > 1), this run has 1 device slot"
    )
    assert skip_reason(standard["diffusion-nodes"], facts) == (
        "needs 2 nodes (requires_capabilities: len(nodes) >= 2), the system has 1 node"
    )
    assert skip_reason(standard["resnet50"], facts) is None
    assert skip_reason(standard["diffusion-single"], facts) is None  # num_machines: 1
    skipped = {s.name for s in standard.enabled if skip_reason(s, facts)}
    assert skipped == {
        "resnet152-ddp-gpus", "diffusion-nodes", "llm-lora-ddp-nodes", "llm-lora-mp-gpus",
        "llm-full-mp-gpus", "llm-full-mp-nodes",
    }  # fmt: skip


def test_skip_reasons_with_two_slots_and_nodes(standard, tmp_path: Path) -> None:
    system = _system(tmp_path, """
        system:
          nodes:
            - {name: a, ip: 10.0.0.1, main: true}
            - {name: b, ip: 10.0.0.2}
    """)
    facts = RunFacts.of(system, slots=2, gpus=True)
    assert not [s.name for s in standard.enabled if skip_reason(s, facts)]
    four = resolve_suite(MILABENCH / "4nodes.yaml")["diffusion-nodes"]  # num_machines: 4
    assert skip_reason(four, facts) == (
        "needs 4 nodes (requires_capabilities: len(nodes) >= 4), the system has 2 nodes"
    )


def test_num_machines_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a:\n  definition: pytest_dlbench.workloads.toy:main\n  num_machines: 2\n")
    spec = resolve_suite(path)["a"]
    assert skip_reason(spec, RunFacts.of(local_system(), slots=4, gpus=True)) == (
        "needs 2 machines (num_machines: 2), the system has 1 node (describe them with "
        "--bench-system)"
    )


def test_an_unreadable_condition_is_a_skip_with_why(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "a:\n  definition: pytest_dlbench.workloads.toy:main\n"
        "  requires_capabilities: ['nodes >= 2']\n"
    )
    reason = skip_reason(resolve_suite(path)["a"], _facts())
    assert reason == (
        "requires_capabilities 'nodes >= 2' cannot be checked here: cannot compare list with "
        "int (>=)"
    )


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("requires_capabilities: {a: 1}", "'requires_capabilities' must be a list of strings"),
        ("num_machines: two", "'num_machines' must be a positive integer, got 'two'"),
    ],
)
def test_bad_requirement_shapes(tmp_path: Path, entry: str, needle: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"a:\n  definition: pytest_dlbench.workloads.toy:main\n  {entry}\n")
    with pytest.raises(SuiteError, match=needle):
        resolve_suite(path)


# --- keys with no effect, entries without definition, milabench folders -------------------------


def test_one_warning_line_per_ignored_key(standard) -> None:
    lines = [w for w in standard.warnings if "has no effect here" in w]
    keys = [w.split("'")[1] for w in lines]
    assert sorted(keys) == sorted(["install_group", "url", "server", "client",
                                   "voir.options.gpu_poll"])
    assert all("\n" not in w for w in lines)
    assert f"{STANDARD.resolve()}: 'install_group' (in 54 benchmarks) has no effect here: " \
        f"{IGNORED_KEYS['install_group']}" in lines


def test_use_deepspeed_warns_once(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "_t:\n  definition: pytest_dlbench.workloads.toy:main\n  use_deepspeed: true\n"
        "a: {inherits: _t}\nb: {inherits: _t}\n"
    )
    warnings = resolve_suite(path).warnings
    assert [w for w in warnings if "use_deepspeed" in w] == [
        f"{path}: 'use_deepspeed' (in 2 benchmarks) has no effect here: "
        f"{IGNORED_KEYS['use_deepspeed']}"
    ]


NO_DEFINITION = """
a:
  definition: pytest_dlbench.workloads.toy:main
multirun:               # milabench keeps it and never selects it
  runs: [{name: x}]
"""


def test_an_entry_without_definition_is_kept_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(NO_DEFINITION)
    suite = resolve_suite(path)
    assert [(s.name, s.definition) for s in suite.specs] == [
        ("a", "pytest_dlbench.workloads.toy:main"), ("multirun", None),
    ]  # fmt: skip
    assert suite.warnings == [
        f"{path}: multirun: no 'definition', nothing to run: deselected (milabench never "
        "selects such an entry either)"
    ]


def test_an_entry_without_definition_is_deselected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", nodef=NO_DEFINITION)
    result = pytester.runpytest("--bench-suite=nodef.yaml", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert [line for line in result.outlines if "::" in line] == ["nodef.yaml::a[D0]"]
    result.stdout.fnmatch_lines([
        "*SuiteWarning: *nodef.yaml: multirun: no 'definition', nothing to run: deselected*",
        "1/2 tests collected (1 deselected)*",
    ])


def test_a_milabench_folder_definition_says_how_to_port(standard) -> None:
    message = porting_error(standard["resnet50"])
    folder = (MILABENCH.parent / "benchmarks" / "torchvision").resolve()
    assert message == (
        f"resnet50: definition '../benchmarks/torchvision' names a milabench benchmark folder, "
        f"but {folder} is not there (is the suite in a milabench checkout?): a folder with "
        "main.py and voirfile.py runs through voir; else set 'definition' to a Python function "
        "(module:function, file.py:function) or an external command ({command: [...], parser: "
        "...}), see 'Porting a milabench suite' in docs/suites.md"
    )
    ported = resolve_suite(REPO_ROOT / "docs" / "examples"
                           / "suite-milabench-port.yaml")
    assert porting_error(ported["resnet50"]) is None


# --- the plugin: skipped, failing with the porting error, warnings -----------------------------


@pytest.fixture
def one_slot(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """milabench's standard.yaml in pytester's folder, on a run of one device slot."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: one slot of every core
    shutil.copytree(MILABENCH, pytester.path / "config")
    return pytester.path / "config" / "standard.yaml"


def test_plugin_skips_what_needs_more_gpus(pytester: pytest.Pytester, one_slot: Path) -> None:
    result = pytester.runpytest(
        f"--bench-suite={one_slot}", "--bench-select=resnet152-ddp-gpus", "-rs"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [1] config/standard.yaml: needs 2 GPUs (requires_capabilities: gpu['count'] > 1), "
        "this run has 1 device slot",
    ])
    out = result.stdout.str()
    for key in IGNORED_KEYS:
        expected = 0 if key == "use_deepspeed" else 1
        assert out.count(f"'{key}' (in ") == expected, key


def test_plugin_fails_a_milabench_folder_without_a_child(
    pytester: pytest.Pytester, one_slot: Path
) -> None:
    result = pytester.runpytest(f"--bench-suite={one_slot}", "--bench-select=resnet50,fp16")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*resnet50: definition '../benchmarks/torchvision' names a milabench benchmark folder, "
        "but *is not there*runs through voir*Porting a milabench suite*",
    ])


# --- dlbench resolve | head ----------------------------------------------------------------------


@pytest.mark.slow  # starts a child process
def test_resolve_into_a_closed_pipe_has_no_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_dlbench.cli", "resolve", str(STANDARD), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line (`| head -0`, deterministic)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err.count("has no effect here") == 5  # the warnings, and nothing else


@pytest.mark.parametrize(
    ("definition", "folder"),
    [
        ("../benchmarks/torchvision", True),     # milabench's, not there
        ("./bench_dir", True),                   # a folder that is there
        ("bench.py", False),                     # file.py: main
        ("bench.py:train", False),
        ("bench_dir/x.py:train", False),
        ("pytest_dlbench.workloads.toy:main", False),
        ("pytest_dlbench.workloads.toy", False),  # a module: its main
        ("./script", False),                     # a file, no suffix: load_definition's
    ],
)
def test_what_is_a_milabench_folder(tmp_path: Path, definition: str, folder: bool) -> None:
    (tmp_path / "bench_dir").mkdir()
    (tmp_path / "script").write_text("")
    path = tmp_path / "s.yaml"
    path.write_text(f"a:\n  definition: {definition}\n")
    error = porting_error(resolve_suite(path)["a"])
    assert (error is not None) is folder
    if folder:
        assert error.startswith(f"a: definition '{definition}' names a milabench benchmark "
                                "folder, but ")


@pytest.mark.parametrize("condition", [
    "(" * 100_000 + "1" + ")" * 100_000,
    "not " * 100_000 + "True",
    "len(" * 5_000 + "nodes" + ")" * 5_000,
    "gpu['count']" + "[1]" * 100_000,
    "9" * 5_000 + " > 1",
])
def test_a_hostile_condition_is_one_line_not_a_recursion_error(condition: str) -> None:
    """Issue 40 item 9: a condition is text someone else wrote; the recursive parser and
    evaluator are bounded (nesting, digits) and say so."""
    from pytest_dlbench.suite.capability import CapabilityError, RunFacts, evaluate

    with pytest.raises(CapabilityError, match="nested more than|more than 18 digits"):
        evaluate(condition, RunFacts(slots=1))


def test_a_long_flat_condition_is_evaluated() -> None:
    from pytest_dlbench.suite.capability import RunFacts, evaluate

    facts = RunFacts(slots=2)
    assert evaluate(" and ".join(["gpu['count'] >= 1"] * 3_000), facts) is True
    assert evaluate(" or ".join(["gpu['count'] > 8"] * 3_000) + " or True", facts) is True
    assert evaluate("not True and True or len(nodes) == 1", facts) is True
