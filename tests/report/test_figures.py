"""Every figure declared in results/model/figures.py reaches every output (docs/reports.md, "The
figures"): the terminal's report (what pytest prints and ``dlbench report`` prints: both are
report/evaluation.render_evaluation), the single-run HTML page, ``frame()``'s columns, and the
loggers (MLflow in sqlite, W&B offline) fed the same evaluation as a live session feeds them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from _logger_runs import copy_db, empty_mlflow_db, write_run_dir

from pytest_dlbench.loggers.source import (
    bench_labels,
    bench_metrics,
    bench_table,
    session_facts,
    streams,
)
from pytest_dlbench.report.console import report_width
from pytest_dlbench.report.evaluation import render_evaluation
from pytest_dlbench.report.html import render_html
from pytest_dlbench.results.evaluation import EvaluateOptions, Evaluation, evaluate
from pytest_dlbench.results.history.frames import runs_frame
from pytest_dlbench.results.model import FIGURES, TOTAL_TIME, Figure, SuiteSummary, figure

GiB = 2**30


def _every_figure(summary: SuiteSummary, *, gpu: bool) -> SuiteSummary:
    """The logger tests' run (alpha, beta, gamma) with every figure somewhere: alpha counted
    FLOPs with a peak (TFLOP/s, MFU), ran in bf16, trained to a time, recorded torch's peaks
    and ran on a busy machine; beta counted FLOPs without a peak (MFU's reason) and is
    unreliable; gamma has the GPU's telemetry (NVML's peak, energy), or without ``gpu`` none
    (then the process's peak RSS is the memory column)."""
    def runs(b: Any, **telemetry: Any) -> tuple[Any, ...]:
        out = []
        for r in b.runs:
            t = dict(r.telemetry, **telemetry)
            if not gpu:
                t.pop("peak_gpu_mem_bytes", None)
                t.pop("energy_j", None)
            out.append(dataclasses.replace(r, telemetry=t, precision=r.precision or (
                "bf16-mixed" if b.name == "alpha" else None)))
        return tuple(out)

    changed = []
    for b in summary.benchmarks:
        if b.name == "alpha":
            b = dataclasses.replace(
                b, tflops=12.5, mfu=0.31, peak_source="datasheet", metric=TOTAL_TIME,
                runs=runs(b, torch_max_allocated_bytes=2 * GiB,
                          torch_max_reserved_bytes=3 * GiB, busy=True))
        elif b.name == "beta":
            b = dataclasses.replace(b, tflops=3.25, unreliable="too few observations (4 steady)",
                                    runs=runs(b))
        else:
            b = dataclasses.replace(b, runs=runs(b))
        changed.append(b)
    return dataclasses.replace(summary, benchmarks=tuple(changed))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("figures"))


def evaluations(run_dir: Path) -> list[Evaluation]:
    """The run with a GPU's telemetry and without (NVML's peak and the process's RSS are one
    column or the other, never both)."""
    plain = evaluate(run_dir, EvaluateOptions(suite="lt"))
    return [dataclasses.replace(plain, summary=_every_figure(plain.summary, gpu=gpu))
            for gpu in (True, False)]


def _header_has(text: str, column: str) -> bool:
    """A table of the text has ``column`` as a header: a line starting with ``bench`` with the
    name between two-space gaps (report/terminal_tables.GAP) or at an end."""
    pattern = re.compile(rf"(?:^|\s\s){re.escape(column)}(?:\s\s|$)")
    return any(pattern.search(line) for line in text.splitlines() if line.startswith("bench"))


def in_terminal(text: str, f: Figure) -> bool:
    if f.table == "lines":  # said in words under the tables: "busy: alpha (...)"
        return re.search(rf"^{re.escape(f.column)}: \w", text, re.MULTILINE) is not None
    return _header_has(text, f.column)


def in_html(html: str, f: Figure) -> bool:
    if f.key == "busy":
        return ">busy machine</span>" in html
    if f.key == "unreliable":
        return ">unreliable: " in html
    header = "total_time_secs ↓" if f.key == "total_time_secs" else f.column
    return re.search(rf"<th[^>]*>{re.escape(header)}</th>", html) is not None


