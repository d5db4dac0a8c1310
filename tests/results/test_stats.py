"""results/judge/stats.py: the tests of a comparison, and results/judge/verdict.py's rule called
directly (size and significance), and the property that the two kinds of comparison (a saved
baseline, a paired run) judge alike."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from _runs import quiet_sessions, steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.judge import (
    ALPHA,
    FAILED,
    IMPROVED,
    INCOMPARABLE,
    INCONCLUSIVE,
    REGRESSED,
    TOLERANCE,
    UNCHANGED,
    Evidence,
    PairedStats,
    Rule,
    Verdict,
    combined_paired,
    compare,
    compare_paired,
    expanded_level,
    judge,
    judge_score,
    p_in_direction,
    paired_stats,
    quantile_stats,
)
from pytest_dlbench.results.judge import noise as noise_mod
from pytest_dlbench.results.judge import paired as paired_mod
from pytest_dlbench.results.judge import saved as compare_mod
from pytest_dlbench.results.judge.stats import _hodges_lehmann, _signed_rank_counts
from pytest_dlbench.results.model import TOTAL_TIME, SuiteSummary


def verdict(ratio: float, p: float | None, *, tolerance: float = TOLERANCE,
            alpha: float = ALPHA) -> Verdict:
    """Size and significance alone: the core's rule on evidence with no noise model (paired
    evidence without a variance: no claim level), its interval the ratio itself where it was
    tested (certain), none where it was not."""
    ci = (ratio, ratio) if p is not None else None
    return judge(Evidence(ratio, p, ci, paired=True), Rule(tolerance, alpha))


def score_verdict(ratio: float | None, p: float | None, weighted: set[str] | tuple[()]
                  ) -> Verdict:
    found = Evidence(ratio, p, (ratio, ratio), paired=True) if ratio is not None else None
    return judge_score(found, set(weighted), Rule())


# -- verdict() --------------------------------------------------------------------------------
def test_a_regression_needs_size_and_significance() -> None:
    v = verdict(0.9, 0.01)
    assert v.word == REGRESSED
    assert "ratio 0.900 below 0.970" in v.reason and "p 0.01 < alpha 0.05" in v.reason
    assert verdict(1.1, 0.01).word == IMPROVED
    # Slower beyond the tolerance without the evidence: inconclusive, in every mode (issue 38);
    # faster without it: unchanged (no claim, nothing to gate on).
    not_significant = verdict(0.9, 0.2)
    assert not_significant.word == INCONCLUSIVE and "not significant" in not_significant.reason
    assert verdict(1.1, 0.2).word == UNCHANGED
    too_small = verdict(0.98, 0.0)  # certain, but within the tolerance
    assert too_small.word == UNCHANGED and "not beyond ±3%" in too_small.reason


def test_one_sample_has_no_test_and_no_verdict() -> None:
    v = verdict(0.5, None)
    assert v.word == INCONCLUSIVE and "no test" in v.reason  # slower: no evidence either way
    # Faster without a test: no interval excludes a regression either, so not unchanged.
    assert verdict(1.5, None).word == INCONCLUSIVE


def test_a_ratio_exactly_at_the_tolerance_is_not_beyond_it() -> None:
    at_lower, at_upper = 1 - TOLERANCE, 1 + TOLERANCE
    assert verdict(at_lower, 0.0).word == UNCHANGED
    assert verdict(at_upper, 0.0).word == UNCHANGED
    assert verdict(math.nextafter(at_lower, 0.0), 0.0).word == REGRESSED
    assert verdict(math.nextafter(at_upper, 2.0), 0.0).word == IMPROVED
    assert verdict(0.9, ALPHA).word == INCONCLUSIVE  # p exactly at alpha: not significant
    assert verdict(0.9, math.nextafter(ALPHA, 0.0)).word == REGRESSED


def test_the_tolerance_and_alpha_are_the_callers() -> None:
    assert verdict(0.999, 0.01, tolerance=0.0).word == REGRESSED
    assert verdict(1.0, 0.0, tolerance=0.0).word == UNCHANGED  # no change at all
    assert verdict(0.9, 0.08, alpha=0.1).word == REGRESSED
    assert verdict(0.94, 0.01, tolerance=0.05).word == REGRESSED
    assert verdict(0.96, 0.01, tolerance=0.05).word == UNCHANGED
    assert verdict(float("nan"), 0.0).word == INCONCLUSIVE  # nothing excluded
    with pytest.raises(ValueError, match="tolerance"):
        Rule(1.0, ALPHA)
    with pytest.raises(ValueError, match="alpha"):
        Rule(TOLERANCE, 0.0)


def test_the_p_value_reported_is_the_one_of_the_changes_direction() -> None:
    assert p_in_direction(0.9, (0.01, 0.99)) == 0.01
    assert p_in_direction(1.1, (0.99, 0.01)) == 0.01
    assert p_in_direction(1.0, (0.4, 0.6)) == 0.6
    assert p_in_direction(0.9, None) is None
    assert p_in_direction(0.9, (None, None)) is None


def test_the_score_regresses_on_its_combined_p_or_a_weighted_benchmark() -> None:
    assert score_verdict(None, None, ()).word == INCOMPARABLE
    assert score_verdict(0.9, 0.01, ()).word == REGRESSED  # combined evidence alone
    assert score_verdict(0.9, 0.3, {REGRESSED}).word == REGRESSED  # one weighted benchmark
    assert "weighted benchmark regressed" in score_verdict(0.9, 0.3, {REGRESSED}).reason
    assert score_verdict(0.9, 0.3, {UNCHANGED, FAILED}).word == INCONCLUSIVE  # no evidence
    assert score_verdict(0.9, None, {REGRESSED}).word == REGRESSED  # untestable score
    assert score_verdict(0.99, 0.0, {REGRESSED}).word == UNCHANGED  # within the tolerance
    assert score_verdict(1.1, 0.3, {IMPROVED, REGRESSED}).word == IMPROVED
    assert score_verdict(1.1, 0.3, {REGRESSED}).word == UNCHANGED  # the other direction


# -- Welch (a saved baseline) -----------------------------------------------------------------
def test_paired_stats_edge_cases() -> None:
    assert paired_stats([]) is None
    one = paired_stats([math.log(0.9)])
    assert one is not None and one.p_lower is None and one.ci is None and one.p is None
    assert one.ratio == pytest.approx(0.9)
    flat = paired_stats([math.log(0.9)] * 3)  # no noise at all: a deterministic difference
    assert flat is not None and flat.p_lower == 0.0 and flat.ci == (
        pytest.approx(0.9), pytest.approx(0.9))
    with pytest.raises(ValueError, match="unknown paired test"):
        paired_stats([0.1, 0.2], test="sign")


@pytest.mark.parametrize("test", ["t", "wilcoxon"])
def test_no_noise_and_no_change_is_no_evidence_either_way(test: str) -> None:
    """The one no-noise rule: identical sides give p = 1 both ways, as Welch, the quantile
    test and the saved baseline's score always did (the paired t and Wilcoxon said 0.5)."""
    same = paired_stats([0.0] * 4, test=test)
    assert same is not None and (same.p_lower, same.p_higher) == (1.0, 1.0)
    assert same.ratio == 1.0
    quantile = quantile_stats([[100.0, 100.0]] * 4, [[100.0, 100.0]] * 4)
    assert quantile is not None and (quantile.p_lower, quantile.p_higher) == (1.0, 1.0)


