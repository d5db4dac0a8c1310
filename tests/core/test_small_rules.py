"""The small rules of issue 38 (item 4), each with one home: the results base's precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dlbench.layout import DEFAULT_BASE, results_base


@pytest.mark.parametrize(("option", "environ", "expected"), [
    ("opt", {"DLBENCH_BASE": "env"}, "opt"),  # --bench-base first
    (None, {"DLBENCH_BASE": "env"}, "env"),  # then $DLBENCH_BASE
    (None, {}, DEFAULT_BASE),  # then .dlbench
    ("", {"DLBENCH_BASE": ""}, DEFAULT_BASE),  # empty counts as unset
])
def test_results_base_precedence(option: str | None, environ: dict[str, str],
                                 expected: str) -> None:
    assert results_base(option, environ) == Path(expected)


def test_results_base_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_BASE", "from-env")
    assert results_base() == Path("from-env")
    monkeypatch.delenv("DLBENCH_BASE")
    assert results_base() == Path(".dlbench")


def test_every_reader_of_the_base_uses_it(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from pytest_dlbench.cli.history import _default_history
    from pytest_dlbench.options import results_base as pytest_base

    monkeypatch.setenv("DLBENCH_BASE", "env")
    config = SimpleNamespace(getoption=lambda name: None,
                             invocation_params=SimpleNamespace(dir=tmp_path))
    assert pytest_base(config) == tmp_path / "env"
    config.getoption = lambda name: "opt"
    assert pytest_base(config) == tmp_path / "opt"
    assert _default_history() == Path("env") / "history"


def test_usage_error_is_defined_once() -> None:
    from pytest_dlbench.core import protocol
    from pytest_dlbench.results import gate
    from pytest_dlbench.run.launch import nodes

    assert gate.USAGE_ERROR is protocol.USAGE_ERROR == 4
    assert not hasattr(nodes, "USAGE_EXIT")


@pytest.mark.parametrize(("value", "number", "integer"), [
    (3, True, True), (2.5, True, False), (float("nan"), True, False), (True, False, False),
    (False, False, False), ("3", False, False), (None, False, False),
])
def test_a_json_number_is_never_a_bool(value: object, number: bool, integer: bool) -> None:
    from pytest_dlbench.core.numbers import as_number, is_integer, is_number

    assert is_number(value) is number
    assert is_integer(value) is integer
    assert (as_number(value) is not None) is number


def test_the_default_units_are_one_constant() -> None:
    from pytest_dlbench.core.numbers import DEFAULT_UNITS
    from pytest_dlbench.measure.bench import Bench

    assert Bench(name="b").units == DEFAULT_UNITS == "items/s"


def test_run_layout_paths_are_named_by_layout(tmp_path: Path) -> None:
    from pytest_dlbench import layout
    from pytest_dlbench.run.against import round_order

    run_dir = tmp_path / "runs" / "s.20261127-120000"
    assert layout.run_base(run_dir) == tmp_path.resolve()
    assert layout.base_dir(run_dir) == layout.side_dir(run_dir, layout.BASE) == run_dir / "base"
    for k in (10, 2):
        layout.confirm_round_dir(run_dir, k).mkdir(parents=True)
    assert [p.name for p in layout.confirm_round_dirs(run_dir)] == ["2", "10"]
    assert round_order(0) == layout.SIDES == ("base", "candidate")
