"""The paired verdict when the rounds' noise is too large for the tolerance (the verdict core,
results/judge/verdict.py, on paired evidence): synthetic streams with known answers."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from _runs import steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.cli import main
from pytest_dlbench.results import gate
from pytest_dlbench.results.judge import (
    IMPROVED,
    INCONCLUSIVE,
    INCONCLUSIVE_ADVICE,
    PAIRED_INCONCLUSIVE_ADVICE,
    REGRESSED,
    UNCHANGED,
    Evidence,
    Rule,
    Verdict,
    judge,
    judge_score,
    paired_stats,
    reach,
    summarize_paired_dir,
)


def interval_of(ratio: float, log_var: float | None, alpha: float = 0.05
                ) -> tuple[float, float]:
    """The ratio's ``1 - 2 alpha`` interval for a standard error ``sqrt(log_var)`` of its log
    (normal), the ratio itself without a variance."""
    if log_var is None:
        return ratio, ratio
    half = statistics.NormalDist().inv_cdf(1 - alpha) * math.sqrt(log_var)
    return ratio * math.exp(-half), ratio * math.exp(half)


def paired_verdict(ratio: float, p: float | None, log_var: float | None, *, tolerance: float,
                   alpha: float, ci: tuple[float, float] | None = None) -> Verdict:
    """A benchmark's paired evidence, judged by the core (its interval from its variance
    unless given)."""
    found = Evidence(ratio, p, ci or interval_of(ratio, log_var, alpha), log_var=log_var,
                     paired=True)
    return judge(found, Rule(tolerance, alpha))


def verdict(ratio: float, p: float | None, *, tolerance: float, alpha: float) -> Verdict:
    """Size and significance alone (no variance: no claim level)."""
    return paired_verdict(ratio, p, None, tolerance=tolerance, alpha=alpha)


def paired_score_verdict(ratio: float | None, p: float | None, log_var: float | None,
                         weighted: set[str], *, tolerance: float, alpha: float) -> Verdict:
    found = (Evidence(ratio, p, interval_of(ratio, log_var, alpha), log_var=log_var,
                      paired=True) if ratio is not None else None)
    return judge_score(found, weighted, Rule(tolerance, alpha))

TOL, ALPHA = 0.03, 0.05
QUIET = 0.01**2  # a standard error of 1 % of the log ratio: an unchanged pair reaches ±3 % rarely
NOISY = 0.047**2  # 4.7 %: runs 15 % apart over 10 rounds; beyond ±3 % 1 time in 4


def test_reach_is_the_chance_an_unchanged_pair_lands_beyond_the_tolerance() -> None:
    quiet = reach(0.95, QUIET, TOL)
    assert quiet is not None and quiet.se == pytest.approx(0.01)
    assert quiet.chance == pytest.approx(0.00116, rel=0.02)  # Φ(-ln(1/0.97) / 0.01)
    assert not quiet.noisy(ALPHA)
    noisy = reach(0.95, NOISY, TOL)
    assert noisy is not None and noisy.chance == pytest.approx(0.259, abs=0.005)
    assert noisy.noisy(ALPHA)
    assert "1 time in 4" in noisy.describe(TOL) and "±4.7 %" in noisy.describe(TOL)
    # The threshold: where the band alone keeps an unchanged pair beyond it to half of alpha.
    edge = -math.log(0.97) / 1.959964
    assert not reach(0.9, (edge * 0.99) ** 2, TOL).noisy(ALPHA)  # type: ignore[union-attr]
    assert reach(0.9, (edge * 1.01) ** 2, TOL).noisy(ALPHA)  # type: ignore[union-attr]
    # Faster ratios measure the band on their own side (ln 1.03 < -ln 0.97).
    assert reach(1.1, NOISY, TOL).chance > noisy.chance  # type: ignore[union-attr]
    assert reach(0.9, None, TOL) is None and reach(0.9, 0.0, TOL) is None


@pytest.mark.parametrize(
    ("ratio", "p", "log_var", "word"),
    [
        # Quiet rounds: the fixed rule, whatever p between half of alpha and alpha.
        (0.95, 0.04, QUIET, REGRESSED),
        (1.05, 0.04, QUIET, IMPROVED),
        # Noisy rounds: a claim needs p at half of alpha.
        (0.93, 0.04, NOISY, INCONCLUSIVE),
        (1.07, 0.04, NOISY, UNCHANGED),  # no improvement claimed
        (0.90, 0.02, NOISY, REGRESSED),
        (1.10, 0.02, NOISY, IMPROVED),
        (0.90, 0.025, NOISY, REGRESSED),  # at the level: a claim
        # Not beyond the tolerance: unchanged where the interval excludes a regression beyond
        # it (quiet: down to 0.974), inconclusive where it does not (noisy: down to 0.907).
        (0.99, 0.001, QUIET, UNCHANGED),
        (0.98, 0.001, NOISY, INCONCLUSIVE),
        (0.90, 0.20, NOISY, INCONCLUSIVE),  # slower without the evidence
        (1.10, 0.20, NOISY, UNCHANGED),  # faster without it (down to 1.019): no claim
        # No variance (one pair): the fixed rule.
        (0.90, 0.04, None, REGRESSED),
    ],
)
def test_paired_verdict(ratio: float, p: float, log_var: float | None, word: str) -> None:
    judged = paired_verdict(ratio, p, log_var, tolerance=TOL, alpha=ALPHA)
    assert judged.word == word
    fixed = verdict(ratio, p, tolerance=TOL, alpha=ALPHA)
    if word != fixed.word and "does not exclude" not in judged.reason:
        assert judged.reason.startswith(fixed.reason)
        assert "rounds are noisy" in judged.reason and "p <= 0.025" in judged.reason


def test_the_claim_level_follows_alpha() -> None:
    # At alpha 0.10 the level is 0.05, and the threshold of "noisy" moves with it.
    assert paired_verdict(0.93, 0.04, NOISY, tolerance=TOL, alpha=0.10).word == REGRESSED
    assert paired_verdict(0.93, 0.07, NOISY, tolerance=TOL, alpha=0.10).word == INCONCLUSIVE


def test_score_claims_at_the_same_level_unless_a_weighted_benchmark_regressed() -> None:
    noisy = paired_score_verdict(0.93, 0.04, NOISY, set(), tolerance=TOL, alpha=ALPHA)
    assert noisy.word == INCONCLUSIVE and noisy.reason.startswith("rate ratio 0.930")
    held = paired_score_verdict(0.93, 0.04, NOISY, {REGRESSED}, tolerance=TOL, alpha=ALPHA)
    assert held.word == REGRESSED
    quiet = paired_score_verdict(0.93, 0.04, QUIET, set(), tolerance=TOL, alpha=ALPHA)
    assert quiet.word == REGRESSED
    assert paired_score_verdict(None, None, None, set(), tolerance=TOL,
                                alpha=ALPHA).word != INCONCLUSIVE


@pytest.mark.parametrize("spread", [0.01, 0.05, 0.15, 0.30])
def test_unchanged_pairs_regress_at_most_half_of_alpha_at_every_noise(spread: float) -> None:
    # Known answer: identical sides, each round's log ratio N(0, spread), 10 rounds, the
    # paired t-test. The fixed rule's false alarms climb to alpha once the noise swamps the
    # band; the rule keeps them near half of alpha, and what it takes from them is inconclusive.
    # Every slower ratio beyond the tolerance not claimed is inconclusive (issue 38: the saved
    # baseline's rule), so at 15 % and 30 % most slower A/A pairs are, not "unchanged".
    rng = np.random.default_rng(7)
    # Within the tolerance, an interval reaching below it is inconclusive too (``unproven``).
    trials, fixed, judged, doubtful, slower, unproven = 2000, 0, 0, 0, 0, 0
    for _ in range(trials):
        s = paired_stats(rng.normal(0.0, spread, 10), test="t", alpha=ALPHA)
        assert s is not None and s.ci is not None
        fixed += verdict(s.ratio, s.p, tolerance=TOL, alpha=ALPHA).word == REGRESSED
        word = paired_verdict(s.ratio, s.p, s.log_var, tolerance=TOL, alpha=ALPHA,
                              ci=s.ci).word
        judged += word == REGRESSED
        slower += s.ratio < 1 - TOL
        doubtful += word == INCONCLUSIVE and s.ratio < 1 - TOL
        unproven += word == INCONCLUSIVE and s.ratio >= 1 - TOL
        assert (word == UNCHANGED) <= (s.ci[0] >= 1 - TOL)
    # 2000 trials: the binomial's 3 standard errors around 2.5 % are ±1 %.
    assert judged / trials <= ALPHA / 2 + 0.01
    assert judged + doubtful == slower and judged <= fixed
    if spread >= 0.15:  # the band keeps nothing out: the fixed rule is at alpha
        assert fixed / trials > ALPHA - 0.015
        assert doubtful > fixed - judged
    if spread == 0.01:  # quiet: nothing changes
        assert judged == fixed and doubtful == 0 and unproven == 0


def test_a_clear_change_is_still_caught_on_noisy_rounds() -> None:
    # 30 % slower with rounds 15 % apart: p far below the level, regressed as before.
    rng = np.random.default_rng(3)
    caught = 0
    for _ in range(200):
        s = paired_stats(rng.normal(math.log(0.7), 0.15, 10), test="t", alpha=ALPHA)
        assert s is not None
        caught += paired_verdict(s.ratio, s.p, s.log_var, tolerance=TOL,
                                 alpha=ALPHA).word == REGRESSED
    assert caught >= 195


# -- through a run directory: dlbench report, its exit status, the terminal and the JSON ------
NOISE = (0.14, -0.04, 0.10, -0.12, 0.02, 0.12, -0.09, 0.05, -0.02, 0.03)


def noisy_run(tmp: Path) -> Path:
    """A paired run directory whose candidate is ~7 % slower with rounds ±10 % apart, judged
    by the t-test over 10 rounds (fixed design): p between half of alpha and alpha."""
    run = tmp / "run"
    base = layout.base_dir(run)
    base.mkdir(parents=True)
    for r, wobble in enumerate(NOISE):
        write_run(base, "mlp", steady_at(100.0), repeat=r)
        write_run(run, "mlp", steady_at(93.0 * (1 + wobble)), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "c" * 40, "rounds": len(NOISE),
                               "design": "fixed", "test": "t", "warnings": []})
    return run


def test_a_noisy_paired_run_is_inconclusive_with_its_own_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = noisy_run(tmp_path)
    result = summarize_paired_dir(run)
    assert result is not None
    mlp = result[2].get("mlp")
    assert mlp is not None and mlp.ratio is not None and mlp.p_value is not None
    assert mlp.ratio < 1 - TOL and ALPHA / 2 < mlp.p_value < ALPHA
    assert mlp.verdict == INCONCLUSIVE and "rounds are noisy" in mlp.reason
    assert result[2].score_verdict == INCONCLUSIVE
    capsys.readouterr()
    out_json, html = tmp_path / "now.json", tmp_path / "now.html"
    assert main(["report", str(run), "--save", str(out_json), "--html", str(html)]) == 9
    out = capsys.readouterr().out
    assert "inconclusive: mlp: ratio" in out and "rounds are noisy" in out
    assert "alpha 0.05, 0.025 where the rounds are too noisy for the tolerance)" in out
    assert PAIRED_INCONCLUSIVE_ADVICE in out
    assert INCONCLUSIVE_ADVICE not in out  # the saved baseline's advice is not for this
    record = json.loads(out_json.read_text())["gate"]
    assert record["verdict"] == INCONCLUSIVE and record["status"] == gate.EXIT_INCONCLUSIVE
    assert record["advice"] == PAIRED_INCONCLUSIVE_ADVICE
    assert "rounds are noisy" in record["inconclusive"]["mlp"]
    page = html.read_text()
    assert "Gate inconclusive" in page and PAIRED_INCONCLUSIVE_ADVICE in page
