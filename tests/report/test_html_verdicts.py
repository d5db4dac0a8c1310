"""The HTML report's verdicts, rule and profiles (issue 25, items 9-12): the gate's banner says
what the exit status says, the comparison draws each ratio as a bar and the baseline on the
rate plots, the page states the perf_adj rule the code applies, the legends sit outside the
data, and profiles are tables with the torchinfo tree folded and a link to the trace."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
from _html_runs import comparison, make_suite, write_stream

from pytest_dlbench.report.html import render_html, write_html
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import MAX_STD_PENALTY, load_run, summarize_runs
from pytest_dlbench.results.judge import compare
from pytest_dlbench.results.model import SuiteSummary, load_baseline


def quiet_suite(tmp_path: Path, *, names: tuple[str, ...] = ("alpha", "beta")) -> SuiteSummary:
    """Every run ok, two devices each."""
    runs = []
    for b, name in enumerate(names):
        for device in (0, 1):
            path = tmp_path / "run" / f"{name}.D{device}.data"
            write_stream(path, name, device=device, base=100.0 * (b + 1), seed=10 * b + device)
            runs.append(load_run(path))
    return summarize_runs(runs, run_dir=str(tmp_path / "run"))


def slower_baseline(suite: SuiteSummary, factor: float) -> dict:
    """The baseline ``suite`` would be if every rate were ``factor`` times what it is (its
    noise samples scaled too, so the test has evidence)."""
    data = suite.to_dict()
    for bench in data["benchmarks"].values():
        if bench.get("perf"):
            bench["perf"] *= factor
            bench["perf_adj"] *= factor
            bench["samples"] = [x * factor for x in bench.get("samples") or []]
    return data


def banner(page: str) -> str:
    start = page.index('<div class="banner gate')
    return page[start: page.index("</div>", start)]


# -- 9: the gate's verdict at the top ----------------------------------------------------------
@pytest.mark.slow
def test_a_regression_is_a_red_banner_and_never_a_green_card(tmp_path: Path) -> None:
    suite = quiet_suite(tmp_path)
    cmp = compare(suite, slower_baseline(suite, 1.45), tolerance=0.05)
    assert cmp.regressed and gate.final_status(failed=False, comparison=cmp) == gate.EXIT_REGRESSED
    page = render_html(suite, comparison=cmp)
    top = banner(page)
    assert top.startswith('<div class="banner gate bad"') and "exit 6" in top
    assert "Gate failed: performance regressed" in top
    assert "alpha, beta regressed against the baseline" in top and "5.0 % tolerance" in top
    # The banner comes before everything else the page says about the run.
    assert page.index('id="gate"') < page.index('id="score"')
    # The score card is red (the gate's colour), whatever the score's own verdict.
    card = page[page.index('id="score-ratio-card"') - 30: page.index('id="score-ratio-card"')]
    assert 'class="card bad"' in card and "gate failed" in page


@pytest.mark.slow
def test_the_banner_states_each_exit_status(tmp_path: Path) -> None:
    quiet = quiet_suite(tmp_path / "q")
    assert "exit 0" in banner(render_html(quiet)) and "Every benchmark ran" in banner(
        render_html(quiet))
    same = compare(quiet, quiet.to_dict(), tolerance=0.3)  # one session a side: ±20 % interval
    top = banner(render_html(quiet, comparison=same))
    assert top.startswith('<div class="banner gate good"')
    assert "Gate passed: nothing regressed" in top
    failed = make_suite(tmp_path / "f")  # an oom, a crash everywhere
    top = banner(render_html(failed, comparison=comparison(failed)))
    assert "exit 1" in top and "A benchmark failed" in top
    assert "bert-base, vit-b16 failed" in top and "bert-base regressed" in top
    # The status the caller knows wins: an output that could not be written, a missing baseline.
    assert "exit 8" in banner(render_html(quiet, status=gate.OUTPUT_FAILED))
    assert "No baseline to compare with" in banner(render_html(quiet,
                                                               status=gate.BASELINE_MISSING))


@pytest.mark.slow
def test_write_evaluation_passes_the_runs_exit_status_to_the_page(tmp_path: Path) -> None:
    from pytest_dlbench.report.evaluation import write_evaluation
    from pytest_dlbench.results.evaluation import EvaluateOptions, Outputs, evaluate
    from pytest_dlbench.results.model import save_summary

    quiet = quiet_suite(tmp_path)
    base = tmp_path / "base.json"
    save_summary(quiet, base)
    data = json.loads(base.read_text())
    for bench in data["benchmarks"].values():
        bench["perf"] *= 1.5
        bench["samples"] = [x * 1.5 for x in bench.get("samples") or []]
    base.write_text(json.dumps(data))
    html = tmp_path / "r.html"
    options = EvaluateOptions(baseline=load_baseline(str(base)), baseline_path=str(base),
                              tolerance=0.05, outputs=Outputs(html=str(html)))
    evaluation = write_evaluation(evaluate(quiet.run_dir or "", options))
    assert evaluation.status == gate.EXIT_REGRESSED
    assert "exit 6" in banner(html.read_text(encoding="utf-8"))


# -- 9: ratio bars and the baseline on the rate plots ----------------------------------------
@pytest.mark.slow
def test_each_ratio_is_a_bar_around_one(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    page = render_html(suite, comparison=comparison(suite))
    section = page[page.index('id="comparison-table"'):]
    bars = re.findall(r'<span class="bar (\w+)[^"]*" style="left:([\d.]+)%;width:([\d.]+)%"',
                      section)
    assert len(bars) == 2  # resnet18 unchanged, bert-base regressed
    by_class = {css: (float(left), float(width)) for css, left, width in bars}
    left, width = by_class["bad"]
    assert left + width == pytest.approx(50.0) and width > 5  # slower: left of the centre
    tol = re.search(r'class="tol" style="left:([\d.]+)%;width:([\d.]+)%"', section)
    assert tol is not None and float(tol[2]) == pytest.approx(2 * (50 - float(tol[1])), abs=0.02)


@pytest.mark.slow
def test_the_baseline_is_drawn_on_the_rate_plots_when_compared(tmp_path: Path) -> None:
    suite = quiet_suite(tmp_path)
    assert "baseline perf" not in render_html(suite)
    page = render_html(suite, comparison=compare(suite, slower_baseline(suite, 1.2)))
    rates = page[page.index('id="rates"'): page.index("</section>", page.index('id="rates"'))]
    assert rates.count("baseline perf") == 2  # one legend entry per benchmark's plot


def test_the_baseline_line_is_at_the_baselines_perf(tmp_path: Path) -> None:
    from pytest_dlbench.report.plots import rate_figure

    suite = quiet_suite(tmp_path, names=("alpha",))
    fig = rate_figure(suite.benchmarks[0], baseline=321.0)
    assert fig is not None
    (ax,) = fig.axes
    flat = [line for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    assert 321.0 in {line.get_ydata()[0] for line in flat}
    assert ax.get_ylim()[1] >= 321.0  # in view


# -- 12: legends outside the data ----------------------------------------------------------------
@pytest.mark.parametrize("devices", [1, 2, 12])
def test_rate_plot_legends_are_outside_the_axes(tmp_path: Path, devices: int) -> None:
    from pytest_dlbench.report.plots import rate_figure

    runs = []
    for device in range(devices):
        path = tmp_path / f"x.D{device}.data"
        write_stream(path, "x", device=device, base=100.0, seed=device)
        runs.append(load_run(path))
    bench = summarize_runs(runs).benchmarks[0]
    fig = rate_figure(bench, baseline=90.0)
    assert fig is not None
    fig.draw_without_rendering()  # runs the constrained layout
    (ax,) = fig.axes
    legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    assert legends
    box = ax.get_window_extent()
    for legend in legends:
        assert not legend.get_window_extent().overlaps(box)


# -- 10: the rule the code applies ---------------------------------------------------------------
@pytest.mark.slow
def test_the_page_states_the_perf_adj_rule_with_its_cap(tmp_path: Path) -> None:
    page = render_html(quiet_suite(tmp_path))
    cap = f"{100 * MAX_STD_PENALTY:g} %"
    assert f"perf_adj = perf × (1 − min(std%, {cap})) × (1 − fail/n)" in page
    assert "perf × (1 − std%)" not in page


# -- 11: profiles as tables --------------------------------------------------------------------
def write_profile(stream: Path) -> Path:
    """A profile directory beside ``stream`` as a profiled run writes it: speed, time with a
    nested region, memory (CPU only), the model summary with a long torchinfo table, a trace."""
    from pytest_dlbench import layout
    from pytest_dlbench.profile.artifacts import TraceReport
    from pytest_dlbench.profile.memory import build_memory_report
    from pytest_dlbench.profile.speed import SpeedReport
    from pytest_dlbench.profile.summary import SummaryReport
    from pytest_dlbench.profile.timereport import IntervalSample, StepSample, build_time_report
    from pytest_dlbench.profile.writer import write_reports

    steps = [StepSample(i, 0.1) for i in range(10, 14)]
    intervals = []
    for i in range(10, 14):
        intervals += [IntervalSample("forward", i, 0.03, 0.0),
                      IntervalSample("attention", i, 0.01, 0.005),
                      IntervalSample("backward", i, 0.05, 0.03)]

    def op(name: str, calls: int, self_us: float, total_us: float) -> types.SimpleNamespace:
        return types.SimpleNamespace(key=name, count=calls, self_cpu_time_total=self_us,
                                     cpu_time_total=total_us, self_cpu_memory_usage=4096,
                                     cpu_memory_usage=8192, device_type="CPU")

    events = [op("aten::mm", 40, 200_000.0, 210_000.0), op("aten::add_", 80, 50_000.0, 50_000.0)]
    tree = "\n".join(f"Linear: 1-{i}   [32, 64]   4,160" for i in range(1, 101))
    reports = {
        "speed": SpeedReport(units="items/s", throughput=1000.0, time_per_item=0.001,
                             items_per_step=32.0, io_time_per_batch=None, io_throughput=None,
                             io_source="", profiled_steps=4, first_step=10, last_step=13,
                             profiled_throughput=900.0, profiler_cpu_s=0.5,
                             profiler_device_s=None),
        "time": build_time_report(steps, intervals),
        "memory": build_memory_report(events, device=False, steps=4),
        "summary": SummaryReport(model="MLP", example="[32, 64]", total_params=416_000,
                                 trainable_params=416_000, mult_adds=13_000_000,
                                 input_bytes=8192, forward_backward_bytes=1 << 20,
                                 params_bytes=1 << 21, layers=(), text=tree),
        "trace": TraceReport(file="trace.json", bytes=12345, steps=4, rank=0),
    }
    folder = layout.profile_dir(stream)
    write_reports(reports, folder, meta={"bench": "x"})
    (folder / "trace.json").write_text("{}")
    return folder


@pytest.mark.slow
def test_profiles_are_tables_with_the_tree_folded_and_a_link_to_the_trace(
    tmp_path: Path,
) -> None:
    stream = write_stream(tmp_path / "run" / "x.D0.data", "x")
    folder = write_profile(stream)
    summary = summarize_runs([load_run(stream)], run_dir=str(tmp_path / "run"))
    out = write_html(summary, tmp_path / "out" / "report.html")
    page = out.read_text(encoding="utf-8")
    section = page[page.index('id="profiles"'): page.index('id="runs"')]
    assert "profile of x.D0" in section
    assert "<pre" not in section.split('class="mono tree"')[0].split("Layers (torchinfo)")[0]
    # Regions: top-level ones by time, the nested one under its parent, rest and step; each
    # with its share as a bar.
    regions = re.findall(r'<tr class="region-row([^"]*)">\s*<td class="l">([^<]+)</td>', section)
    assert [name for _, name in regions] == ["backward", "forward", "attention (in forward)",
                                             "rest", "step"]
    assert regions[2][0] == " nested" and regions[4][0] == " total"
    assert 'class="fill" style="width:50.0%"' in section  # backward: 0.05 of a 0.1 s step
    # Operators as key_averages().table(): % of the profiler's total (0.5 s) and per call.
    head = section[section.index('class="profile operators-table"'):]
    head = head[: head.index("</thead>")]
    for col in ("self CPU %", "self CPU", "CPU total %", "CPU total", "CPU per call", "calls"):
        assert f"<th>{col}</th>" in head
    mm = section[section.index("aten::mm"):]
    mm = mm[: mm.index("</tr>")]
    assert "40%" in mm and "5.25 ms" in mm  # 0.2 s of 0.5 s; 0.21 s over 40 calls
    # The 100-line torchinfo table is folded, never open.
    assert '<details class="tree"><summary>Layers (torchinfo)</summary>' in section
    assert section.count("Linear: 1-") == 100
    # A link to the trace, relative to where the page was written.
    href = re.search(r'<a href="([^"]+)">trace: trace.json</a>', section)
    assert href is not None
    assert (out.parent / href[1]).resolve() == (folder / "trace.json").resolve()
    # render_html alone (no page folder): a file URI.
    assert (folder / "trace.json").resolve().as_uri() in render_html(summary)


@pytest.mark.slow
def test_a_profile_report_that_was_not_made_is_its_one_line(tmp_path: Path) -> None:
    from pytest_dlbench import layout
    from pytest_dlbench.profile.base import NoteReport
    from pytest_dlbench.profile.writer import write_reports

    stream = write_stream(tmp_path / "run" / "x.D0.data", "x")
    write_reports({"snapshot": NoteReport("snapshot", "snapshot: needs CUDA")},
                  layout.profile_dir(stream))
    page = render_html(summarize_runs([load_run(stream)], run_dir=str(tmp_path / "run")))
    assert "snapshot: needs CUDA" in page[page.index('id="profiles"'):]
