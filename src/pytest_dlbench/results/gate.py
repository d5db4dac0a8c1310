"""The regression gate shared by ``pytest --bench-...`` and ``dlbench report/compare``: the
exit statuses and their precedence, whether a run failed, and the gate's verdict line and record.

0, 1, 2 and 4 mean what they mean for pytest (``pytest.ExitCode``), so a CI script can treat
``pytest --bench-...`` and ``dlbench report`` alike; 6, 7, 8 and 9 are ours, above pytest's 0-5,
so that CI can tell "slower", "nothing to compare with", "an output was lost" and "the noise was
too large to tell" from "broken". Why verdicts are inconclusive and what to do about it are the
judge's (results/judge/causes.py); the option parsers are the option table's (options.py).

Kept light (no scoring, no pandas): the pytest plugin imports it at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Bad input (4) and a missing baseline (7): defined with the run's protocol, which the node
# launcher and the baseline's loader read too.
from pytest_dlbench.core.protocol import BASELINE_MISSING, USAGE_ERROR
from pytest_dlbench.results.judge.verdict import INCONCLUSIVE, REGRESSED

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = [
    "gate_record",
    "gate_word",
    "verdict_line",
    "BASELINE_MISSING",
    "PASSED",
    "BENCH_FAILED",
    "EXIT_INCONCLUSIVE",
    "INTERRUPTED",
    "LOGGER_FAILED",
    "OK",
    "OUTPUT_FAILED",
    "EXIT_REGRESSED",
    "USAGE_ERROR",
    "final_status",
    "output_status",
    "run_failed",
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
# 7, BASELINE_MISSING (imported above): a baseline was required (``--compare``/``--bench-compare``)
# but its file does not exist.
#: Every benchmark passed, but performance regressed against the baseline.
EXIT_REGRESSED = 6
#: Measured, passed and nothing regressed, but an output (``--bench-save``, ``--bench-html``,
#: ``--bench-export``) could not be written at the end (a full disk): the one line says which.
OUTPUT_FAILED = 8
#: Every benchmark passed and none regressed, but a verdict against the baseline is
#: "inconclusive": a change beyond the tolerance that the noise between runs cannot tell from
#: noise, or a side measured on a busy machine (results/judge/noise.py). Below 1 and 6 (a failure or
#: a regression that was proven says more), above 8 (what was measured matters more than a
#: file that could not be written) and 0 (a gate that cannot tell must not pass silently).
EXIT_INCONCLUSIVE = 9

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
    """The ``gate`` entry (results/model/summary_json.GATE) of a run compared with a baseline (None
    without a comparison): the exit status, the verdict in one word, each inconclusive
    verdict's reason and what to do (the terminal and the HTML banner say the same), and the
    whole comparison."""
    # Here, not at the top: the plugin imports the gate at start-up, and the words at the end.
    from pytest_dlbench.results.judge.causes import CAUSE_WORDS, NOTHING_COMPARED

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