def test_every_figure_reaches_the_terminal_and_the_html_page(run_dir: Path) -> None:
    texts, pages = [], []
    for evaluation in evaluations(run_dir):
        # -v: the n, fail and total columns; 200 columns: no table cut into blocks.
        texts.append(render_evaluation(evaluation, verbosity=1, width=200))
        pages.append(render_html(evaluation.summary))
    missing_text = [f.column for f in FIGURES if not any(in_terminal(t, f) for t in texts)]
    missing_html = [f.column for f in FIGURES if not any(in_html(p, f) for p in pages)]
    assert missing_text == [] and missing_html == [], (missing_text, missing_html)
    gpu_text, cpu_text = texts
    assert _header_has(gpu_text, "nvml peak") and not _header_has(gpu_text, "peak rss")
    assert _header_has(cpu_text, "peak rss") and not _header_has(cpu_text, "nvml peak")
    # MFU's reason is on the page, not only on hover: under the table, as the terminal says it.
    reason = re.search(r"^MFU not shown: beta \((.+)\)$", gpu_text, re.MULTILINE)
    assert reason is not None, gpu_text
    notes = re.search(r'<ul class="notes" id="flops-notes">(.*?)</ul>', pages[0], re.DOTALL)
    assert notes is not None and "MFU not shown: beta (" in notes[1]


def test_every_figure_reaches_frame_and_what_the_loggers_send(run_dir: Path) -> None:
    evaluation = evaluations(run_dir)[0]
    df = runs_frame(evaluation.summary)
    assert [f.key for f in FIGURES if f.key not in df.columns] == []
    alpha = df[df["bench"] == "alpha"].iloc[0]
    assert alpha["tflops"] == 12.5 and alpha["mfu"] == pytest.approx(31.0)  # in percent
    assert alpha["torch_max_reserved_bytes"] == 3 * GiB and bool(alpha["busy"])
    assert bool(df[df["bench"] == "beta"].iloc[0]["unreliable"])
    # What MLflow and W&B send, from the evaluation they are given.
    metrics, labels = bench_metrics(evaluation.summary), bench_labels(evaluation.summary)
    sent = {k for values in (*metrics.values(), *labels.values()) for k in values}
    assert [f.metric for f in FIGURES if f.metric not in sent] == []
    assert metrics["alpha"]["tflops"] == 12.5 and metrics["alpha"]["mfu"] == pytest.approx(31.0)
    assert metrics["alpha"]["busy"] == 1.0 and metrics["beta"]["unreliable"] == 1.0
    assert labels["alpha"]["precision"] == "bf16-mixed"
    columns, rows = bench_table(evaluation.summary)
    assert columns == ("bench", *(f.key for f in FIGURES)) and len(rows) == 3


def _log(sink: Any, run_dir: Path, evaluation: Evaluation) -> None:
    """The calls a live session makes (loggers/sink.log_run_dir), with this evaluation."""
    sink.start_session(run_dir, session_facts(run_dir))
    for path in streams(run_dir):
        sink.log_bench_run(path)
    sink.finish_session(evaluation, [])
    sink.close()


@pytest.mark.slow
def test_every_figure_reaches_mlflow(run_dir: Path, tmp_path: Path,
                                     tmp_path_factory: pytest.TempPathFactory,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    from pytest_dlbench.loggers.mlflow_logger import MlflowSink

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    uri = copy_db(empty_mlflow_db(tmp_path_factory), tmp_path / "store")
    _log(MlflowSink(uri), run_dir, evaluations(run_dir)[0])
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("lt").experiment_id])
    metrics = {k for r in runs for k in r.data.metrics}
    tags = {k for r in runs for k in r.data.tags}
    missing = [f.metric for f in FIGURES
               if (f"dlbench.{f.key}" not in tags if f.is_text else f.metric not in metrics)]
    assert missing == []
    alpha = next(r for r in runs if r.info.run_name == "alpha[D0]")
    assert alpha.data.metrics["tflops"] == 12.5 and alpha.data.metrics["mfu"] == 31.0
    assert alpha.data.tags["dlbench.precision"] == "bf16-mixed"


