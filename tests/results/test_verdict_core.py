"""The verdict core (results/judge/verdict.py) decides every mode's verdict as the 15 functions it
replaced did, except for two changes made on purpose.

The ``old_*`` functions below are the old rule kept for this equivalence test only: their
bodies are copied from results/judge/stats.py, noise.py, paired_noise.py, sequential.py, confirm.py
and probe.py at d023ee7, frozen. Generated evidence goes to both, and the words and reasons
must be the same, a few hundred cases per mode, except:

- :func:`one_rule`: a paired ratio (a benchmark's or the score's) slower beyond the tolerance
  without the evidence, "unchanged" before, is "inconclusive", as a saved baseline's;
- :func:`one_definition`: "unchanged" (in every mode: a benchmark, the score, an interim
  look, a bisect step) only when the ratio's interval excludes a regression beyond the
  tolerance (its lower bound above ``1 - tolerance``); else "inconclusive". A ratio of 1.012
  with the interval [0.782, 1.520] passed the gate as "unchanged" before;
- :func:`one_claim`: a change (a benchmark's or the score's, in every mode) claimed only when
  its interval excludes no change (wholly below 1 for "regressed", above for "improved"); a
  regression whose interval reaches 1 is "inconclusive", an improvement "no improvement
  claimed" (the score's, unless a weighted benchmark claims the same on its own evidence).
  Beside a loaded neighbour a paired run printed "regressed" with 0.875 [0.811, 1.103].
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlbench.results.judge import (
    CHANGED,
    IMPROVED,
    INCOMPARABLE,
    INCONCLUSIVE,
    REGRESSED,
    SAME,
    UNCHANGED,
    UNSURE,
    Evidence,
    Rule,
    Verdict,
    judge,
    judge_confirmation,
    judge_confirmed_score,
    judge_doubted,
    judge_doubted_score,
    judge_look,
    judge_probe,
    judge_score,
    judge_step,
    suspicion,
)

CASES = settings(max_examples=400, deadline=None)


# -- the old rule, frozen at d023ee7 (for this equivalence test only) ---------------------------
def _old_percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def old_beyond_tolerance(ratio: float, tolerance: float) -> str | None:
    if ratio < 1 - tolerance:
        return REGRESSED
    if ratio > 1 + tolerance:
        return IMPROVED
    return None


def old_verdict(ratio: float, p: float | None, *, tolerance: float, alpha: float) -> Verdict:
    size = f"ratio {ratio:.3f}"
    word = old_beyond_tolerance(ratio, tolerance)
    if word == REGRESSED:
        beyond = f"{size} below {1 - tolerance:.3f}"
    elif word == IMPROVED:
        beyond = f"{size} above {1 + tolerance:.3f}"
    else:
        return Verdict(UNCHANGED, f"{size} not beyond ±{_old_percent(tolerance)}")
    if p is None:
        return Verdict(UNCHANGED, f"{beyond}, but no test (too few samples)")
    if p < alpha:
        return Verdict(word, f"{beyond} and significant (p {p:.3g} < alpha {alpha:g})")
    return Verdict(UNCHANGED, f"{beyond}, but not significant (p {p:.3g} >= alpha {alpha:g})")


def old_score_verdict(rate_ratio: float | None, p: float | None, weighted: Collection[str], *,
                      tolerance: float, alpha: float) -> Verdict:
    if rate_ratio is None:
        return Verdict(INCOMPARABLE, "no weighted benchmark scored on both sides")
    combined = old_verdict(rate_ratio, p, tolerance=tolerance, alpha=alpha)
    if combined.word != UNCHANGED:
        return combined
    direction = old_beyond_tolerance(rate_ratio, tolerance)
    if direction is not None and direction in weighted:
        bound = "below" if direction == REGRESSED else "above"
        limit = 1 - tolerance if direction == REGRESSED else 1 + tolerance
        return Verdict(direction, f"rate ratio {rate_ratio:.3f} {bound} {limit:.3f} and a "
                                  f"weighted benchmark {direction}")
    return combined


def old_judge(ratio: float, p: float, ci: tuple[float, float], noise: str,
              doubt: Sequence[str], *, tolerance: float, alpha: float) -> Verdict:
    """noise.judge (its Evidence unpacked: p, ci, noise)."""
    judged = old_verdict(ratio, p, tolerance=tolerance, alpha=alpha)
    if not old_beyond_tolerance(ratio, tolerance):
        return judged
    if doubt:
        return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f} beyond ±{tolerance:.0%}, but "
                                     f"{'; '.join(doubt)}")
    if judged.word in (REGRESSED, IMPROVED):
        return judged
    lo, hi = ci
    if ratio > 1:
        return Verdict(UNCHANGED, f"ratio {ratio:.3f} beyond ±{tolerance:.0%} but not "
                                  f"significant (p {p:.3g} >= alpha {alpha:g}; interval "
                                  f"[{lo:.3f}, {hi:.3f}]): no improvement claimed")
    return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f} beyond ±{tolerance:.0%}, but its interval "
                                 f"[{lo:.3f}, {hi:.3f}] spans the tolerance (p {p:.3g} >= "
                                 f"alpha {alpha:g}; between runs: {noise})")


def old_saved_score_verdict(rate_ratio: float | None, p: float | None, weighted: Sequence[str],
                            doubtful: bool, *, tolerance: float, alpha: float) -> Verdict:
    """noise.saved_score_verdict (its p already in the ratio's direction)."""
    score = old_score_verdict(rate_ratio, p, set(weighted), tolerance=tolerance, alpha=alpha)
    if rate_ratio is None or not old_beyond_tolerance(rate_ratio, tolerance):
        return score
    if doubtful:
        return Verdict(INCONCLUSIVE, f"rate ratio {rate_ratio:.3f} beyond ±{tolerance:.0%}, "
                                     "but a weighted benchmark's figure is in doubt")
    if score.word != UNCHANGED or rate_ratio > 1:
        return score
    return Verdict(INCONCLUSIVE, f"rate ratio {rate_ratio:.3f} beyond ±{tolerance:.0%}, "
                                 "but not significant")


def old_reach(ratio: float, log_var: float | None, tolerance: float
              ) -> tuple[float, float] | None:
    """paired_noise.reach: (se, chance)."""
    if log_var is None or not math.isfinite(log_var) or log_var <= 0:
        return None
    se = math.sqrt(log_var)
    bound = -math.log1p(-tolerance) if ratio < 1 else math.log1p(tolerance)
    return se, statistics.NormalDist().cdf(-bound / se)


def old_describe_reach(se: float, chance: float, tolerance: float) -> str:
    times = 1 / chance if chance > 0 else math.inf
    return (f"±{100 * se:.1f} % standard error, so an unchanged pair lands beyond "
            f"±{100 * tolerance:g} % about 1 time in {times:.0f}")


def old_paired_verdict(ratio: float, p: float | None, log_var: float | None, *,
                       tolerance: float, alpha: float) -> Verdict:
    judged = old_verdict(ratio, p, tolerance=tolerance, alpha=alpha)
    if judged.word not in (REGRESSED, IMPROVED) or p is None:
        return judged
    level = alpha * 0.5
    found = old_reach(ratio, log_var, tolerance)
    if found is None or not found[1] > alpha * 0.5 or p <= level:
        return judged
    why = (f"{judged.reason}, but the rounds are noisy "
           f"({old_describe_reach(*found, tolerance)}): a "
           f"change needs p <= {level:g} at this noise")
    if judged.word == IMPROVED:
        return Verdict(UNCHANGED, f"{why}; no improvement claimed")
    return Verdict(INCONCLUSIVE, why)


def old_paired_score_verdict(rate_ratio: float | None, p: float | None, log_var: float | None,
                             weighted: Collection[str], *, tolerance: float,
                             alpha: float) -> Verdict:
    score = old_score_verdict(rate_ratio, p, weighted, tolerance=tolerance, alpha=alpha)
    if rate_ratio is None or score.word not in (REGRESSED, IMPROVED) or score.word in weighted:
        return score
    noisy = old_paired_verdict(rate_ratio, p, log_var, tolerance=tolerance, alpha=alpha)
    return score if noisy.word == score.word else Verdict(noisy.word, f"rate {noisy.reason}")


def old_judge_look(n: int, ratio: float, ci: tuple[float, float] | None, p: float | None,
                   log_var: float | None, log_mean: float, *, tolerance: float,
                   alpha: float) -> str | None:
    """sequential.judge_look and _no_regression (its PairedStats unpacked)."""
    if ci is None or n < 2:
        return None
    low, high = ci
    level = alpha * 0.5
    claim = None
    if high < 1 - tolerance and p is not None and p <= level and ratio < 1:
        claim = REGRESSED
    elif low > 1 + tolerance and p is not None and p <= level and ratio > 1:
        claim = IMPROVED
    if claim is not None:
        found = old_reach(ratio, log_var, tolerance)
        return claim if found is None or not found[1] > alpha else None
    if 1 - tolerance <= low and high <= 1 + tolerance:
        return UNCHANGED
    if ratio <= 1 + tolerance:
        if log_var is None or not math.isfinite(log_var) or log_var < 0:
            return None
        z = statistics.NormalDist().inv_cdf(0.90)
        if log_mean - z * math.sqrt(log_var) >= math.log(1 - tolerance):
            return UNCHANGED
    return None


def old_repeats(first: str, rate: float | None, baseline: float, tolerance: float) -> bool:
    if rate is None or not rate > 0 or not baseline > 0:
        return False
    ratio = rate / baseline
    if first == REGRESSED:
        return ratio < 1 - tolerance
    if first == IMPROVED:
        return ratio > 1 + tolerance
    return False


def old_decide(first: str, combined: str, ratios: Sequence[float], tolerance: float) -> str:
    """confirm._decide's verdict."""
    held = not ratios or (combined == first and all(
        old_repeats(first, r, 1.0, tolerance) for r in ratios))
    if held:
        return first
    return combined if combined != first else INCONCLUSIVE


def old_confirmed_score(word: str, backed: bool, dropped: bool) -> str:
    if word not in (REGRESSED, IMPROVED):
        return word
    return INCONCLUSIVE if dropped and not backed else word


def old_paired_doubt(word: str, ratio: float, doubt: str | None) -> Verdict | None:
    """paired_with_doubts's rule for one row (results/judge/noise.py at d023ee7)."""
    if word in (REGRESSED, IMPROVED) and doubt is not None:
        return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f}, but {doubt}")
    return None


