"""The verdict core: the one place that decides whether a benchmark (or the score)
**regressed**, **improved**, is **unchanged**, **inconclusive**, **failed** or
**incomparable**. Every mode only measures and hands it an :class:`Evidence`: a saved baseline
(results/judge/saved.py, noise.py), a ``--bench-against`` run at its last or an interim look
(results/judge/paired.py), confirmation reruns (results/judge/confirm.py), a bisect step
(results/judge/paired.judge_paired_run) and a step of the history (results/history/changes.py). The
:class:`Rule` decides and describes itself.

**The rule** (docs/reports.md, "The verdict rule"): a change is claimed when the ratio is
beyond ``1 ± tolerance``, its one-sided p is below alpha (paired rounds so noisy that an
unchanged pair lands beyond the tolerance more than ``claim_share`` of alpha of the time,
:func:`reach`, claim it only at that level) and its interval excludes no change
(:func:`excludes_no_change`: the interval wholly on the change's side of 1); **unchanged** only
when the evidence excludes a regression beyond the tolerance (:func:`excludes_regression`: the
interval's lower bound above ``1 - tolerance``), whatever the point estimate; anything else is
**inconclusive**. So the interval printed beside a verdict never contradicts its word.

Pure and light: no scipy, no numpy, no other module of results/ (everything imports this).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["ALPHA", "CHANGED", "CLAIM_ALPHA_SHARE", "FAILED", "IMPROVED", "INCOMPARABLE",
           "INCONCLUSIVE", "NOT_HELD", "REGRESSED", "SAME", "SUSPECT", "TOLERANCE", "UNCHANGED",
           "UNSURE", "Evidence", "Reach", "Rule", "Verdict", "excludes_no_change",
           "excludes_regression", "judge",
           "judge_confirmation", "judge_confirmed_score", "judge_doubted", "judge_doubted_score",
           "judge_look", "judge_probe", "judge_score", "judge_step", "judge_unmatched", "reach",
           "repeats", "suspicion"]

# -- the words, defined once ------------------------------------------------------------------
REGRESSED = "regressed"
IMPROVED = "improved"
UNCHANGED = "unchanged"
#: Beyond the tolerance, but the evidence cannot tell a change from noise.
INCONCLUSIVE = "inconclusive"
FAILED = "failed"  # no successful run on the candidate side, some on the reference side
INCOMPARABLE = "incomparable"  # no successful run on the reference side (or on either)
#: The verdicts worth confirming (results/judge/confirm.py): the gate fails on the first.
SUSPECT = (REGRESSED, IMPROVED)
#: A confirmed verdict that did not hold while the combined comparison still says it.
NOT_HELD = INCONCLUSIVE
#: A bisect step (results/judge/paired.judge_paired_run): beyond the tolerance from GOOD, within it,
#: or neither.
CHANGED, SAME, UNSURE = "changed", "same", "unsure"

#: Defaults of the rule (smallest change that counts; significance level), tuned with
#: ``benchmarks/detection.py``: see docs/reports.md.
TOLERANCE = 0.03
ALPHA = 0.05
#: The share of alpha at which a change is claimed where the tolerance band cannot keep an
#: unchanged pair's false alarms down by itself: a noisy last look and every interim look of
#: the sequential design (results/judge/paired.py, :func:`reach`).
CLAIM_ALPHA_SHARE = 0.5


@dataclass(frozen=True)
class Verdict:
    """A verdict word and why, one line."""

    word: str
    reason: str


@dataclass(frozen=True)
class Evidence:
    """What a comparison measured, the only input of a decision."""

    ratio: float  # candidate / reference (above 1 is faster)
    p: float | None  # one-sided, in the ratio's direction; None: nothing could be tested
    ci: tuple[float, float] | None = None  # of the ratio, at 1 - 2 alpha
    #: The variance of ln(ratio) the test assumed (paired rounds: the reach of their noise).
    log_var: float | None = None
    log_mean: float | None = None  # the mean log ratio behind that variance
    noise: str = ""  # where the noise came from (a saved baseline: both sides, the drift)
    paired: bool = False  # matched rounds (--bench-against), else a saved baseline
    rounds: int = 0  # pairs behind a paired ratio
    doubts: tuple[str, ...] = ()  # why a side's figure cannot carry a change (saved baseline)


@dataclass(frozen=True)
class Reach:
    """How far the rounds' noise carries an unchanged pair: its standard error of the log
    ratio (``se``) and the chance (``chance``) its ratio lands beyond the tolerance on the
    side of the change."""

    se: float
    chance: float

    def noisy(self, alpha: float, share: float = CLAIM_ALPHA_SHARE) -> bool:
        """The band no longer keeps an unchanged pair beyond it to ``share`` of alpha."""
        return self.chance > alpha * share

    def describe(self, tolerance: float) -> str:
        """``±4.7 % standard error, so an unchanged pair lands beyond ±3 % about 1 time in
        4``."""
        times = 1 / self.chance if self.chance > 0 else math.inf
        return (f"±{100 * self.se:.1f} % standard error, so an unchanged pair lands beyond "
                f"±{100 * tolerance:g} % about 1 time in {times:.0f}")


def reach(ratio: float, log_var: float | None, tolerance: float) -> Reach | None:
    """The reach of the rounds behind ``ratio``: ``Φ(-b / se)`` with ``b`` the tolerance on the
    log scale in the change's direction; None without a variance."""
    if log_var is None or not math.isfinite(log_var) or log_var <= 0:
        return None
    se = math.sqrt(log_var)
    bound = -math.log1p(-tolerance) if ratio < 1 else math.log1p(tolerance)
    return Reach(se, statistics.NormalDist().cdf(-bound / se))


