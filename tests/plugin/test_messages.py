"""Messages that say the cause (issue 25, item 4): an argument error's last line in the failure
reason, a --bench-select that names nothing with its close names, a score line that says no
weighted benchmark was selected."""

from __future__ import annotations

import sys
import textwrap

import pytest

from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.results.evaluation import no_score_reason
from pytest_dlbench.run.exit_reason import exit_reason, stderr_tail
from pytest_dlbench.run.harness import classify_exception, execute
from pytest_dlbench.suite.selection import select_words, unknown_selection
from pytest_dlbench.suite.spec import BenchSpec

ARGPARSE_TAIL = [
    "usage: toy [-h] [--batch-size BATCH_SIZE] [--hidden HIDDEN]",
    "toy: error: unrecognized arguments: --batch-szie 3",
]


# -- the cause of a SystemExit -----------------------------------------------------------------

def test_the_last_error_line_is_the_reason() -> None:
    assert exit_reason(SystemExit(2), ARGPARSE_TAIL) == (
        "the benchmark exited with status 2: unrecognized arguments: --batch-szie 3")
    outcome = classify_exception(SystemExit(2), ARGPARSE_TAIL)
    assert (outcome.status, outcome.reason) == (
        "fail", "the benchmark exited with status 2: unrecognized arguments: --batch-szie 3")


@pytest.mark.parametrize(("exc", "lines", "reason"), [
    (SystemExit(2), [], "the benchmark exited with status 2 (an argument error? see its output)"),
    (SystemExit(3), ["some progress", "RuntimeError: no data here"],
     "the benchmark exited with status 3: RuntimeError: no data here"),
    (SystemExit("stopping: no GPU\n"), [], "the benchmark exited: stopping: no GPU"),
    (SystemExit(None), [], "the benchmark exited with status 0 (an argument error? see its "
                           "output)"),
])
def test_other_exits(exc: SystemExit, lines: list[str], reason: str) -> None:
    assert exit_reason(exc, lines) == reason


def test_a_long_cause_is_cut() -> None:
    reason = exit_reason(SystemExit(2), ["prog: error: " + "x" * 1000])
    assert len(reason) < 400 and reason.endswith("...") and "\n" not in reason


def test_argparse_in_the_harness_names_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    def main() -> None:
        parser = argparse.ArgumentParser(prog="toy")
        parser.add_argument("--batch-size", type=int)
        parser.parse_args(["--batch-szie", "3"])

    outcome, exc = execute(main, NullStream())
    assert isinstance(exc, SystemExit)
    assert outcome.reason == ("the benchmark exited with status 2: unrecognized arguments: "
                              "--batch-szie 3")
    assert "unrecognized arguments" in capsys.readouterr().err  # still written through


def test_the_tail_puts_stderr_back() -> None:
    before = sys.stderr
    with stderr_tail() as tail:
        print("a\nerror: b", file=sys.stderr, end="")
    assert sys.stderr is before
    assert tail.last_lines() == ["a", "error: b"]


SUITE = textwrap.dedent(
    """
    quick:
      definition: defs.py:quick
      argv: {--steps: 8}
      voir: {options: {skip: 1, stop: 4}}
    """
)
DEFS = textwrap.dedent(
    """
    import argparse

    def quick(bench):
        parser = argparse.ArgumentParser(prog="quick")
        parser.add_argument("--steps", type=int)
        args = parser.parse_args(bench.args)
        for _ in bench.iterate(range(args.steps), batch_size=1):
            pass
    """
)


@pytest.mark.slow
def test_an_override_typo_names_the_argument(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE)
    pytester.makepyfile(defs=DEFS)
    result = pytester.runpytest_subprocess(
        "--bench-suite=s.yaml", "--bench-base=out", "-p", "no:cacheprovider",
        "--bench-override", "quick.argv.--stesp=3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*failed quick[[]D0]: fail: the benchmark exited with status 2: "
                                 "unrecognized arguments: --stesp 3"])
    (stream,) = (pytester.path / "out" / "runs").glob("s.*/quick.D0.data")
    assert "unrecognized arguments: --stesp 3" in stream.read_text()  # the end's reason


# -- --bench-select that names nothing ---------------------------------------------------------