def old_step_holds(diff: float, p: float, tolerance: float, alpha: float) -> bool:
    """changes.detect_steps: a step is weak (merged away) unless both hold."""
    return not (abs(diff) < math.log1p(tolerance) - 1e-12 or p >= alpha)


# -- the one intended change (issue 38: the same rule in every mode) --------------------------
def one_rule(old: Verdict, ratio: float | None, tolerance: float, *, score: bool = False,
             ci: tuple[float, float] | None = None) -> Verdict:
    """The old paired verdict as the one rule gives it: unchanged -> inconclusive where the
    ratio is slower beyond the tolerance (not significant, or no test); every other case as
    before."""
    if old.word != UNCHANGED or ratio is None or \
            old_beyond_tolerance(ratio, tolerance) != REGRESSED:
        return old
    if score:  # the saved baseline's words for its score (old_saved_score_verdict)
        return Verdict(INCONCLUSIVE, f"rate ratio {ratio:.3f} beyond ±{tolerance:.0%}, "
                                     "but not significant")
    suffix = f"; interval [{ci[0]:.3f}, {ci[1]:.3f}]" if ci is not None else ""
    return Verdict(INCONCLUSIVE, old.reason + suffix)


def one_definition(old: Verdict, ci: tuple[float, float] | None, tolerance: float, *,
                   what: str = "ratio") -> Verdict:
    """The old verdict under the one definition of unchanged: kept where the interval's lower
    bound is above ``1 - tolerance``, else inconclusive with the interval."""
    if old.word != UNCHANGED or (ci is not None and ci[0] >= 1 - tolerance):
        return old
    if ci is None:
        why = "no interval, so a regression beyond the tolerance is not excluded"
    else:
        why = (f"its interval [{ci[0]:.3f}, {ci[1]:.3f}] does not exclude a regression beyond "
               f"{100 * tolerance:g}% (unchanged needs a lower bound of {1 - tolerance:.3f} "
               "or more)")
    head = old.reason if what == "ratio" or old.reason.startswith(what) else \
        f"{what} {old.reason}"
    return Verdict(INCONCLUSIVE, f"{head}; {why}")


