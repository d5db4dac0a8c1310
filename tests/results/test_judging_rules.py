"""The judging side of issue 38: each rule the saved-baseline and paired modes share has one
home (the busy share, the run-layout names, the JSON numbers and default units)."""

from __future__ import annotations

from typing import Any

from _paths import REPO_ROOT

from pytest_dlbench.results.figures import busy
from pytest_dlbench.results.judge import noise, paired
from pytest_dlbench.results.model import SCHEMA, SuiteSummary


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
    assert busy.busy_share(side) == (2, 3, "reason 2")
    quiet = _bench([("ok", False)] * 3)
    assert busy.busy_share(quiet) == (0, 3, "other processes used the CPU")
    assert noise.doubts(side, quiet) == [
        "the machine was busy during this run (2 of 3 runs: reason 2)"]
    assert paired.paired_doubt(quiet, side) == (
        "the machine was busy during 2 of the candidate side's 3 runs and none of the other "
        "side's")


def test_the_confirmation_folders_are_named_by_layout_alone() -> None:
    """results/judge/confirm.py decides; the confirmation's folder, round folders and done file are
    layout.py's names, imported from there (plugin/confirm.py too), never re-exported."""
    from pytest_dlbench.results.judge import confirm

    for name in ("round_dir", "DONE_FILE", "confirm_dir", "CONFIRM", "parse_confirm"):
        assert name not in confirm.__all__
    assert not hasattr(confirm, "round_dir") and not hasattr(confirm, "DONE_FILE")
    assert not hasattr(confirm, "parse_confirm")  # the option's parsing is options.py's


_NAMES_ONE_HOME = ("src/pytest_dlbench/results/figures/scoring.py",
                   "src/pytest_dlbench/results/figures/plausibility.py",
                   "src/pytest_dlbench/measure/rates.py")


def test_json_numbers_and_default_units_come_from_core_numbers() -> None:
    """What a JSON number is and a rate's default units are core/numbers.py's (issue 38 item
    4): the scoring, the wall-clock ceiling and the rate columns write neither by hand."""
    import re

    root = REPO_ROOT
    for name in _NAMES_ONE_HOME:
        text = (root / name).read_text()
        assert '"items/s"' not in text, name
        assert not re.search(r"not isinstance\([^)]*bool\)", text), name
    # A finite JSON number is core/numbers.is_finite, written out nowhere else.
    for path in (root / "src").rglob("*.py"):
        if path.name != "numbers.py":
            assert not re.search(r"is_number\((\w+)\) and math\.isfinite\(\1\)",
                                 path.read_text()), path


def test_a_flops_record_of_bools_is_no_figure(tmp_path: Any) -> None:
    """``true`` is no JSON number: a flops record saying ``flops: true, items: true`` gives no
    FLOPs per item (it read as 1 / 1 before)."""
    import json

    from _runs import write_run

    from pytest_dlbench.measure.stream import Event
    from pytest_dlbench.results.figures import load_run

    path = write_run(tmp_path, "x", [(100.0, 1.0)] * 10)
    *records, end = path.read_text().splitlines(keepends=True)
    flops = {"event": Event.FLOPS.value, "flops": True, "items": True, "reason": ""}
    path.write_text("".join(records) + json.dumps(flops) + "\n" + end)
    run = load_run(path)
    assert run.ok and run.flops_per_item is None
    flops["flops"], flops["items"] = 8.0, 4
    path.write_text("".join(records) + json.dumps(flops) + "\n" + end)
    assert load_run(path).flops_per_item == 2.0


def test_docstrings_name_what_exists() -> None:
    """A docstring of the judging modules that names ``measure/stream.read_records`` or
    ``results/paired_noise.py`` names code that was deleted: every ``pkg/module.name`` and
    ``pkg/module.py`` they name exists (scoring.load_run named read_records)."""
    import importlib
    import re

    root = REPO_ROOT / "src" / "pytest_dlbench"
    owned = [root / "results" / f"{m}.py" for m in (
        "judge/stats", "judge/noise", "figures/busy", "judge/confirm", "judge/saved",
        "judge/comparison", "judge/causes", "judge/paired", "judge/verdict", "evaluation", "gate",
        "figures/scoring", "figures/plausibility")]
    owned += [root / "measure" / "rates.py", root / "plugin" / "confirm.py"]
    layers = "core|measure|results|report|run|suite|plugin|profile|loggers|workloads"
    missing = []
    for path in owned:
        text = path.read_text()
        for module, attr in re.findall(rf"\b((?:{layers})(?:/\w+)+)\.([A-Za-z_]\w*)", text):
            if attr == "py":
                if not (root / f"{module}.py").is_file():
                    missing.append(f"{path.name}: {module}.py")
                continue
            found = importlib.import_module("pytest_dlbench." + module.replace("/", "."))
            if not hasattr(found, attr):
                missing.append(f"{path.name}: {module}.{attr}")
    assert not missing


def test_gate_offline_takes_exit_statuses_from_the_evaluation() -> None:
    """benchmarks/gate_offline.py judges a run's exit status where the product decides it
    (results/evaluation.judged), not by calling the gate's rule and the stream reader itself."""
    import inspect

    from _bench_scripts import load_script

    offline = load_script("gate_offline")
    source = inspect.getsource(offline)
    assert "final_status(" not in source and "run_failed(" not in source
    assert not hasattr(offline, "load_run")


def test_a_verdict_word_is_decided_only_by_the_core() -> None:
    """Issue 38: regressed, improved, unchanged, inconclusive, failed and incomparable are set
    in results/judge/verdict.py alone (the gate's one word of a run, in results/gate.gate_record):
    no other module makes a ``Verdict`` or sets a row's word to one of them itself."""
    import re

    words = "REGRESSED|IMPROVED|UNCHANGED|INCONCLUSIVE|FAILED|INCOMPARABLE|NOT_HELD"
    setting = re.compile(rf"\b(?:verdict|word|score_verdict)\s*=\s*(?:{words})\b"
                         r"|(?<!class )\bVerdict\(")
    root = REPO_ROOT / "src" / "pytest_dlbench"
    found = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py")
             if path.name not in ("verdict.py", "gate.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if setting.search(line)]
    assert found == []
