"""Precision presets and torch.compile in the shared training loop (workloads/precision.py,
compilation.py and train.py).

The tests that compile are slow: inductor builds C++ on the first compile of a graph (tens of
seconds on a small CPU, a few once its cache is warm)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _doc_outputs import matches, output_blocks, run_command

torch = pytest.importorskip("torch")

from pytest_dlbench.core.errors import DlbenchError  # noqa: E402
from pytest_dlbench.measure.bench import Bench  # noqa: E402
from pytest_dlbench.measure.stream import NullStream  # noqa: E402
from pytest_dlbench.workloads import toy  # noqa: E402
from pytest_dlbench.workloads.compilation import (  # noqa: E402
    COMPILE_MIN_STEPS,
    CompileError,
    CompileOptions,
    compile_reason,
)
from pytest_dlbench.workloads.precision import (  # noqa: E402
    precision_unsupported,
    resolve_precision,
    setup_precision,
)
from pytest_dlbench.workloads.train import train_steps  # noqa: E402

DOCS_COMPILE = "pytest --bench-suite=smoke -k compile"
CPU = torch.device("cpu")


def run_toy(args: str, *, skip: int = 2, stop: int = 6) -> NullStream:
    stream = NullStream()
    with Bench(name="toy", args=args.split(), device="cpu", stream=stream, skip=skip,
               stop=stop) as bench:
        toy.main(bench)
    return stream


def of(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == event]


def assert_no_observation_in_compilation(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every rate observation's interval [time - seconds, time] lies after the compile record's
    [start, end]; returns that record."""
    (compiled,) = [r for r in of(records, "compile") if r["phase"] == "warmup"]
    assert compiled["start"] < compiled["end"]
    rates = of(records, "rate")
    assert rates
    for r in rates:
        begin = r["time"] - r["seconds"]
        assert begin >= compiled["end"] - 1e-6, (r, compiled)  # after, not overlapping
    return compiled


# -- precision presets -------------------------------------------------------------------------
def test_tf32_on_a_cpu_is_unsupported() -> None:
    reason = precision_unsupported("tf32", CPU)
    assert reason is not None and "TF32" in reason
    assert precision_unsupported("tf32-fp16", CPU) is not None
    assert precision_unsupported("fp32", CPU) is None