def one_claim(old: Verdict, ci: tuple[float, float] | None, *, what: str = "ratio"
              ) -> Verdict:
    """The old verdict under the one condition of a claim: a regression (improvement) kept where
    its interval is wholly below (above) 1; else inconclusive (no improvement claimed)."""
    if old.word not in (REGRESSED, IMPROVED) or ci is None:
        return old
    if (old.word == REGRESSED and ci[1] < 1) or (old.word == IMPROVED and ci[0] > 1):
        return old
    head = old.reason if what == "ratio" or old.reason.startswith(what) else \
        f"{what} {old.reason}"
    why = f"{head}, but its interval [{ci[0]:.3f}, {ci[1]:.3f}] reaches 1 (no change)"
    if old.word == IMPROVED:
        return Verdict(UNCHANGED, f"{why}; no improvement claimed")
    return Verdict(INCONCLUSIVE, why)


def new_look(n: int, ratio: float, ci: tuple[float, float] | None, p: float | None,
             log_var: float | None, *, tolerance: float, alpha: float) -> str | None:
    """An interim look under the one definition: the old claims; UNCHANGED only when the ratio
    is not faster than the band and the interval's lower bound is above ``1 - tolerance`` (the
    last look's condition; the old 90 % normal futility bound and the band test are gone)."""
    old = old_judge_look(n, ratio, ci, p, log_var, math.log(ratio), tolerance=tolerance,
                         alpha=alpha)
    if old in (REGRESSED, IMPROVED) or ci is None or n < 2:
        return old
    if ratio <= 1 + tolerance and ci[0] >= 1 - tolerance:
        return UNCHANGED
    return None


