"""Why a gate's verdicts are inconclusive, and what to do about it: the causes the closing
line names (a busy machine, noise, too few rounds, nothing compared), their words and the
advice the terminal, the HTML banner and the JSON say (``Comparison.inconclusive_causes``,
results/judge/comparison.py; the exit statuses are results/gate.py's).
"""

from __future__ import annotations

__all__ = [
    "BUSY",
    "BUSY_ADVICE",
    "BUSY_DOUBT",
    "CAUSES",
    "CAUSE_WORDS",
    "FEW_ROUNDS",
    "FEW_ROUNDS_ADVICE",
    "INCONCLUSIVE_ADVICE",
    "NOISE",
    "NOTHING_COMPARED",
    "NOTHING_COMPARED_ADVICE",
    "PAIRED_INCONCLUSIVE_ADVICE",
    "doubt_cause",
    "inconclusive_advice",
    "inconclusive_why",
]

#: What to do about an inconclusive verdict, said by the terminal, the HTML banner and the JSON.
INCONCLUSIVE_ADVICE = ("compare both sides interleaved with --bench-against, keep this "
                       "machine's sessions (--bench-autosave, or dlbench baseline) and run "
                       "with --bench-repeat, or use a quieter runner")
#: The same for a ``--bench-against`` run, whose sides already ran interleaved: its rounds
#: were too noisy for the tolerance (results/judge/paired.py, results/judge/verdict.py).
PAIRED_INCONCLUSIVE_ADVICE = ("run more rounds (--bench-rounds) or on a quieter runner, with "
                              "nothing else loading it during the run")

#: Why verdicts are inconclusive, as the closing line names it (results/judge/comparison.py,
#: ``Comparison.inconclusive_causes``):
#: a side measured on a busy machine, noise too large for the tolerance (between runs, within
#: a side's runs, or between a paired run's rounds), or a paired run that ended before the
#: rounds it needed.
BUSY = "busy"
NOISE = "noise"
FEW_ROUNDS = "rounds"
#: A gate that compared nothing: no weighted benchmark had a figure on both sides (every base
#: run failed, or the baseline has none of them): it cannot pass.
NOTHING_COMPARED = "nothing"
CAUSES = (NOTHING_COMPARED, BUSY, NOISE, FEW_ROUNDS)
#: How a doubt on a side's figure taken on a busy machine begins (results/judge/noise.py,
#: results/judge/paired.py): the phrase the cause is told by.
BUSY_DOUBT = "the machine was busy"
#: What each cause is, in the closing line.
CAUSE_WORDS = {
    BUSY: "the machine was busy during the runs",
    NOISE: "the noise is too large for the tolerance",
    FEW_ROUNDS: "too few rounds ran to tell",
    NOTHING_COMPARED: "the gate compared nothing: no weighted benchmark has a figure on both "
                      "sides",
}
#: What to do about a busy machine, and about a paired run that ended too soon.
BUSY_ADVICE = "rerun on a quieter runner, with nothing else loading it during the run"
FEW_ROUNDS_ADVICE = "run more rounds (--bench-rounds), and let the run finish them"
#: What to do about a gate that compared nothing.
NOTHING_COMPARED_ADVICE = ("see the warnings above for why the reference side has no figure "
                           "(a base run that failed, a benchmark the baseline lacks)")


def doubt_cause(doubt: str) -> str:
    """The cause a doubt on a side's figure stands for: :data:`BUSY` for a busy machine, else
    :data:`NOISE` (a std% flagged unreliable: the side's own runs are too noisy)."""
    return BUSY if doubt.startswith(BUSY_DOUBT) else NOISE


def inconclusive_why(causes: tuple[str, ...] = (NOISE,)) -> str:
    """``the machine was busy during the runs``, ``the noise is too large for the tolerance``
    or both: what made the verdicts inconclusive, in the order of :data:`CAUSES`."""
    ordered = [c for c in CAUSES if c in causes] or [NOISE]
    return " and ".join(CAUSE_WORDS[c] for c in ordered)


def inconclusive_advice(paired: bool, causes: tuple[str, ...] = (NOISE,)) -> str:
    """What to do about inconclusive verdicts of a paired run, or of a saved baseline's, for
    the ``causes`` given: a busy machine wants a quieter runner, noise more rounds (paired) or
    the saved baseline's remedies, a paired run that ended too soon more rounds."""
    ordered = [c for c in CAUSES if c in causes] or [NOISE]
    noise = PAIRED_INCONCLUSIVE_ADVICE if paired else INCONCLUSIVE_ADVICE
    if BUSY in ordered and NOISE in ordered and paired:
        return noise  # more rounds or a quieter runner: both said once
    advice = {BUSY: BUSY_ADVICE, NOISE: noise, FEW_ROUNDS: FEW_ROUNDS_ADVICE,
              NOTHING_COMPARED: NOTHING_COMPARED_ADVICE}
    return "; ".join(advice[c] for c in ordered)