@dataclass(frozen=True)
class Rule:
    """The decision: the tolerance, alpha and the share of alpha a noisy change needs."""

    tolerance: float = TOLERANCE
    alpha: float = ALPHA
    claim_share: float = CLAIM_ALPHA_SHARE

    def __post_init__(self) -> None:  # no verdict can be made with other levels
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    @property
    def claim_level(self) -> float:
        """The p a change needs where the rounds are noisy, and at an interim look."""
        return self.alpha * self.claim_share

    def beyond(self, ratio: float) -> str | None:
        """REGRESSED below ``1 - tolerance``, IMPROVED above ``1 + tolerance``, None within
        (a ratio exactly at a bound is within): the size half of every verdict."""
        if ratio < 1 - self.tolerance:
            return REGRESSED
        if ratio > 1 + self.tolerance:
            return IMPROVED
        return None

    def describe(self, test: str, *, paired: bool) -> str:
        """The rule the verdicts follow, one line (the terminal's, the HTML's and the JSON's):
        ``test`` describes the statistical test (results/judge/stats.py's table)."""
        level = f"alpha {self.alpha:g}"
        if paired:
            level += (f", {self.claim_level:g} where the rounds are too noisy for the "
                      "tolerance")
        return (f"verdict: rate (perf) ratio beyond ±{100 * self.tolerance:g}% and significant "
                f"({test}, {level}), its interval clear of 1; unchanged only when the interval "
                f"of the ratio excludes a regression beyond {100 * self.tolerance:g}% (lower "
                f"bound at least {1 - self.tolerance:.3f}); else inconclusive; adj ratio: "
                "perf_adj, not judged")


# -- a benchmark --------------------------------------------------------------------------------
def _significance(ratio: float, p: float | None, rule: Rule) -> Verdict:
    """Size and significance alone: the change when both say so, else unchanged and why."""
    size = f"ratio {ratio:.3f}"
    word = rule.beyond(ratio)
    if word == REGRESSED:
        beyond = f"{size} below {1 - rule.tolerance:.3f}"
    elif word == IMPROVED:
        beyond = f"{size} above {1 + rule.tolerance:.3f}"
    else:
        return Verdict(UNCHANGED, f"{size} not beyond ±{rule.tolerance * 100:g}%")
    if p is None:
        return Verdict(UNCHANGED, f"{beyond}, but no test (too few samples)")
    if p < rule.alpha:
        return Verdict(word, f"{beyond} and significant (p {p:.3g} < alpha {rule.alpha:g})")
    return Verdict(UNCHANGED,
                   f"{beyond}, but not significant (p {p:.3g} >= alpha {rule.alpha:g})")