def test_what_a_first_pass_suspects() -> None:
    """Confirmed (--bench-confirm): a claimed change, and a slowdown beyond the tolerance that
    the noise alone left inconclusive; not one a doubt left so, nor one within the tolerance
    (the issue's 1.012 [0.782, 1.520]: nothing suggests a regression but the interval)."""
    rule = Rule(0.03)
    assert suspicion(REGRESSED, 0.8, rule) == REGRESSED
    assert suspicion(IMPROVED, 1.2, rule) == IMPROVED
    assert suspicion(INCONCLUSIVE, 0.874, rule) == REGRESSED
    assert suspicion(INCONCLUSIVE, 0.874, rule, ("a busy machine during this run",)) is None
    assert suspicion(INCONCLUSIVE, 1.012, rule) is None
    assert suspicion(INCONCLUSIVE, 0.97, rule) is None  # at the bound: within
    assert suspicion(INCONCLUSIVE, 1.2, rule) is None  # faster: no regression to confirm
    assert suspicion(INCONCLUSIVE, None, rule) is None
    assert suspicion(UNCHANGED, 0.99, rule) is None


def test_an_inconclusive_slowdown_regresses_only_as_a_held_regression() -> None:
    rule, first = Rule(0.03), INCONCLUSIVE
    # Every rerun below the bound and the combined comparison regressed at the claim level
    # (half of alpha: a second look): regressed.
    assert judge_confirmation(first, REGRESSED, [0.85, 0.86], rule, REGRESSED, 0.001) == REGRESSED
    # Regressed at alpha but not at the claim level (0.03 > 0.025), or no p: not held.
    assert judge_confirmation(first, REGRESSED, [0.85, 0.86], rule, REGRESSED, 0.03) == \
        INCONCLUSIVE
    assert judge_confirmation(first, REGRESSED, [0.85, 0.86], rule, REGRESSED) == INCONCLUSIVE
    # A first pass that regressed is confirmed at alpha, as before (its first look claimed).
    assert judge_confirmation(REGRESSED, REGRESSED, [0.85], rule, REGRESSED, 0.03) == REGRESSED
    # One rerun within the tolerance: not held, whatever the combined comparison says.
    assert judge_confirmation(first, REGRESSED, [0.85, 0.99], rule, REGRESSED, 0.001) == \
        INCONCLUSIVE
    # The runs together exclude the regression: unchanged; still wide: inconclusive.
    assert judge_confirmation(first, UNCHANGED, [0.99, 1.0], rule, REGRESSED) == UNCHANGED
    assert judge_confirmation(first, INCONCLUSIVE, [0.9], rule, REGRESSED) == INCONCLUSIVE
    # No rerun succeeded: the first pass stands.
    assert judge_confirmation(first, REGRESSED, [], rule, REGRESSED) == INCONCLUSIVE


