"""The merge table of suite-format.md ("Merging two layers"), unit by unit and as properties."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlbench.suite import DELETE, SuiteError, merge, resolve_suite
from pytest_dlbench.suite.merge import finalize

TOY = "pytest_dlbench.workloads.toy:main"


# --- the table, row by row ----------------------------------------------------------------------


def test_mapping_mapping_keeps_earlier_order_and_appends_new_keys_in_later_order() -> None:
    earlier = {"a": 1, "b": 2, "c": 3}
    later = {"z": 26, "b": 20, "y": 25, "a": 10}
    result = merge(earlier, later)
    assert result == {"a": 10, "b": 20, "c": 3, "z": 26, "y": 25}
    assert list(result) == ["a", "b", "c", "z", "y"]


def test_mapping_mapping_is_recursive() -> None:
    earlier = {"voir": {"options": {"stop": 60, "skip": 5}}, "argv": {"--a": 1}}
    later = {"voir": {"options": {"stop": 10}}, "argv": {"--b": 2}}
    assert merge(earlier, later) == {
        "voir": {"options": {"stop": 10, "skip": 5}},
        "argv": {"--a": 1, "--b": 2},
    }


def test_list_list_later_replaces() -> None:
    assert merge({"tags": [1, 2, 3]}, {"tags": [4]}) == {"tags": [4]}
    assert merge({"tags": [1, 2, 3]}, {"tags": []}) == {"tags": []}


def test_list_append_concatenates() -> None:
    assert merge({"argv": ["--a", "1"]}, {"argv": {"append": ["--b", "2"]}}) == {
        "argv": ["--a", "1", "--b", "2"]
    }
    assert merge([1], {"append": [2, 3]}) == [1, 2, 3]


def test_append_of_a_single_value() -> None:
    assert merge([1], {"append": 2}) == [1, 2]


@pytest.mark.parametrize("earlier", [1, 2.5, "text", True, False, None])
@pytest.mark.parametrize("later", [7, "other", None, [1], {"k": "v"}, False])
def test_scalar_or_null_is_overridden_by_anything(earlier: Any, later: Any) -> None:
    assert merge({"k": earlier}, {"k": later}) == {"k": later}
    assert merge(earlier, later) == later


def test_null_overrides() -> None:
    assert merge({"a": {"b": 1}, "c": [1]}, {"a": None, "c": None}) == {"a": None, "c": None}
    assert merge({"argv": {"--flag": True}}, {"argv": {"--flag": None}}) == {
        "argv": {"--flag": None}
    }


def test_mapping_then_scalar_later_wins() -> None:
    # Not a row of the table; the later value wins, as for every non-clash.
    assert merge({"voir": {"options": {}}}, {"voir": 3}) == {"voir": 3}


def test_mapping_list_clash_is_one_line_naming_benchmark_and_key() -> None:
    with pytest.raises(SuiteError) as info:
        merge({"argv": {"--a": 1}}, {"argv": ["--a", "1"]}, bench="resnet50", file="s.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("s.yaml: resnet50: ")
    assert "'argv'" in message and "list" in message and "mapping" in message


def test_list_mapping_without_append_clash_is_one_line_naming_benchmark_and_key() -> None:
    with pytest.raises(SuiteError) as info:
        merge({"voir": {"tags": [1]}}, {"voir": {"tags": {"x": 1}}}, bench="b", file="s.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("s.yaml: b: ")
    assert "'voir.tags'" in message and "append" in message


def test_append_to_a_mapping_is_an_error() -> None:
    with pytest.raises(SuiteError, match="'env'.*append"):
        merge({"env": {"A": "1"}}, {"env": {"append": ["B"]}}, bench="b")


def test_append_mapping_takes_only_append() -> None:
    with pytest.raises(SuiteError, match="only 'append'"):
        merge({"argv": []}, {"argv": {"append": [1], "extra": 2}}, bench="b")


def test_append_with_nothing_to_extend_waits_for_a_parent() -> None:
    # Kept as an append mapping until inheritance and '*' are applied; finalize makes it a list.
    pending = merge({}, {"argv": {"append": [1]}})
    assert pending == {"argv": {"append": [1]}}
    pending = merge(pending, {"argv": {"append": 2}})
    assert pending == {"argv": {"append": [1, 2]}}
    assert merge({"argv": [0]}, pending) == {"argv": [0, 1, 2]}
    assert finalize(pending) == {"argv": [1, 2]}
    assert merge(pending, {"argv": [9]}) == {"argv": [9]}  # a list replaces it
    with pytest.raises(SuiteError, match="mapping over a list"):
        merge(pending, {"argv": {"--x": 1}}, bench="b")


def test_append_over_a_scalar_or_null_is_the_list() -> None:
    assert merge({"argv": None}, {"argv": {"append": [1]}}) == {"argv": [1]}
    assert merge({"argv": "x"}, {"argv": {"append": [1]}}) == {"argv": [1]}


def test_finalize_copies() -> None:
    value = {"a": [{"b": 1}], "c": {"append": [{"d": 2}]}}
    result = finalize(value)
    assert result == {"a": [{"b": 1}], "c": [{"d": 2}]}
    result["a"][0]["b"] = 5
    assert value["a"][0]["b"] == 1


def test_delete_removes_the_key() -> None:
    earlier = {"env": {"A": "1", "B": "2"}, "argv": {"--x": 1}}
    assert merge(earlier, {"env": {"A": DELETE}, "argv": DELETE}) == {"env": {"B": "2"}}


def test_delete_of_an_absent_key_is_nothing() -> None:
    assert merge({"a": 1}, {"b": DELETE, "c": {"d": DELETE, "e": 1}}) == {"a": 1, "c": {"e": 1}}


def test_delete_in_a_list_is_an_error() -> None:
    with pytest.raises(SuiteError, match="list item"):
        merge({}, {"argv": ["--a", DELETE]}, bench="b")
    with pytest.raises(SuiteError, match="list item"):
        merge({"argv": []}, {"argv": {"append": [DELETE]}}, bench="b")


def test_merge_does_not_mutate() -> None:
    earlier = {"a": {"b": [1, 2], "c": {"d": 1}}, "e": [1]}
    later = {"a": {"b": {"append": [3]}, "c": {"d": DELETE, "x": 2}}, "e": [2]}
    before = copy.deepcopy((earlier, later))
    merge(earlier, later)
    assert (earlier, later) == before


# --- the rules through suite files (layers of one entry) --------------------------------------


def _suite(tmp_path: Path, files: dict[str, str], main: str = "suite.yaml") -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / main


def test_layers_merge_by_the_table(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        {
            "base.yaml": f"""