def _unproven_slower(found: Evidence, judged: Verdict, rule: Rule) -> Verdict:
    """A paired ratio slower beyond the tolerance that its rounds could not prove (p at or
    above alpha, or no test): inconclusive, as a saved baseline's."""
    if judged.word != UNCHANGED or rule.beyond(found.ratio) != REGRESSED:
        return judged
    if found.ci is None:
        return Verdict(INCONCLUSIVE, judged.reason)
    low, high = found.ci
    return Verdict(INCONCLUSIVE, f"{judged.reason}; interval [{low:.3f}, {high:.3f}]")


def _noisy_rounds(found: Evidence, judged: Verdict, rule: Rule) -> Verdict:
    """A paired change claimed at alpha, unless its rounds are noisy and its p above the
    claim level: then a slower ratio is inconclusive, a faster one unchanged. Slower beyond
    the tolerance without the evidence: inconclusive at any noise."""
    if judged.word not in SUSPECT or found.p is None:
        return _unproven_slower(found, judged, rule)
    noise = reach(found.ratio, found.log_var, rule.tolerance)
    if noise is None or not noise.noisy(rule.alpha, rule.claim_share) or \
            found.p <= rule.claim_level:
        return judged
    why = (f"{judged.reason}, but the rounds are noisy ({noise.describe(rule.tolerance)}): a "
           f"change needs p <= {rule.claim_level:g} at this noise")
    if judged.word == IMPROVED:
        return Verdict(UNCHANGED, f"{why}; no improvement claimed")
    return Verdict(INCONCLUSIVE, why)


def _between_runs(found: Evidence, judged: Verdict, rule: Rule) -> Verdict:
    """A saved baseline's change beyond the tolerance: inconclusive with a doubt, or slower
    without the evidence; unchanged faster without it."""
    ratio, tol = found.ratio, rule.tolerance
    if found.doubts:
        return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f} beyond ±{tol:.0%}, but "
                                     f"{'; '.join(found.doubts)}")
    if judged.word in SUSPECT:
        return judged
    lo, hi = found.ci if found.ci is not None else (math.nan, math.nan)
    p = found.p if found.p is not None else math.nan
    if ratio > 1:  # faster without evidence: no improvement claimed, and no sign of a regression
        return Verdict(UNCHANGED, f"ratio {ratio:.3f} beyond ±{tol:.0%} but not "
                                  f"significant (p {p:.3g} >= alpha {rule.alpha:g}; interval "
                                  f"[{lo:.3f}, {hi:.3f}]): no improvement claimed")
    return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f} beyond ±{tol:.0%}, but its interval "
                                 f"[{lo:.3f}, {hi:.3f}] spans the tolerance (p {p:.3g} >= "
                                 f"alpha {rule.alpha:g}; between runs: {found.noise})")


def excludes_regression(found: Evidence, rule: Rule) -> bool:
    """The one condition of **unchanged**, in every mode: the evidence excludes a regression
    beyond the tolerance, i.e. the one-sided lower bound of the ratio at the rule's level (the
    lower end of its ``1 - 2 alpha`` interval) is above ``1 - tolerance`` (a bound exactly at it
    excludes a ratio beyond it, as :meth:`Rule.beyond` counts a ratio at the bound within).
    Without an interval nothing is excluded."""
    return found.ci is not None and found.ci[0] >= 1 - rule.tolerance


