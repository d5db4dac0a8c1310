"""Time-to-train (docs/time-to-train.md): the metric in scoring, baselines, compare, the
terminal and HTML reports, and the sweep table (``dlbench table``)."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path

import pytest
from _ttt_runs import write_ttt_run

from pytest_dlbench.cli import main
from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import run_from_records, step_stats, summarize_dir, sweep_rows
from pytest_dlbench.results.judge import REGRESSED, UNCHANGED, compare
from pytest_dlbench.results.model import TOTAL_TIME, load_summary, save_summary


def jittered(base: float, n: int, seed: int, spread: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [round(base * (1 + rng.gauss(0, spread)), 3) for _ in range(n)]


# -- one run ------------------------------------------------------------------------------------
def test_step_stats_skip_the_first_step() -> None:
    records = [{"items": 10, "seconds": s, "value": 10 / s} for s in (9.0, 1.0, 2.0, 0.5)]
    stats = step_stats(records, planned=8)
    assert stats.steps == 4
    assert stats.total_time_secs == 3.5
    assert stats.items == 30
    assert stats.rate == 30 / 3.5
    assert stats.time_per_iteration == 3.5 / 3
    assert stats.throughput_avg == pytest.approx((10 + 5 + 20) / 3)
    assert stats.done_percent == 50.0  # 4 of skip + stop = 8 observations
    assert step_stats(records, done_percent=100.0).done_percent == 100.0
    # log_rate observations (no seconds) have no time.
    assert step_stats([{"value": 3.0}, {"value": 4.0}]).total_time_secs is None


def test_a_time_to_train_run_scores_its_equivalent_throughput() -> None:
    stream = NullStream()
    stream.write("config", spec={"name": "t", "metric": TOTAL_TIME, "skip": 3, "stop": 5},
                 device=0)
    with Bench(name="t", stream=stream, skip=3, stop=5) as bench:
        for s in (30.0, 2.0, 2.0, 4.0, 1.0, 1.0, 2.0, 4.0):
            bench.log_step(32, s)
    stream.write("end", status="ok")
    run = run_from_records(stream.records)
    assert run.ok and run.metric == TOTAL_TIME
    assert run.total_time_secs == 16.0  # every step but the first, whatever ``skip`` says
    assert run.rate == 7 * 32 / 16.0
    assert len(run.block_rates) == 5  # the batch-means noise of the same 7 steps
    assert run.to_dict()["timing"]["total_time_secs"] == 16.0


def test_a_time_to_train_run_needs_two_steps() -> None:
    stream = NullStream()
    stream.write("config", spec={"name": "t", "metric": TOTAL_TIME}, device=0)
    Bench(name="t", stream=stream, skip=0, stop=5).log_step(32, 1.0)
    stream.write("end", status="ok")
    run = run_from_records(stream.records)
    assert not run.ok and "needs two timed steps" in run.reason


def test_log_step_counts_like_iterate_and_keeps_job_items() -> None:
    stream = NullStream()
    bench = Bench(name="t", stream=stream, skip=1, stop=2, items_scale=4)
    assert bench.log_step(8, 2.0)  # per rank: scaled to the job
    assert bench.log_step(8, 2.0, per_rank=False, loss=1.5)
    assert bench.log_step(8, 2.0, per_rank=False)
    assert bench.done and not bench.log_step(8, 2.0)
    rates = [r for r in stream.records if r["event"] == "rate"]
    assert [(r["items"], r["seconds"], r["warmup"]) for r in rates] == [
        (32.0, 2.0, True), (8.0, 2.0, False), (8.0, 2.0, False)]
    assert [(r["step"], r["value"]) for r in stream.records if r["event"] == "loss"] == [(1, 1.5)]
    bench.log_progress(42.0)
    assert stream.records[-1]["event"] == "progress"
    assert stream.records[-1]["done_percent"] == 42.0


# -- the suite: score, baseline, compare --------------------------------------------------------
@pytest.fixture
def base_and_slower(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs of the same time-to-train benchmark; the second takes 10 % longer."""
    steps = 41
    base = jittered(2.0, steps, seed=1)
    slower = [round(s * 1.1, 3) for s in jittered(2.0, steps, seed=2)]
    a, b = tmp_path / "a", tmp_path / "b"
    for run_dir, seconds in ((a, base), (b, slower)):
        write_ttt_run(run_dir, "clip-ttt", [40.0, *seconds[1:]])
        write_ttt_run(run_dir, "steady", [1.0] + jittered(1.0, 20, seed=3), metric=None)
    return a, b


