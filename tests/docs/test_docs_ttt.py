"""docs/time-to-train.md and docs/examples/ttt/: the examples resolve to what the page says,
and the runnable ones run (slow); the shipped suites' CLIP entries."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.cli import main
from pytest_dlbench.measure.logparse import StepReader, total_time_secs
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.suite import find_suite, resolve_suite
from pytest_dlbench.suite.logparsers import make_parser

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples" / "ttt"
PAGE = (DOCS / "time-to-train.md").read_text()

#: Seed 004's command line, verbatim.
SEED_COMMAND = (
    'python src/open_clip/src/training/main.py --dataset-type synthetic --train-num-samples '
    '3200000 --epochs 1 --batch-size=512 --model ViT-L-14 --dist-url="env://" --name test '
    '--logs logs --local-loss --gather-with-grad --grad-checkpointing --log-every-n-steps 1'
)


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", PAGE, flags=re.S)


@pytest.mark.parametrize("index", range(len(_yaml_blocks())))
def test_yaml_on_the_page_is_in_the_examples_or_suites(index: int) -> None:
    block = _yaml_blocks()[index]
    if block.startswith("metric:") or block.startswith("mmoclip:"):
        return  # fragments: the key and the shape of an entry
    texts = [p.read_text() for p in EXAMPLES.glob("*.yaml")]
    texts += [p.read_text() for p in (ROOT / "bench_suites").glob("*.yaml")]
    assert any(block in text for text in texts), block


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_resolves_and_is_on_the_page(path: Path) -> None:
    suite = resolve_suite(path)
    assert suite.specs and suite.warnings == []
    assert f"examples/ttt/{path.name}" in PAGE


def test_seed_004s_command_line_is_a_benchmark() -> None:
    (spec,) = resolve_suite(EXAMPLES / "mmoclip-seed.yaml").specs
    words = shlex.split(SEED_COMMAND)
    words[1] = f"{EXAMPLES}/{words[1]}"  # the archive next to the suite file
    assert list(spec.args) == words
    assert spec.command is not None and spec.command["parser"] == "open_clip"
    assert spec.metric == "total_time_secs" and spec.is_njobs


def test_the_shipped_suites_clip_entries() -> None:
    smoke = resolve_suite(find_suite("smoke"))
    inproc, external = smoke["clip-tiny"], smoke["clip-tiny-openclip"]
    assert inproc.metric == external.metric == "total_time_secs"
    assert external.args[:3] == ("python", "-m", "open_clip_train.main")
    for flag in ("--local-loss", "--gather-with-grad", "--grad-checkpointing"):
        assert flag in inproc.args and flag in external.args
    # The same work: 168 pairs in batches of 8, every step recorded.
    for spec in (inproc, external):
        args = list(spec.args)
        assert args[args.index("--train-num-samples") + 1] == "168"
        assert args[args.index("--batch-size") + 1] == "8"
        assert spec.skip + spec.stop == 21
        assert spec.env == {"OMP_NUM_THREADS": "1"}  # the same threads, steadier on a busy CPU
    standard = resolve_suite(find_suite("standard"))
    for model in ("ViT-B-32", "ViT-L-14"):
        mmoclip = standard[f"mmoclip-{model}"]
        args = " ".join(mmoclip.args)
        assert ("--dataset-type synthetic --train-num-samples 3200000 --epochs 1 "
                f"--batch-size 512 --model {model} --dist-url env:// --name test --logs logs "
                "--local-loss --gather-with-grad --grad-checkpointing --log-every-n-steps 1"
                ) in args
        assert mmoclip.metric == "total_time_secs" and mmoclip.weight == 1 and mmoclip.is_njobs
        assert standard[f"clip-{model}"].definition == "pytest_dlbench.workloads.clip:train"
    sweep = resolve_suite(find_suite("mmoclip"))
    assert [s.plan["nodes"] for s in sweep.specs] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert all(s.weight == 0 and s.metric == "total_time_secs" for s in sweep.specs)


# -- runs ---------------------------------------------------------------------------------------
def _run_dir(pytester: pytest.Pytester) -> Path:
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    return run_dir


@pytest.mark.slow
def test_my_script_example_runs_and_its_time_is_its_logs(pytester: pytest.Pytester) -> None:
    suite = EXAMPLES / "my-script.yaml"
    result = pytester.runpytest(f"--bench-suite={suite}", "--bench-base=out")
    result.assert_outcomes(passed=1)
    run_dir = _run_dir(pytester)
    bench = summarize_dir(run_dir).get("my-script")
    assert bench is not None and bench.lower_is_better
    # The time is the sum of the times the script printed, the first left out.
    (spec,) = resolve_suite(suite).specs
    reader = StepReader(make_parser(spec.command["parser"]))  # type: ignore[index]
    steps = reader.read((run_dir / "my-script.D0.log").read_text().splitlines())
    assert len(steps) == 12
    assert bench.total_time_secs == total_time_secs(s.seconds for s in steps)
    assert bench.done_percent == 100.0


@pytest.mark.slow
def test_the_sweep_runs_what_fits_and_skips_the_rest(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("open_clip")
    suite = EXAMPLES / "scaling-tiny.yaml"
    result = pytester.runpytest(f"--bench-suite={suite}", "--bench-base=out", "-rs",
                                "--bench-cpus-per-slot=1")
    two_slots = "needs 2 device slots" not in result.stdout.str()
    result.assert_outcomes(passed=2 if two_slots else 1, skipped=2 if two_slots else 3)
    result.stdout.fnmatch_lines(["*needs 2 nodes, the system has 1*"])
    run_dir = _run_dir(pytester)
    capsys.readouterr()
    assert main(["table", str(run_dir), "--csv"]) == 0
    import csv
    import io

    rows = {r["bench"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert set(rows) == {"clip-tiny-n1-g1", "clip-tiny-n1-g2", "clip-tiny-n2-g1",
                         "clip-tiny-n2-g2"}
    one = rows["clip-tiny-n1-g1"]
    assert (one["nodes"], one["gpus"], one["global_batch"], one["status"]) == ("1", "1", "8", "ok")
    assert float(one["done_percent_last"]) == 100.0 and float(one["total_time_secs"]) > 0
    assert rows["clip-tiny-n2-g2"]["status"] == "not run"
    if two_slots:
        both = rows["clip-tiny-n1-g2"]
        assert (both["gpus"], both["global_batch"], both["status"]) == ("2", "16", "ok")
    text = result.stdout.str()
    assert "sweep (matrix benchmarks" in text


@pytest.mark.slow
def test_smoke_clip_runs_in_process_and_through_open_clip_train(
    pytester: pytest.Pytester,
) -> None:
    """The issue's check: `pytest --bench-suite=smoke -k clip` runs the tiny model in-process
    and through `open_clip_train.main`; both report samples/s and total_time_secs over the same
    work. Their agreement (a median ratio of 0.95 over six rounds, docs/time-to-train.md) is
    measured, not asserted to 15 %: on a shared 2-core machine one run's noise can be larger
    than that. A gross mismatch (items counted twice, a wrong parser) fails the loose bound."""
    pytest.importorskip("open_clip_train")
    pytest.importorskip("webdataset")
    result = pytester.runpytest("--bench-suite=smoke", "-k", "clip", "--bench-base=out")
    result.assert_outcomes(passed=2)
    summary = summarize_dir(_run_dir(pytester))
    inproc, external = summary.get("clip-tiny"), summary.get("clip-tiny-openclip")
    assert inproc is not None and external is not None
    for bench in (inproc, external):
        assert bench.lower_is_better and bench.total_time_secs and bench.perf
        (run,) = bench.runs
        assert run.timing.steps == 21 and run.timing.items == 20 * 8
        assert bench.done_percent == 100.0
    ratio = inproc.perf / external.perf  # type: ignore[operator]
    print(f"in-process / external throughput: {ratio:.3f}")
    assert 1 / 3 < ratio < 3
    assert "total_time_secs" in result.stdout.str()
    records = [json.loads(line) for line in
               (_run_dir(pytester) / "clip-tiny-openclip.D0.data").read_text().splitlines()]
    ends = [r for r in records if r["event"] == "command" and r["status"] == "end"]
    assert ends and ends[0]["returncode"] == 0 and ends[0]["steps"] == 21
