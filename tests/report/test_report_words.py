"""Words that say no more than the run (issue 46, item 5): a subset's score is a subset's, a run
whose weighted figures are in doubt is no green all-clear, a speed-up with a side in doubt is
flagged, a paired page says the rounds that ran and what it compares with, the closing advice
names the cause the verdicts gave, and the gate's verdict is the last line pytest prints."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _preset_runs import COMPILED, records, suite_of

from pytest_dlbench import layout
from pytest_dlbench.report.html import render_html
from pytest_dlbench.report.html_compare import gate_banner, rounds_text, section_title
from pytest_dlbench.report.terminal import inconclusive_lines, render_summary, score_line
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import (
    compile_rows,
    figure_doubt,
    figures_in_doubt,
    machine_busy,
    run_from_records,
    summarize_runs,
)
from pytest_dlbench.results.judge import (
    BUSY as gate_BUSY,
)
from pytest_dlbench.results.judge import (
    BUSY_ADVICE,
    BUSY_DOUBT,
    FEW_ROUNDS,
    FEW_ROUNDS_ADVICE,
    INCONCLUSIVE,
    NOISE,
    PAIRED_INCONCLUSIVE_ADVICE,
    BenchComparison,
    Comparison,
    compare,
)
from pytest_dlbench.results.model import SCHEMA, RunResult, SuiteSummary

BUSY = machine_busy([1.5, 1.6, 1.7, 1.6], whole_machine=True)
assert BUSY is not None and BUSY.busy


def saved(benches: dict[str, dict[str, Any]], **top: Any) -> SuiteSummary:
    """A saved summary of ``benches`` (name: {rate, runs, weight, busy, unreliable})."""
    data: dict[str, Any] = {"schema": SCHEMA, "version": 1, "suite": "s", **top,
                            "benchmarks": {}}
    for name, b in benches.items():
        runs = [{"rate": b["rate"], "status": "ok", "repeat": i, "device": 0,
                 "telemetry": {"busy": b.get("busy", False),
                               "busy_reason": BUSY.reason if b.get("busy") else None}}
                for i in range(b.get("runs", 3))]
        data["benchmarks"][name] = {
            "n": len(runs), "fail": 0, "perf": b["rate"], "perf_adj": b["rate"],
            "weight": b.get("weight", 1.0), "units": "items/s", "runs": runs,
            "unreliable": b.get("unreliable")}
    return SuiteSummary.from_dict(data)


# -- 1. a subset's score -----------------------------------------------------------------------
def _subset_run(tmp_path: Path) -> SuiteSummary:
    run = run_from_records(records("a", 100.0))
    manifest = {"suite": "s", "benchmarks": {"a": {"weight": 1.0}},
                layout.SUITE_WEIGHTED: ["a", "b", "c"]}
    return summarize_runs([run], manifest, run_dir=str(tmp_path))


def test_a_subset_says_its_score_is_a_subsets_everywhere(tmp_path: Path) -> None:
    summary = _subset_run(tmp_path)
    assert summary.subset and summary.left_out == ("b", "c")
    assert not summary.incomplete  # left out by the selection: never "did not run"
    line = score_line(summary)
    assert line.startswith("score of 1 of the suite's 3 weighted benchmarks: 100")
    assert "\nscore: " not in render_summary(summary)
    page = render_html(summary)
    assert "Score of 1 of the suite&#39;s 3 weighted benchmarks" in page
    assert 'id="subset"' in page and "left out: b, c" in page
    saved_form = json.loads(json.dumps(summary.to_dict()))
    assert saved_form["score"] == pytest.approx(summary.score)  # the old key stays
    assert saved_form["subset"] == {"weighted": 1, "of": 3, "left_out": ["b", "c"]}
    back = SuiteSummary.from_dict(saved_form)
    assert back.left_out == ("b", "c") and score_line(back) == line


def test_the_whole_suite_says_score_as_before(tmp_path: Path) -> None:
    run = run_from_records(records("a", 100.0))
    manifest = {"suite": "s", "benchmarks": {"a": {"weight": 1.0}},
                layout.SUITE_WEIGHTED: ["a"]}
    summary = summarize_runs([run], manifest)
    assert not summary.subset and score_line(summary).startswith("score: 100")
    assert "subset" not in summary.to_dict()
    assert 'id="subset"' not in render_html(summary)


# -- 2. the banner of a run whose figures are in doubt ------------------------------------------
def test_a_busy_or_unreliable_weighted_benchmark_puts_the_banner_in_doubt() -> None:
    busy = saved({"a": {"rate": 100.0, "busy": True}, "b": {"rate": 50.0}})
    assert figures_in_doubt(busy) == ("a",)
    banner = gate_banner(busy, None, gate.OK)
    assert (banner.css, banner.headline) == ("warn", "Every benchmark ran, figures in doubt")
    assert "a's figure is in doubt" in banner.detail
    noisy = saved({"a": {"rate": 100.0, "unreliable": "std% 62%: noisy steps"}})
    assert gate_banner(noisy, None, gate.OK).headline == "Every benchmark ran, figures in doubt"
    assert figure_doubt(noisy.benchmarks[0]) == "unreliable (std% 62%)"
    passed = compare(busy, saved({"a": {"rate": 100.0}, "b": {"rate": 50.0}}))
    banner = gate_banner(busy, passed, gate.OK)
    assert (banner.css, banner.headline) == ("warn", "Gate passed, figures in doubt")
    # An unweighted benchmark's doubt is not the score's: the all-clear stands.
    quiet = saved({"a": {"rate": 100.0, "busy": True, "weight": 0.0}, "b": {"rate": 50.0}})
    assert figures_in_doubt(quiet) == ()
    assert gate_banner(quiet, None, gate.OK).css == "good"
    assert 'banner gate warn' in render_html(busy, status=gate.OK)


# -- 3. a compiled speed-up with a side in doubt ---------------------------------------------
def _busy(run: RunResult) -> RunResult:
    return dataclasses.replace(run, telemetry={**run.telemetry, "busy": True,
                                               "busy_reason": BUSY.reason})


def test_a_speedup_whose_eager_side_was_busy_is_flagged_on_its_row() -> None:
    eager = _busy(run_from_records(records("mlp-eager", 100.0, ["--batch-size", "8"])))
    compiled = run_from_records(records("mlp-compiled", 28.0, ["--batch-size", "8", "--compile"],
                                        compile_record=COMPILED))
    summary = summarize_runs([eager, compiled])
    (row,) = compile_rows(summary)
    assert row.speedup == pytest.approx(0.28)
    assert row.doubt == "eager mlp-eager: busy machine (1 of 1 run)"
    text = render_summary(summary)
    assert "0.28x?" in text
    assert "speedup in doubt: mlp-compiled 0.28x (eager mlp-eager: busy machine (1 of 1 run))" \
        in text.splitlines()
    page = render_html(summary)
    assert 'class="speedup-doubt"' in page and "speed-up in doubt: eager mlp-eager" in page
    # Both sides sound: no mark, no line.
    sound = suite_of(records("mlp-eager", 100.0, ["--batch-size", "8"]),
                     records("mlp-compiled", 250.0, ["--batch-size", "8", "--compile"],
                             compile_record=COMPILED))
    assert compile_rows(sound)[0].doubt is None
    assert "speedup in doubt" not in render_summary(sound) and "2.50x?" not in \
        render_summary(sound)


# -- 4. the paired page: the rounds that ran, and what it compares with ----------------------
def _paired(stops: dict[str, Any], *, pairs: int = 6, p: float | None = 0.2,
            doubts: tuple[str, ...] = ()) -> Comparison:
    row = BenchComparison(name="a", units="items/s", weight=1.0, current=90.0, baseline=100.0,
                          ratio=0.9, verdict=INCONCLUSIVE, p_value=p, samples=(pairs, pairs),
                          reason="ratio 0.900 below 0.970, but not significant",
                          doubts=doubts)
    return Comparison(
        benchmarks=(row,), only_current=(), only_baseline=(), current_score=90.0,
        baseline_score=100.0, score_ratio=0.9, score_verdict="unchanged", score_p_value=None,
        tolerance=0.03, alpha=0.05,
        against=layout.Against(rev="main", sha="0123456789abcdef", rounds=10,
                               design="sequential", stops=stops))


def test_the_paired_page_says_the_rounds_that_ran_and_names_its_section() -> None:
    cut = _paired({"a": {"rounds_used": 6, "rounds": 10, "stopped": "all rounds"}})
    assert cut.rounds_ran == (6, 6, 10)
    assert rounds_text(cut) == "stopped after 6 of 10 rounds"
    assert section_title(cut) == "Paired comparison with main"
    summary = saved({"a": {"rate": 90.0}})
    page = render_html(summary, comparison=cut, status=gate.EXIT_INCONCLUSIVE)
    assert "<h2>Paired comparison with main</h2>" in page
    assert "main (0123456789), stopped after 6 of 10 rounds" in page
    assert "Comparison with the baseline" not in page and "), 10 rounds" not in page
    full = _paired({"a": {"rounds_used": 10, "rounds": 10, "stopped": "all rounds"}}, pairs=10)
    assert rounds_text(full) == "10 rounds"
    saved_mode = dataclasses.replace(cut, against=None)
    assert section_title(saved_mode) == "Comparison with the baseline"
    assert section_title(dataclasses.replace(cut, against=layout.Against(rounds=10))) == \
        "Comparison with the base revision"


# -- 5. the closing advice names the cause -----------------------------------------------------
def test_a_busy_machine_is_said_as_such_with_its_remedy() -> None:
    now = saved({"x": {"rate": 80.0, "busy": True}})
    comparison = compare(now, saved({"x": {"rate": 100.0}}))
    assert comparison.get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    assert comparison.inconclusive_causes == (gate_BUSY,)
    last = inconclusive_lines(comparison)[-1]
    assert last == (f"the machine was busy during the runs (exit status 9): {BUSY_ADVICE}")
    assert "noise is too large" not in last
    record = gate.gate_record(comparison, gate.EXIT_INCONCLUSIVE)
    assert record is not None and record["causes"] == [gate_BUSY]
    assert record["advice"] == BUSY_ADVICE
    banner = gate_banner(now, comparison, gate.EXIT_INCONCLUSIVE)
    assert banner.headline == "Gate inconclusive: the machine was busy during the runs"
    assert "The machine was busy during the runs: rerun on a quieter runner" in render_html(
        now, comparison=comparison, status=gate.EXIT_INCONCLUSIVE)


def test_paired_noise_and_too_few_rounds_get_their_own_advice() -> None:
    full = _paired({"a": {"rounds_used": 10, "rounds": 10, "stopped": "all rounds"}}, pairs=10)
    assert full.inconclusive_causes == (NOISE,)
    assert inconclusive_lines(full)[-1] == (
        f"the noise is too large for the tolerance (exit status 9): "
        f"{PAIRED_INCONCLUSIVE_ADVICE}")
    cut = _paired({"a": {"rounds_used": 6, "rounds": 10, "stopped": "all rounds"}})
    assert cut.inconclusive_causes == (FEW_ROUNDS,)
    assert inconclusive_lines(cut)[-1] == (
        f"too few rounds ran to tell (exit status 9): {FEW_ROUNDS_ADVICE}")
    interrupted = _paired({})  # cut short before its rule decided: no stop recorded
    assert interrupted.inconclusive_causes == (FEW_ROUNDS,)
    one_pair = _paired({"a": {"rounds_used": 10, "rounds": 10, "stopped": "all rounds"}},
                       pairs=10, p=None)
    assert one_pair.inconclusive_causes == (FEW_ROUNDS,)
    busy = _paired({"a": {"rounds_used": 10, "rounds": 10, "stopped": "all rounds"}},
                   pairs=10, doubts=(f"{BUSY_DOUBT} during 3 of the base side's 10 runs "
                                     "and none of the other side's",))
    assert busy.inconclusive_causes == (gate_BUSY,)
    assert inconclusive_lines(busy)[-1].startswith("the machine was busy during the runs")


# -- 6. the gate's verdict is the last line ----------------------------------------------------
DEFS = textwrap.dedent(
    """
    import time

    def sleeper(bench):
        seconds = 0.002 * (float(bench.args[0]) if bench.args else 1.0)
        for _ in bench.iterate(range(10_000), batch_size=8):
            time.sleep(seconds)
    """
)

SUITE = textwrap.dedent(
    """
    _base:
      voir: {options: {skip: 2, stop: 12}}
    fast: {inherits: _base, definition: defs.py:sleeper, weight: 1}
    other: {inherits: _base, definition: defs.py:sleeper, weight: 2}
    """
)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s=SUITE)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--bench-suite=s.yaml", "--bench-isolation=inline",
                              "--bench-base=out", *args)


def _last_line(result: pytest.RunResult) -> str:
    return [line for line in result.outlines if line.strip()][-1]


def test_the_gates_verdict_is_the_last_line_and_a_plain_run_is_unchanged(
        suite: pytest.Pytester) -> None:
    plain = _run(suite, "--bench-save=base.json")
    assert plain.ret == 0
    assert " passed in " in _last_line(plain) and "dlbench:" not in _last_line(plain)
    slower = _run(suite, "--bench-compare=base.json", "--bench-override", "*.argv=[4]")
    # 4x slower: regressed, or inconclusive where this shared machine's load left a side's
    # figure in doubt; either way the gate's word and status close the output.
    word = {gate.EXIT_REGRESSED: "regressed", gate.EXIT_INCONCLUSIVE: "inconclusive"}
    assert slower.ret in word, slower.stdout.str()
    verdict = f"dlbench: {word[slower.ret]} (exit status {slower.ret})"
    assert _last_line(slower) == verdict
    out = slower.stdout.str()
    assert out.index(" passed in ") < out.index(verdict)
    same = _run(suite, "--bench-compare=base.json", "--bench-tolerance=0.9", "-q")
    assert same.ret == gate.OK, same.stdout.str()
    assert _last_line(same) == "dlbench: passed (exit status 0)"


def test_a_k_subset_prints_and_saves_a_subsets_score(suite: pytest.Pytester) -> None:
    result = _run(suite, "-k", "fast", "--bench-save=sub.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["score of 1 of the suite's 2 weighted benchmarks: *"])
    assert "\nscore: " not in result.stdout.str()
    data = json.loads((suite.path / "sub.json").read_text())
    assert data["subset"] == {"weighted": 1, "of": 2, "left_out": ["other"]}
    assert data["score"] > 0


FIXTURE_TESTS = textwrap.dedent(
    """
    import time

    def test_fast(bench):
        for _ in bench.iterate(range(24), batch_size=4):
            time.sleep(0.002)
    """
)


def test_the_bench_fixtures_gate_ends_with_its_verdict_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=FIXTURE_TESTS)

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out", *args)

    first = run("--bench-save=base.json")
    assert first.ret == 0 and "dlbench:" not in _last_line(first)
    again = run("--bench-compare=base.json", "--bench-tolerance=90%")
    assert again.ret == 0, again.stdout.str()
    assert _last_line(again) == "dlbench: passed (exit status 0)"
