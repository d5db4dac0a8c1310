"""Precision and compile as benchmark dimensions, without compiling: the shared arguments, the
config record's fields, the eager-sibling pairing, skips, and how reports show them."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest
from _preset_runs import COMPILED, TOY, records, spec_of, suite_of

from pytest_dlbench.report.html import render_html
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results.figures import (
    compile_rows,
    compile_summary,
)
from pytest_dlbench.results.gate import run_failed
from pytest_dlbench.results.model import SuiteSummary, load_summary, save_summary
from pytest_dlbench.suite.presets import (
    TRAINING_DEFINITIONS,
    add_arguments,
    eager_key,
    run_dimensions,
)
from pytest_dlbench.workloads import WORKLOADS


# -- the arguments, defined once ---------------------------------------------------------------
@pytest.mark.parametrize("definition", sorted(TRAINING_DEFINITIONS))
def test_every_training_workload_takes_the_shared_arguments(definition: str) -> None:
    module = importlib.import_module(definition.split(":")[0])
    args = module.make_parser().parse_args(
        ["--precision", "bf16", "--compile", "--compile-backend", "eager"])
    assert (args.precision, args.compile, args.compile_backend) == ("bf16", "default", "eager")
    defaults = module.make_parser().parse_args([])
    assert (defaults.compile, defaults.compile_backend) == ("none", "inductor")


def test_training_definitions_are_the_registry_less_flops_and_loader() -> None:
    not_training = {WORKLOADS["matmul"], WORKLOADS["dataloader"]}
    assert set(WORKLOADS.values()) - not_training == TRAINING_DEFINITIONS


@pytest.mark.parametrize(
    ("argv", "mode"),
    [([], "none"), (["--compile"], "default"), (["--compile=max-autotune"], "max-autotune"),
     (["--compile", "reduce-overhead"], "reduce-overhead"), (["--compile", "none"], "none")],
)
def test_compile_flag_forms(argv: list[str], mode: str) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(argv).compile == mode


def test_an_unknown_compile_mode_is_an_argument_error() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--compile=fastest"])


# -- the config record's fields ----------------------------------------------------------------
def test_run_dimensions() -> None:
    assert run_dimensions(TOY, []) == {"precision": "fp32", "compile": None}
    assert run_dimensions(TOY, ["--batch-size", "8", "--precision", "bf16", "--compile"]) == {
        "precision": "bf16", "compile": {"mode": "default", "backend": "inductor"}}
    assert run_dimensions(TOY, ["--compile=max-autotune", "--compile-backend=aot_eager"])[
        "compile"] == {"mode": "max-autotune", "backend": "aot_eager"}
    # not a built-in training workload: nothing recorded (its --precision may mean anything)
    assert run_dimensions("pytest_dlbench.workloads.matmul:main", ["--dtype", "bf16"]) == {}
    assert run_dimensions("my_bench.py:main", ["--precision", "bf16"]) == {}
    # a value the workload will reject itself: not recorded, not a crash here
    assert run_dimensions(TOY, ["--precision", "fp8"]) == {}


def test_eager_key_ignores_only_the_compile_arguments() -> None:
    eager = eager_key(spec_of(["--batch-size", "64"]))
    for compiled in (["--batch-size", "64", "--compile"],
                     ["--compile", "--batch-size", "64"],
                     ["--compile", "max-autotune", "--batch-size", "64"],
                     ["--batch-size", "64", "--compile=default", "--compile-backend", "eager"],
                     ["--batch-size", "64", "--compile", "none"]):
        assert eager_key(spec_of(compiled)) == eager, compiled
    assert eager_key(spec_of(["--batch-size", "32", "--compile"])) != eager
    assert eager_key(spec_of(["--batch-size", "64"], plan={"method": "njobs", "n": 1})) != eager
    assert eager_key(spec_of(["--batch-size", "64", "--precision", "bf16"])) != eager
    assert eager_key({"args": []}) is None


# -- reports -----------------------------------------------------------------------------------
def test_compile_summary_of_a_run() -> None:
    assert compile_summary([]) == {}
    stats = compile_summary([{"event": "compile", "phase": "warmup", **COMPILED},
                             {"event": "compile", "phase": "loop", "graphs": 1,
                              "graph_breaks": 1}])
    assert stats["seconds"] == 12.34 and stats["graph_breaks"] == 2
    assert (stats["loop_graphs"], stats["loop_breaks"]) == (1, 1)


def test_siblings_pair_by_arguments_not_by_name() -> None:
    summary = suite_of(
        records("a", 100.0, ["--batch-size", "8"]),
        records("b", 250.0, ["--batch-size", "8", "--compile"], compile_record=COMPILED),
        records("c", 50.0, ["--batch-size", "16", "--compile"], compile_record=COMPILED),
    )
    rows = {r.bench: r for r in compile_rows(summary)}
    assert set(rows) == {"b", "c"}
    assert rows["b"].eager == "a" and rows["b"].speedup == pytest.approx(2.5)
    assert (rows["b"].seconds, rows["b"].graphs, rows["b"].graph_breaks) == (12.34, 3, 2)
    assert rows["c"].eager is None and rows["c"].speedup is None  # no bs16 eager run
    assert summary.get("b").to_dict()["compile"] == {"mode": "default", "backend": "inductor"}
    assert summary.get("a").to_dict()["precision"] == "fp32"


def test_table_shows_precision_compile_time_breaks_and_speedup() -> None:
    summary = suite_of(
        records("mlp-eager", 100.0, ["--batch-size", "8"]),
        records("mlp-compiled", 250.0, ["--batch-size", "8", "--compile"],
                compile_record=COMPILED),
    )
    text = render_summary(summary)
    # The second table (report/columns.DETAILS): what only some benchmarks have.
    header, *lines = text.split("\n\n")[1].splitlines()[:3]
    rows = {line.split()[0]: line.split() for line in lines}
    eager, compiled = rows["mlp-eager"], rows["mlp-compiled"]
    assert header.split()[1:6] == ["precision", "compile", "graphs", "breaks", "speedup"]
    assert eager[1:6] == ["fp32", "-", "-", "-", "-"]
    assert compiled[1:7] == ["fp32", "12.3", "s", "3", "2", "2.50x"]


def test_no_new_columns_without_dimensions() -> None:
    # Streams of other definitions (and older streams) record neither: the table is as before.
    summary = suite_of(records("x", 10.0, definition="mine.py:main"))
    header = render_summary(summary)
    assert "precision" not in header and "compile" not in header and "speedup" not in header


def test_cached_compile_and_recompiles_in_the_loop_are_said() -> None:
    cached = {**COMPILED, "cache_hits": 6, "cache_misses": 0}
    summary = suite_of(
        records("e", 100.0),
        records("c", 120.0, ["--compile"], compile_record=cached, loop_graphs=2),
    )
    text = render_summary(summary)
    # The time said in words (issue 41 item 4: "29.5 s cached" read as no time at all).
    assert "compile: c 12.3 s with every graph a cache hit: tracing and loading them, not " \
        "compiling" in text.splitlines()
    assert " cached" not in text
    assert "warning: c compiled 2 graph(s) inside its timed loop" in text


def test_failed_compile_fails_alone_and_the_eager_result_stands() -> None:
    reason = ("CompileError: torch.compile failed (mode default, backend nope): "
              "InvalidBackend: Invalid backend: 'nope'.")
    summary = suite_of(
        records("e", 100.0, weight=1.0),
        records("c", 0.0, ["--compile", "--compile-backend", "nope"], status="fail",
                reason=reason),
    )
    assert summary.get("e").perf == 100.0 and summary.get("c").fail == 1
    (row,) = compile_rows(summary)
    assert row.failed == reason and row.speedup is None
    assert f"  failed c[D0]: fail: {reason}" in render_summary(summary)


def test_html_shows_the_compiled_table_and_precision(tmp_path: Path) -> None:
    summary = suite_of(
        records("mlp-eager", 100.0),
        records("mlp-compiled", 250.0, ["--compile"], compile_record=COMPILED),
    )
    html = render_html(summary)
    assert 'id="compiled-table"' in html and "× 2.5" in html and "12.3 s" in html
    assert re.search(r'<th class="l"[^>]*>precision</th>', html)  # its source on hover
    plain = render_html(suite_of(records("x", 10.0, definition="mine.py:main")))
    assert 'id="compiled-table"' not in plain and ">precision<" not in plain


# -- skipped benchmarks ------------------------------------------------------------------------
def test_a_skipped_run_is_not_a_failure() -> None:
    why = "precision tf32: TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer)"
    summary = suite_of(records("ok", 10.0), records("tf32", 0.0, ["--precision", "tf32"],
                                                    status="skipped", reason=why))
    tf32 = summary.get("tf32")
    assert tf32.skipped and (tf32.n, tf32.fail) == (0, 0)
    assert summary.failure_rate == 0.0 and not summary.failed_runs
    assert summary.incomplete == ("tf32",)  # the score is over fewer benchmarks: said
    text = render_summary(summary)
    assert "incomplete: tf32 (skipped)" in text
    assert "failure rate: 0.0% (0 of 1 runs)" in text
    assert f"  skipped tf32[D0]: {why}" in text
    assert "failed tf32" not in render_html(summary)


def test_a_weighted_benchmark_that_skipped_itself_fails_the_run_by_the_one_rule(
    tmp_path: Path,
) -> None:
    """"Did the run fail?" has one home, gate.run_failed (docs/reports.md: a skipped benchmark
    is not a failure unless it is weighted: then the score is incomplete). The same answer on the
    summary scored here and on the same summary read back from its file (`dlbench compare`)."""
    why = "precision tf32: TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer)"
    for weight, failed in ((1.0, True), (0.0, False)):
        summary = suite_of(records("ok", 10.0), records(
            "tf32", 0.0, ["--precision", "tf32"], status="skipped", reason=why, weight=weight))
        assert not summary.failed_runs  # no run failed either way
        assert run_failed(summary) is failed, weight
        saved = save_summary(summary, tmp_path / f"w{weight}.json")
        assert run_failed(load_summary(saved)) is failed, weight
    assert not hasattr(SuiteSummary, "failed")  # no second rule beside gate's
