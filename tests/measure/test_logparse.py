"""Log parsers (measure/logparse.py): OpenCLIP's lines against seed 004's grep/awk recipe."""

from __future__ import annotations

import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.logparse import StepReader, recipe_format, total_time_secs
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.results.figures import run_from_records
from pytest_dlbench.results.model import TOTAL_TIME
from pytest_dlbench.suite.logparsers import OPEN_CLIP, LogParseError, make_parser

#: Seed 004's three sample lines, verbatim.
SEED_LINES = """\
2023-04-21,12:03:13 | INFO | Train Epoch: 0 [ 16384/3200000 (1%)] Data (t): 90.938 Batch (t): 137.606, 119.065/s, 3.72078/s/gpu LR: 0.000000 Logit Scale: 14.286 Contrastive_loss: 9.7031 (9.7031) Loss: 9.7031 (9.7031)
2023-04-21,12:03:20 | INFO | Train Epoch: 0 [ 32768/3200000 (1%)] Data (t): 0.029 Batch (t): 6.655, 2461.78/s, 76.9308/s/gpu LR: 0.000000 Logit Scale: 14.286 Contrastive_loss: 9.7031 (9.7031) Loss: 9.7031 (9.7031)
2023-04-21,12:03:26 | INFO | Train Epoch: 0 [ 49152/3200000 (2%)] Data (t): 0.034 Batch (t): 6.466, 2533.71/s, 79.1783/s/gpu LR: 0.000000 Logit Scale: 14.286 Contrastive_loss: 9.7031 (9.7031) Loss: 9.7031 (9.7031)
"""  # noqa: E501

#: Seed 004's recipe, verbatim (``<STDOUT>`` is the file).
RECIPE = (
    r"""grep -oP '(?<=Batch \(t\): )\d+\.\d+' "$1"|tail -n +2|"""
    r"""awk '{ sum += $1 } END { print "total_time_secs:"sum }'"""
)
#: The same, printing the sum with 17 significant digits: the double itself.
RECIPE_EXACT = RECIPE.replace('print "total_time_secs:"sum', 'printf "%.17g\\n", sum')

needs_tools = pytest.mark.skipif(
    not (shutil.which("bash") and shutil.which("grep") and shutil.which("awk")
         and subprocess.run(["grep", "-P", "x"], input=b"x", capture_output=True).returncode
         == 0),
    reason="needs bash, GNU grep with -P, and awk",
)


def open_clip_line(epoch: int, samples: int, total: int, data_t: float, batch_t: float,
                   batch: int, world: int, loss: float) -> str:
    """A line as open_clip_train/train.py formats it (its f-string, our values)."""
    digits = math.ceil(math.log(total + 1, 10))
    rate = batch * world / batch_t
    percent = 100.0 * samples / total
    return (
        f"2026-01-01,00:00:00 | INFO | Train Epoch: {epoch} [{samples:>{digits}}/{total} "
        f"({percent:.0f}%)] Data (t): {data_t:.3f} Batch (t): {batch_t:.3f}, {rate:#g}/s, "
        f"{rate / world:#g}/s/gpu LR: {0.0001:5f} Logit Scale: {14.286:.3f} "
        f"Contrastive_loss: {loss:#.5g} ({loss:#.5g}) Loss: {loss:#.5g} ({loss:#.5g})"
    )


def long_log(seed: int = 4, steps: int = 400, epochs: int = 2) -> str:
    """A long OpenCLIP log: start-up noise, a slow first step, varied step times (some big,
    some tiny), two epochs, warnings and lines that look alike but are no steps."""
    rng = random.Random(seed)
    batch, world = 512, 32
    per_epoch = steps // epochs
    total = per_epoch * batch * world
    lines = [
        "2026-01-01,00:00:00 | INFO | Running in distributed mode with multiple processes.",
        "2026-01-01,00:00:00 | INFO | Params:",
        "2026-01-01,00:00:00 | INFO |   batch_size: 512",
        "/site-packages/torch/utils/data/dataloader.py:1: UserWarning: pin_memory",
    ]
    for epoch in range(epochs):
        lines.append(f"2026-01-01,00:00:00 | INFO | Start epoch {epoch}")
        for i in range(per_epoch):
            first = epoch == 0 and i == 0
            batch_t = rng.uniform(90, 140) if first else rng.choice(
                [rng.uniform(6.0, 7.5), rng.uniform(0.001, 0.05), rng.uniform(10, 99.999)])
            lines.append(open_clip_line(epoch, (i + 1) * batch * world, total,
                                        rng.uniform(0, 1), batch_t, batch, world,
                                        rng.uniform(0.5, 9.8)))
            if i % 97 == 5:
                lines.append("Batch (t) is the time of one batch")  # no number: not a step
    lines.append("2026-01-01,00:00:00 | INFO | Eval Epoch: 1 ...")
    return "\n".join(lines) + "\n"


def run_recipe(text: str, tmp_path: Path, script: str = RECIPE) -> str:
    path = tmp_path / "stdout.txt"
    path.write_text(text)
    return subprocess.run(["bash", "-c", script, "recipe", str(path)], check=True,
                          capture_output=True, text=True).stdout.strip()


