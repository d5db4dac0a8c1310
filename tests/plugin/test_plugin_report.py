"""The end of a suite run: summary, --bench-save, --bench-compare gate and exit statuses."""

from __future__ import annotations

import json
import textwrap

import pytest

DEFS = textwrap.dedent(
    """
    import os
    import time

    def sleeper(bench):
        # A step of fixed length; DLBENCH_TEST_SLOW=1.5 makes it 50 % slower.
        seconds = 0.004 * float(os.environ.get("DLBENCH_TEST_SLOW", "1"))
        for _ in bench.iterate(range(10_000), batch_size=8):
            time.sleep(seconds)

    def broken(bench):
        raise RuntimeError("broken on purpose")
    """
)

SUITE = textwrap.dedent(
    """
    _base:
      voir: {options: {skip: 2, stop: 20}}
    fast: {inherits: _base, definition: defs.py:sleeper, weight: 1}
    other: {inherits: _base, definition: defs.py:sleeper, weight: 2}
    broken: {inherits: _base, definition: defs.py:broken, weight: 1, enabled: false}
    """
)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "120")  # a fixed terminal width for the table
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s=SUITE)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-suite=s.yaml", "--bench-isolation=inline",
                              "--bench-base=out", *args)


def test_summary_table_and_score_after_the_run(suite):
    result = run(suite)
    assert result.ret == 0
    # Peak RSS of this in-process run: MiB or GiB, as big as the test process has grown.
    result.stdout.fnmatch_lines(
        ["*= dlbench =*", "bench *perf*units*std%*perf_adj*weight",
         "fast *items/s *", "other *items/s *", "",
         "bench *peak rss", "fast *iB", "other *iB", "", "score: *",
         "failure rate: 0.0% (0 of 2 runs)*", "results: *out/runs/s.*"]
    )


def test_quiet_prints_the_score_line_only(suite):
    result = run(suite, "-q")
    assert "= dlbench =" not in result.stdout.str()
    result.stdout.fnmatch_lines(["score: *"])


@pytest.mark.slow
def test_save_then_compare_same_machine_passes_and_slower_candidate_regresses(suite, monkeypatch):
    first = run(suite, "--bench-save=base.json")
    assert first.ret == 0
    saved = json.loads((suite.path / "base.json").read_text())
    assert saved["schema"] == "pytest-dlbench/summary"
    assert set(saved["benchmarks"]) == {"fast", "other"}

    # An A/A pair on a shared machine drifts a few % between runs: one run a side judged
    # with the default noise between runs is inconclusive (9) beyond ±3 % slower, so the
    # unchanged comparison is asked within ±30 %: the default noise (8 % a run, 5 % a session)
    # puts the interval of an identical run at about ±20 % (the 1.5x slower one is far beyond).
    same = run(suite, "--bench-compare=base.json", "--bench-tolerance=0.3")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*ratio*verdict*"])

    monkeypatch.setenv("DLBENCH_TEST_SLOW", "1.5")
    slower = run(suite, "--bench-compare=base.json")
    assert slower.ret == 6, slower.stdout.str()
    slower.stdout.fnmatch_lines(["*fast*regressed*", "performance regressed: *(exit status 6)"])


@pytest.mark.slow
def test_slower_by_suite_override_is_flagged(suite):
    run(suite, "--bench-save=base.json")
    # A heavier candidate made by an override: every step sleeps 3x longer.
    suite.makepyfile(
        defs=DEFS.replace('float(os.environ.get("DLBENCH_TEST_SLOW", "1"))',
                          "float(bench.args[0]) if bench.args else 1.0")
    )
    result = run(suite, "--bench-compare=base.json", "--bench-override", "*.argv=[3]")
    assert result.ret == 6


@pytest.mark.slow
def test_failed_benchmark_wins_over_regression(suite):
    run(suite, "--bench-save=base.json")
    result = run(suite, "--bench-compare=base.json", "--bench-override", "broken.enabled=true")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_missing_baseline_is_one_line_and_status_4_before_the_run(suite):
    # issue 25 item 4: it was exit 0 with a PytestWarning pointing at the plugin's source, twice.
    result = run(suite, "--bench-compare=nope.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = "\n".join([*result.outlines, *result.errlines])
    assert output.count("baseline not found: nope.json") == 1
    result.stderr.fnmatch_lines(["ERROR: --bench-compare: baseline not found: nope.json"])
    assert "PytestWarning" not in output and "warnings summary" not in output
    assert not (suite.path / "out").exists()  # nothing ran


@pytest.mark.slow
def test_missing_baseline_with_require_is_status_7(suite):
    result = run(suite, "--bench-compare=nope.json", "--bench-require-baseline")
    assert result.ret == 7


@pytest.mark.parametrize("content", ["{not json", '{"some": "other tool"}'])
def test_corrupt_or_foreign_baseline_is_a_one_line_usage_error(suite, content):
    (suite.path / "bad.json").write_text(content)
    result = run(suite, "--bench-compare=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR")]
    assert len(errors) == 1 and "bad.json" in errors[0]
    assert not (suite.path / "out").exists()  # nothing ran


@pytest.mark.slow
def test_html_and_export_files(suite):
    result = run(suite, "--bench-html=r/report.html", "--bench-export=r/bench.json")
    assert result.ret == 0
    html = (suite.path / "r" / "report.html").read_text()
    assert "<svg" in html and "fast" in html
    exported = json.loads((suite.path / "r" / "bench.json").read_text())
    assert {e["name"] for e in exported} >= {"fast", "other"}
    assert all(e["unit"] for e in exported)


def _reporter():
    """plugin/reporter as the next in-process run will use it: the one in sys.modules (an
    earlier in-process run's snapshot may have dropped the one the package still names)."""
    import importlib

    return importlib.import_module("pytest_dlbench.plugin.reporter")


def test_ctrl_c_while_the_outputs_are_written_keeps_the_table_and_says_one_line(
    suite, monkeypatch
):
    """Issue 40 item 8: Ctrl-C during the save / autosave / HTML gave a 34-frame traceback,
    exit 130, and no table or score; now the table and the score, one line, exit status 2."""
    def interrupted(evaluation):
        raise KeyboardInterrupt

    monkeypatch.setattr(_reporter(), "write_evaluation", interrupted)
    result = run(suite, "--bench-save=saved.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = result.stdout.str()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    result.stdout.fnmatch_lines(["*= dlbench =*", "score: *",
                                 "interrupted while the outputs were written: *dlbench report *",
                                 "results: *out/runs/s.*"])


@pytest.mark.slow
def test_a_regression_whose_confirmation_was_interrupted_says_exit_status_2(
    suite, monkeypatch
):
    """Issue 40 item 13: Ctrl-C during --bench-confirm exits 2; the last line said 'exit
    status 6'."""
    assert run(suite, "--bench-save=base.json").ret == 0
    monkeypatch.setenv("DLBENCH_TEST_SLOW", "4")  # far beyond any noise: regressed

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_reporter(), "confirm_suspects", interrupted)
    result = run(suite, "--bench-compare=base.json", "--bench-confirm=1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "confirmation interrupted: the first pass's verdicts stand",
        "performance regressed: * (the first pass's verdict, interrupted: exit status 2)"])
    assert "(exit status 6)" not in result.stdout.str()