@pytest.fixture
def repeated_base_and_slower(tmp_path: Path) -> tuple[Path, Path]:
    """:func:`base_and_slower` with three repeats a side (``--bench-repeat=3``): a 10 % change
    is judged with the noise between runs they show, not the default model's (one run a side
    is "inconclusive" at 10 %: results/judge/noise.py)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for repeat in range(3):
        base = jittered(2.0, 41, seed=1 + 10 * repeat)
        slower = [round(s * 1.1, 3) for s in jittered(2.0, 41, seed=2 + 10 * repeat)]
        for run_dir, seconds in ((a, base), (b, slower)):
            write_ttt_run(run_dir, "clip-ttt", [40.0, *seconds[1:]], repeat=repeat)
            write_ttt_run(run_dir, "steady", [1.0] + jittered(1.0, 20, seed=3 + repeat),
                          metric=None, repeat=repeat)
    return a, b


def test_summary_reports_the_time_lower_is_better(base_and_slower: tuple[Path, Path]) -> None:
    summary = summarize_dir(base_and_slower[0])
    bench = summary.get("clip-ttt")
    assert bench is not None and bench.lower_is_better
    assert bench.total_time_secs == pytest.approx(80.0, rel=0.01)
    assert bench.perf == pytest.approx(40 * 64 / bench.total_time_secs)
    assert bench.perf_per_gpu == bench.perf
    saved = bench.to_dict()
    assert saved["metric"] == TOTAL_TIME and saved["lower_is_better"] is True
    assert saved["total_time_secs"] == bench.total_time_secs
    steady = summary.get("steady")
    assert steady is not None and not steady.lower_is_better
    assert "total_time_secs" not in steady.to_dict()  # other benchmarks keep their shape
    assert summary.score is not None


def test_ten_percent_longer_is_a_regression_with_exit_status_6(
    repeated_base_and_slower: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a, b = repeated_base_and_slower
    session = tmp_path / "session.json"
    assert main(["report", str(a), "--save", str(session)]) == gate.OK
    # A baseline of sessions that agreed (the same one twice): the drift between sessions at
    # its floor, as on a quiet machine (against one session, 10 % is inconclusive).
    baseline = tmp_path / "base.json"
    assert main(["baseline", str(baseline), *[str(session)] * 5]) == gate.OK
    saved = load_summary(baseline).get("clip-ttt")
    assert saved is not None and saved.lower_is_better is True and saved.total_time_secs > 0
    capsys.readouterr()
    # The pytest gate and `dlbench report --compare` share final_status: exit 6.
    assert main(["report", str(b), "--compare", str(baseline)]) == gate.EXIT_REGRESSED
    out = capsys.readouterr().out
    assert "regressed" in out
    comparison = compare(summarize_dir(b), load_summary(baseline))
    c = comparison.get("clip-ttt")
    assert c is not None and c.verdict == REGRESSED
    assert c.time_ratio == pytest.approx(1.1, rel=0.02)
    assert c.ratio == pytest.approx(1 / 1.1, rel=0.03)
    assert comparison.get("steady").verdict == UNCHANGED  # type: ignore[union-attr]
    # `dlbench compare` of two saved summaries: the same verdict, the times side by side.
    current = tmp_path / "cur.json"
    save_summary(summarize_dir(b), current)
    assert main(["compare", str(baseline), str(current)]) == gate.EXIT_REGRESSED
    out = capsys.readouterr().out
    assert "baseline time" in out and "current time" in out
    # A shorter time is no regression; against one session (the default drift) it is no
    # evidence of an improvement either, nor of the absence of a regression: exit 9, not 6.
    assert main(["report", str(a), "--compare", str(current)]) == gate.EXIT_INCONCLUSIVE


def test_terminal_and_html_show_the_time(base_and_slower: tuple[Path, Path],
                                         tmp_path: Path) -> None:
    from pytest_dlbench.report.html import render_html

    summary = summarize_dir(base_and_slower[0])
    text = render_summary(summary)
    details = text.split("\n\n")[1]  # the second table, the time-to-train column in it
    assert "total_time_secs" in details.splitlines()[0]
    row = next(line for line in details.splitlines() if line.startswith("clip-ttt"))
    # Four significant digits (issue 41 item 4: two decimals printed 0.0112 s as "0.01 s").
    assert f"{summary.get('clip-ttt').total_time_secs:.4g} s" in row  # type: ignore[union-attr]
    assert "lower is better" in text
    html = render_html(summary)
    assert "total_time_secs ↓" in html and 'id="time-to-train-note"' in html


def test_reports_without_time_to_train_are_unchanged(tmp_path: Path) -> None:
    write_ttt_run(tmp_path, "steady", [1.0] * 6, metric=None)
    text = render_summary(summarize_dir(tmp_path))
    assert "total_time_secs" not in text and "lower is better" not in text


# -- the sweep table -----------------------------------------------------------------------------
def sweep_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "sweep"
    for nodes in (1, 2):
        write_ttt_run(run_dir, f"mmoclip-n{nodes}", [10.0, 2.0, 2.0, 2.0], items=512 * nodes,
                      matrix={"nodes": nodes, "model": "ViT-L-14", "batch_size": 512},
                      world=nodes, method="njobs", progress=100.0)
    write_ttt_run(run_dir, "other", [1.0, 1.0, 1.0], metric=None)
    manifest = {"version": 1, "suite": "mmoclip", "benchmarks": {
        f"mmoclip-n{n}": {"weight": 0, "enabled": True, "units": None, "plan": {"method": "njobs"},
                          "matrix": {"nodes": n, "model": "ViT-L-14", "batch_size": 512}}
        for n in (1, 2, 4)}}
    manifest["benchmarks"]["other"] = {"weight": 0, "enabled": True, "units": None,
                                       "plan": {"method": "per_gpu"}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_sweep_rows_are_seed_004s_table(tmp_path: Path) -> None:
    rows = sweep_rows(summarize_dir(sweep_dir(tmp_path)), matrix_only=True)
    assert [r.bench for r in rows] == ["mmoclip-n1", "mmoclip-n2", "mmoclip-n4"]
    one, two, four = rows
    assert one.params == {"nodes": 1, "model": "ViT-L-14", "batch_size": 512}
    assert (one.total_time_secs, one.time_per_iteration_secs_avg) == (6.0, 2.0)
    assert one.throughput_avg == 256.0 and one.done_percent_last == 100.0
    assert (two.gpus, two.global_batch) == (2, 1024)
    assert two.throughput_avg == 512.0 and two.throughput_per_gpu_avg == 256.0
    assert four.status == "not run" and four.params["nodes"] == 4  # from the manifest
    assert four.total_time_secs is None and four.global_batch is None


def test_dlbench_table_prints_and_writes_csv(tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    run_dir = sweep_dir(tmp_path)
    assert main(["table", str(run_dir)]) == gate.OK
    text = capsys.readouterr().out
    # Wider than the terminal: in blocks of columns, each starting with the benchmark's name.
    header = [word for line in text.splitlines() if line.startswith("bench ")
              for word in line.split()]
    assert header[:4] == ["bench", "nodes", "model", "batch_size"]
    for column in ("done_percent_last", "throughput_avg", "time_per_iteration_secs_avg",
                   "total_time_secs", "status"):
        assert column in header
    assert any(line.startswith("other") for line in text.splitlines())  # all benchmarks
    assert main(["table", str(run_dir), "--csv", "--matrix"]) == gate.OK
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["bench"] for r in rows] == ["mmoclip-n1", "mmoclip-n2", "mmoclip-n4"]
    assert float(rows[0]["total_time_secs"]) == 6.0 and rows[2]["total_time_secs"] == ""
    assert rows[1]["global_batch"] == "1024"
    assert main(["table", str(tmp_path / "nope")]) == gate.USAGE_ERROR


def test_terminal_summary_has_a_sweep_section_for_matrix_benchmarks(tmp_path: Path) -> None:
    text = render_summary(summarize_dir(sweep_dir(tmp_path)), width=250)
    section = text[text.index("sweep (matrix benchmarks"):]
    assert "mmoclip-n2" in section and "other" not in section
    assert math.isfinite(float(section.splitlines()[2].split()[-2]))  # total_time_secs
