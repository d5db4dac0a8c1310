"""argv -> command line, and launch-time placeholders (suite-format.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlbench.suite import (
    SuiteError,
    fill_all,
    fill_placeholders,
    load_system,
    render_argv,
    resolve_suite,
)

TOY = "pytest_dlbench.workloads.toy:main"


# --- the rendering table, row by row ------------------------------------------------------------


def test_null_renders_nothing() -> None:
    assert render_argv({"--a": None, "--b": 1}) == ["--b", "1"]


def test_true_with_dash_is_a_bare_flag() -> None:
    assert render_argv({"--synthetic-data": True, "-v": True}) == ["--synthetic-data", "-v"]


def test_true_without_dash_is_a_positional_and_positionals_come_first() -> None:
    argv = {"--a": 1, "train": True, "--flag": True, "eval": True, "--b": "x"}
    assert render_argv(argv) == ["train", "eval", "--a", "1", "--flag", "--b", "x"]


def test_false_is_an_error() -> None:
    with pytest.raises(SuiteError) as info:
        render_argv({"--flag": False}, bench="resnet50", file="suite.yaml")
    message = str(info.value)
    assert message == (
        "suite.yaml: resnet50: argv '--flag' is false: use null to cancel an option, not false"
    )


def test_list_is_comma_joined() -> None:
    assert render_argv({"--layers": [1, 2, 3], "--names": ["a"]}) == [
        "--layers", "1,2,3", "--names", "a",
    ]  # fmt: skip


def test_double_dash_list_is_appended_as_is() -> None:
    argv = {"--": ["--extra", "a b", 3], "--a": 1, "pos": True}
    assert render_argv(argv) == ["pos", "--a", "1", "--extra", "a b", "3"]


def test_double_dash_null_cancels() -> None:
    assert render_argv({"--a": 1, "--": None}) == ["--a", "1"]


def test_anything_else_is_key_and_str_value() -> None:
    assert render_argv({"--lr": 0.01, "--n": 3, "--s": "text", "--big": 10**20}) == [
        "--lr", "0.01", "--n", "3", "--s", "text", "--big", str(10**20),
    ]  # fmt: skip


def test_merged_key_order_is_kept() -> None:
    argv = {"--z": 1, "--a": 2, "--m": 3}
    assert render_argv(argv) == ["--z", "1", "--a", "2", "--m", "3"]


def test_list_argv_is_used_verbatim() -> None:
    assert render_argv(["--a", 1, "pos", "--", "x"]) == ["--a", "1", "pos", "--", "x"]


def test_no_argv_is_no_args() -> None:
    assert render_argv(None) == []
    assert render_argv({}) == []


@pytest.mark.parametrize("argv", ["--a 1", 3, {"--opt": {"nested": 1}}])
def test_other_shapes_are_errors(argv: Any) -> None:
    with pytest.raises(SuiteError) as info:
        render_argv(argv, bench="b", file="f.yaml")
    assert str(info.value).startswith("f.yaml: b: ")


def test_rendering_after_inheritance_null_cancels_inherited_option(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"""
_base:
  definition: {TOY}
  argv:
    --no-stdout: true
    --lr: 0.01
child:
  inherits: _base
  argv:
    --no-stdout: null
    run: true
"""
    )
    assert resolve_suite(path)["child"].args == ("run", "--lr", "0.01")


# --- launch-time placeholders ------------------------------------------------------------------

CONTEXT = {
    "cpu_count": 16,
    "gpu_count": 2,
    "cpu_per_gpu": 8,
    "n_worker": 8,
    "device_name": "cuda",
    "arch": "cuda",
    "ccl": "nccl",
    "data": "/data",
    "run_name": "run1",
    "bench_name": "resnet50",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{cpu_per_gpu}", "8"),
        ("--workers={n_worker}", "--workers=8"),
        ("{data}/imagenet", "/data/imagenet"),
        ("{run_name}.{bench_name}", "run1.resnet50"),
        ("{device_name}:{gpu_count}:{cpu_count}:{arch}:{ccl}", "cuda:2:16:cuda:nccl"),
        ("no braces", "no braces"),
    ],
)
def test_placeholders_are_filled(text: str, expected: str) -> None:
    assert fill_placeholders(text, CONTEXT) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"k": 1}',  # JSON
        "{unknown}",
        "{__import__('os').system('echo hi')}",
        "{cpu_count + 1}",
        "auto({cpu_count})x",
        "{}",
        "{0}",
        "{cpu_count",
        "{a.b}",
    ],
)
def test_what_is_not_a_known_placeholder_is_left_unchanged(text: str) -> None:
    result = fill_placeholders(text, CONTEXT)
    if text == "auto({cpu_count})x":
        assert result == "auto(16)x"  # filled as text, never evaluated
    else:
        assert result == text


def test_expressions_are_never_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("eval called")

    monkeypatch.setattr("builtins.eval", refuse)
    monkeypatch.setattr("builtins.exec", refuse)
    args = ["expr {cpu_count} * 2", "auto", "{__import__('os')}", "{cpu_count}"]
    assert fill_all(args, CONTEXT) == ["expr 16 * 2", "auto", "{__import__('os')}", "16"]


@given(st.text(alphabet=st.sampled_from(list("{}\"': ,abk_1")), max_size=20))
def test_fill_with_empty_context_is_identity(text: str) -> None:
    assert fill_placeholders(text, {}) == text


def test_fill_all_keeps_the_list() -> None:
    assert fill_all([], CONTEXT) == []
    assert fill_all(["--n", "{n_worker}", "{x}"], CONTEXT) == ["--n", "8", "{x}"]


def test_system_keys_are_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "system.yaml"
    path.write_text(
        "system:\n  arch: cuda\n  sshkey: /keys/id\n  docker_image: img:1\n"
        "  nodes:\n    - {name: a, ip: 10.0.0.1, main: true}\n"
    )
    context = {**load_system(path).placeholders(), **CONTEXT}
    assert fill_all(["{sshkey}", "{docker_image}", "{arch}"], context) == [
        "/keys/id", "img:1", "cuda",
    ]  # fmt: skip