def parsed_total(text: str) -> float | None:
    steps = StepReader(OPEN_CLIP).read(text.splitlines())
    return total_time_secs(s.seconds for s in steps)


def streamed_total(text: str) -> float | None:
    """The parsed steps through Bench.log_step and the stream reader: what a run reports."""
    stream = NullStream()
    steps = StepReader(OPEN_CLIP).read(text.splitlines())
    stream.write("config", spec={"name": "mmoclip", "metric": TOTAL_TIME}, device=0)
    with Bench(name="mmoclip", stream=stream, skip=1, stop=10**6) as bench:
        for step in steps:
            bench.log_step(step.items, step.seconds, per_rank=False, loss=step.loss)
    stream.write("end", status="ok")
    return run_from_records(stream.records).total_time_secs


# -- seed 004's lines ---------------------------------------------------------------------------
def test_seed_lines_parse_into_steps() -> None:
    steps = StepReader(OPEN_CLIP).read(SEED_LINES.splitlines())
    assert [s.seconds for s in steps] == [137.606, 6.655, 6.466]
    assert [s.items for s in steps] == [16384, 16384, 16384]  # 32 GPUs x 512
    assert [s.percent for s in steps] == [1, 1, 2]
    assert [s.loss for s in steps] == [9.7031] * 3
    assert total_time_secs(s.seconds for s in steps) == 6.655 + 6.466
    assert recipe_format(parsed_total(SEED_LINES)) == "13.121"


@needs_tools
def test_seed_lines_give_the_recipes_total(tmp_path: Path) -> None:
    assert run_recipe(SEED_LINES, tmp_path) == f"total_time_secs:{recipe_format(13.121)}"
    exact = float(run_recipe(SEED_LINES, tmp_path, RECIPE_EXACT))
    assert parsed_total(SEED_LINES) == exact
    assert streamed_total(SEED_LINES) == exact


@needs_tools
@pytest.mark.parametrize("seed", [4, 5])
def test_a_long_log_gives_the_recipes_total_to_the_last_bit(tmp_path: Path, seed: int) -> None:
    text = long_log(seed)
    printed = run_recipe(text, tmp_path)
    exact = float(run_recipe(text, tmp_path, RECIPE_EXACT))
    assert len(StepReader(OPEN_CLIP).read(text.splitlines())) == 400
    assert parsed_total(text) == exact  # the same double: a running sum in the same order
    assert streamed_total(text) == exact  # and through the stream (JSON round trip)
    assert printed == f"total_time_secs:{recipe_format(exact)}"


def test_long_log_items_follow_the_sample_counter_across_epochs() -> None:
    steps = StepReader(OPEN_CLIP).read(long_log().splitlines())
    assert {s.items for s in steps} == {512 * 32}
    assert steps[0].percent == 0 and steps[-1].percent == 100


def test_fewer_than_two_steps_have_no_total() -> None:
    assert total_time_secs([]) is None
    assert total_time_secs([5.0]) is None
    assert total_time_secs([5.0, 1.5]) == 1.5


def test_recipe_format_is_awks() -> None:
    assert recipe_format(1253.51) == "1253.51"
    assert recipe_format(12.0) == "12"
    assert recipe_format(1234567.891) == "1.23457e+06"


# -- parsers from a suite -------------------------------------------------------------------------
def test_a_regex_parser_with_items_and_seconds() -> None:
    parser = make_parser({"regex": r"step \d+ took (?P<seconds>[\d.]+)s for (?P<items>\d+)"})
    reader = StepReader(parser)
    assert reader.feed("hello") is None
    step = reader.feed("step 3 took 0.25s for 64 samples")
    assert step is not None and (step.seconds, step.items) == (0.25, 64)
    assert (reader.lines, reader.steps) == (2, 1)


def test_a_rate_only_parser_needs_items() -> None:
    with pytest.raises(LogParseError, match="items of a step are unknown"):
        make_parser({"regex": r"(?P<rate>[\d.]+) img/s"})
    parser = make_parser({"regex": r"(?P<rate>[\d.]+) img/s", "items_per_step": 32})
    step = StepReader(parser).feed("128.0 img/s")
    assert step is not None and (step.items, step.seconds) == (32, 0.25)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("nope", "unknown parser 'nope'"),
        ({"regex": "("}, "bad regex"),
        ({"regex": r"(?P<loss>\d+)"}, "needs a named group"),
        ({"regex": r"(?P<seconds>\d+)", "item": 3}, "unknown keys"),
        ({"regex": r"(?P<seconds>\d+)", "items_per_step": "many"}, "must be a number"),
        (3, "must be a name or a mapping"),
    ],
)
def test_bad_parsers_are_refused(value: object, match: str) -> None:
    with pytest.raises(LogParseError, match=match):
        make_parser(value)


def test_open_clip_is_a_ready_parser() -> None:
    assert make_parser("open_clip") is OPEN_CLIP
    nan = StepReader(OPEN_CLIP).feed(open_clip_line(0, 16, 32, 0.1, 0.5, 16, 1, 1.0).replace(
        "Loss: 1.0000 (1.0000)", "Loss: nan (nan)"))
    assert nan is not None and math.isnan(nan.loss)
