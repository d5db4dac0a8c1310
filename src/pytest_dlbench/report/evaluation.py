"""How the end of a run is shown and kept, the same in pytest and in ``dlbench report``: the
text of an :class:`~pytest_dlbench.results.evaluation.Evaluation` and the files it asked for."""

from __future__ import annotations

from pytest_dlbench.report.confirm import render_confirmation
from pytest_dlbench.report.outputs import write_outputs
from pytest_dlbench.results.evaluation import Evaluation

__all__ = ["render_evaluation", "write_evaluation"]


def render_evaluation(evaluation: Evaluation, *, verbosity: int = 0, width: int = 100,
                      columns: tuple[str, ...] | None = None, sort: str | None = None) -> str:
    """The summary table and score; a --bench-against run's paired table below it (its
    verdicts are there, not in the summary's columns). ``verbosity < 0``: the score line.
    ``columns``/``sort``: ``--bench-columns``/``--bench-sort`` (report/columns.py)."""
    from pytest_dlbench.report.terminal import render_paired, render_summary, score_label

    paired = evaluation.paired and verbosity >= 0
    text = render_summary(evaluation.summary, None if paired else evaluation.comparison,
                          verbosity=verbosity, width=width, price=evaluation.options.price,
                          columns=columns, sort=sort)
    if paired and evaluation.comparison is not None:
        text += "\n\n" + render_paired(evaluation.comparison, evaluation.base_summary,
                                       verbosity=verbosity, width=width, sort=sort,
                                       label=score_label(evaluation.summary))
    if evaluation.options.reference and verbosity >= 0:  # milabench's published figures
        from pytest_dlbench.results.figures import reference_lines

        text += "\n" + "\n".join(reference_lines(evaluation.summary))
    confirmed = render_confirmation(evaluation.confirmation) if verbosity >= 0 else ""
    return text + "\n\n" + confirmed if confirmed else text


def write_evaluation(evaluation: Evaluation) -> Evaluation:
    """Write the files asked for (summary, HTML, export); the evaluation with one line per
    file written, one per file that could not be (``unwritten``) and its status for them."""
    outputs = evaluation.options.outputs
    written = write_outputs(evaluation.summary, comparison=evaluation.comparison,
                            save=outputs.save, html=outputs.html, export=outputs.export,
                            price=evaluation.options.price, suite=evaluation.options.suite,
                            status=evaluation.status, autosave=outputs.autosave,
                            confirmation=evaluation.confirmation)
    return evaluation.with_written(written.lines, written.failed)