def test_the_paired_t_test_is_scipys_and_its_interval_agrees_with_it() -> None:
    from scipy import stats as scipy_stats

    rng = random.Random(1)
    for _ in range(20):
        d = [rng.gauss(-0.03, 0.03) for _ in range(6)]
        s = paired_stats(d, test="t")
        assert s is not None and s.ci is not None and s.p_lower is not None
        expected = scipy_stats.ttest_1samp(d, 0.0, alternative="less").pvalue
        assert s.p_lower == pytest.approx(expected)
        assert s.ratio == pytest.approx(math.exp(sum(d) / len(d)))
        # The interval at 1 - 2 alpha: its upper end is below 1 exactly when p_lower < alpha.
        assert (s.ci[1] < 1) == (s.p_lower < ALPHA)


def test_wilcoxon_is_scipys_signed_rank_test_with_the_hodges_lehmann_ratio() -> None:
    from scipy import stats as scipy_stats

    d = [-0.05, -0.04, -0.06, 0.01, -0.03, -0.05]
    s = paired_stats(d, test="wilcoxon")
    assert s is not None
    assert s.p_lower == pytest.approx(scipy_stats.wilcoxon(d, alternative="less").pvalue)
    assert s.ratio == pytest.approx(math.exp(_hodges_lehmann(d, ALPHA)[0]))
    t = paired_stats(d, test="t")
    assert t is not None and (s.log_mean, s.log_var) == (t.log_mean, t.log_var)  # for the score


