"""The judging side of issue 38: each rule the saved-baseline and paired modes share has one
home (the busy share, the run-layout names, the JSON numbers and default units)."""

from __future__ import annotations

from typing import Any

from pytest_dlbench.results import noise
from pytest_dlbench.results.summary import SuiteSummary
from pytest_dlbench.results.summary_json import SCHEMA


def _bench(runs: list[tuple[str, bool | None]]) -> Any:
    """One benchmark read back from a saved summary: (status, busy) per run."""
    entries = [{"rate": 100.0, "status": status, "repeat": i, "device": 0,
                "telemetry": {} if busy is None else
                {"busy": busy, "busy_reason": f"reason {i}" if busy else None}}
               for i, (status, busy) in enumerate(runs)]
    data = {"schema": SCHEMA, "version": 1, "benchmarks": {"x": {
        "n": len(runs), "fail": 0, "perf": 100.0, "perf_adj": 100.0, "weight": 1.0,
        "runs": entries}}}
    return SuiteSummary.from_dict(data).benchmarks[0]


def test_the_busy_share_is_counted_once_for_both_modes() -> None:
    """A failed run is no evidence of load either way: the saved baseline's doubt and the
    paired one count the same successful busy runs, through one function."""
    side = _bench([("ok", False), ("fail", True), ("ok", True), ("ok", True)])
    assert noise.busy_share(side) == (2, 3, "reason 2")
    quiet = _bench([("ok", False)] * 3)
    assert noise.busy_share(quiet) == (0, 3, "other processes used the CPU")
    assert noise.doubts(side, quiet) == [
        "the machine was busy during this run (2 of 3 runs: reason 2)"]
    assert noise.paired_doubt(quiet, side) == (
        "the machine was busy during 2 of the candidate side's 3 runs and none of the other "
        "side's")


def test_the_confirmation_folders_are_named_by_layout_alone() -> None:
    """results/confirm.py decides; the confirmation's folder, round folders and done file are
    layout.py's names, imported from there (plugin/confirm.py too), never re-exported."""
    from pytest_dlbench.results import confirm

    for name in ("round_dir", "DONE_FILE", "confirm_dir", "CONFIRM", "parse_confirm"):
        assert name not in confirm.__all__
    assert not hasattr(confirm, "round_dir") and not hasattr(confirm, "DONE_FILE")
    assert not hasattr(confirm, "parse_confirm")  # the option's parsing is results/gate.py's
