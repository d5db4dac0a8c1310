"""What a run means (docs/architecture.md, "results/ by job"): four rooms by job with the
gate's exit statuses and the end of a run, each standing on the ones below it: model <
figures < judge < gate < history < evaluation.

The front door: ``evaluate(run_dir, EvaluateOptions(...))`` gives the run's ``Evaluation``
(its summary, comparison, verdict and exit status); ``frame(path)`` its results as pandas
DataFrames. A lazy face: a name is imported from its module on first use (core/lazy.py), so
importing a room (``pytest_dlbench.results.judge``) imports nothing else of results/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.core.lazy import face_getattr

if TYPE_CHECKING:
    from pytest_dlbench.results.evaluation import EvaluateOptions, Evaluation, evaluate
    from pytest_dlbench.results.history.frames import frame

#: Each module and the names of the face.
_HOMES = {
    "evaluation": ("EvaluateOptions", "Evaluation", "evaluate"),
    "history.frames": ("frame",),
}

__all__ = ["EvaluateOptions", "Evaluation", "evaluate", "frame"]
__getattr__ = face_getattr(__name__, _HOMES)