b:
  definition: {TOY}
  argv: {{--a: 1, --b: 2}}
  tags: [x, y]
  env: {{A: "1", B: "2"}}
  extra: [1, 2]
  max_duration: 100
""",
            "suite.yaml": """
include: base.yaml
b:
  argv: {--c: 3, --a: 10}
  tags: [z]
  env:
    A: !delete
  extra:
    append: [3]
  max_duration: null
""",
        },
    )
    spec = resolve_suite(path)["b"]
    assert list(spec.argv.items()) == [("--a", 10), ("--b", 2), ("--c", 3)]
    assert spec.tags == ("z",)  # list replaces list between layers of one entry
    assert spec.env == {"B": "2"}
    assert spec.config["extra"] == [1, 2, 3]
    assert spec.config["max_duration"] is None  # null overrides...
    assert spec.max_duration == 600  # ...and then means the default


@pytest.mark.parametrize(
    ("earlier", "later", "key"),
    [
        ("argv: {--a: 1}", "argv: [--a, '1']", "argv"),
        ("voir: {options: [1]}", "voir: {options: {stop: 1}}", "voir.options"),
    ],
)
def test_layer_clash_names_file_benchmark_and_key(
    tmp_path: Path, earlier: str, later: str, key: str
) -> None:
    path = _suite(
        tmp_path,
        {
            "base.yaml": f"resnet50:\n  definition: {TOY}\n  {earlier}\n",
            "suite.yaml": f"include: base.yaml\nresnet50:\n  {later}\n",
        },
    )
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: resnet50: key '{key}'")


def test_top_level_delete_removes_an_entry(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        {
            "base.yaml": f"a:\n  definition: {TOY}\nb:\n  definition: {TOY}\n",
            "suite.yaml": "include: base.yaml\na: !delete\n",
        },
    )
    assert [s.name for s in resolve_suite(path).specs] == ["b"]


# --- properties ---------------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c", "d", "--x", "argv", "n"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3)
)


def _values(depth: int = 3) -> st.SearchStrategy[Any]:
    # Nested dicts, lists and scalars; no DELETE and no "append" key, so no append mapping.
    return st.recursive(
        _SCALARS,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(_KEYS, children, max_size=4),
        ),
        max_leaves=12,
    )


_LAYERS = st.dictionaries(_KEYS, _values(), max_size=5)


def _clashes(a: Any, b: Any) -> bool:
    """Whether merging b over a hits one of the two clash rows of the table."""
    if isinstance(a, dict) and isinstance(b, dict):
        return any(_clashes(a[k], v) for k, v in b.items() if k in a)
    if isinstance(a, dict) and isinstance(b, list):
        return True
    return isinstance(a, list) and isinstance(b, dict)


def _scalar_paths(value: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, value) for every non-container leaf reached through mappings."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _scalar_paths(v, (*prefix, k))]
    if isinstance(value, list):
        return [(prefix, value)]  # a list is replaced whole
    return [(prefix, value)]


def _reaches(layer: Any, path: tuple) -> bool:
    """Whether a later layer sets something at ``path`` or at one of its prefixes."""
    for key in path:
        if not isinstance(layer, dict):
            return True
        if key not in layer:
            return False
        layer = layer[key]
    return True


def _get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def _check_key_order(a: Any, b: Any, result: Any) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(result) == [*a, *(k for k in b if k not in a)]
        for key in b:
            if key in a:
                _check_key_order(a[key], b[key], result[key])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_LAYERS)
def test_merging_a_layer_onto_itself_changes_nothing(a: dict) -> None:
    assert merge(a, a) == a


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_LAYERS)
def test_empty_layers_are_neutral(a: dict) -> None:
    assert merge(a, {}) == a
    assert merge({}, a) == a


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(_LAYERS, _LAYERS)
def test_later_wins_and_key_order(a: dict, b: dict) -> None:
    if _clashes(a, b):
        with pytest.raises(SuiteError):
            merge(a, b)
        return
    result = merge(a, b)
    for path, value in _scalar_paths(b):
        assert _get(result, path) == value
    # What b does not reach keeps a's value.
    for path, value in _scalar_paths(a):
        if not _reaches(b, path):
            assert _get(result, path) == value
    _check_key_order(a, b, result)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_LAYERS, _LAYERS)
def test_merge_never_mutates_its_inputs(a: dict, b: dict) -> None:
    before = copy.deepcopy((a, b))
    try:
        result = merge(a, b)
    except SuiteError:
        result = None
    assert (a, b) == before
    if result is not None:
        # Changing the result afterwards does not reach the inputs either, at the top level.
        result.clear()
        assert (a, b) == before


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(_values(), max_size=4), st.lists(_values(), max_size=4))
def test_append_is_concatenation(a: list, b: list) -> None:
    assert merge({"k": a}, {"k": {"append": b}}) == {"k": [*a, *b]}