def test_a_wide_interval_is_inconclusive_in_every_mode() -> None:
    # The observed case: p75 ratio 1.012, 90 % interval [0.782, 1.520], 10 of 10 rounds of a
    # real 20 % slowdown, which read "unchanged", exit 0.
    rule, ci = Rule(), (0.782, 1.520)
    paired = Evidence(1.012, 0.45, ci, log_var=0.12**2, log_mean=math.log(1.012), paired=True,
                      rounds=10)
    saved = Evidence(1.012, 0.45, ci, noise="this run 1 run at the default 8%")
    for found in (paired, saved):
        verdict = judge(found, rule)
        assert verdict.word == INCONCLUSIVE
        assert "interval [0.782, 1.520] does not exclude a regression beyond 3%" in \
            verdict.reason
        assert judge_score(found, {INCONCLUSIVE}, rule).word == INCONCLUSIVE
    # The sequential design runs on; a bisect step is unsure; confirmation keeps the combined.
    assert judge_look(paired, rule) is None
    assert judge_probe(judge(paired, rule).word) == UNSURE
    assert judge_confirmation(REGRESSED, judge(saved, rule).word, [1.012], rule) == INCONCLUSIVE
    # The same point estimate with a narrow interval is unchanged, everywhere.
    narrow = Evidence(1.012, 0.3, (0.985, 1.04), log_var=0.01**2, log_mean=math.log(1.012),
                      paired=True, rounds=6)
    assert judge(narrow, rule).word == UNCHANGED
    assert judge_look(narrow, rule) == UNCHANGED
    assert judge_probe(judge(narrow, rule).word) == SAME


