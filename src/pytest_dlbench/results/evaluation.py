"""The end of a run, decided once for ``pytest --bench-...``, ``dlbench report`` and the loggers.

:func:`evaluate` scores a run directory, compares it (with a baseline file, or a
``--bench-against`` run with its base side, round by round), and says whether the run failed
and with which exit status. How an :class:`Evaluation` is shown and which files it is written to
is the report's (:mod:`pytest_dlbench.report.evaluation`); the loggers receive it as it is.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.layout import read_manifest
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures.milabench_score import MILABENCH, MILARUN, with_milabench_score
from pytest_dlbench.results.figures.scoring import summarize_dir
from pytest_dlbench.results.history.records import drifts_from_history, history_folder
from pytest_dlbench.results.judge.confirm import read_confirmation
from pytest_dlbench.results.judge.paired import summarize_paired_dir
from pytest_dlbench.results.judge.saved import compare_saved
from pytest_dlbench.results.judge.verdict import ALPHA, TOLERANCE
from pytest_dlbench.results.model.baseline import summary_dict
from pytest_dlbench.results.model.baseline_load import BaselineLoad

if TYPE_CHECKING:
    from pytest_dlbench.results.judge.comparison import Comparison
    from pytest_dlbench.results.judge.confirm import Confirmation
    from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = ["EvaluateOptions", "Evaluation", "Outputs", "evaluate", "judged", "no_score_reason"]


@dataclass(frozen=True)
class Outputs:
    """The files a run's report is written to (``--bench-save``, ``--bench-html``,
    ``--bench-export``); None: not asked."""

    save: str | None = None
    html: str | None = None
    export: str | None = None
    #: ``--bench-autosave``: the history folder ("" for ``<base>/history``;
    #: results/history/records.py).
    autosave: str | None = None

    def artifacts(self) -> list[Path]:
        """The files a logger attaches to the session: the HTML report and the saved summary,
        those that exist."""
        return [Path(p) for p in (self.html, self.save) if p and Path(p).is_file()]


@dataclass(frozen=True)
class EvaluateOptions:
    """What the end of a run is asked to do: the gate's options and the report's files."""

    tolerance: float = TOLERANCE
    alpha: float = ALPHA
    #: A --bench-against run's test and what each run contributes (None: the run's own).
    paired_test: str | None = None
    paired_rate: str | None = None
    #: The baseline file asked for (``--compare``), already read: pytest reads it before the
    #: run, so that a corrupt one stops the run before anything is measured.
    baseline: BaselineLoad | None = None
    baseline_path: str | None = None
    #: A baseline file that does not exist is exit status 7 (``dlbench report`` always; pytest
    #: with ``--bench-require-baseline``), else a warning.
    require_baseline: bool = True
    #: Look for a --bench-against run's base side when there is no baseline file.
    paired: bool = True
    price: float | None = None
    #: ``--bench-score``: milarun (the seed's score alone) or milabench (milabench's beside it).
    score: str = MILARUN
    #: ``--bench-reference``: milabench's published per-GPU figures beside the run's
    #: (results/figures/reference.py).
    reference: bool = False
    #: The suite named in the saved summary (pytest: the run's name).
    suite: str | None = None
    outputs: Outputs = field(default_factory=Outputs)


@dataclass(frozen=True)
class Evaluation:
    """A scored run: its summary, its comparison (with a baseline, or the paired verdicts of a
    --bench-against run and its ``base_summary``), the verdict and the exit status."""

    run_dir: Path
    summary: SuiteSummary
    options: EvaluateOptions
    comparison: Comparison | None = None
    #: The base side of a --bench-against run (None: not a paired run).
    base_summary: SuiteSummary | None = None
    #: :func:`gate.run_failed`: the one "did the run fail?" rule.
    failed: bool = False
    #: The exit status of :func:`gate.final_status`.
    status: int = gate.OK
    #: One line per file written (report/evaluation.write_evaluation), for the user.
    written: tuple[str, ...] = ()
    #: One line per file that could not be written at the end (its path and the reason).
    unwritten: tuple[str, ...] = ()
    #: ``--bench-confirm``: the suspected verdicts run again (results/judge/confirm.py); the summary
    #: and the comparison above then include the confirmation runs.
    confirmation: Confirmation | None = None

    @property
    def paired(self) -> bool:
        return self.base_summary is not None

    @property
    def regressed(self) -> bool:
        return self.comparison is not None and self.comparison.regressed

    @functools.cached_property
    def saved_summary(self) -> dict[str, Any]:
        """The summary as ``--bench-save`` writes it (what the loggers send), made once."""
        return summary_dict(self.summary, suite=self.options.suite)

    def with_written(self, lines: list[str], unwritten: list[str] | None = None) -> Evaluation:
        """With the lines of the files written, and of those that could not be (the status
        becomes :data:`gate.OUTPUT_FAILED` if it was OK)."""
        unwritten = unwritten or []
        return dataclasses.replace(
            self, written=(*self.written, *lines), unwritten=(*self.unwritten, *unwritten),
            status=gate.output_status(self.status, unwritten=bool(unwritten)))


def evaluate(run_dir: str | PathLike[str], options: EvaluateOptions | None = None) -> Evaluation:
    """Score ``run_dir``, compare it as ``options`` ask, and give the verdict."""
    options = options or EvaluateOptions()
    run_dir = Path(run_dir)
    summary, base, comparison = _score(run_dir, options)
    confirmation = None
    baseline = options.baseline
    if baseline is not None and baseline.summary is not None:
        # The drift between sessions the machine's history measured: the --bench-autosave
        # folder, else <base>/history when there is one (results/judge/history_drift.py).
        folder = history_folder(summary, options.outputs.autosave)
        saved = compare_saved(summary, baseline.summary, tolerance=options.tolerance,
                              alpha=options.alpha, history=drifts_from_history(folder, run_dir),
                              baseline_path=options.baseline_path,
                              confirm=functools.partial(read_confirmation, run_dir))
        summary, comparison, confirmation = saved.summary, saved.comparison, saved.confirmation
    if options.score == MILABENCH:  # beside the seed's score, never instead of it
        manifest = read_manifest(run_dir)
        summary = with_milabench_score(summary,
                                       manifest.suite_weights if manifest is not None else None)
    return judged(run_dir, summary, options, comparison, base, confirmation)


def judged(
    run_dir: str | PathLike[str], summary: SuiteSummary, options: EvaluateOptions | None = None,
    comparison: Comparison | None = None, base: SuiteSummary | None = None,
    confirmation: Confirmation | None = None,
) -> Evaluation:
    """The :class:`Evaluation` of a scored (and compared) run: whether it failed and its exit
    status, by the gate's rule (results/gate.py). The one place an exit status is decided:
    :func:`evaluate`, ``dlbench compare`` (two saved summaries) and the HTML page read it."""
    options = options or EvaluateOptions()
    failed = gate.run_failed(summary)
    status = gate.final_status(failed=failed, comparison=comparison,
                               baseline_status=_baseline_status(options))
    return Evaluation(Path(run_dir), summary, options, comparison, base, failed, status,
                      confirmation=confirmation)


def _score(
    run_dir: Path, options: EvaluateOptions
) -> tuple[SuiteSummary, SuiteSummary | None, Comparison | None]:
    """(summary, base side, paired comparison): a --bench-against run is paired with its base
    side when no baseline file was asked for."""
    if options.paired and options.baseline is None:
        paired = summarize_paired_dir(run_dir, tolerance=options.tolerance, alpha=options.alpha,
                                      test=options.paired_test, rate=options.paired_rate)
        if paired is not None:
            return paired
    return summarize_dir(run_dir), None, None


def _baseline_status(options: EvaluateOptions) -> int:
    """A corrupt baseline is always bad input; a missing one only when it was required."""
    loaded = options.baseline
    if loaded is None or loaded.status == gate.OK:
        return gate.OK
    if loaded.status == gate.BASELINE_MISSING and not options.require_baseline:
        return gate.OK
    return loaded.status


def no_score_reason(summary: SuiteSummary) -> str:
    """Why a run has no score, in the words of its score line: no benchmark of weight > 0 was
    selected (``-k toy``, a weight-0 benchmark), or none of those selected succeeded."""
    weighted = [b for b in summary.benchmarks if b.weight > 0]
    if not weighted and not summary.incomplete:
        return "no weighted benchmark was selected"
    return "no weighted benchmark succeeded"