SPECS = [BenchSpec(name="resnet18", definition=None, origin="s.yaml", group="torchvision",
                   tags=("vision",)),
         BenchSpec(name="resnet50", definition=None, origin="s.yaml", group="torchvision",
                   tags=("vision",)),
         BenchSpec(name="toy", definition=None, origin="s.yaml", tags=("sanity",))]


def test_close_names() -> None:
    assert unknown_selection(SPECS, ["resnt"]) == (
        "--bench-select: no benchmark, group or tag is named 'resnt' "
        "(did you mean resnet50, resnet18?)")  # closest first
    assert unknown_selection(SPECS, ["toy,vision", "torchvision"]) is None
    assert unknown_selection(SPECS, ["toy,zzzz"]) == (
        "--bench-select: no benchmark, group or tag is named 'zzzz'")
    assert select_words(["a, b", "b,,c"]) == ["a", "b", "c"]


def test_select_that_names_nothing_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE)
    result = pytester.runpytest_inprocess("--bench-suite=s.yaml", "--bench-base=out",
                                          "--bench-select=quik")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --bench-select: no benchmark, group or tag is named 'quik' (did you mean "
        "quick?); `dlbench resolve s` lists them"])
    assert not (pytester.path / "out").exists()  # nothing ran


# -- the score line of a run without a weighted benchmark --------------------------------------

def _summary(weights: list[float], incomplete: tuple[str, ...] = ()) -> object:
    from types import SimpleNamespace

    benchmarks = tuple(SimpleNamespace(weight=w) for w in weights)
    return SimpleNamespace(benchmarks=benchmarks, incomplete=incomplete)


def test_no_score_reason() -> None:
    assert no_score_reason(_summary([0.0])) == "no weighted benchmark was selected"  # type: ignore[arg-type]
    assert no_score_reason(_summary([])) == "no weighted benchmark was selected"  # type: ignore[arg-type]
    assert no_score_reason(_summary([0.0, 1.0])) == "no weighted benchmark succeeded"  # type: ignore[arg-type]
    assert no_score_reason(_summary([0.0], ("r50",))) == "no weighted benchmark succeeded"  # type: ignore[arg-type]


def test_a_weight_0_selection_says_none_was_selected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE.replace("  argv:", "  weight: 0\n  argv:"))
    pytester.makepyfile(defs=DEFS)
    result = pytester.runpytest_inprocess("--bench-suite=s.yaml", "--bench-base=out",
                                          "--bench-isolation=inline")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["score: - (no weighted benchmark was selected)"])


# -- dlbench report without RUN_DIR: the latest run of the base -------------------------------

def test_the_latest_run_dir(tmp_path) -> None:
    from _runs import write_run

    from pytest_dlbench.layout import NotARunDir, latest_run_dir

    runs = tmp_path / "runs"
    with pytest.raises(NotARunDir, match="no run directory"):
        latest_run_dir(tmp_path)
    for name in ("smoke.20261121-220108", "tests.20261124-101500", "smoke.20261124-101500-2",
                 "zzz.20261122-000000"):
        (runs / name).mkdir(parents=True)
        write_run(runs / name, "a")
    (runs / "empty.20261130-000000").mkdir()  # no streams, no manifest: not a run
    assert latest_run_dir(tmp_path) == runs / "smoke.20261124-101500-2"


def test_report_without_a_run_dir(tmp_path, monkeypatch, capsys) -> None:
    from _runs import write_run

    from pytest_dlbench.cli import main

    old, new = tmp_path / "runs" / "s.20261121-220108", tmp_path / "runs" / "s.20261122-220108"
    for run_dir, bench in ((old, "old_bench"), (new, "new_bench")):
        run_dir.mkdir(parents=True)
        write_run(run_dir, bench)
    assert main(["report", "--bench-base", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "new_bench" in out and "old_bench" not in out
    assert err == f"dlbench: the latest run: {new}\n"
    monkeypatch.setenv("DLBENCH_BASE", str(tmp_path / "none"))
    assert main(["report"]) == 4
    assert capsys.readouterr().err == (f"dlbench: error: {tmp_path / 'none' / 'runs'}: no run "
                                       "directory (give RUN_DIR, or --bench-base DIR)\n")
