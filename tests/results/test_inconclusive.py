""""inconclusive" as a verdict (issue 26, item 3): its exit status (9) and its precedence, and
the terminal, the HTML banner and the saved JSON saying the same thing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from _runs import steady_at, write_run

from pytest_dlbench.cli import main
from pytest_dlbench.report.html_compare import comparison_view, gate_banner
from pytest_dlbench.report.terminal import inconclusive_lines, render_comparison
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.gate import gate_record
from pytest_dlbench.results.judge import INCONCLUSIVE, INCONCLUSIVE_ADVICE, compare


@dataclass(frozen=True)
class Judged:
    """What final_status reads of a comparison."""

    regressed: bool = False
    inconclusive: bool = False


@pytest.mark.parametrize(("failed", "comparison", "expected"), [
    (False, Judged(inconclusive=True), gate.EXIT_INCONCLUSIVE),
    (False, Judged(regressed=True, inconclusive=True), gate.EXIT_REGRESSED),  # 6 > 9
    (True, Judged(inconclusive=True), gate.BENCH_FAILED),  # 1 > 9
    (True, Judged(regressed=True, inconclusive=True), gate.BENCH_FAILED),  # 1 > 6
    (False, Judged(), gate.OK),
])
def test_exit_status_9_and_its_precedence(failed: bool, comparison: Judged,
                                          expected: int) -> None:
    assert gate.EXIT_INCONCLUSIVE == 9
    assert gate.final_status(failed=failed, comparison=comparison) == expected


def test_a_lost_output_does_not_hide_an_inconclusive_gate() -> None:
    # 9 > 8 > 0: a file that could not be written replaces OK only.
    assert gate.output_status(gate.EXIT_INCONCLUSIVE, unwritten=True) == gate.EXIT_INCONCLUSIVE
    assert gate.output_status(gate.OK, unwritten=True) == gate.OUTPUT_FAILED
    missing = gate.final_status(failed=False, comparison=Judged(inconclusive=True),
                                baseline_status=gate.BASELINE_MISSING)
    assert missing == gate.BASELINE_MISSING


def quiet_run(run_dir: Path, rate: float, *, name: str = "x") -> Path:
    """One run of ``name`` at ``rate`` items/s, its blocks within 0.1 %."""
    write_run(run_dir, name, steady_at(rate, jitter=[0.001, -0.001] * 5))
    return run_dir


def test_terminal_html_and_json_say_the_same(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """One run a side, 8 % slower: beyond the tolerance, within the noise between runs."""
    base_json = tmp_path / "base.json"
    assert main(["report", str(quiet_run(tmp_path / "a", 100.0)), "--save",
                 str(base_json)]) == gate.OK
    slow = quiet_run(tmp_path / "b", 92.0)
    saved, html = tmp_path / "now.json", tmp_path / "now.html"
    capsys.readouterr()
    status = main(["report", str(slow), "--compare", str(base_json), "--save", str(saved),
                   "--html", str(html)])
    assert status == gate.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    comparison = compare(summarize_dir(slow), json.loads(base_json.read_text()))
    assert comparison.get("x").verdict == INCONCLUSIVE  # type: ignore[union-attr]
    reason = comparison.get("x").reason  # type: ignore[union-attr]

    # The terminal: the reason and what to do, with the exit status.
    lines = inconclusive_lines(comparison)
    assert lines[0] == f"inconclusive: x: {reason}"
    assert lines[-1].startswith("the noise is too large for the tolerance (exit status 9)")
    assert all(line in out for line in lines)
    assert INCONCLUSIVE_ADVICE in out and "--bench-against" in INCONCLUSIVE_ADVICE

    # The JSON: the status, the verdict and the same reason and advice.
    record = json.loads(saved.read_text())["gate"]
    assert record["status"] == gate.EXIT_INCONCLUSIVE and record["verdict"] == INCONCLUSIVE
    assert record["inconclusive"]["x"] == reason
    assert record["advice"] == INCONCLUSIVE_ADVICE
    assert record["comparison"]["benchmarks"]["x"]["verdict"] == INCONCLUSIVE
    assert record == gate_record(comparison, gate.EXIT_INCONCLUSIVE) | {
        "comparison": record["comparison"]}  # the baseline's path is the file's, not None

    # The HTML: the banner (status 9, the advice) and the comparison's reasons.
    banner = gate_banner(summarize_dir(slow), comparison)
    assert banner.status == gate.EXIT_INCONCLUSIVE and banner.css == "warn"
    assert banner.headline.startswith("Gate inconclusive")
    assert INCONCLUSIVE_ADVICE in banner.detail and "x could not be told" in banner.detail
    score = f"the score: {comparison.score_reason}"
    assert comparison.score_verdict == INCONCLUSIVE and f"inconclusive: {score}" in lines
    assert comparison_view(comparison).inconclusive == (f"x: {reason}", score)
    assert record["inconclusive"]["score"] == comparison.score_reason
    page = html.read_text()
    assert "Gate inconclusive" in page and "exit status 9" in page
    assert "comparison-inconclusive" in page


def test_a_regression_elsewhere_wins_and_the_reasons_are_still_said(tmp_path: Path) -> None:
    base, now = tmp_path / "a", tmp_path / "b"
    quiet_run(base, 100.0)
    quiet_run(base, 100.0, name="y")
    quiet_run(now, 92.0)  # within the noise: inconclusive
    quiet_run(now, 40.0, name="y")  # far beyond any noise: regressed
    comparison = compare(summarize_dir(now), summarize_dir(base))
    assert comparison.get("y").verdict == "regressed"  # type: ignore[union-attr]
    assert comparison.inconclusives == ("x",)
    assert gate.final_status(failed=False, comparison=comparison) == gate.EXIT_REGRESSED
    text = render_comparison(comparison)
    assert "inconclusive: x: " in text
    assert "the noise is too large for the tolerance: " in text  # no "exit status 9": it is 6
    record = gate_record(comparison, gate.EXIT_REGRESSED)
    assert record is not None and record["verdict"] == "regressed"
    assert list(record["inconclusive"]) == ["x"]
    assert gate_banner(summarize_dir(now), comparison).status == gate.EXIT_REGRESSED


def test_dlbench_compare_exits_9(tmp_path: Path) -> None:
    base, now = tmp_path / "base.json", tmp_path / "now.json"
    assert main(["report", str(quiet_run(tmp_path / "a", 100.0)), "--save", str(base)]) == 0
    assert main(["report", str(quiet_run(tmp_path / "b", 92.0)), "--save", str(now)]) == 0
    assert main(["compare", str(base), str(now)]) == gate.EXIT_INCONCLUSIVE
    # Within a 10 % tolerance, but one session a side at the default drift: its interval
    # reaches below 0.90, so still inconclusive; at 30 % a regression beyond it is excluded.
    assert main(["compare", str(base), str(now), "--tolerance", "10%"]) == \
        gate.EXIT_INCONCLUSIVE
    assert main(["compare", str(base), str(now), "--tolerance", "30%"]) == gate.OK
    assert "gate" not in json.loads(base.read_text())  # saved without a comparison: no verdict