def test_signed_rank_distribution_and_hodges_lehmann() -> None:
    counts = _signed_rank_counts(3)  # sums of subsets of {1, 2, 3}
    assert counts == [1, 1, 1, 2, 1, 1, 1] and sum(counts) == 8
    estimate, ci = _hodges_lehmann([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 0.05)
    assert estimate == pytest.approx(0.35)
    # W+ <= 2 has probability 3/64 <= 0.05: the 3rd smallest and 3rd largest of 21 averages.
    assert ci == (pytest.approx(0.2), pytest.approx(0.5))
    assert _hodges_lehmann([0.1, 0.2, 0.3], 0.05)[1] is None  # 2**-3 > 0.05: no interval


def test_quantile_stats_exact_and_sampled_permutations() -> None:
    base = [[100.0, 101.0, 99.0]] * 6
    cand = [[90.0, 91.0, 89.0]] * 6
    s = quantile_stats(base, cand)
    assert s is not None and s.n == 6 and s.ratio == pytest.approx(0.9, rel=0.01)
    assert s.p_lower == pytest.approx(1 / 64)  # every round lower: the exact minimum
    assert s.p_higher == pytest.approx(1.0)
    assert s.ci is not None and s.ci[1] < 1
    assert quantile_stats(base * 3, cand * 3).p_lower < 0.01  # type: ignore[union-attr]  # sampled
    one = quantile_stats(base[:1], cand[:1])
    assert one is not None and one.p_lower is None and one.ci is None
    assert quantile_stats([], []) is None
    with pytest.raises(ValueError, match="steps of each round"):
        paired_stats([0.1], test="quantile")


def test_the_expanded_level_is_student_s_width_for_few_rounds() -> None:
    # Phi(sqrt(n/(n-1)) * t(alpha, n-1)): 0.33 % over 4 rounds, back towards alpha with more.
    assert expanded_level(0.05, 4) == pytest.approx(0.0033, abs=2e-4)
    levels = [expanded_level(0.05, n) for n in (2, 3, 4, 6, 10, 20, 100, 10_000)]
    assert levels == sorted(levels) and levels[-1] == pytest.approx(0.05, abs=1e-3)
    assert expanded_level(0.05, 1) == 0.05  # one round has no interval anyway


def test_the_quantile_interval_is_read_at_the_expanded_level() -> None:
    """The bootstrap is the same; its bounds are read at the expanded level, so over few rounds
    the interval is wider than the plain percentile one (which read a real 5 % slowdown as
    "unchanged" at the sequential design's early looks)."""
    import numpy as np

    rng = random.Random(3)
    base = [[100 * (1 + rng.gauss(0, 0.03)) for _ in range(30)] for _ in range(4)]
    cand = [[0.95 * 100 * (1 + rng.gauss(0, 0.03)) for _ in range(30)] for _ in range(4)]
    s = quantile_stats(base, cand)
    assert s is not None and s.ci is not None
    # The same seeded bootstrap as stats.quantile_stats (4 rounds: no sampled permutations).
    draw = np.random.default_rng(0)
    boot = []
    for _ in range(2000):
        picks = draw.integers(0, 4, 4)
        b = np.concatenate([base[i] for i in picks])
        c = np.concatenate([cand[i] for i in picks])
        boot.append(float(np.log(np.percentile(c, 75) / np.percentile(b, 75))))
    level = expanded_level(ALPHA, 4)
    assert s.ci[0] == pytest.approx(math.exp(float(np.quantile(boot, level))))
    assert s.ci[1] == pytest.approx(math.exp(float(np.quantile(boot, 1 - level))))
    plain = math.exp(float(np.quantile(boot, ALPHA)))
    assert s.ci[0] < plain


def test_combined_paired_of_one_benchmark_is_its_own_t_test() -> None:
    d = [-0.05, -0.02, -0.06, -0.01, -0.04, -0.05]
    s = paired_stats(d, test="t")
    assert s is not None
    ratio, ci, ps = combined_paired([(2.0, s)])
    assert ratio == pytest.approx(s.ratio) and ps is not None
    assert ps[0] == pytest.approx(s.p_lower) and ci == (pytest.approx(s.ci[0]),  # type: ignore[index]
                                                        pytest.approx(s.ci[1]))  # type: ignore[index]
    assert combined_paired([(0.0, s)]) == (None, None, None)  # no weight: not in the score
    one = paired_stats([math.log(0.9)])
    assert one is not None
    ratio, ci, ps = combined_paired([(1.0, s), (1.0, one)])  # one pair: no variance to combine
    assert ratio == pytest.approx(math.exp((s.log_mean + one.log_mean) / 2)) and (ci, ps) == (
        None, None)
    flat = paired_stats([0.0] * 3)
    assert flat is not None and combined_paired([(1.0, flat)]) == (1.0, (1.0, 1.0), (1.0, 1.0))


def test_a_one_benchmark_score_is_its_benchmarks_evidence_whatever_the_test() -> None:
    """A quantile test's rounds: the score's ratio, interval and p are the benchmark's own (a
    t-test of the same rounds read the score inconclusive beside an unchanged benchmark, and
    could claim a p below the permutation's floor of 2**-k)."""
    rng = random.Random(5)
    base = [[1.0 + rng.gauss(0, 0.01) for _ in range(20)] for _ in range(4)]
    cand = [[x * (1 + rng.gauss(0, 0.01)) for x in r] for r in base]
    s = quantile_stats(base, cand)
    assert s is not None
    ratio, ci, ps = combined_paired([(1.0, s)])
    assert (ratio, ci, ps) == (s.ratio, s.ci, (s.p_lower, s.p_higher))
    assert ps is not None and min(ps) >= 2 ** -4  # never below what 4 rounds allow
    found = Evidence(s.ratio, s.p, s.ci, paired=True, rounds=4)
    assert judge_score(found, {judge(found, Rule()).word}, Rule()).word == \
        judge(found, Rule()).word


# -- compare and paired judge alike -----------------------------------------------------------
TARGETS = (0.9, 0.98, 1.0, 1.02, 1.1)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[float, tuple[SuiteSummary,
                                                                           SuiteSummary]]:
    """(candidate, base) summaries, 4 rounds of one weighted benchmark at 100 items/s on the
    base side and ``100 x target`` on the candidate's."""
    out = {}
    for target in TARGETS:
        run = tmp_path_factory.mktemp("same") / "run"
        base = layout.base_dir(run)
        base.mkdir(parents=True)
        for r in range(4):
            write_run(base, "x", steady_at(100.0), repeat=r)
            write_run(run, "x", steady_at(100.0 * target), repeat=r)
        out[target] = (summarize_dir(run), summarize_dir(base))
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ps", [(0.01, 0.99), (0.99, 0.01), (0.5, 0.5), (ALPHA, 1 - ALPHA),
                                None])
