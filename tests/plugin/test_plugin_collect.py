"""Collection of suites as pytest items, run in-process with pytester."""

from __future__ import annotations

import textwrap

import pytest

SUITE = """
_defaults:
  definition: pytest_dlbench.workloads.toy:main
  voir: {options: {skip: 1, stop: 2}}

_vision:
  inherits: _defaults
  group: torchvision
  tags: [vision]

resnet50:
  inherits: _vision
  tags: [resnet, convnet]
  weight: 1

convnext:
  inherits: _vision
  tags: [convnet]
  weight: 1

bert:
  inherits: _defaults
  group: nlp
  tags: [nlp]

old:
  inherits: _defaults
  enabled: false

resnet-matrix:
  matrix:
    batch-size: [16, 32]
  job:
    name: 'resnet50-bs{batch-size}'
    inherits: resnet50
    argv: {--batch-size: '{batch-size}'}
"""


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makefile(".yaml", mysuite=SUITE)
    return pytester.path / "mysuite.yaml"


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def test_collect_only_lists_enabled_benchmarks(pytester, suite):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only", "-q")
    assert collected(result) == [
        "mysuite.yaml::resnet50[D0]",
        "mysuite.yaml::convnext[D0]",
        "mysuite.yaml::bert[D0]",
        "mysuite.yaml::resnet50-bs16[D0]",
        "mysuite.yaml::resnet50-bs32[D0]",
    ]
    result.stdout.fnmatch_lines(["5/6 tests collected (1 deselected)*"])


def test_header_counts_benchmarks_and_disabled(pytester, suite):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only")
    result.stdout.fnmatch_lines(
        ["dlbench: suite mysuite (*mysuite.yaml): 6 benchmarks, 1 disabled"]
    )


def test_named_suite_found_in_bench_suites_dir(pytester):
    pytester.mkdir("bench_suites")
    (pytester.path / "bench_suites" / "mine.yaml").write_text(SUITE)
    result = pytester.runpytest("--bench-suite=mine", "--collect-only", "-q")
    assert "bench_suites/mine.yaml::bert[D0]" in collected(result)


def test_keyword_selects_by_name(pytester, suite):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only", "-q", "-k", "resnet")
    assert collected(result) == [
        "mysuite.yaml::resnet50[D0]",
        "mysuite.yaml::resnet50-bs16[D0]",
        "mysuite.yaml::resnet50-bs32[D0]",
    ]


@pytest.mark.slow
def test_keyword_matches_group(pytester, suite):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only", "-q", "-k", "nlp")
    assert collected(result) == ["mysuite.yaml::bert[D0]"]


def test_tags_are_registered_markers(pytester, suite):
    result = pytester.runpytest(
        "--bench-suite", str(suite), "--collect-only", "-q", "-m", "convnet and not resnet",
        "--strict-markers", "-W", "error::pytest.PytestUnknownMarkWarning",
    )
    assert result.ret == 0
    assert collected(result) == ["mysuite.yaml::convnext[D0]"]
    markers = pytester.runpytest("--bench-suite", str(suite), "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.vision: benchmark tag from a dlbench suite"])


def test_inherited_tags_become_markers(pytester, suite):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only", "-q", "-m", "vision")
    assert len(collected(result)) == 4


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--bench-select", "bert,convnext"], ["convnext", "bert"]),
        (["--bench-select", "torchvision", "--bench-exclude", "resnet"], ["convnext"]),
        (["--bench-select", "convnet", "--bench-exclude", "resnet50-bs32"],
         ["resnet50", "convnext", "resnet50-bs16"]),
        (["--bench-exclude", "vision"], ["bert"]),
    ],
)
def test_bench_select_and_exclude(pytester, suite, option, expected):
    result = pytester.runpytest("--bench-suite", str(suite), "--collect-only", "-q", *option)
    assert collected(result) == [f"mysuite.yaml::{name}[D0]" for name in expected]


def test_deselect_by_node_id(pytester, suite):
    result = pytester.runpytest(
        "--bench-suite", str(suite), "--collect-only", "-q",
        "--deselect", "mysuite.yaml::bert[D0]",
    )
    assert "mysuite.yaml::bert[D0]" not in collected(result)
    assert len(collected(result)) == 4


def test_repeat_adds_repeat_to_ids(pytester, suite):
    result = pytester.runpytest(
        "--bench-suite", str(suite), "--collect-only", "-q", "--bench-repeat=2", "-k", "bert"
    )
    assert collected(result) == ["mysuite.yaml::bert[D0-R0]", "mysuite.yaml::bert[D0-R1]"]


def test_override_is_applied(pytester, suite):
    result = pytester.runpytest(
        "--bench-suite", str(suite), "--collect-only", "-q", "--bench-override", "old.enabled=true"
    )
    assert "mysuite.yaml::old[D0]" in collected(result)


def test_explicit_test_paths_are_kept_beside_the_suite(pytester, suite):
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    result = pytester.runpytest(
        "test_plain.py", "--bench-suite", str(suite), "--collect-only", "-q", "-k", "ok or bert"
    )
    assert collected(result) == ["test_plain.py::test_ok", "mysuite.yaml::bert[D0]"]


def test_without_bench_suite_yaml_files_are_not_collected(pytester, suite):
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    result = pytester.runpytest("--collect-only", "-q")
    assert collected(result) == ["test_plain.py::test_ok"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [1,\n", "mysuite.yaml:2:1: YAML syntax error"),
        ("a:\n  inherits: _nope\n  definition: x:y\n", "mysuite.yaml: a: inherits '_nope'"),
        ("a:\n  definition: x:y\n  argv: {--flag: false}\n", "use null to cancel an option"),
        ("a: !!python/object/apply:os.system ['true']\n", "only plain YAML is allowed"),
    ],
)
def test_bad_suite_is_a_one_line_usage_error(pytester, content, message):
    path = pytester.path / "mysuite.yaml"
    path.write_text(content)
    result = pytester.runpytest("--bench-suite", str(path), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR")]
    assert len(errors) == 1, result.errlines
    assert message in errors[0]
    assert "Traceback" not in result.stderr.str()


def test_unknown_suite_name_lists_available(pytester):
    pytester.mkdir("bench_suites")
    (pytester.path / "bench_suites" / "alpha.yaml").write_text(SUITE)
    result = pytester.runpytest("--bench-suite=nope", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown suite 'nope'; available suites: *alpha*"])


def test_misspelled_key_warns_with_closest(pytester):
    path = pytester.path / "mysuite.yaml"
    path.write_text("a:\n  definition: x:y\n  weigth: 2\n")
    result = pytester.runpytest("--bench-suite", str(path), "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*unknown key 'weigth', did you mean 'weight'?*"])


def test_last_failed_reruns_only_failed_benchmark(pytester):
    pytester.makepyfile(
        benchdefs=textwrap.dedent(
            """
            def good(bench):
                pass

            def bad(bench):
                raise RuntimeError("boom")
            """
        )
    )
    pytester.makefile(
        ".yaml",
        lf="good:\n  definition: benchdefs.py:good\nbad:\n  definition: benchdefs.py:bad\n",
    )
    first = pytester.runpytest("--bench-suite=lf.yaml", "--bench-isolation=inline")
    first.assert_outcomes(passed=1, failed=1)
    again = pytester.runpytest("--bench-suite=lf.yaml", "--bench-isolation=inline", "--lf",
                               "--collect-only", "-q")
    assert collected(again) == ["lf.yaml::bad[D0]"]