@pytest.mark.parametrize("kind", ["bf16", "fp16"])
def test_half_precision_on_a_cpu_depends_on_its_arithmetic(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr("pytest_dlbench.workloads.precision._cpu_has", lambda k: False)
    reason = precision_unsupported(kind, CPU)
    assert reason is not None and f"no {kind} arithmetic" in reason
    monkeypatch.setattr("pytest_dlbench.workloads.precision._cpu_has", lambda k: True)
    assert precision_unsupported(kind, CPU) is None


def _args(precision: str, emulate: bool = False) -> argparse.Namespace:
    return argparse.Namespace(precision=precision, allow_emulated_precision=emulate)


def test_an_unsupported_preset_is_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(pytest.skip.Exception, match="TF32 is a tensor-core mode"):
        setup_precision(_args("tf32"), CPU)
    monkeypatch.setattr("pytest_dlbench.workloads.precision._cpu_has", lambda k: False)
    with pytest.raises(pytest.skip.Exception, match="--allow-emulated-precision"):
        setup_precision(_args("bf16"), CPU)


def test_emulation_runs_the_preset_as_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_dlbench.workloads.precision._cpu_has", lambda k: False)
    assert setup_precision(_args("bf16", True), CPU).autocast_dtype == torch.bfloat16
    # fp16 emulated is fp16 (not the bf16 that resolve_precision substitutes by default)
    assert setup_precision(_args("fp16", True), CPU).autocast_dtype == torch.float16


def test_a_cpu_with_fp16_arithmetic_runs_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_dlbench.workloads.precision._cpu_has", lambda k: True)
    p = setup_precision(_args("fp16"), CPU)
    assert p.autocast_dtype == torch.float16 and p.grad_scaler().is_enabled()  # as on a GPU


def test_a_skipped_workload_writes_no_observation() -> None:
    with pytest.raises(pytest.skip.Exception):
        run_toy("--precision tf32")


# -- compile options and errors ----------------------------------------------------------------
def test_compile_options_from_arguments() -> None:
    parser = toy.make_parser()
    assert not CompileOptions.from_args(parser.parse_args([])).enabled
    options = CompileOptions.from_args(
        parser.parse_args(["--compile=max-autotune", "--compile-backend", "aot_eager"]))
    assert (options.mode, options.backend, options.enabled) == ("max-autotune", "aot_eager",
                                                                 True)


def test_compile_reason_is_the_innermost_error_in_one_line() -> None:
    class BackendCompilerFailed(Exception):  # dynamo's wrapper: its own message says little
        def __init__(self, inner: BaseException) -> None:
            self.inner_exception = inner
            super().__init__("backend='inductor' raised:\nRuntimeError: ...\n\nSet TORCH...")

    inner = RuntimeError("\nC++ compile error: cc1plus: fatal error\nmore lines")
    assert compile_reason(BackendCompilerFailed(inner)) == (
        "RuntimeError: C++ compile error: cc1plus: fatal error")
    wrapped = ValueError("outer")
    wrapped.__cause__ = KeyError("k")
    assert compile_reason(wrapped) == "KeyError: 'k'"


def test_an_unknown_backend_fails_in_one_line() -> None:
    with pytest.raises(CompileError) as info:
        run_toy("--compile --compile-backend no-such-backend")
    message = str(info.value)
    assert isinstance(info.value, DlbenchError) and "\n" not in message
    assert message.startswith("torch.compile failed (mode default, backend no-such-backend): "
                              "InvalidBackend: ")


@pytest.mark.slow
def test_a_backend_that_fails_fails_in_one_line() -> None:
    from torch._dynamo import register_backend

    @register_backend(name="dlbench_test_broken")
    def broken(gm: Any, example_inputs: Any) -> Any:
        raise RuntimeError("no kernel for this operator\nsecond line")

    stream = NullStream()
    args = ["--compile", "--compile-backend", "dlbench_test_broken"]
    with pytest.raises(CompileError) as info, Bench(
        name="toy", args=args, device="cpu", stream=stream, skip=1, stop=2
    ) as bench:
        toy.main(bench)
    assert str(info.value) == ("torch.compile failed (mode default, backend "
                               "dlbench_test_broken): RuntimeError: no kernel for this operator")
    assert not of(stream.records, "rate")  # it failed before the timed loop


# -- compiled training -------------------------------------------------------------------------
@pytest.mark.slow
def test_compiled_toy_compiles_before_the_timed_loop() -> None:
    stream = run_toy("--batch-size 16 --compile", skip=2, stop=6)
    records = stream.records
    compiled = assert_no_observation_in_compilation(records)
    assert (compiled["mode"], compiled["backend"]) == ("default", "inductor")
    assert compiled["graphs"] >= 1 and compiled["graph_breaks"] == 0
    assert compiled["steps"] >= COMPILE_MIN_STEPS and compiled["seconds"] > 0
    # The compile record precedes every observation, and the loop then compiles nothing.
    kinds = [r["event"] for r in records]
    assert kinds.index("compile") < kinds.index("rate")
    assert [r["phase"] for r in of(records, "compile")] == ["warmup"]
    rates = of(records, "rate")
    assert len(rates) == 8 and sum(r["warmup"] for r in rates) == 2
    assert len(of(records, "loss")) == 8  # compile steps log no loss: no observation of theirs


@pytest.mark.slow
def test_graph_breaks_are_counted() -> None:
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def loss_with_a_break(batch: tuple[Any, ...]) -> Any:
        h = model(batch[0])
        torch._dynamo.graph_break()
        return torch.nn.functional.mse_loss(h, batch[1])

    data = [(torch.randn(8, 4), torch.randn(8, 1))] * 20
    stream = NullStream()
    with Bench(args=[], device="cpu", stream=stream, skip=1, stop=3) as bench:
        train_steps(
            bench, iter(data), compute_loss=loss_with_a_break, optimizer=optimizer,
            precision=resolve_precision("fp32", CPU), device=CPU, items_per_step=8,
            compile=CompileOptions("default", "aot_eager"),
        )
    compiled = assert_no_observation_in_compilation(stream.records)
    assert compiled["graph_breaks"] == 1 and compiled["graphs"] == 2
    assert compiled["break_reasons"]


# -- a suite run -------------------------------------------------------------------------------
def _docs_compile_output() -> list[str]:
    """docs/running.md's output of ``pytest --bench-suite=smoke -k compile``, prompt left out."""
    (block,) = [b for b in output_blocks() if b.page.name == "running.md"
                and b.text.startswith(f"$ {DOCS_COMPILE}\n")]
    return block.text.split("\n")[1:]


@pytest.mark.slow
def test_smoke_compile_runs_eager_and_compiled_siblings(tmp_path: Path) -> None:
    """The page's command, run as tests/docs/test_docs_outputs.py runs a page's (the one run of
    torch.compile's suite entries here: its output is docs/running.md's, checked here), with
    --bench-save for the saved summary (a line after the table, which the page leaves out)."""
    out = run_command(f"{DOCS_COMPILE} --bench-save=summary.json", tmp_path)
    assert re.search(r"=+ 2 passed\b", out) and " failed" not in out, out
    assert matches(_docs_compile_output(), out.rstrip("\n").split("\n")), (
        "docs/running.md's output of `pytest --bench-suite=smoke -k compile` is not what it "
        "prints now; it printed:\n" + out)
    # The second table (what only some benchmarks have): precision and the compile columns.
    header = next(line for line in out.splitlines()
                  if line.startswith("bench ") and "precision" in line)
    for column in ("precision", "compile", "graphs", "breaks", "speedup"):
        assert column in header.split()
    compiled_row = [line for line in out.splitlines() if line.startswith("mlp-compiled ")][1]
    # The speed-up over eager; "?" marks it in doubt on a loaded machine (the product's rule).
    assert re.search(r" \d+\.\d\dx\??( |$)", compiled_row), compiled_row
    eager_row = [line for line in out.splitlines() if line.startswith("mlp-eager ")][1]
    start = header.split().index("precision")  # columns by name: others may come before
    assert eager_row.split()[start:start + 5] == ["fp32", "-", "-", "-", "-"]  # no compile

    (run_dir,) = (tmp_path / ".dlbench" / "runs").iterdir()
    streams = {p.name: [json.loads(x) for x in p.read_text().splitlines()]
               for p in run_dir.glob("*.data")}
    assert set(streams) == {"mlp-eager.D0.data", "mlp-compiled.D0.data"}
    eager, compiled = streams["mlp-eager.D0.data"], streams["mlp-compiled.D0.data"]
    assert (eager[0]["precision"], eager[0]["compile"]) == ("fp32", None)
    assert compiled[0]["compile"] == {"mode": "default", "backend": "inductor"}
    assert not of(eager, "compile")
    assert_no_observation_in_compilation(compiled)
    # The machine's state is in every meta record and in the saved summary.
    (meta,) = of(compiled, "meta")
    assert {"governor", "turbo", "aslr", "load", "gpus", "driver", "cuda"} <= set(meta["state"])
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert {"governor", "turbo", "aslr", "load"} <= set(saved["machine"]["state"])
    bench = saved["benchmarks"]["mlp-compiled"]
    assert bench["compile"] == {"mode": "default", "backend": "inductor"}
    assert bench["runs"][0]["compiled"]["graphs"] >= 1


@pytest.mark.slow
def test_a_compile_failure_leaves_the_eager_sibling_standing(pytester: pytest.Pytester) -> None:
    (pytester.path / "pair.yaml").write_text(
        "_mlp:\n"
        "  definition: pytest_dlbench.workloads.toy:main\n"
        "  voir: {options: {skip: 1, stop: 5}}\n"
        "eager:\n  inherits: _mlp\n"
        "broken:\n  inherits: _mlp\n  argv: {--compile: true, --compile-backend: nope}\n"
        "tf32:\n  inherits: _mlp\n  argv: {--precision: tf32}\n"
    )
    result = pytester.runpytest_subprocess("--bench-suite=pair.yaml", "--bench-base=out",
                                           "-p", "no:cacheprovider", "-rs",
                                           "--bench-columns=fail,n,perf")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    reason = ("CompileError: torch.compile failed (mode default, backend nope): "
              "InvalidBackend: Invalid backend: 'nope'*")
    result.stdout.fnmatch_lines([f"  failed broken[[]D0[]]: fail: {reason}"])
    result.stdout.fnmatch_lines(["*skipped tf32[[]D0[]]: precision tf32: TF32 is a tensor-core*"])
    result.stdout.fnmatch_lines(["SKIPPED * precision tf32: TF32 is a tensor-core mode*"])
    eager_row = next(line for line in result.stdout.lines if line.startswith("eager "))
    assert eager_row.split()[1:3] == ["0", "1"]  # fail 0, n 1: the eager result stands