@pytest.mark.parametrize("at_tolerance", [False, True])
def test_compare_and_paired_give_the_same_verdict_for_the_same_ratio_and_p(
    sides: dict[float, tuple[SuiteSummary, SuiteSummary]], monkeypatch: pytest.MonkeyPatch,
    target: float, ps: tuple[float, float] | None, at_tolerance: bool,
) -> None:
    """Each module computes its own evidence; given the same ratio and p-values, the verdicts
    (benchmark and score) and the p reported must be the same: one rule, not two copies. The
    one difference is the saved baseline's: a ratio beyond the tolerance that the evidence
    does not carry is "inconclusive" there (results/judge/noise.py), "unchanged" in a paired run."""
    candidate, base = sides[target]
    # No test (None) is the weakest evidence: a p of 1 both ways for the saved baseline.
    p_lower, p_higher = ps or (1.0, 1.0)

    def fake_evidence(cur: object, ref: object, cur_rate: float, base_rate: float, *,
                      alpha: float, known_drift: object = None) -> noise_mod.NoiseEvidence:
        side = noise_mod.SideNoise(0.0, 1e-4, math.inf, "fake")
        ratio = cur_rate / base_rate
        return noise_mod.NoiseEvidence(ratio, p_lower, p_higher, (ratio, ratio), side, side)

    monkeypatch.setattr(noise_mod, "evidence", fake_evidence)
    monkeypatch.setattr(noise_mod, "combined_evidence", lambda terms, alpha: (
        (p_lower, p_higher), (terms[0][1].ratio, terms[0][1].ratio)))
    first = compare(candidate, base)
    ratio = first.get("x").ratio  # type: ignore[union-attr]
    assert ratio is not None
    tolerance = 1 - ratio if at_tolerance and ratio < 1 else TOLERANCE
    saved = compare(candidate, base, tolerance=tolerance)

    def fake_paired(log_ratios: Sequence[float], *, test: str, alpha: float) -> PairedStats:
        return PairedStats(len(log_ratios), ratio, (ratio, ratio), ps and ps[0], ps and ps[1],
                           math.log(ratio), None if ps is None else 1e-4)

    monkeypatch.setattr(paired_mod, "paired_stats", fake_paired)
    score_ci = (saved.score_rate_ratio, saved.score_rate_ratio) \
        if saved.score_rate_ratio is not None else None
    monkeypatch.setattr(paired_mod, "combined_paired",
                        lambda terms, alpha: (saved.score_rate_ratio, score_ci, ps))
    paired = compare_paired(candidate, base, test="t", tolerance=tolerance)
    a, b = saved.get("x"), paired.get("x")
    assert a is not None and b is not None

    def saved_word(word: str, ratio: float | None) -> str:
        # Beyond the tolerance without evidence, and its interval (here the ratio itself)
        # not ruling out a regression: below 1 - tolerance.
        slower = ratio is not None and Rule(tolerance).beyond(ratio) == REGRESSED
        return INCONCLUSIVE if word == UNCHANGED and slower else word

    assert b.ratio == a.ratio
    assert a.verdict == saved_word(b.verdict, b.ratio)
    if ps is not None:
        assert b.p_value == a.p_value
        assert b.verdict == verdict(ratio, a.p_value, tolerance=tolerance).word
    assert saved.score_verdict == saved_word(paired.score_verdict, saved.score_rate_ratio)
    if ps is not None:
        assert paired.score_p_value == saved.score_p_value