def test_the_issues_paired_case_moved_from_unchanged_to_inconclusive() -> None:
    # Issue 38's example: ratio 0.863 [0.750, 1.071], p 0.141 read "unchanged", exit 0.
    found = Evidence(0.863, 0.141, (0.750, 1.071), log_var=0.07**2, paired=True, rounds=10)
    old = old_paired_verdict(0.863, 0.141, 0.07**2, tolerance=0.03, alpha=0.05)
    assert old.word == UNCHANGED
    new = judge(found, Rule())
    assert new.word == INCONCLUSIVE
    assert new.reason == ("ratio 0.863 below 0.970, but not significant (p 0.141 >= alpha "
                          "0.05); interval [0.750, 1.071]")
    # One pair, no test: inconclusive too; faster without evidence is unchanged only when its
    # interval excludes a regression.
    assert judge(Evidence(0.9, None, paired=True, rounds=1), Rule()).word == INCONCLUSIVE
    assert judge(Evidence(1.1, 0.2, (0.98, 1.2), paired=True), Rule()).word == UNCHANGED
    assert judge(Evidence(1.1, 0.2, (0.95, 1.2), paired=True), Rule()).word == INCONCLUSIVE
    # The score: the same rule on its combined evidence.
    score = judge_score(Evidence(0.9, 0.2, (0.8, 1.01), paired=True), {UNCHANGED}, Rule())
    assert score == Verdict(INCONCLUSIVE, "rate ratio 0.900 beyond ±3%, but not significant")
    # The saved baseline says the same word on the same evidence.
    assert judge(Evidence(0.863, 0.141, (0.750, 1.071), noise="n"), Rule()).word == \
        INCONCLUSIVE


def test_a_claim_whose_interval_reaches_no_change_is_not_made() -> None:
    # Beside a neighbour saturating a core, a 20-round paired run of a 20 % slowdown read
    # "regressed" on the quantile test's p while its printed interval reached 1.103.
    rule = Rule()
    found = Evidence(0.875, 0.01, (0.811, 1.103), log_var=0.02**2, paired=True, rounds=20)
    verdict = judge(found, rule)
    assert verdict == Verdict(INCONCLUSIVE, "ratio 0.875 below 0.970 and significant (p 0.01 < "
                              "alpha 0.05), but its interval [0.811, 1.103] reaches 1 (no "
                              "change)")
    assert judge_probe(verdict.word) == UNSURE
    # The same p with the interval wholly below 1 is a regression, in either mode.
    clear = Evidence(0.875, 0.01, (0.811, 0.96), log_var=0.02**2, paired=True, rounds=20)
    assert judge(clear, rule).word == REGRESSED
    assert judge(Evidence(0.875, 0.01, (0.811, 0.999), noise="n"), rule).word == REGRESSED
    assert judge(Evidence(0.875, 0.01, (0.811, 1.0), noise="n"), rule).word == INCONCLUSIVE
    # Without an interval the p alone decides, as before.
    assert judge(Evidence(0.875, 0.01, None, noise="n"), rule).word == REGRESSED
    # An improvement whose interval reaches 1 is not claimed; unchanged only if it also
    # excludes a regression beyond the tolerance.
    faster = judge(Evidence(1.1, 0.01, (0.99, 1.3), paired=True, rounds=20), rule)
    assert faster.word == UNCHANGED and faster.reason.endswith("no improvement claimed")
    assert judge(Evidence(1.1, 0.01, (0.9, 1.3), paired=True, rounds=20), rule).word == \
        INCONCLUSIVE
    # The score, on its combined evidence: the same condition.
    score = judge_score(Evidence(0.9, 0.01, (0.85, 1.02), paired=True), {UNCHANGED}, rule)
    assert score.word == INCONCLUSIVE and "reaches 1 (no change)" in score.reason
    assert score.reason.startswith("rate ratio 0.900")
    # ... unless a weighted benchmark claims the same change on its own evidence.
    backed = judge_score(Evidence(0.9, 0.01, (0.85, 1.02), paired=True), {REGRESSED}, rule)
    assert backed.word == REGRESSED


# -- generated evidence -------------------------------------------------------------------------
TOLERANCES = st.sampled_from([0.0, 0.01, 0.03, 0.05, 0.1, 0.25])
ALPHAS = st.sampled_from([0.01, 0.05, 0.1, 0.2])


