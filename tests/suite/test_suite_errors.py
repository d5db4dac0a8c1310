"""Every suite error is one line that names the file (with line:column for YAML problems) and,
where there is one, the benchmark."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.suite import SuiteError, resolve_suite

TOY = "pytest_dlbench.workloads.toy:main"


def error_of(tmp_path: Path, text: str, name: str = "suite.yaml", **kwargs: object) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    with pytest.raises(SuiteError) as info:
        resolve_suite(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message, message
    assert isinstance(info.value, DlbenchError)
    assert str(path) in message, message
    return message.replace(str(path), "FILE")


def test_suite_error_format() -> None:
    assert str(SuiteError("m")) == "m"
    assert str(SuiteError("m", file="f.yaml")) == "f.yaml: m"
    assert str(SuiteError("m", file="f.yaml", bench="b")) == "f.yaml: b: m"
    assert str(SuiteError("m", file="f.yaml", line=3, column=4)) == "f.yaml:3:4: m"
    assert str(SuiteError("m", bench="b", line=3)) == "b: m"


# --- YAML ---------------------------------------------------------------------------------------


def test_yaml_syntax_error_gives_file_line_column(tmp_path: Path) -> None:
    message = error_of(tmp_path, "a:\n  definition: x\n  argv: [1, 2\nb: {}\n")
    assert message.startswith("FILE:4:")
    assert "YAML syntax error" in message


def test_yaml_syntax_error_bad_indentation(tmp_path: Path) -> None:
    message = error_of(tmp_path, "a:\n  b: 1\n c: 2\n")
    assert message.startswith("FILE:3:2: YAML syntax error: ")


def test_yaml_syntax_error_in_an_included_file(tmp_path: Path) -> None:
    (tmp_path / "inc.yaml").write_text("a: [\n")
    (tmp_path / "suite.yaml").write_text("include: inc.yaml\n")
    with pytest.raises(SuiteError) as info:
        resolve_suite(tmp_path / "suite.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'inc.yaml'}:2:1: YAML syntax error")


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a:\n  definition: {TOY}\nb: {{}}\na:\n  weight: 1\n")
    assert message == "FILE:4:1: duplicate key 'a' (first at line 1)"


def test_duplicate_nested_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a:\n  definition: {TOY}\n  argv:\n    --x: 1\n    --x: 2\n")
    assert message == "FILE:5:5: duplicate key '--x' (first at line 4)"


@pytest.mark.parametrize(
    "value",
    [
        "!!python/object/apply:os.system ['echo pwned > /tmp/dlbench-pwned']",
        "!!python/name:os.system",
        "!!python/object:collections.OrderedDict {}",
        "!custom 3",
    ],
)
def test_python_tags_are_refused(tmp_path: Path, value: str) -> None:
    message = error_of(tmp_path, f"a:\n  definition: {TOY}\n  argv: {value}\n")
    assert message.startswith("FILE:3:9: only plain YAML is allowed")
    assert not Path("/tmp/dlbench-pwned").exists()


def test_non_hashable_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, "a:\n  ? [x]\n  : 1\n")
    assert message == "FILE:2:5: a mapping key must be a plain value"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_bytes(b"a:\n  definition: \xff\n")
    with pytest.raises(SuiteError, match="not a UTF-8 text file"):
        resolve_suite(path)


def test_missing_suite_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError) as info:
        resolve_suite(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: suite file not found"


# --- shape of the file --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "3\n"])
def test_suite_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    assert error_of(tmp_path, text) == (
        "FILE: a suite file must be a YAML mapping of benchmark entries"
    )


@pytest.mark.parametrize(
    ("value", "kind"),
    [("[1, 2]", "list"), ("3", "int"), ("text", "str"), ("", "null"), ("true", "bool")],
)
def test_top_level_value_must_be_a_mapping_and_the_key_is_named(
    tmp_path: Path, value: str, kind: str
) -> None:
    message = error_of(tmp_path, f"ok:\n  definition: {TOY}\nresnet50: {value}\n")
    assert message == f"FILE: resnet50: top-level value must be a mapping, got {kind}"


def test_top_level_key_must_be_a_string(tmp_path: Path) -> None:
    message = error_of(tmp_path, "3: {definition: x}\n")
    assert message == "FILE: top-level key 3 must be a string"


@pytest.mark.parametrize("value", ["3", "{a: b}", "[a.yaml, 3]"])
def test_include_must_be_paths(tmp_path: Path, value: str) -> None:
    assert error_of(tmp_path, f"include: {value}\n") == (
        "FILE: 'include' must be a path or a list of paths"
    )


# --- merging ------------------------------------------------------------------------------------


def test_mapping_list_clash(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, f"a:\n  definition: {TOY}\n  argv: {{--x: 1}}\n'*':\n  argv: [y]\n"
    )
    assert message == "FILE: a: key 'argv': cannot merge a list over a mapping"


def test_list_mapping_clash(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(f"a:\n  definition: {TOY}\n  tags: [x]\n")
    message = error_of(tmp_path, "include: base.yaml\na:\n  tags: {x: 1}\n")
    assert message == (
        "FILE: a: key 'tags': cannot merge a mapping over a list (use {append: [...]} to extend it)"
    )


def test_delete_in_a_list(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a:\n  definition: {TOY}\n  argv: [x, !delete ]\n")
    assert message == "FILE: a: key 'argv': !delete is a mapping value, it cannot be a list item"


# --- entries ------------------------------------------------------------------------------------


def test_false_in_argv(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a:\n  definition: {TOY}\n  argv:\n    --fast: false\n")
    assert message == "FILE: a: argv '--fast' is false: use null to cancel an option, not false"


def test_false_in_an_inherited_argv_names_the_child(tmp_path: Path) -> None:
    message = error_of(
        tmp_path, f"_t:\n  definition: {TOY}\n  argv: {{--fast: false}}\nchild:\n  inherits: _t\n"
    )
    assert message.startswith("FILE: child: argv '--fast' is false")


def test_missing_parent(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"resnet50:\n  inherits: _torchvision\n  definition: {TOY}\n")
    assert message == "FILE: resnet50: inherits '_torchvision', which is not defined"


def test_inheritance_cycle(tmp_path: Path) -> None:
    message = error_of(tmp_path, "_a: {inherits: _b}\n_b: {inherits: _a}\n")
    assert message.endswith("inheritance cycle: _a -> _b -> _a")


def test_include_cycle(tmp_path: Path) -> None:
    # Named by the file whose include closes the cycle, then the files of the cycle in order.
    (tmp_path / "other.yaml").write_text("include: suite.yaml\n")
    (tmp_path / "suite.yaml").write_text("include: other.yaml\n")
    with pytest.raises(SuiteError) as info:
        resolve_suite(tmp_path / "suite.yaml")
    assert str(info.value) == (
        f"{tmp_path / 'other.yaml'}: include cycle: suite.yaml -> other.yaml -> suite.yaml"
    )


def test_duplicate_names_name_both_origins(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(f"j1:\n  definition: {TOY}\n")
    message = error_of(
        tmp_path,
        "include: base.yaml\nm:\n  matrix: {k: [1]}\n"
        f"  job: {{name: 'j{{k}}', definition: {TOY}}}\n",
    )
    assert message == (
        f"j1: duplicate benchmark name: defined by {tmp_path / 'base.yaml'} "
        "and by FILE (matrix 'm')"
    )


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        ("weight: heavy", "'weight' must be a number, got 'heavy'"),
        ("weight: true", "'weight' must be a number"),
        ("enabled: 'no'", "'enabled' must be true or false, got 'no'"),
        ("tags: vision", "'tags' must be a list of strings"),
        ("tags: [1, 2]", "'tags' must be a list of strings"),
        ("plan: {method: per_node}", "'plan.method' must be one of per_gpu, njobs"),
        ("env: [A]", "'env' must be a mapping"),
        ("max_duration: -1", "'max_duration' must be positive"),
        ("max_duration: soon", "'max_duration' must be a number"),
        ("voir: {options: {stop: -1}}", "'voir.options.stop' must be a non-negative integer"),
        ("voir: {options: {skip: 1.5}}", "'voir.options.skip' must be a non-negative integer"),
        ("voir: {options: [1]}", "'voir.options' must be a mapping"),
        ("validation: 3", "'validation' must be a mapping"),
        ("definition: ''", "'definition' must be a non-empty string"),
        ("definition: 3", "'definition' must be a non-empty string"),
        ("argv: '--a 1'", "'argv' must be a mapping or a list"),
        ("argv: {--a: {b: 1}}", "argv '--a' is a mapping"),
        ("argv: {append: [1], x: 2}", "an append mapping takes only 'append'"),
    ],
)
def test_bad_values_name_file_and_benchmark(tmp_path: Path, lines: str, needle: str) -> None:
    definition = "" if lines.startswith("definition") else f"\n  definition: {TOY}"
    message = error_of(tmp_path, f"bench:{definition}\n  {lines}\n")
    assert message.startswith("FILE: bench: "), message
    assert needle in message, message


def test_no_definition_is_a_note_not_an_error(tmp_path: Path) -> None:
    # milabench keeps an entry without definition and never selects it: deselected, one note.
    path = tmp_path / "suite.yaml"
    path.write_text("bench:\n  weight: 1\n")
    suite = resolve_suite(path)
    assert suite["bench"].definition is None
    assert suite.warnings == [
        f"{path}: bench: no 'definition', nothing to run: deselected (milabench never selects "
        "such an entry either)"
    ]


# --- overrides ----------------------------------------------------------------------------------


def test_override_of_an_unknown_benchmark(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a: {{definition: {TOY}}}\n", overrides=["b.weight=1"])
    assert message == "FILE: --bench-override 'b.weight=1': no benchmark named 'b'"


def test_override_that_makes_a_bad_value(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"a: {{definition: {TOY}}}\n", overrides=["a.weight=lots"])
    assert message == "FILE: a: 'weight' must be a number, got 'lots'"


def test_override_value_that_is_not_yaml() -> None:
    with pytest.raises(SuiteError) as info:
        resolve_suite(
            TESTS_DIR / "suites" / "include" / "main.yaml", overrides=["trace.argv=[a"]
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("--bench-override 'trace.argv=[a': value is not valid YAML (")


@pytest.mark.parametrize("value", ["{a: 1, a: 2}", "!!python/name:os.system"])
def test_override_value_with_yaml_problems(value: str) -> None:
    with pytest.raises(SuiteError) as info:
        resolve_suite(
            TESTS_DIR / "suites" / "include" / "main.yaml",
            overrides=[f"trace.argv={value}"],
        )
    assert "\n" not in str(info.value)
    assert "value is not valid YAML" in str(info.value)


def test_note_mentions_a_misspelled_key_that_may_cause_it(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(f"_t:\n  definition: {TOY}\nb:\n  inherit: _t\n")
    assert resolve_suite(path).warnings == [
        f"{path}: b: unknown key 'inherit', did you mean 'inherits'?",
        f"{path}: b: no 'definition', nothing to run: deselected "
        "(unknown key 'inherit', did you mean 'inherits'?)",
    ]


def test_error_mentions_a_misspelled_key_that_may_cause_it(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"b:\n  definition: {TOY}\n  weigth: 1\n  max_duration: -1\n")
    assert message == (
        "FILE: b: 'max_duration' must be positive and finite (seconds), got -1.0 "
        "(unknown key 'weigth', did you mean 'weight'?)"
    )