def test_no_mode_keeps_its_own_copy_of_the_rule() -> None:
    """Only results/judge/verdict.py compares a ratio with the tolerance or a p with alpha."""
    for module in (compare_mod, paired_mod, noise_mod):
        source = Path(module.__file__ or "").read_text()
        for copy in ("1 - tolerance", "1 + tolerance", "1 - score_p", "< alpha", "<= level"):
            assert copy not in source.split('"""', 2)[2], (module.__name__, copy)


# -- lower is better: time-to-train -----------------------------------------------------------
def write_ttt(run_dir: Path, name: str, step_seconds: Sequence[float], repeat: int) -> None:
    """A time-to-train run (steps logged with ``Bench.log_step``, metric total_time)."""
    path = layout.stream_path(run_dir, name, 0, repeat)
    spec = {"name": name, "weight": 1.0, "plan": {"method": "per_gpu"}, "metric": TOTAL_TIME,
            "skip": 1, "stop": len(step_seconds) - 1, "tags": []}
    with StreamWriter(path) as stream:
        stream.write("config", spec=spec, device=0, repeat=repeat)
        bench = Bench(name=name, stream=stream, skip=1, stop=len(step_seconds) - 1)
        for seconds in step_seconds:
            bench.log_step(64, seconds, per_rank=False)
        bench.close()
        stream.write("end", status="ok", reason="")


@pytest.mark.parametrize(("step", "expected"), [(1.1, REGRESSED), (0.9, IMPROVED),
                                                (1.0, UNCHANGED)])