def _unresolved(found: Evidence, judged: Verdict, rule: Rule, what: str = "ratio") -> Verdict:
    """``judged`` unless it is UNCHANGED on evidence that does not exclude a regression beyond
    the tolerance: then INCONCLUSIVE, with the interval (more rounds or runs, or a quieter
    runner, narrow it)."""
    if judged.word != UNCHANGED or excludes_regression(found, rule):
        return judged
    bound = 1 - rule.tolerance
    if found.ci is None:
        why = "no interval, so a regression beyond the tolerance is not excluded"
    else:
        low, high = found.ci
        why = (f"its interval [{low:.3f}, {high:.3f}] does not exclude a regression beyond "
               f"{100 * rule.tolerance:g}% (unchanged needs a lower bound of {bound:.3f} or more)")
    return Verdict(INCONCLUSIVE, f"{_headed(judged.reason, what)}; {why}")


def _headed(reason: str, what: str) -> str:
    """``reason`` led by what it judges (``rate`` for the score) where it does not say so."""
    return reason if what == "ratio" or reason.startswith(what) else f"{what} {reason}"


def excludes_no_change(found: Evidence, word: str) -> bool:
    """The interval's condition of a claimed change ``word``: the whole interval on its side of
    1 (below 1 for REGRESSED, above for IMPROVED). Without an interval the test's p alone
    decides. The p and the interval come from different statistics in some modes (the paired
    quantile test's p, a bootstrap of the rounds' upper quartiles at the expanded level), and
    beside a loaded neighbour they can disagree: 0.875 [0.811, 1.103] with p below alpha."""
    if found.ci is None:
        return True
    low, high = found.ci
    return high < 1 if word == REGRESSED else low > 1


def _claim_backed(found: Evidence, judged: Verdict, what: str = "ratio") -> Verdict:
    """A claimed change whose interval still reaches no change (1): a regression becomes
    inconclusive, an improvement "no improvement claimed" (unchanged, then the unchanged test
    of :func:`_unresolved`)."""
    if judged.word not in SUSPECT or excludes_no_change(found, judged.word):
        return judged
    assert found.ci is not None  # excludes_no_change holds without one
    low, high = found.ci
    why = (f"{_headed(judged.reason, what)}, but its interval [{low:.3f}, {high:.3f}] reaches 1 "
           "(no change)")
    if judged.word == IMPROVED:
        return Verdict(UNCHANGED, f"{why}; no improvement claimed")
    return Verdict(INCONCLUSIVE, why)


def judge(found: Evidence, rule: Rule) -> Verdict:
    """A benchmark's verdict on its evidence (the module's docstring)."""
    judged = _significance(found.ratio, found.p, rule)
    if found.paired:
        judged = _noisy_rounds(found, judged, rule)
    elif rule.beyond(found.ratio) is not None:
        judged = _between_runs(found, judged, rule)
    return _unresolved(found, _claim_backed(found, judged), rule)


def judge_unmatched(*, current_ran: bool, reference_ran: bool, refused: str | None = None
                    ) -> Verdict:
    """A benchmark with no ratio to judge, in either mode: INCOMPARABLE when its sides cannot
    be compared (``refused`` says why) or the reference side has no successful run (whatever
    the current side's), FAILED when only the current side has none, INCOMPARABLE when both
    ran but nothing pairs them."""
    if refused is not None:
        return Verdict(INCOMPARABLE, refused)
    if not reference_ran:
        return Verdict(INCOMPARABLE, "no successful run to compare with")
    if not current_ran:
        return Verdict(FAILED, "no successful run")
    return Verdict(INCOMPARABLE, "no round ran on both sides")


def judge_doubted(word: str, ratio: float | None, doubt: str | None) -> Verdict | None:
    """A paired change whose figure is in doubt (load on one side's runs only): inconclusive;
    None when the verdict stands."""
    if word not in SUSPECT or doubt is None:
        return None
    return Verdict(INCONCLUSIVE, f"ratio {ratio:.3f}, but {doubt}")


