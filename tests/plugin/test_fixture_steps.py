"""A ``bench`` fixture test's warm-up and steady steps: its ``bench_steps`` marker, else
``--bench-fixture-steps``, else the suites' 5 + 60; a bad value is one line and exit status 4
(plugin/fixture_steps.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.core.protocol import Env
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.options import FIXTURE_STEPS, OptionValueError, parse_fixture_steps

TESTS = textwrap.dedent(
    """
    import pytest

    def test_plain(bench):
        for _ in bench.iterate(range(200), batch_size=2):
            pass

    @pytest.mark.bench_steps(warmup=2, steps=7)
    def test_marked(bench):
        for _ in bench.iterate(range(200), batch_size=2):
            pass

    @pytest.mark.bench_steps(steps=4)
    def test_steps_only(bench):
        for _ in bench.iterate(range(200), batch_size=2):
            pass
    """
)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out",
                                        "--strict-markers", *args)


def _counts(pytester: pytest.Pytester) -> dict[str, tuple[int, int, int, int]]:
    """Each test's (warm-up observations, steady ones, the spec's skip, its stop)."""
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    counts = {}
    for path in sorted(run_dir.glob("*.data")):
        records = RunRecords.of(read_stream(path))
        spec = (records.config or {})["spec"]
        rates = [r for r in read_stream(path) if r.get("event") == "rate"]
        warm = sum(1 for r in rates if r["warmup"])
        counts[Path(path).name.split(".")[0]] = (warm, len(rates) - warm, spec["skip"],
                                                 spec["stop"])
    return counts


def test_the_default_the_marker_and_a_field_left_out(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=TESTS)
    result = _run(pytester, "-q")
    assert result.ret == 0, result.stdout.str()
    assert _counts(pytester) == {
        "test_plain": (*FIXTURE_STEPS, *FIXTURE_STEPS),
        "test_marked": (2, 7, 2, 7),
        "test_steps_only": (FIXTURE_STEPS[0], 4, FIXTURE_STEPS[0], 4)}


def test_the_option_sets_them_and_the_marker_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=TESTS)
    result = _run(pytester, "-q", "--bench-fixture-steps=1,3")
    assert result.ret == 0, result.stdout.str()
    assert "not used" not in result.stdout.str()
    assert _counts(pytester) == {"test_plain": (1, 3, 1, 3), "test_marked": (2, 7, 2, 7),
                                 "test_steps_only": (1, 4, 1, 4)}


def test_the_parents_steps_win_in_a_child(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A round's child runs the steps its parent decided, over its own tree's marker."""
    pytester.makepyfile(test_dl=TESTS)
    monkeypatch.setenv(Env.FIXTURE_STEPS, "0,2")
    result = _run(pytester, "-q", "-k", "marked")
    assert result.ret == 0, result.stdout.str()
    assert _counts(pytester) == {"test_marked": (0, 2, 0, 2)}


@pytest.mark.parametrize("value", ["5", "a,60", "5,0", "-1,60", "5,60,1", ""])
def test_a_bad_option_is_one_line_and_exit_4(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_dl=TESTS)
    result = _run(pytester, f"--bench-fixture-steps={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # pytest's own usage line, then argparse's error, as for every option with a bad value.
    errors = [line for line in result.stderr.lines if "--bench-fixture-steps" in line]
    assert len(errors) == 1, result.stderr.str()
    assert "error: argument --bench-fixture-steps: " in errors[0]
    assert not (pytester.path / "out" / "runs").exists()


@pytest.mark.parametrize(("marker", "why"), [
    ("bench_steps(warmup=2, steps=0)", "steps must be a whole number, 1 or more, got 0"),
    ("bench_steps(warmup=-1)", "warmup must be a whole number, 0 or more, got -1"),
    ("bench_steps(steps='60')", "steps must be a whole number, 1 or more, got '60'"),
    ("bench_steps(warmup=True)", "warmup must be a whole number, 0 or more, got True"),
    ("bench_steps(stops=60)", "takes warmup and steps*got (stops=60)"),
    ("bench_steps(1, 2, 3)", "takes warmup and steps*got (1, 2, 3)"),
])
def test_a_bad_marker_is_one_line_and_exit_4(pytester: pytest.Pytester, marker: str,
                                             why: str) -> None:
    pytester.makepyfile(test_bad=f"""
        import pytest

        @pytest.mark.{marker}
        def test_bad(bench):
            raise AssertionError("the body ran")
        """)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: @pytest.mark.bench_steps on test_bad.py::test_bad: "
                                 f"{why}"])
    assert "the body ran" not in result.stdout.str()


def test_positional_values(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pos="""
        import pytest

        @pytest.mark.bench_steps(1, 2)
        def test_pos(bench):
            for _ in bench.iterate(range(50), batch_size=1):
                pass
        """)
    result = _run(pytester, "-q")
    assert result.ret == 0, result.stdout.str()
    assert _counts(pytester) == {"test_pos": (1, 2, 1, 2)}


def test_parse_fixture_steps() -> None:
    assert parse_fixture_steps("5,60") == (5, 60)
    assert parse_fixture_steps(" 0 , 1 ") == (0, 1)
    for bad in ("5", "5,0", "x,1", "1,2,3", "1.5,2"):
        with pytest.raises(OptionValueError):
            parse_fixture_steps(bad)


def test_the_default_is_a_suites() -> None:
    from pytest_dlbench.suite.spec import DEFAULT_SKIP, DEFAULT_STOP

    assert FIXTURE_STEPS == (DEFAULT_SKIP, DEFAULT_STOP)


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.bench_steps(warmup=5, steps=60): *"])


@pytest.mark.slow
def test_the_docs_example_runs_its_markers_steps(pytester: pytest.Pytester) -> None:
    example = REPO_ROOT / "docs/examples/writing/test_steps.py"
    pytester.makepyfile(test_steps=example.read_text())
    # In a subprocess: torch's parts cannot be imported twice by pytester's in-process runs.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out", "-q",
                                           "--strict-markers")
    assert result.ret == 0, result.stdout.str()
    assert _counts(pytester) == {"test_mlp_step": (3, 20, 3, 20)}