def test_a_longer_time_to_train_regresses_in_both_comparisons(
    tmp_path: Path, step: float, expected: str
) -> None:
    """Lower is better: the verdict judges the time's equivalent rate, so a 10 % longer time
    is a ratio of 1/1.1 and regresses, with the p of that direction; no flip anywhere."""
    run = tmp_path / "run"
    base = layout.base_dir(run)
    base.mkdir(parents=True)
    rng = random.Random(7)
    for r in range(6):
        write_ttt(base, "ttt", [5.0] + [1.0 * (1 + rng.gauss(0, 0.005)) for _ in range(20)], r)
        write_ttt(run, "ttt", [5.0] + [step * (1 + rng.gauss(0, 0.005)) for _ in range(20)], r)
    candidate, reference = summarize_dir(run), summarize_dir(base)
    # A baseline of quiet sessions: the default drift between sessions (5 %) would make 10 %
    # inconclusive against a single session's baseline.
    saved = compare(candidate, quiet_sessions(reference)).get("ttt")
    assert saved is not None and saved.verdict == expected
    assert saved.time_ratio == pytest.approx(step, rel=0.02)
    assert saved.ratio == pytest.approx(1 / step, rel=0.02)
    for test in ("t", "quantile"):
        paired = compare_paired(candidate, reference, test=test).get("ttt")
        assert paired is not None and paired.verdict == expected, test
        assert paired.ratio == pytest.approx(1 / step, rel=0.02)
        if expected != UNCHANGED:
            assert paired.p_value is not None and paired.p_value < ALPHA
            assert saved.p_value is not None and saved.p_value < ALPHA


@pytest.mark.parametrize("rounds", [6, 10])
def test_quantile_ties_of_alike_steps_do_not_count_against_a_clean_change(rounds: int) -> None:
    """Steps logged to the millisecond ("time 0.013s" every step) leave both upper quartiles
    where they were when fewer than a quarter of the rounds swap: those permutations tied the
    observed ratio and a 23 % regression in every round read p = 56/1024 (7/64 at 6 rounds),
    inconclusive. A tie is broken by the shift of the mean log rates: p is the exact minimum."""
    base = [[1 / 0.013] * 20] * rounds
    cand = [[1 / 0.016] * 20] * rounds
    s = quantile_stats(base, cand)
    assert s is not None and s.ratio == pytest.approx(0.013 / 0.016)
    assert s.p_lower == pytest.approx(2.0**-rounds)
    assert s.p_higher == pytest.approx(1.0)
    # Identical sides still tie every way: no evidence either way.
    same = quantile_stats(base, base)
    assert same is not None and (same.p_lower, same.p_higher) == (1.0, 1.0)


def test_quantile_untied_p_values_are_the_quartiles_alone() -> None:
    """Where no permutation ties the observed ratio, breaking ties changes nothing: the
    p-values are the share of the quartiles' ratios at or beyond the observed one."""
    import numpy as np

    rng = random.Random(7)
    base = [[rng.uniform(90, 110) for _ in range(15)] for _ in range(7)]
    cand = [[rng.uniform(85, 108) for _ in range(15)] for _ in range(7)]
    s = quantile_stats(base, cand)
    assert s is not None

    def ratio(swap: int) -> float:
        b = [x for i in range(7) for x in (cand[i] if swap >> i & 1 else base[i])]
        c = [x for i in range(7) for x in (base[i] if swap >> i & 1 else cand[i])]
        return float(np.log(np.percentile(c, 75) / np.percentile(b, 75)))

    all_ratios = [ratio(k) for k in range(2**7)]
    observed = all_ratios[0]
    assert s.p_lower == pytest.approx(sum(r <= observed + 1e-12 for r in all_ratios) / 2**7)
    assert s.p_higher == pytest.approx(sum(r >= observed - 1e-12 for r in all_ratios) / 2**7)


@pytest.mark.parametrize("rounds", [4, 9, 13])
def test_quantile_stats_in_blocks_gives_the_numbers_of_one_at_a_time(
        rounds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resamples' percentiles computed a block at a time (a speed-up: the sequential design
    judges every look after every round) are exactly those computed one resample at a time:
    exact permutations (<= 12 rounds), sampled ones, ties, and a slowdown."""
    from pytest_dlbench.results.judge import stats as stats_mod

    rng = random.Random(rounds)
    base = [[100 + rng.gauss(0, 3) for _ in range(11)] for _ in range(rounds)]
    cand = [[95 + rng.gauss(0, 3) for _ in range(11)] for _ in range(rounds)]
    tied = [[100.0] * 6 + [rng.choice([99.0, 101.0])] * 5 for _ in range(rounds)]
    for b, c in ((base, cand), (base, base[::-1]), (tied, tied[::-1])):
        blocks = quantile_stats(b, c)
        monkeypatch.setattr(stats_mod, "_IN_BLOCKS", False)
        one_at_a_time = quantile_stats(b, c)
        monkeypatch.setattr(stats_mod, "_IN_BLOCKS", True)
        assert blocks == one_at_a_time