# -- the score ----------------------------------------------------------------------------------
def _score_significance(found: Evidence, weighted: Collection[str], rule: Rule) -> Verdict:
    """The score's size and significance: its combined p, or a weighted benchmark's own
    change in the same direction (a drop spread thinly is caught by the first, a drop in one
    benchmark by the second)."""
    combined = _significance(found.ratio, found.p, rule)
    if combined.word != UNCHANGED:
        return combined
    direction = rule.beyond(found.ratio)
    if direction is not None and direction in weighted:
        bound = "below" if direction == REGRESSED else "above"
        limit = 1 - rule.tolerance if direction == REGRESSED else 1 + rule.tolerance
        return Verdict(direction, f"rate ratio {found.ratio:.3f} {bound} {limit:.3f} and a "
                                  f"weighted benchmark {direction}")
    return combined


def judge_score(found: Evidence | None, weighted: Collection[str], rule: Rule) -> Verdict:
    """The score's verdict on the weighted benchmarks' combined evidence (None: no weighted
    benchmark scored on both sides) and their verdicts (``weighted``): unchanged, as a
    benchmark's, only when its interval excludes a regression beyond the tolerance; a change
    claimed when its interval excludes no change, or a weighted benchmark claims the same."""
    if found is None:
        return Verdict(INCOMPARABLE, "no weighted benchmark scored on both sides")
    score = _score_word(found, weighted, rule)
    if score.word not in weighted:  # else a weighted benchmark's own claim backs it
        score = _claim_backed(found, score, what="rate")
    return _unresolved(found, score, rule, what="rate")


def _score_word(found: Evidence, weighted: Collection[str], rule: Rule) -> Verdict:
    """The score's change (or not) by size and significance, before the unchanged test."""
    score = _score_significance(found, weighted, rule)
    if found.paired:
        if score.word == UNCHANGED and rule.beyond(found.ratio) == REGRESSED:
            return _unproven_score(found, rule)
        if score.word not in SUSPECT or score.word in weighted:
            return score
        noisy = _noisy_rounds(found, _significance(found.ratio, found.p, rule), rule)
        return score if noisy.word == score.word else Verdict(noisy.word, f"rate {noisy.reason}")
    if rule.beyond(found.ratio) is None:
        return score
    tol = rule.tolerance
    if found.doubts:
        return Verdict(INCONCLUSIVE, f"rate ratio {found.ratio:.3f} beyond ±{tol:.0%}, "
                                     "but a weighted benchmark's figure is in doubt")
    if score.word != UNCHANGED or found.ratio > 1:  # faster without evidence: unchanged
        return score
    return _unproven_score(found, rule)


def _unproven_score(found: Evidence, rule: Rule) -> Verdict:
    """The score slower beyond the tolerance without the evidence, in either mode."""
    return Verdict(INCONCLUSIVE, f"rate ratio {found.ratio:.3f} beyond ±{rule.tolerance:.0%}, "
                                 "but not significant")


def judge_doubted_score(word: str, doubted: Sequence[str]) -> Verdict | None:
    """A paired score that changed with a weighted benchmark's figure in doubt (``doubted``:
    their names): inconclusive; None when it stands."""
    if not doubted or word not in SUSPECT:
        return None
    return Verdict(INCONCLUSIVE, f"the score was {word}, but a weighted benchmark's figure is "
                                 f"in doubt ({', '.join(doubted)})")


# -- an interim look of the sequential design (results/judge/paired.py) --------------------------
def judge_look(found: Evidence | None, rule: Rule) -> str | None:
    """The verdict at an interim look: REGRESSED or IMPROVED when the interval is clear of the
    band, p at most the claim level and the rounds not noisy (at alpha itself); UNCHANGED when
    the ratio is not faster than the band and the evidence excludes a regression beyond the
    tolerance (:func:`excludes_regression`, the last look's own condition); None: more rounds."""
    if found is None or found.ci is None or found.rounds < 2:
        return None
    low, high = found.ci
    tol, p = rule.tolerance, found.p
    sure = p is not None and p <= rule.claim_level
    claim = None
    if high < 1 - tol and sure and found.ratio < 1:
        claim = REGRESSED
    elif low > 1 + tol and sure and found.ratio > 1:
        claim = IMPROVED
    if claim is not None:
        noise = reach(found.ratio, found.log_var, tol)
        return claim if noise is None or not noise.noisy(rule.alpha, share=1.0) else None
    if found.ratio <= 1 + tol and excludes_regression(found, rule):
        return UNCHANGED
    return None


