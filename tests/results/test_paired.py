"""Paired verdicts of a --bench-against run (results/judge/paired.py), from written streams."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from _paired import LOAD, WOBBLE, judge, paired_run
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench import layout
from pytest_dlbench.cli import main
from pytest_dlbench.report.terminal import render_paired
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.judge import (
    ALPHA,
    FAILED,
    IMPROVED,
    INCOMPARABLE,
    INCONCLUSIVE,
    REGRESSED,
    UNCHANGED,
    Comparison,
    pairs_of,
    summarize_paired_dir,
)
from pytest_dlbench.run.against import round_order


def test_abba_order() -> None:
    assert [round_order(r) for r in range(4)] == [
        ("base", "candidate"), ("candidate", "base"), ("base", "candidate"), ("candidate", "base")
    ]


def test_pairs_cancel_the_load_that_welch_sees(tmp_path: Path) -> None:
    # 5 % slower under load swings of 40 %: the paired test sees it, two-sample Welch cannot.
    run = paired_run(tmp_path, {"x": (100.0, 95.0)})
    cand, base, comparison = judge(run)
    x = comparison.get("x")
    assert x is not None and x.verdict == REGRESSED
    assert x.ratio == pytest.approx(0.95, abs=0.005)
    assert x.ci is not None and x.ci[0] < x.ratio < x.ci[1] < 1
    assert x.p_value is not None and x.p_value < 0.001
    assert x.samples == (6, 6)
    assert comparison.regressed and comparison.score_verdict == REGRESSED
    assert comparison.test == "t" and comparison.against is not None
    assert comparison.against.rev == "main"
    from pytest_dlbench.results.judge import compare

    # Against a saved baseline the same runs are 5 % below, but within the noise between runs:
    # inconclusive (issue 26), never regressed.
    assert compare(cand, base).get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]


def test_same_code_is_unchanged_and_faster_is_improved(tmp_path: Path) -> None:
    _, _, same = judge(paired_run(tmp_path / "a", {"x": (100.0, 100.0)}))
    assert same.get("x").verdict == UNCHANGED  # type: ignore[union-attr]
    assert not same.regressed
    ci = same.get("x").ci  # type: ignore[union-attr]
    assert ci is not None and ci[0] < 1 < ci[1]
    _, _, faster = judge(paired_run(tmp_path / "b", {"x": (100.0, 110.0)}))
    assert faster.get("x").verdict == IMPROVED  # type: ignore[union-attr]
    assert faster.score_verdict == IMPROVED


def test_within_tolerance_is_unchanged(tmp_path: Path) -> None:
    run = paired_run(tmp_path, {"x": (100.0, 98.5)})
    _, _, comparison = judge(run)
    x = comparison.get("x")
    assert x is not None and x.p_value is not None and x.p_value < ALPHA
    assert x.verdict == UNCHANGED  # significant, but 1.5 % is inside the 3 % tolerance
    _, _, strict = judge(run, tolerance=0.01)
    assert strict.get("x").verdict == REGRESSED  # type: ignore[union-attr]


def test_wilcoxon_test(tmp_path: Path) -> None:
    run = paired_run(tmp_path, {"x": (100.0, 95.0)})
    _, _, comparison = judge(run, test="wilcoxon")
    x = comparison.get("x")
    assert comparison.test == "wilcoxon"
    assert x is not None and x.verdict == REGRESSED
    assert x.p_value == pytest.approx(1 / 64)  # every one of 6 pairs lower: the exact minimum
    assert x.ci is not None and x.ci[1] < 1
    # Four rounds cannot reach 0.05 with ranks (2**-4 = 0.0625): 10 % slower without the
    # evidence is inconclusive, as against a saved baseline (issue 38; "unchanged" before).
    few = paired_run(tmp_path / "few", {"x": (100.0, 90.0)}, rounds=4)
    _, _, four = judge(few, test="wilcoxon")
    assert four.get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    assert judge(few, test="t")[2].get("x").verdict == REGRESSED  # type: ignore[union-attr]


def burst_run(tmp: Path, *, base: float, cand: float, rounds: int = 8) -> Path:
    """Steady rates per round with a small wobble, and in one base run a burst of load over
    4 of its 10 steps (at a third of the speed): what gate_power saw on a shared machine."""
    run = tmp / "run"
    base_dir = layout.base_dir(run)
    base_dir.mkdir(parents=True, exist_ok=True)
    for r in range(rounds):
        jitter = [WOBBLE[(r + i) % 6] for i in range(10)]
        burst = [-2 / 3] * 4 if r == 2 else []
        write_run(base_dir, "x", steady_at(base, jitter=burst + jitter[len(burst):]), repeat=r)
        write_run(run, "x", steady_at(cand, jitter=jitter[::-1]), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "t", "rate": "median",
                               "warnings": []})
    return run


def test_median_rate_resists_a_burst_inside_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # 5 % slower; one base run lost 27 % of its window rate to a burst. Its window rate makes
    # that round look 30 % faster and hides the regression; its median step rate does not.
    run = burst_run(tmp_path, base=100.0, cand=95.0)
    base = summarize_dir(layout.base_dir(run)).get("x")
    assert base is not None
    burst = next(r for r in base.runs if r.repeat == 2)
    assert burst.rate == pytest.approx((6 * 100 + 4 * 100 / 3) / 10, rel=0.01)  # 73.3
    assert burst.median_rate == pytest.approx(100, rel=0.01)
    window = judge(run, rate="window")[2]
    assert window.pair_rate == "window"
    # The burst widens the window rates' interval: not unchanged (the 5 % slowdown it hides
    # no longer passes the gate), inconclusive.
    assert window.get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    median = judge(run)[2]  # against.json says median
    assert median.pair_rate == "median"
    x = median.get("x")
    assert x is not None and x.verdict == REGRESSED
    assert x.ratio == pytest.approx(0.95, abs=0.01)
    # Same code: the median rate does not turn the burst into a verdict either way.
    same = judge(burst_run(tmp_path / "same", base=100.0, cand=100.0))[2]
    assert same.get("x").verdict == UNCHANGED  # type: ignore[union-attr]
    # dlbench report takes the choice too, and says it in the verdict line.
    write_manifest(run, {"x": {}})
    assert main(["report", str(run), "--paired-rate", "window"]) == gate.EXIT_INCONCLUSIVE
    assert "median step rates" not in capsys.readouterr().out
    assert main(["report", str(run)]) == gate.EXIT_REGRESSED
    assert "median step rates" in capsys.readouterr().out
    with pytest.raises(ValueError, match="paired rate"):
        pairs_of(base, base, "mean")


def test_median_rate_of_time_to_train_is_its_rate(tmp_path: Path) -> None:
    write_run(tmp_path, "x", steady_at(10.0, jitter=[0.5, -0.2, 0.1]), repeat=0)
    run = summarize_dir(tmp_path).get("x").runs[0]  # type: ignore[union-attr]
    assert run.median_rate == pytest.approx(10.0)  # the median step, not the window's rate
    timed = dataclasses.replace(run, metric="total_time_secs")
    assert timed.median_rate == timed.rate


def regime_run(tmp: Path, *, base: float, cand: float, rounds: int = 10, seed: int = 1) -> Path:
    """What gate_power saw on a shared 2-core VM: the machine runs at full speed or at half
    speed in spells of seconds, so a run's steps mix the two and whole runs can be slowed, on
    either side of a pair."""
    import random

    rng = random.Random(seed)
    run = tmp / "run"
    base_dir = layout.base_dir(run)
    base_dir.mkdir(parents=True, exist_ok=True)

    def steps(rate: float) -> list[tuple[float, float]]:
        slow_from = rng.choice([0, 0, 10, 25, 40, 50, 50, 50])  # where the slow spell starts
        return [(rate * (0.5 if i >= slow_from else 1.0) * (1 + rng.gauss(0, 0.01)), 1.0)
                for i in range(50)]

    for r in range(rounds):
        write_run(base_dir, "x", steps(base), repeat=r)
        write_run(run, "x", steps(cand), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "quantile", "warnings": []})
    return run


def test_quantile_test_sees_through_spells_of_half_speed(tmp_path: Path) -> None:
    slower = regime_run(tmp_path / "slower", base=100.0, cand=95.0)
    x = judge(slower)[2].get("x")  # against.json says quantile
    assert x is not None and x.verdict == REGRESSED
    assert x.ratio == pytest.approx(0.95, abs=0.01)
    assert x.ci is not None and x.ci[0] < x.ratio < x.ci[1] < 1
    assert x.p_value is not None and x.p_value < 0.05
    # The per-run tests are at the mercy of the spells: the same streams cannot prove the
    # slowdown, inconclusive (issue 38; "unchanged" before).
    assert judge(slower, test="t")[2].get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    for seed in range(3):  # same code: no false alarm (unchanged where the spells allow)
        same = regime_run(tmp_path / f"same{seed}", base=100.0, cand=100.0, seed=seed)
        word = judge(same)[2].get("x").verdict  # type: ignore[union-attr]
        assert word in (UNCHANGED, INCONCLUSIVE), word


def test_failed_rounds_are_left_out_and_failures_named(tmp_path: Path) -> None:
    run = paired_run(tmp_path, {"x": (100.0, 95.0), "dead": (10.0, 10.0)})
    write_run(layout.base_dir(run), "x", repeat=2, status="crash", reason="crash: boom")
    for r in range(6):
        write_run(run, "dead", repeat=r, status="oom", reason="oom: CUDA out of memory")
    cand, base, comparison = judge(run)
    x = comparison.get("x")
    assert x is not None and x.samples == (5, 5)  # round 2's base run crashed
    assert len(pairs_of(base.get("x"), cand.get("x"))) == 5
    assert comparison.get("dead").verdict == FAILED  # type: ignore[union-attr]
    text = render_paired(comparison, base, width=120)
    # The crashed run had measured its window: shown, not scored (as the run's own failures).
    assert "base side failed x[D0-R2]: crash: boom (it measured 10.00 items/s, not scored)" in text
    assert "failed runs" not in text


def test_base_without_the_benchmark_lists_it(tmp_path: Path) -> None:
    run = paired_run(tmp_path, {"x": (100.0, 100.0)}, base_only=("gone",))
    for r in range(6):
        write_run(run, "new", steady_at(5.0), repeat=r)
    _, _, comparison = judge(run)
    assert comparison.only_current == ("new",)
    assert comparison.only_baseline == ("gone",)
    assert [b.name for b in comparison.benchmarks] == ["x"]
    # Every base run failed: no pair, no verdict, and a note says why.
    run2 = paired_run(tmp_path / "b", {"y": (100.0, 100.0)})
    for r in range(6):
        write_run(layout.base_dir(run2), "y", repeat=r, status="crash", reason="crash: x")
    y = judge(run2)[2].get("y")
    assert y is not None and y.verdict == INCOMPARABLE and y.note == "no base run succeeded"


def test_sides_measured_in_other_units_are_not_compared(tmp_path: Path) -> None:
    # The base side measured items/s, the candidate TFLOP/s (the benchmark changed what it
    # logs): no ratio, no verdict, no term of the score, and a warning every report shows.
    run = paired_run(tmp_path, {"x": (100.0, 100.0)})
    for r in range(6):
        write_run(layout.base_dir(run), "flops", steady_at(100.0), repeat=r, units="items/s")
        write_run(run, "flops", steady_at(30.0), repeat=r, units="TFLOP/s")
    _, _, comparison = judge(run)
    flops = comparison.get("flops")
    assert flops is not None and flops.verdict == INCOMPARABLE and flops.ratio is None
    assert flops.note == "not compared: measured in TFLOP/s here and in items/s on the base side"
    assert comparison.warnings == (f"flops: {flops.note}",)
    assert not comparison.regressed and comparison.score_rate_ratio == pytest.approx(1.0, 0.01)


def _four_slower(tmp_path: Path, noise: tuple[float, ...]) -> Comparison:
    """Four benchmarks 4 % slower, their pairs disturbed by ``noise`` (round r of benchmark k
    by ``noise[(r + k) % 6]``), judged over 6 rounds."""
    run = tmp_path / "run"
    base = layout.base_dir(run)
    base.mkdir(parents=True)
    for k, name in enumerate("abcd"):
        for r in range(6):
            j = noise[(r + k) % 6]
            write_run(base, name, steady_at(100.0 * LOAD[r]), repeat=r)
            write_run(run, name, steady_at(96.0 * LOAD[r] * (1 + j)), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "b" * 40, "rounds": 6})
    return judge(run)[2]


def test_score_combines_the_benchmarks(tmp_path: Path) -> None:
    # Each benchmark's pairs too noisy for a verdict of its own: the score's test pools them.
    # (b and d read 8 % slower without the evidence, a and c within the tolerance with
    # intervals reaching below it: all inconclusive.)
    comparison = _four_slower(tmp_path, (0.05, -0.04, 0.03, -0.05, 0.04, -0.03))
    assert [b.verdict for b in comparison.benchmarks] == [INCONCLUSIVE] * 4
    assert comparison.score_rate_ratio == pytest.approx(0.96, abs=0.01)
    assert comparison.score_ci is not None and comparison.score_ci[1] < 1
    assert comparison.score_p_value is not None and comparison.score_p_value < ALPHA / 2
    assert comparison.score_verdict == REGRESSED and comparison.regressed


def test_score_of_noisy_rounds_needs_half_alpha(tmp_path: Path) -> None:
    # Pairs ±10 % apart: the pooled p is below alpha but not half of it, and an unchanged pair
    # would land beyond the tolerance 1 time in 9 at this noise: inconclusive (paired_noise).
    comparison = _four_slower(tmp_path, (0.10, -0.08, 0.06, -0.10, 0.08, -0.06))
    assert comparison.score_p_value is not None
    assert ALPHA / 2 < comparison.score_p_value < ALPHA
    assert comparison.score_verdict == INCONCLUSIVE and not comparison.regressed
    assert "rounds are noisy" in comparison.score_reason
    assert "needs p <= 0.025" in comparison.score_reason


def test_render_paired_table(tmp_path: Path) -> None:
    run = paired_run(tmp_path, {"resnet": (100.0, 90.0), "bert": (500.0, 500.0)})
    _, base, comparison = judge(run)
    text = render_paired(comparison, base, width=120)
    lines = text.splitlines()
    assert lines[0] == ("against main (aaaaaaaaaa): 6 rounds, base and candidate alternating "
                        "in ABBA order")
    # The judged ratio under its name (the t-test's: the rounds' geometric mean, issue 38).
    assert lines[1].split() == ["bench", "base", "candidate", "units", "geomean", "ratio", "90%",
                                "CI", "verdict"]  # p, pairs and adj ratio with -v (issue 25)
    verbose = render_paired(comparison, base, width=120, verbosity=1).splitlines()[1].split()
    assert verbose[-4:] == ["p", "pairs", "adj", "ratio"]
    resnet = next(line for line in lines if line.startswith("resnet"))
    assert "0.900" in resnet and "regressed" in resnet and "[0.89" in resnet
    assert any(line.startswith("score: ") and "(rate ratio 0.9" in line
               and "], regressed; adj score ratio 0.9" in line for line in lines)
    assert "paired t-test on the log ratios of the rounds" in text
    assert render_paired(comparison, verbosity=-1).startswith("score: ")
    # The JSON names the judged ratio and says the rule, as the terminal does (issue 38).
    data = comparison.to_dict()
    assert data["ratio_name"] == "geomean ratio" and data["rule"] in text
    assert data["ratios"]["ratio"].startswith("geomean ratio = the geometric mean")
    assert "not judged" in data["ratios"]["score_ratio"]


def test_dlbench_report_recomputes_the_paired_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    run = paired_run(tmp_path, {"x": (100.0, 90.0)})
    write_manifest(run, {"x": {}})
    assert main(["report", str(run)]) == gate.EXIT_REGRESSED
    out = capsys.readouterr().out
    assert "against main" in out and "regressed" in out
    assert main(["report", str(run), "--paired-test", "wilcoxon"]) == gate.EXIT_REGRESSED
    assert "Wilcoxon signed-rank" in capsys.readouterr().out
    assert main(["report", str(layout.base_dir(run))]) == gate.OK  # the base side alone
    assert "against" not in capsys.readouterr().out
    same = paired_run(tmp_path / "same", {"x": (100.0, 100.0)})
    assert main(["report", str(same), "-q"]) == gate.OK
    assert capsys.readouterr().out.startswith("score: ")


def test_summarize_paired_dir_is_none_for_a_plain_run(tmp_path: Path) -> None:
    write_run(tmp_path, "x", steady_at(10.0))
    assert summarize_paired_dir(tmp_path) is None
    assert summarize_dir(tmp_path).get("x") is not None


def test_layout_of_the_sides(tmp_path: Path) -> None:
    assert layout.side_dir(tmp_path, "candidate") == tmp_path
    assert layout.side_dir(tmp_path, "base") == tmp_path / "base"
    with pytest.raises(ValueError):
        layout.side_dir(tmp_path, "other")
    layout.write_against(tmp_path, {"rev": "HEAD~1"})
    against = layout.read_against(tmp_path)
    assert against is not None and against.rev == "HEAD~1" and against.rounds is None
    assert against.to_dict() == {"version": 1, "rev": "HEAD~1"}
    # The base side's streams are not the candidate's: a plain glob of the run directory.
    write_run(layout.base_dir(tmp_path), "x", repeat=0)
    assert layout.stream_paths(tmp_path) == []


def test_html_report_shows_the_pairs(tmp_path: Path) -> None:
    from pytest_dlbench.report.html import render_html

    cand, _, comparison = judge(paired_run(tmp_path, {"x": (100.0, 90.0)}))
    page = render_html(cand, comparison=comparison)
    section = page[page.index('id="comparison"'):]
    assert "Paired against <code>main (aaaaaaaaaa), 6 rounds</code>" in section
    assert "<th>90 % CI</th>" in section and "<th>perf_adj ratio</th>" in section
    assert "regressed" in section
    # One ratio, named for what it is, and the rule, as the terminal says them (issue 38).
    assert "<th>geomean ratio</th>" in section and "perf / baseline perf" not in section
    assert "geomean ratio = the geometric mean of the rounds" in section
    assert comparison.rule in section
    card = page[page.index('id="score-ratio-card"'):]
    assert f"× {comparison.score_rate_ratio:.3f}" in card[:400]


@pytest.mark.parametrize(("cand_ok", "base_ok", "word"), [
    (False, True, FAILED), (True, False, INCOMPARABLE), (False, False, INCOMPARABLE)])
def test_a_side_with_no_run_gets_the_same_word_paired_or_saved(
        tmp_path: Path, cand_ok: bool, base_ok: bool, word: str) -> None:
    # One rule (results/judge/verdict.judge_unmatched): both sides failed is "incomparable" in
    # either mode (the paired gate said "failed" before); the candidate's failure fails the run
    # anyway.
    run = paired_run(tmp_path, {"x": (100.0, 100.0)}, rounds=4)
    for r in range(4):
        if not cand_ok:
            write_run(run, "x", repeat=r, status="crash", reason="crash: boom")
        if not base_ok:
            write_run(layout.base_dir(run), "x", repeat=r, status="crash", reason="crash: boom")
    cand, base, comparison = judge(run)
    assert comparison.get("x").verdict == word  # type: ignore[union-attr]
    from pytest_dlbench.results.judge import compare

    assert compare(cand, base).get("x").verdict == word  # type: ignore[union-attr]


def _one_bench_quantile_run(tmp: Path, rates: list[tuple[float, float]]) -> Path:
    """One benchmark ``x`` judged by the quantile test, round r's runs at ``rates[r]`` (base,
    candidate) with a little noise of their own within each run."""
    run = tmp / "run"
    base_dir = layout.base_dir(run)
    base_dir.mkdir(parents=True, exist_ok=True)
    for r, (b, c) in enumerate(rates):
        jitter = [0.01 * ((i * 7 + r) % 5 - 2) for i in range(20)]
        write_run(base_dir, "x", steady_at(b, 20, jitter), repeat=r)
        write_run(run, "x", steady_at(c, 20, jitter[::-1]), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": len(rates),
                               "order": "ABBA", "test": "quantile", "warnings": []})
    return run


def test_a_one_benchmark_score_says_what_its_benchmark_says(tmp_path: Path) -> None:
    """Three rounds: the permutation test cannot go below 2**-3 = 0.125, and the benchmark is
    inconclusive; the score's t-test on the bootstrap's variance read p 0.02, regressed (exit
    6) where its only benchmark could not. A one-benchmark score is its benchmark's evidence."""
    run = _one_bench_quantile_run(tmp_path, [(100.0, 95.0), (90.0, 85.0), (95.0, 90.5)])
    comparison = judge(run)[2]
    x = comparison.get("x")
    assert x is not None and x.verdict == INCONCLUSIVE and x.p_value == pytest.approx(0.125)
    assert comparison.score_p_value == pytest.approx(x.p_value)
    assert comparison.score_rate_ratio == pytest.approx(x.ratio)
    assert comparison.score_ci == x.ci
    assert comparison.score_verdict == INCONCLUSIVE and not comparison.regressed