@st.composite
def ratios(draw: st.DrawFn, tolerance: float) -> float:
    """Ratios anywhere, and exactly at the bounds and just beside them."""
    edge = st.sampled_from([1 - tolerance, 1 + tolerance, 1.0])
    near = edge.map(lambda x: x * (1 + draw(st.sampled_from([-1e-9, 0.0, 1e-9]))))
    return draw(st.one_of(st.floats(0.3, 2.0), near))


@st.composite
def ps(draw: st.DrawFn, alpha: float, optional: bool = True) -> float | None:
    """p-values anywhere, at alpha and its half, and None (nothing tested)."""
    exact = st.sampled_from([alpha, alpha * 0.5, 0.0, 1.0, 1 / 64, 1 / 128])
    choices = [st.floats(0.0, 1.0), exact]
    if optional:
        choices.append(st.none())
    return draw(st.one_of(*choices))


LOG_VARS = st.one_of(st.none(), st.just(0.0), st.floats(1e-8, 0.2), st.just(math.inf))
DOUBTS = st.lists(st.sampled_from(["the machine was busy during this run (1 of 1 runs: x)",
                                   "the baseline's figure is unreliable (std 40%)"]),
                  max_size=2)
WORDS = st.sampled_from([REGRESSED, IMPROVED, UNCHANGED, INCONCLUSIVE, "failed",
                         "incomparable"])


@st.composite
def interval(draw: st.DrawFn, ratio: float) -> tuple[float, float]:
    low = ratio * draw(st.floats(0.5, 1.0))
    return low, ratio * draw(st.floats(1.0, 2.0))


@CASES
@given(st.data())
def test_saved_baseline_benchmark(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES), data.draw(ALPHAS)
    ratio = data.draw(ratios(tol))
    p = data.draw(ps(alpha, optional=False))
    assert p is not None
    ci, doubts = data.draw(interval(ratio)), tuple(data.draw(DOUBTS))
    noise = "this run 1 run at the default 8%, the baseline 3 runs"
    old = old_judge(ratio, p, ci, noise, doubts, tolerance=tol, alpha=alpha)
    new = judge(Evidence(ratio, p, ci, noise=noise, doubts=doubts), Rule(tol, alpha))
    assert new == one_definition(one_claim(old, ci), ci, tol)


@CASES
@given(st.data())
def test_saved_baseline_score(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES), data.draw(ALPHAS)
    ratio = data.draw(st.one_of(st.none(), ratios(tol)))
    p = data.draw(ps(alpha)) if ratio is not None else None
    weighted = data.draw(st.lists(WORDS, max_size=3))
    doubtful = data.draw(st.booleans())
    ci = data.draw(st.one_of(st.none(), interval(ratio))) if ratio is not None else None
    old = old_saved_score_verdict(ratio, p, weighted, doubtful, tolerance=tol, alpha=alpha)
    found = (Evidence(ratio, p, ci, doubts=("in doubt",) if doubtful else ())
             if ratio is not None else None)
    claimed = old if old.word in weighted else one_claim(old, ci, what="rate")
    expected = one_definition(claimed, ci, tol, what="rate") if ratio is not None else old
    assert judge_score(found, set(weighted), Rule(tol, alpha)) == expected


@CASES
@given(st.data())
def test_paired_benchmark(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES), data.draw(ALPHAS)
    ratio, p, log_var = data.draw(ratios(tol)), data.draw(ps(alpha)), data.draw(LOG_VARS)
    ci = data.draw(st.one_of(st.none(), interval(ratio)))
    old = old_paired_verdict(ratio, p, log_var, tolerance=tol, alpha=alpha)
    new = judge(Evidence(ratio, p, ci, log_var=log_var, paired=True), Rule(tol, alpha))
    assert new == one_definition(one_claim(one_rule(old, ratio, tol, ci=ci), ci), ci, tol)