# -- confirmation reruns (results/judge/confirm.py)
# ---------------------------------------------------
def repeats(first: str, ratio: float | None, rule: Rule) -> bool:
    """Whether one run's ratio repeats the first pass's suspicion ``first`` on its own."""
    return ratio is not None and ratio > 0 and first in SUSPECT and rule.beyond(ratio) == first


def suspicion(word: str, ratio: float | None, rule: Rule, doubts: Sequence[str] = ()
              ) -> str | None:
    """What a saved-baseline first pass suspects, and so is worth confirming: its verdict when
    it claims a change; REGRESSED for a slowdown beyond the tolerance that only the noise left
    inconclusive (more runs are what would resolve it); None otherwise, and for a slowdown a
    doubt left inconclusive (a busy machine's or an unreliable figure's: the rerun could not
    lift a doubt on the first pass)."""
    if word in SUSPECT:
        return word
    if word == INCONCLUSIVE and not doubts and ratio is not None and ratio > 0 and \
            rule.beyond(ratio) == REGRESSED:
        return REGRESSED
    return None


def judge_confirmation(first: str, combined: str, ratios: Sequence[float], rule: Rule,
                       suspected: str | None = None, combined_p: float | None = None) -> str:
    """The verdict kept after the confirmation runs (``ratios``: each one's ratio) of a first
    pass that said ``first`` and suspected ``suspected`` (:func:`suspicion`; default ``first``):
    the first pass's when none succeeded; the suspected change when every run repeats it and
    the combined comparison says it; else the combined verdict, or NOT_HELD where that still
    says the suspected change.

    An inconclusive slowdown is regressed on that evidence and one more condition: the
    combined comparison's p (``combined_p``) at the claim level (``rule.claim_level``, half of
    alpha), not alpha. Its first pass was already tested and did not claim; testing again with
    more runs is a second look, and two looks at alpha each would claim a regression of
    identical code more often than alpha (the sequential design's interim looks, likewise)."""
    suspected = first if suspected is None else suspected
    if not ratios:
        return first
    second_look = suspected != first
    sure = not second_look or (combined_p is not None and combined_p <= rule.claim_level)
    if combined == suspected and sure and all(repeats(suspected, r, rule) for r in ratios):
        return suspected
    return combined if combined != suspected else NOT_HELD


def judge_confirmed_score(word: str, backed: bool, dropped: bool) -> str:
    """The score's verdict once the benchmarks' are confirmed: a change only on the strength of
    benchmarks whose verdict did not hold (``dropped``, none ``backed`` it) does not hold."""
    if word not in SUSPECT:
        return word
    return NOT_HELD if dropped and not backed else word


# -- a bisect step and a step of the history ----------------------------------------------------
def judge_probe(word: str) -> str:
    """A bisect step from its paired verdict ``word``: CHANGED when it claims a change, SAME
    when it is UNCHANGED (the one definition: a regression beyond the tolerance excluded),
    else UNSURE."""
    if word in SUSPECT:
        return CHANGED
    return SAME if word == UNCHANGED else UNSURE


def judge_step(found: Evidence, rule: Rule) -> bool:
    """Whether a step of a history series holds: its log ratio beyond the tolerance either way
    (on the log scale, symmetric) and its two-sided p below alpha."""
    log_ratio = found.log_mean if found.log_mean is not None else math.log(found.ratio)
    p = found.p if found.p is not None else 1.0
    return abs(log_ratio) >= math.log1p(rule.tolerance) - 1e-12 and p < rule.alpha