def test_a_score_p_is_never_below_what_its_rounds_allow(tmp_path: Path) -> None:
    """Two benchmarks of three rounds each, every round slower: the quantile test's smallest p
    is 2**-3, and the score's combined p is held there, not below."""
    run = tmp_path / "run"
    base_dir = layout.base_dir(run)
    base_dir.mkdir(parents=True, exist_ok=True)
    for name in ("x", "y"):
        for r, load in enumerate((1.0, 0.9, 0.95)):
            jitter = [0.01 * ((i * 3 + r) % 5 - 2) for i in range(20)]
            write_run(base_dir, name, steady_at(100.0 * load, 20, jitter), repeat=r)
            write_run(run, name, steady_at(94.0 * load, 20, jitter), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": 3,
                               "order": "ABBA", "test": "quantile", "warnings": []})
    comparison = judge(run)[2]
    assert comparison.score_p_value is not None and comparison.score_p_value >= 0.125
    assert comparison.score_verdict != REGRESSED and not comparison.regressed


def test_a_clean_regression_of_steps_alike_is_regressed(tmp_path: Path) -> None:
    """A log at millisecond resolution: "time 0.013s" every step on one side, 0.016 s on the
    other, in every one of 10 rounds. The quantile test's ties held p at 56/1024: inconclusive,
    exit 9, whatever the change."""
    run = tmp_path / "run"
    base_dir = layout.base_dir(run)
    base_dir.mkdir(parents=True)
    for r in range(10):
        write_run(base_dir, "x", [(1, 0.013)] * 20, repeat=r)
        write_run(run, "x", [(1, 0.016)] * 20, repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": 10,
                               "order": "ABBA", "test": "quantile", "warnings": []})
    comparison = judge(run)[2]
    x = comparison.get("x")
    assert x is not None and x.verdict == REGRESSED
    assert x.p_value == pytest.approx(1 / 1024)
    assert comparison.regressed
