"""The judging (docs/architecture.md, "results/ by job"): the verdict core (verdict), the
statistical tests (stats), a saved baseline's noise (noise, history_drift), the rows both
modes return (comparison), the two modes (saved: against a saved baseline; paired: a
``--bench-against`` run), the confirmation runs (confirm), why verdicts are inconclusive
(causes) and the gate's defaults (defaults). Stands on the figures and the model.

A lazy face: a name is imported from its module on first use (core/lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.core.lazy import face_getattr

if TYPE_CHECKING:
    from pytest_dlbench.results.judge.causes import (
        BUSY,
        BUSY_ADVICE,
        BUSY_DOUBT,
        FEW_ROUNDS,
        FEW_ROUNDS_ADVICE,
        INCONCLUSIVE_ADVICE,
        NOISE,
        PAIRED_INCONCLUSIVE_ADVICE,
    )
    from pytest_dlbench.results.judge.comparison import BenchComparison, Comparison
    from pytest_dlbench.results.judge.confirm import (
        NOT_HELD,
        BenchConfirmation,
        Confirmation,
        read_confirmation,
        suspected,
    )
    from pytest_dlbench.results.judge.defaults import (
        CONFIRM,
        PAIRED_RATE,
        PAIRED_RATES,
        PAIRED_TEST,
        ROUNDS,
    )
    from pytest_dlbench.results.judge.history_drift import HistoryDrifts, history_drifts
    from pytest_dlbench.results.judge.noise import (
        DEFAULT_BETWEEN_RUN_CV,
        estimate_drift,
        session_drift,
    )
    from pytest_dlbench.results.judge.paired import (
        ALL_ROUNDS,
        CLEAR,
        FIXED,
        SEQUENTIAL,
        Judgement,
        Stop,
        compare_paired,
        design_of,
        evidence_of,
        first_stop,
        judge_paired_run,
        looks,
        paired_doubt,
        pairs_of,
        stop_before,
        summarize_paired_dir,
    )
    from pytest_dlbench.results.judge.saved import (
        SavedComparison,
        compare,
        compare_saved,
        compare_summaries,
    )
    from pytest_dlbench.results.judge.stats import (
        BOOTSTRAPS,
        PAIRED_QUANTILE,
        PAIRED_TESTS,
        PERMUTATIONS,
        PairedStats,
        combined_paired,
        expanded_level,
        p_in_direction,
        paired_stats,
        quantile_stats,
    )
    from pytest_dlbench.results.judge.verdict import (
        ALPHA,
        CHANGED,
        FAILED,
        IMPROVED,
        INCOMPARABLE,
        INCONCLUSIVE,
        REGRESSED,
        SAME,
        TOLERANCE,
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
        reach,
        repeats,
        suspicion,
    )

#: Each module of the room and the names of its face.
_HOMES = {
    "causes": (
        "BUSY", "BUSY_ADVICE", "BUSY_DOUBT", "FEW_ROUNDS", "FEW_ROUNDS_ADVICE",
        "INCONCLUSIVE_ADVICE", "NOISE", "PAIRED_INCONCLUSIVE_ADVICE",
    ),
    "comparison": ("BenchComparison", "Comparison"),
    "confirm": (
        "BenchConfirmation", "Confirmation", "NOT_HELD", "read_confirmation",
        "suspected",
    ),
    "defaults": ("CONFIRM", "PAIRED_RATE", "PAIRED_RATES", "PAIRED_TEST", "ROUNDS"),
    "history_drift": ("HistoryDrifts", "history_drifts"),
    "noise": ("DEFAULT_BETWEEN_RUN_CV", "estimate_drift", "session_drift"),
    "paired": (
        "ALL_ROUNDS", "CLEAR", "FIXED", "Judgement", "SEQUENTIAL", "Stop", "compare_paired",
        "design_of", "evidence_of", "first_stop", "judge_paired_run", "looks", "paired_doubt",
        "pairs_of", "stop_before", "summarize_paired_dir",
    ),
    "saved": ("SavedComparison", "compare", "compare_saved", "compare_summaries"),
    "stats": (
        "BOOTSTRAPS", "PAIRED_QUANTILE", "PAIRED_TESTS", "PERMUTATIONS", "PairedStats",
        "combined_paired", "expanded_level", "p_in_direction", "paired_stats",
        "quantile_stats",
    ),
    "verdict": (
        "ALPHA", "CHANGED", "Evidence", "FAILED", "IMPROVED", "INCOMPARABLE", "INCONCLUSIVE",
        "REGRESSED", "Rule", "SAME", "TOLERANCE", "UNCHANGED", "UNSURE", "Verdict", "judge",
        "judge_confirmation", "judge_confirmed_score", "judge_doubted", "judge_doubted_score",
        "judge_look", "judge_probe", "judge_score", "judge_step", "reach", "repeats",
        "suspicion",
    ),
}

__all__ = [
    "ALL_ROUNDS", "ALPHA", "BenchComparison", "BenchConfirmation", "BOOTSTRAPS", "BUSY",
    "BUSY_ADVICE", "BUSY_DOUBT", "CHANGED", "CLEAR", "combined_paired", "compare",
    "compare_paired", "compare_saved", "compare_summaries", "Comparison", "CONFIRM",
    "Confirmation", "DEFAULT_BETWEEN_RUN_CV", "design_of", "estimate_drift", "Evidence",
    "evidence_of", "expanded_level", "FAILED", "FEW_ROUNDS", "FEW_ROUNDS_ADVICE", "first_stop",
    "FIXED",
    "history_drifts", "HistoryDrifts", "IMPROVED", "INCOMPARABLE", "INCONCLUSIVE",
    "INCONCLUSIVE_ADVICE", "judge", "judge_confirmation", "judge_confirmed_score",
    "judge_doubted", "judge_doubted_score", "judge_look", "judge_paired_run", "judge_probe",
    "judge_score", "judge_step", "Judgement", "looks", "NOISE", "NOT_HELD", "p_in_direction",
    "paired_doubt", "PAIRED_INCONCLUSIVE_ADVICE", "PAIRED_QUANTILE", "PAIRED_RATE",
    "PAIRED_RATES", "paired_stats", "PAIRED_TEST", "PAIRED_TESTS", "PairedStats", "pairs_of",
    "PERMUTATIONS", "quantile_stats", "reach", "read_confirmation", "REGRESSED", "repeats",
    "ROUNDS", "Rule", "SAME", "SavedComparison", "SEQUENTIAL", "session_drift", "Stop",
    "stop_before", "summarize_paired_dir", "suspected", "suspicion",
    "TOLERANCE", "UNCHANGED", "UNSURE", "Verdict",
]
__getattr__ = face_getattr(__name__, _HOMES)
