"""One rule, one home (docs/architecture.md, "Where each rule lives"): the no-MFU reason and the
busy words in results/, the reports only formatting them; the verdict words in
results/judge/verdict.py alone (bisect reads whether a step changed, never a word); one type per
name; and the run directory's ``against.json`` and ``manifest.json`` as frozen records of
layout.py, read by attribute, their JSON unchanged."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest
from _paths import REPO_ROOT
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench import layout
from pytest_dlbench.layout import Against, Manifest, ManifestEntry
from pytest_dlbench.report import terminal
from pytest_dlbench.report.html import render_html
from pytest_dlbench.report.html_compare import gate_banner
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import machine_busy, summarize_dir, summarize_runs
from pytest_dlbench.results.figures.busy import busy_note
from pytest_dlbench.results.figures.peaks import no_mfu_reason
from pytest_dlbench.results.judge import (
    CHANGED,
    FAILED,
    IMPROVED,
    INCOMPARABLE,
    INCONCLUSIVE,
    REGRESSED,
    SAME,
    UNCHANGED,
    UNSURE,
    BenchComparison,
    Comparison,
    Judgement,
    compare_paired,
)
from pytest_dlbench.results.model import SCHEMA, SuiteSummary

SRC = REPO_ROOT / "src" / "pytest_dlbench"
BENCHMARKS = REPO_ROOT / "benchmarks"


def _strings(path: Path) -> set[str]:
    """Every string constant of a module (docstrings too: a word in prose is a string)."""
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


# -- 1. the no-MFU reason ---------------------------------------------------------------------
def _flops_summary(tmp_path: Path) -> SuiteSummary:
    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    write_run(run_dir, "a", steady_at(100.0, 6))
    summary = summarize_dir(run_dir)
    benches = tuple(dataclasses.replace(b, tflops=0.002) for b in summary.benchmarks)
    return dataclasses.replace(summary, benchmarks=benches)


def test_the_no_mfu_reason_is_decided_in_results_and_both_reports_print_it(
    tmp_path: Path,
) -> None:
    summary = _flops_summary(tmp_path)
    why = no_mfu_reason(summary.benchmarks[0])
    assert why == ("no peak known for cpu (fp32): no datasheet peak (results/figures/peaks.py) "
                   "and no matmul benchmark of fp32 in this run to measure one")
    assert f"MFU not shown: a ({why})" in terminal.render_summary(summary).splitlines()
    assert f'title="{why}"' in render_html(summary)
    # A benchmark with an MFU, or with no TFLOP/s, has no reason to give.
    assert no_mfu_reason(dataclasses.replace(summary.benchmarks[0], mfu=0.5)) is None
    assert no_mfu_reason(dataclasses.replace(summary.benchmarks[0], tflops=None)) is None
    # The reports hold no copy of the rule.
    assert not hasattr(terminal, "mfu_reason")
    for path in (SRC / "report").glob("*.py"):
        assert not any("no peak known" in s for s in _strings(path)), path


# -- 2. the busy words ------------------------------------------------------------------------
def _busy_summary() -> SuiteSummary:
    verdict = machine_busy([1.5, 1.6, 1.7, 1.6], whole_machine=True)
    assert verdict is not None
    runs = [{"rate": 2000.0, "status": "ok", "repeat": i, "device": 0,
             "telemetry": {"busy": busy, "busy_reason": verdict.reason if busy else None}}
            for i, busy in enumerate((True, False))]
    return SuiteSummary.from_dict({"schema": SCHEMA, "version": 1, "suite": "s", "benchmarks": {
        "toy": {"n": 2, "fail": 0, "perf": 2000.0, "perf_adj": 1900.0, "weight": 1.0,
                "units": "items/s", "runs": runs}}})


def test_the_busy_words_live_in_results_busy_and_both_reports_print_them() -> None:
    summary = _busy_summary()
    note = busy_note(summary.benchmarks[0])
    assert note is not None and note.startswith("1 of 2 runs while other processes used")
    assert note.endswith(": its figures measure this machine's load as well as the code")
    assert terminal.busy_lines(summary)[0] == f"busy: toy ({note})"
    assert note.replace("'", "&#39;") in render_html(summary)
    for path in (SRC / "report").glob("*.py"):
        assert not any("load as well as the code" in s for s in _strings(path)), path


def test_the_html_report_takes_no_rule_from_the_terminal_report() -> None:
    tree = ast.parse((SRC / "report" / "html.py").read_text())
    taken = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "pytest_dlbench.report.terminal" for alias in node.names}
    assert taken <= {"score_label"}  # a label's words, not a rule


# -- 3. the verdict words, in the verdict core alone --------------------------------------------
VERDICT_WORDS = {REGRESSED, IMPROVED, UNCHANGED, INCONCLUSIVE, FAILED, INCOMPARABLE}


def test_the_reports_and_bisect_compare_no_verdict_word_of_their_own() -> None:
    paths = [*(SRC / "report").glob("*.py"), SRC / "run" / "bisect.py"]
    found = {f"{p.relative_to(SRC)}: {w}" for p in paths
             for w in _strings(p) & (VERDICT_WORDS | {CHANGED, SAME, UNSURE})}
    assert found == set()


def _comparison(*verdicts: str) -> Comparison:
    rows = tuple(BenchComparison(name=f"b{i}", units="items/s", weight=1.0, current=90.0,
                                 baseline=100.0, ratio=0.9, verdict=v, p_value=0.01,
                                 samples=(5, 5)) for i, v in enumerate(verdicts))
    return Comparison(benchmarks=rows, only_current=(), only_baseline=(), current_score=90.0,
                      baseline_score=100.0, score_ratio=0.9, score_verdict=UNCHANGED,
                      score_p_value=None, tolerance=0.03, alpha=0.05)


def test_the_banner_names_the_comparisons_own_regressions() -> None:
    comparison = _comparison(REGRESSED, UNCHANGED, REGRESSED)
    assert comparison.regressions == ("b0", "b2")
    banner = gate_banner(SuiteSummary(benchmarks=(), score=None, incomplete=(),
                                      failure_rate=0.0), comparison, gate.EXIT_REGRESSED)
    assert "but b0, b2 regressed against the baseline" in banner.detail


# -- 4. bisect's words and the types named for what they are -------------------------------------
@pytest.mark.parametrize(("word", "decided", "changed"), [
    (CHANGED, True, True), (SAME, True, False), (UNSURE, False, False)])
def test_a_bisect_step_says_whether_it_is_decided_and_changed(
    word: str, decided: bool, changed: bool
) -> None:
    judgement = Judgement(word, 0.9, None, None, 4, REGRESSED)
    assert (judgement.decided, judgement.changed) == (decided, changed)


def test_each_type_name_has_one_home() -> None:
    homes: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    for name in ("Verdict", "Evidence", "Against", "Manifest"):
        assert len(homes[name]) == 1, (name, homes[name])
    assert not (SRC / "run" / "launch" / "verdict.py").exists()
    from pytest_dlbench.results.judge.noise import NoiseEvidence
    from pytest_dlbench.run.bisect import ProbeJudgement
    from pytest_dlbench.run.launch.node_failure import record_failure

    assert NoiseEvidence and ProbeJudgement and record_failure


# -- 5. against.json and the manifest as records ------------------------------------------------
AGAINST_FILE = {"version": 1, "rev": "main", "sha": "a" * 40, "repo": "/r", "worktree": "/w",
                "head": "b" * 40, "dirty": [], "rounds": 6, "order": "ABBA",
                "first": ["A", "B"], "test": "t", "rate": "window", "warnings": ["note"]}


def test_against_is_read_by_attribute_and_written_back_unchanged(tmp_path: Path) -> None:
    (tmp_path / layout.AGAINST).write_text(json.dumps(AGAINST_FILE, indent=2))
    against = layout.read_against(tmp_path)
    assert against is not None
    assert (against.rev, against.rounds, against.test, against.warnings) == \
        ("main", 6, "t", ("note",))
    assert against.design is None and against.stops is None  # an older file: no design
    assert json.dumps(against.to_dict()) == json.dumps(AGAINST_FILE)
    again = tmp_path / "again"
    again.mkdir()
    layout.write_against(again, against)
    assert (again / layout.AGAINST).read_text() == \
        json.dumps(AGAINST_FILE, indent=2, default=str) + "\n"


def test_a_paired_comparisons_json_keeps_the_files_keys_in_order() -> None:
    empty = summarize_runs([])
    for design in (None, "sequential"):
        raw = {**AGAINST_FILE, **({"design": design} if design else {})}
        comparison = compare_paired(empty, empty, test="t", against=Against.from_dict(raw))
        saved = comparison.to_dict()["against"]
        # What {**file, "design": ..., "stops": ...} gave: a design said stays where it is.
        assert json.dumps(saved) == json.dumps({**raw, "design": design or "fixed", "stops": {}})


def test_an_against_record_built_in_code_writes_only_what_it_says() -> None:
    assert Against(rev="main", rounds=4).to_dict() == {"rev": "main", "rounds": 4}
    assert Against.from_dict({}) == Against()


def test_the_manifest_is_a_record_and_missing_keys_are_the_runs(tmp_path: Path) -> None:
    write_run(tmp_path, "a", steady_at(100.0, 6), weight=3.0)
    write_run(tmp_path, "b", steady_at(100.0, 6), weight=3.0)
    (tmp_path / layout.MANIFEST).write_text(json.dumps({
        "version": 1, "suite": "s", "commit": None,
        "benchmarks": {"a": {}, "b": {"weight": None}, "never": {"weight": 2}}}))
    manifest = layout.read_manifest(tmp_path)
    assert manifest is not None and manifest.suite == "s"
    assert manifest.facts == {"commit": None} and manifest.suite_weighted is None
    assert manifest.benchmarks["a"] == ManifestEntry()
    summary = summarize_dir(tmp_path)
    weights = {b.name: b.weight for b in summary.benchmarks}
    # No weight: the runs'; a weight said as null: 0, as it was always read.
    assert weights == {"a": 3.0, "b": 0.0, "never": 2.0}
    assert summary.incomplete == ("never",)
    assert summarize_runs(summary.runs, manifest).benchmarks == summary.benchmarks


def test_a_benchmark_as_a_manifest_entry_keeps_its_order_weight_and_units(
    tmp_path: Path,
) -> None:
    write_run(tmp_path, "z", steady_at(100.0, 6))
    write_run(tmp_path, "y", steady_at(50.0, 6))
    write_manifest(tmp_path, {"z": {"weight": 2.0, "units": "img/s"}, "y": {}})
    first = summarize_dir(tmp_path)
    again = summarize_runs(first.runs, Manifest(
        suite=first.suite, benchmarks={b.name: b.manifest_entry for b in first.benchmarks}))
    assert again.benchmarks == first.benchmarks and again.score == first.score


def test_no_module_reads_against_json_or_the_manifest_by_key() -> None:
    by_key = re.compile(r"\b(against|manifest)(\s+or\s+\{\}\))?(\.get\(|\[)")
    found = [f"{path.relative_to(path.parents[1])}:{n}"
             for path in [*SRC.rglob("*.py"), *BENCHMARKS.glob("*.py")]
             for n, line in enumerate(path.read_text().splitlines(), 1) if by_key.search(line)]
    assert found == []