@pytest.mark.slow
def test_every_figure_reaches_wandb(run_dir: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    import shutil

    from pytest_dlbench.loggers.wandb_logger import WandbSink
    from pytest_dlbench.loggers.wandb_offline import find_offline_runs, read_offline_run

    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_DIR", "WANDB_API_KEY", "WANDB_ENTITY"):
        monkeypatch.delenv(name, raising=False)
    own = tmp_path / "base"
    shutil.copytree(run_dir.parent.parent, own)  # its offline runs beside a copy of the run
    copy = own / "runs" / run_dir.name
    _log(WandbSink(), copy, evaluations(copy)[0])
    runs = {r.name: r for r in map(read_offline_run, find_offline_runs(own))}
    sent = {k for name, r in runs.items() if "[" in name for k in r.summary}
    assert [f.metric for f in FIGURES if f.metric not in sent] == []
    assert runs["alpha[D0]"].summary["tflops"] == 12.5
    assert runs["alpha[D0]"].summary["precision"] == "bf16-mixed"


# -- dlbench report prints the run's tables in pytest's shapes ------------------------------------
@pytest.mark.parametrize("columns", [None, "30", "79", "132"])
def test_dlbench_report_fits_the_width_pytest_fits(columns: str | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a terminal pytest fits its report to 80 columns (``$COLUMNS`` when set, 80 for
    one under 40); ``dlbench report`` fitted it to 100, cutting the tables into other blocks."""
    from _pytest._io.terminalwriter import get_terminal_width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert report_width() == get_terminal_width()


def test_the_terminal_tables_are_the_declared_figures() -> None:
    """The compact, -v and second tables' columns are the declaration's, in its order (the
    compile columns are the compiled table's, beside precision)."""
    from pytest_dlbench.report import columns as cols

    assert cols.MAIN == ("perf", "units", "std%", "perf_adj", "weight")
    assert cols.VERBOSE == ("n", "fail", "total")
    declared = [c for c in cols.DETAILS if c not in cols.COMPILE]
    assert declared == [f.column for f in FIGURES if f.table == "details"]
    assert figure("MFU") is figure("mfu")
    # Each figure's format is one the reports write, and each key is one name.
    from pytest_dlbench.results.model.figures import FORMATS

    assert {f.fmt for f in FIGURES} <= set(FORMATS)
    assert len({f.key for f in FIGURES}) == len({f.column for f in FIGURES}) == len(FIGURES)


def test_the_docs_list_every_declared_figure() -> None:
    """docs/reports.md's list of figures is the declaration's: a row per figure, its column and
    its key, in its order."""
    from _paths import REPO_ROOT

    text = (REPO_ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    section = text.split("### The figures", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)`", section, re.MULTILINE)
    assert rows == [(f.column, f.key) for f in FIGURES]


def test_dlbench_report_prints_what_pytest_prints(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Without a terminal, ``dlbench report`` prints the run's report as pytest's terminal
    summary renders it (report/evaluation.render_evaluation at pytest's width): the same
    tables, cut into the same blocks."""
    from _pytest._io.terminalwriter import get_terminal_width
    from _runs import steady_at, write_run

    from pytest_dlbench.cli import main

    monkeypatch.delenv("COLUMNS", raising=False)
    run = tmp_path / "run"
    for repeat in range(3):  # long names and -v: wider than 80 columns, cut into blocks
        write_run(run, "a-rather-long-benchmark-name-one", steady_at(100.0 + repeat),
                  repeat=repeat)
        write_run(run, "a-rather-long-benchmark-name-two", steady_at(50.0 + repeat),
                  repeat=repeat)
    assert main(["report", str(run), "-v"]) == 0
    printed = capsys.readouterr().out
    expected = render_evaluation(evaluate(run), verbosity=1, width=get_terminal_width())
    assert printed.startswith(expected + "\n"), (printed, expected)