@CASES
@given(st.data())
def test_paired_score(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES), data.draw(ALPHAS)
    ratio = data.draw(st.one_of(st.none(), ratios(tol)))
    p, log_var = data.draw(ps(alpha)), data.draw(LOG_VARS)
    weighted = set(data.draw(st.lists(WORDS, max_size=3)))
    ci = data.draw(st.one_of(st.none(), interval(ratio))) if ratio is not None else None
    old = old_paired_score_verdict(ratio, p, log_var, weighted, tolerance=tol, alpha=alpha)
    found = Evidence(ratio, p, ci, log_var=log_var, paired=True) if ratio is not None else None
    expected = one_rule(old, ratio, tol, score=True)
    if ratio is not None:
        if expected.word not in weighted:  # a weighted benchmark's claim backs the score's
            expected = one_claim(expected, ci, what="rate")
        expected = one_definition(expected, ci, tol, what="rate")
    assert judge_score(found, weighted, Rule(tol, alpha)) == expected


@CASES
@given(st.data())
def test_paired_doubts(data: st.DataObject) -> None:
    word, ratio = data.draw(WORDS), data.draw(st.floats(0.3, 2.0))
    doubt = data.draw(st.one_of(st.none(), st.just("busy on one side")))
    assert judge_doubted(word, ratio, doubt) == old_paired_doubt(word, ratio, doubt)
    doubted = data.draw(st.lists(st.sampled_from(["a", "b"]), max_size=2))
    new = judge_doubted_score(word, doubted)
    assert (new is not None) == (bool(doubted) and word in (REGRESSED, IMPROVED))


@CASES
@given(st.data())
def test_sequential_look(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES.filter(lambda t: t < 0.5)), data.draw(ALPHAS)
    ratio = data.draw(ratios(tol))
    ci = data.draw(st.one_of(st.none(), interval(ratio)))
    n, p, log_var = data.draw(st.integers(0, 12)), data.draw(ps(alpha)), data.draw(LOG_VARS)
    log_mean = math.log(ratio) + data.draw(st.floats(-0.05, 0.05))
    expected = new_look(n, ratio, ci, p, log_var, tolerance=tol, alpha=alpha)
    found = Evidence(ratio, p, ci, log_var=log_var, log_mean=log_mean, paired=True, rounds=n)
    assert judge_look(found, Rule(tol, alpha)) == expected


@CASES
@given(st.data())
def test_confirmation(data: st.DataObject) -> None:
    tol = data.draw(TOLERANCES)
    first, combined = data.draw(WORDS), data.draw(WORDS)
    runs = data.draw(st.lists(st.one_of(ratios(tol), st.just(0.0), st.just(math.nan)),
                              max_size=3))
    assert judge_confirmation(first, combined, runs, Rule(tol)) == old_decide(first, combined,
                                                                              runs, tol)
    backed, dropped = data.draw(st.booleans()), data.draw(st.booleans())
    assert judge_confirmed_score(first, backed, dropped) == old_confirmed_score(first, backed,
                                                                                dropped)


@CASES
@given(st.data())
def test_bisect_probe_and_history_step(data: st.DataObject) -> None:
    tol, alpha = data.draw(TOLERANCES), data.draw(ALPHAS)
    word = data.draw(WORDS)
    # One definition: a step is SAME exactly when its paired verdict is unchanged (which the
    # core gives only with the interval's lower bound above 1 - tolerance).
    expected = CHANGED if word in (REGRESSED, IMPROVED) else SAME if word == UNCHANGED else UNSURE
    assert judge_probe(word) == expected
    diff = data.draw(st.one_of(st.floats(-0.5, 0.5),
                               st.sampled_from([math.log1p(tol), -math.log1p(tol)])))
    p = data.draw(ps(alpha, optional=False))
    assert p is not None
    assert judge_step(Evidence(math.exp(diff), p, log_mean=diff), Rule(tol, alpha)) == \
        old_step_holds(diff, p, tol, alpha)
