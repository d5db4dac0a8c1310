"""The regression gate shared by ``pytest --bench-...`` and ``dlbench report/compare``: the
exit statuses, the option values they parse, the baseline loader and the final verdict.

0, 1, 2 and 4 mean what they mean for pytest (``pytest.ExitCode``), so a CI script can treat
``pytest --bench-...`` and ``dlbench report`` alike; 6, 7, 8 and 9 are ours, above pytest's 0-5,
so that CI can tell "slower", "nothing to compare with", "an output was lost" and "the noise was
too large to tell" from "broken".

Kept light (no scoring, no pandas): the pytest plugin imports it at start-up.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# Bad input (4): defined with the run's protocol, which the node launcher reads too.
from pytest_dlbench.core.protocol import USAGE_ERROR

# The rule's defaults are the verdict core's, the paired tests the table of the tests'.
from pytest_dlbench.results.stats import PAIRED_QUANTILE, PAIRED_TESTS
from pytest_dlbench.results.verdict import ALPHA, INCONCLUSIVE, REGRESSED, TOLERANCE

if TYPE_CHECKING:
    from pytest_dlbench.results.summary import SuiteSummary

__all__ = [
    "gate_record",
    "gate_word",
    "verdict_line",
    "BASELINE_MISSING",
    "BUSY",
    "BUSY_ADVICE",
    "BUSY_DOUBT",
    "CAUSES",
    "FEW_ROUNDS",
    "FEW_ROUNDS_ADVICE",
    "NOISE",
    "PASSED",
    "BENCH_FAILED",
    "EXIT_INCONCLUSIVE",
    "INCONCLUSIVE_ADVICE",
    "PAIRED_INCONCLUSIVE_ADVICE",
    "INTERRUPTED",
    "LOGGER_FAILED",
    "OK",
    "OUTPUT_FAILED",
    "EXIT_REGRESSED",
    "USAGE_ERROR",
    "ALPHA",
    "CONFIRM",
    "PAIRED_QUANTILE",
    "PAIRED_RATE",
    "PAIRED_RATES",
    "PAIRED_TEST",
    "PAIRED_TESTS",
    "ROUNDS",
    "TOLERANCE",
    "BaselineLoad",
    "OptionValueError",
    "final_status",
    "doubt_cause",
    "inconclusive_advice",
    "inconclusive_why",
    "output_status",
    "run_failed",
    "load_baseline",
    "parse_alpha",
    "parse_paired_rate",
    "parse_paired_test",
    "parse_price",
    "parse_rounds",
    "parse_tolerance",
]

#: Every benchmark ran and nothing regressed.
OK = 0
#: A benchmark run failed, or a weighted benchmark of the suite did not run. Wins over 6.
BENCH_FAILED = 1
#: ``dlbench log``: a logger failed (its one warning line says why). 1, as a failed benchmark
#: is for the other commands: the command did not do all it was asked.
LOGGER_FAILED = 1
#: Interrupted (Ctrl-C), as pytest.
INTERRUPTED = 2
# 4, USAGE_ERROR (imported above): bad input, an unreadable, corrupt or foreign baseline file,
# a bad option, no run directory.
#: Every benchmark passed, but performance regressed against the baseline.
EXIT_REGRESSED = 6
#: A baseline was required (``--compare``/``--bench-compare``) but its file does not exist.
BASELINE_MISSING = 7
#: Measured, passed and nothing regressed, but an output (``--bench-save``, ``--bench-html``,
#: ``--bench-export``) could not be written at the end (a full disk): the one line says which.
OUTPUT_FAILED = 8
#: Every benchmark passed and none regressed, but a verdict against the baseline is
#: "inconclusive": a change beyond the tolerance that the noise between runs cannot tell from
#: noise, or a side measured on a busy machine (results/noise.py). Below 1 and 6 (a failure or
#: a regression that was proven says more), above 8 (what was measured matters more than a
#: file that could not be written) and 0 (a gate that cannot tell must not pass silently).
EXIT_INCONCLUSIVE = 9
#: What to do about an inconclusive verdict, said by the terminal, the HTML banner and the JSON.
INCONCLUSIVE_ADVICE = ("compare both sides interleaved with --bench-against, keep this "
                       "machine's sessions (--bench-autosave, or dlbench baseline) and run "
                       "with --bench-repeat, or use a quieter runner")
#: The same for a ``--bench-against`` run, whose sides already ran interleaved: its rounds
#: were too noisy for the tolerance (results/paired.py, results/verdict.py).
PAIRED_INCONCLUSIVE_ADVICE = ("run more rounds (--bench-rounds) or on a quieter runner, with "
                              "nothing else loading it during the run")

#: Why verdicts are inconclusive, as the closing line names it (results/compare.py,
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
#: How a doubt on a side's figure taken on a busy machine begins (results/noise.py,
#: results/paired.py): the phrase the cause is told by.
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


#: ``--bench-against``: the most rounds of (base, candidate) pairs per benchmark, and the
#: paired test (results/paired.py). Even, so that ABBA order puts each side first equally
#: often. The sequential design stops a benchmark once its verdict is clear, so the most rounds
#: is what an undecided pair costs: at 10, a quarter of identical pairs on a noisy 2-core
#: machine could not exclude a 3 % regression and ended inconclusive; at 20 a few in a hundred,
#: for about two rounds more on average (docs/reports.md, "Stopping early").
#: On a shared machine whose load slows whole runs in spells, the quantile test is the one that
#: caught 5 % slowdowns; the per-run tests (t, wilcoxon) lost them to the spells.
ROUNDS = 20
PAIRED_TEST = "quantile"
#: What each run of a pair contributes (results/paired.py): ``window``, its rate over the
#: steady window (Σitems/Σseconds, the scored figure), or ``median``, the median of its steady
#: steps' rates, which a burst of load over a few steps of one run does not move.
PAIRED_RATES = ("window", "median")
PAIRED_RATE = "window"
#: Default of ``--bench-confirm``: confirmation runs at most, per suspected benchmark. Two: a
#: false alarm of the first pass rarely repeats twice beyond the tolerance, and a suite with
#: no suspect pays nothing (results/confirm.py).
CONFIRM = 2


# -- option values (argparse ``type=`` callables, for pytest's parser and the CLI's) -------------


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """An option value that cannot be used; argparse (and pytest) print it as a usage error."""


def parse_tolerance(text: str | float) -> float:
    """``"5%"`` or ``"0.05"`` (or a float) -> 0.05. A bare number must be a fraction below 1:
    ``"5"`` is refused rather than guessed."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise OptionValueError(
            f"tolerance {text!r} is not a number (write 5% or 0.05)"
        ) from None
    if not 0 <= value < 1 or math.isnan(value):
        raise OptionValueError(
            f"tolerance {text!r} is not in [0%, 100%) (write 5% or 0.05)"
        )
    return value


def parse_alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise OptionValueError(f"alpha must be a number in (0, 1), got {text!r}")
    return value


def _one_of(text: str, choices: tuple[str, ...], what: str) -> str:
    value = str(text).strip().lower()
    if value not in choices:
        raise OptionValueError(f"{what} must be one of {', '.join(choices)}, got {text!r}")
    return value


def parse_paired_test(text: str) -> str:
    return _one_of(text, PAIRED_TESTS, "paired test")


def parse_paired_rate(text: str) -> str:
    return _one_of(text, PAIRED_RATES, "paired rate")


def parse_rounds(text: str) -> int:
    """Rounds of a paired run: two at least (one pair has no variance to test against)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise OptionValueError(f"rounds must be a whole number, 2 or more, got {text!r}")
    return value


def parse_confirm(text: str | int) -> int:
    """``--bench-confirm``: confirmation runs at most, 0 (no confirmation) or more."""
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OptionValueError(
            f"--bench-confirm must be a whole number, 0 or more (0: no confirmation), "
            f"got {text!r}")
    return value


def parse_price(text: str) -> float:
    """Dollars: ``2000``, ``$2,000.50``."""
    try:
        value = float(str(text).lstrip("$").replace(",", ""))
    except ValueError:
        value = -1.0
    if not value > 0 or math.isinf(value):
        raise OptionValueError(f"price must be a positive number of dollars: {text!r}")
    return value


# -- the baseline ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineLoad:
    """A baseline file read for comparison: the summary, or why there is none."""

    summary: SuiteSummary | None  # typed: results/summary.py
    status: int = OK  # OK, BASELINE_MISSING or USAGE_ERROR
    message: str = ""


def load_baseline(path: str) -> BaselineLoad:
    """Read a saved summary. A missing file is :data:`BASELINE_MISSING` (the caller decides
    whether that is an error); a corrupt or foreign one is :data:`USAGE_ERROR`, one line."""
    from pytest_dlbench.core.errors import DlbenchError
    from pytest_dlbench.results.baseline import BaselineMissing, load_summary

    try:
        return BaselineLoad(load_summary(path))
    except BaselineMissing:
        return BaselineLoad(None, BASELINE_MISSING, f"baseline not found: {path}")
    except DlbenchError as exc:
        return BaselineLoad(None, USAGE_ERROR, str(exc))


# -- the verdict -----------------------------------------------------------------------------------


def run_failed(summary: SuiteSummary) -> bool:
    """The "a benchmark failed" verdict on a scored run, the one rule for ``pytest --bench-...``,
    ``dlbench report``, ``dlbench compare`` (a summary read back) and the loggers: a run that
    ended other than ok or skipped (pytest's own verdict on its item), or a weighted benchmark
    missing from the score, even one that skipped itself everywhere (the score the gate judges
    lacks it)."""
    from pytest_dlbench.core.protocol import Status

    if summary.incomplete:
        return True
    return any(run.status not in (Status.OK, Status.SKIPPED) for run in summary.runs)


def final_status(*, failed: bool, comparison: Any = None, baseline_status: int = OK) -> int:
    """Bad input first, then failures (never hide one behind "no baseline"), then a missing
    baseline, then the gate: regressed (6) before inconclusive (9). An output lost at the end
    (8) only replaces OK (:func:`output_status`): 1 > 6 > 9 > 8 > 0."""
    if baseline_status == USAGE_ERROR:
        return USAGE_ERROR
    if failed:
        return BENCH_FAILED
    if baseline_status:
        return baseline_status
    if comparison is not None and comparison.regressed:
        return EXIT_REGRESSED
    if comparison is not None and getattr(comparison, "inconclusive", False):
        return EXIT_INCONCLUSIVE
    return OK


def output_status(status: int, *, unwritten: bool) -> int:
    """The exit status once the outputs are written: a status that says what the run measured
    (1, 4, 6, 7, 9) keeps its meaning; a run that is otherwise OK but lost an output is 8."""
    return OUTPUT_FAILED if unwritten and status == OK else status


PASSED = "passed"


def gate_word(comparison: Any) -> str:
    """The gate's verdict in one word: :data:`REGRESSED`, :data:`INCONCLUSIVE` or ``passed``."""
    if comparison.regressed:
        return REGRESSED
    return INCONCLUSIVE if comparison.inconclusive else PASSED


#: What an exit status other than the gate's own (0, 6, 9) says, before the gate's word.
_STATUS_WORDS = {
    BENCH_FAILED: "a benchmark failed",
    INTERRUPTED: "interrupted",
    USAGE_ERROR: "bad input",
    OUTPUT_FAILED: "an output could not be written",
}


def verdict_line(comparison: Any, status: int) -> str:
    """The gate's verdict in one line, the last one pytest prints when a gate ran
    (``dlbench: regressed (exit status 6)``); an exit status that is not the gate's says
    first what it means (``dlbench: a benchmark failed (exit status 1); the gate: passed``)."""
    word = gate_word(comparison)
    if status in (OK, EXIT_REGRESSED, EXIT_INCONCLUSIVE):
        return f"dlbench: {word} (exit status {status})"
    what = _STATUS_WORDS.get(status, f"exit status {status}")
    return f"dlbench: {what} (exit status {status}); the gate: {word}"


def gate_record(comparison: Any, status: int | None) -> dict[str, Any] | None:
    """The ``gate`` entry (results/summary_json.GATE) of a run compared with a baseline (None
    without a comparison): the exit status, the verdict in one word, each inconclusive
    verdict's reason and what to do (the terminal and the HTML banner say the same), and the
    whole comparison."""
    if comparison is None:
        return None
    word = gate_word(comparison)
    reasons = {c.name: c.reason for c in comparison.benchmarks if c.verdict == INCONCLUSIVE}
    if getattr(comparison, "compared_nothing", False):
        reasons["gate"] = CAUSE_WORDS[NOTHING_COMPARED]
    if comparison.score_verdict == INCONCLUSIVE:
        reasons["score"] = comparison.score_reason
    return {
        "status": status,
        "verdict": word,
        "regressions": list(comparison.regressions),
        "inconclusive": reasons,
        "advice": comparison.inconclusive_advice if reasons else None,
        "causes": list(comparison.inconclusive_causes) if reasons else [],
        "comparison": comparison.to_dict(),
    }
