"""milabench's benchmark folders through voir (issue 23; run/voir.py, run/voir_data.py,
suite/definitions.py, docs/suites.md): the suite forms, voir's data lines, the runner on a real
voir folder (tests/data/voirbench: main.py, voirfile.py, prepare.py) and the milabench figure."""

from __future__ import annotations

import io
import json
import math
import shutil
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.measure.bench import Bench, NonFiniteLoss
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.run.external import (
    ExternalCommandError,
    check_observations,
    command_argv,
    environment_voir,
    run_command,
)
from pytest_dlbench.run.voir import milabench_env, prepare_folder, voir_config
from pytest_dlbench.run.voir_data import STOP, DataChannel, decode_smuggled
from pytest_dlbench.suite import resolve_suite
from pytest_dlbench.suite.definitions import VOIR_RUNNER
from pytest_dlbench.suite.spec import porting_error

FOLDER = TESTS_DIR / "data" / "voirbench"
voir = pytest.importorskip("voir")  # the dev extra installs it


def smuggle(text: str) -> str:
    """What voir writes for a data line when DATA_FD is 1 or 2 (voir/smuggle.py)."""
    from voir.smuggle import encode_as_escape_sequence

    return encode_as_escape_sequence(text)


def new_bench(skip: int = 1, stop: int = 4) -> tuple[Bench, NullStream]:
    stream = NullStream()
    return Bench(name="v", stream=stream, skip=skip, stop=stop), stream


def kinds(stream: NullStream, kind: str) -> list[dict[str, Any]]:
    return [r for r in stream.records if str(r["event"]) == kind]


# -- the suite: a folder is a voir definition ------------------------------------------------------
def checkout(tmp_path: Path) -> Path:
    """A milabench checkout: config/ (milabench's files) and benchmarks/torchvision (ours)."""
    shutil.copytree(TESTS_DIR / "data" / "milabench_config", tmp_path / "config")
    shutil.copytree(FOLDER, tmp_path / "benchmarks" / "torchvision")
    return tmp_path


def test_a_milabench_folder_definition_runs_through_voir(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    spec = resolve_suite(root / "config" / "standard.yaml")["resnet50"]
    folder = str((root / "benchmarks" / "torchvision").resolve())
    assert spec.definition == VOIR_RUNNER
    assert spec.command == {"voir": folder, "script": "main.py", "parser": "voir", "cwd": folder,
                            "command": ["voir", "main.py"]}
    assert spec.args[:2] == ("voir", "main.py") and "--model" in spec.args
    assert porting_error(spec) is None
    assert type(spec).from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_the_explicit_voir_form(tmp_path: Path) -> None:
    shutil.copytree(FOLDER, tmp_path / "bench")
    (tmp_path / "s.yaml").write_text(textwrap.dedent("""
        one:
          definition: {voir: bench, script: prepare.py}
          argv: {--batch-size: 8}
        """))
    (spec,) = resolve_suite(tmp_path / "s.yaml").specs
    assert spec.definition == VOIR_RUNNER
    assert spec.args == ("voir", "prepare.py", "--batch-size", "8")
    assert spec.command is not None and spec.command["cwd"] == str((tmp_path / "bench").resolve())


@pytest.mark.parametrize(
    ("definition", "match"),
    [
        ("{voir: nowhere}", "the voir folder .*nowhere is not there"),
        ("{voir: bench, script: other.py}", "has no other.py"),
        ("{voir: bench, script: sub/main.py}", "'script' must be a file name"),
        ("{voir: bench, timeout: 3}", r"unknown keys \['timeout'\]"),
        ("{voir: 3}", "'voir' must be a folder"),
    ],
)
def test_bad_voir_definitions(tmp_path: Path, definition: str, match: str) -> None:
    shutil.copytree(FOLDER, tmp_path / "bench")
    (tmp_path / "s.yaml").write_text(f"one: {{definition: {definition}}}\n")
    with pytest.raises(SuiteError, match=match):
        resolve_suite(tmp_path / "s.yaml")


def test_a_folder_without_voirfile_says_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "main.py").write_text("")
    (tmp_path / "s.yaml").write_text("a: {definition: ./bench}\nb: {definition: ../gone}\n")
    suite = resolve_suite(tmp_path / "s.yaml")
    assert porting_error(suite["a"]) == (
        f"a: definition './bench' names a milabench benchmark folder, but "
        f"{(tmp_path / 'bench').resolve()} has no voirfile.py: a folder with main.py and "
        "voirfile.py runs through voir; else set 'definition' to a Python function "
        "(module:function, file.py:function) or an external command ({command: [...], parser: "
        "...}), see 'Porting a milabench suite' in docs/suites.md")
    assert "is not there (is the suite in a milabench checkout?)" in str(porting_error(suite["b"]))


def test_parser_voir_on_a_command_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("one: {definition: {command: [voir, main.py], "
                                     "parser: voir}}\n")
    (spec,) = resolve_suite(tmp_path / "s.yaml").specs
    assert spec.command is not None and spec.command["parser"] == "voir"


def test_voir_is_the_environments() -> None:
    import sys

    found = environment_voir(sys.executable)
    assert found == [str(Path(sys.executable).parent / "voir")] or found[1:] == ["-m", "voir"]
    assert command_argv(["voir", "main.py"], workdir="/w")[-1] == "main.py"
    assert command_argv(["voir", "x"], workdir="/w", python="/no/bin/python") == [
        "/no/bin/python", "-m", "voir", "x"]


def test_voir_config_is_the_entrys_mapping_with_the_runs_skip_and_stop() -> None:
    assert voir_config({"options": {"stop": 60, "gpu_poll": 0.1, "interval": "1s"}},
                       skip=2, stop=8) == {
        "options": {"stop": 8, "gpu_poll": 0.1, "interval": "1s", "skip": 2}}
    assert voir_config(None, skip=5, stop=60) == {"options": {"skip": 5, "stop": 60}}


def test_milabench_env_maps_its_folders_onto_the_run(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = milabench_env(name="resnet50", folder=FOLDER, data_dir=tmp_path / "base" / "data",
                        run_dir=tmp_path / "base" / "runs" / "r1", config="/s/standard.yaml")
    base = tmp_path / "base"
    assert env["MILABENCH_BASE"] == str(base)
    assert env["MILABENCH_DIR_DATA"] == str(base / "data")
    assert env["MILABENCH_DIR_CODE"] == str(FOLDER)
    assert env["MILABENCH_DIR_RUNS"] == str(base / "runs")
    assert env["MILABENCH_DIR_EXTRA"] == str(base / "extra" / "resnet50")
    assert env["MILABENCH_DIR_CACHE"] == str(base / "cache")
    assert env["MILABENCH_CONFIG"] == "/s/standard.yaml"
    assert int(env["OMP_NUM_THREADS"]) >= 1
    assert (base / "extra" / "resnet50").is_dir() and (base / "cache").is_dir()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the launcher's, per device slot: kept
    assert "OMP_NUM_THREADS" not in milabench_env(
        name="x", folder=FOLDER, data_dir=tmp_path / "d", run_dir=tmp_path / "r",
        config="c")


# -- voir's data lines ---------------------------------------------------------------------------
def test_data_lines_become_records() -> None:
    bench, stream = new_bench(skip=1, stop=4)
    keep = io.StringIO()
    channel = DataChannel(bench, keep=keep)
    lines = [
        {"$event": "phase", "$data": {"name": "init"}},
        {"rate": 100.0, "units": "items/s", "task": "train", "elapsed": 0.5},
        {"rate": 80.0, "units": "items/s", "task": "train"},  # no elapsed: the rate as given
        {"rate": 1.0, "units": "items/s", "task": "valid"},  # another task: not an observation
        {"loss": 2.5, "task": "train"},
        {"progress": [3, 12], "task": "early_stop"},
        {"gpudata": {"0": {"load": 0.5, "memory": [1, 2]}}, "task": "main"},
        {"$event": "error", "$data": {"type": "RuntimeError", "message": "boom\nat step 3"}},
    ]
    assert [channel.feed(json.dumps(line)) for line in lines] == [None] * len(lines)
    assert channel.feed("not json") is None and channel.feed("[1, 2]") is None
    assert channel.feed(json.dumps({"$event": "stop"})) == STOP
    rates = kinds(stream, "rate")
    assert [(r["value"], r.get("items"), r.get("seconds")) for r in rates] == [
        (100.0, 50.0, 0.5), (80.0, None, None)]
    assert [r["warmup"] for r in rates] == [True, False]
    assert kinds(stream, "loss") == [{"event": "loss", "value": 2.5, "step": 1}]
    assert [r["done_percent"] for r in kinds(stream, "progress")] == [25.0]
    telemetry = [r for r in kinds(stream, "command") if r["status"] == "telemetry"]
    assert telemetry[0]["gpudata"] == {"0": {"load": 0.5, "memory": [1, 2]}}
    assert channel.error == "RuntimeError: boom at step 3"
    assert (channel.lines, channel.rates, channel.stopped) == (11, 2, True)
    assert len(keep.getvalue().splitlines()) == 11  # every data line kept as it came


def test_a_nan_loss_fails_as_nan() -> None:
    bench, stream = new_bench()
    channel = DataChannel(bench)
    with pytest.raises(NonFiniteLoss, match="loss is nan"):
        channel.feed('{"loss": NaN, "task": "train"}')
    assert math.isnan(kinds(stream, "loss")[0]["value"])


def test_the_suites_units_win() -> None:
    bench, stream = new_bench()
    DataChannel(bench, units="img/s").feed('{"rate": 5, "units": "items/s", "task": "train"}')
    assert kinds(stream, "rate")[0]["units"] == "img/s"
    bench, stream = new_bench()
    DataChannel(bench).feed('{"rate": 5, "units": "tokens/s", "task": "train"}')
    assert kinds(stream, "rate")[0]["units"] == "tokens/s"


def test_smuggled_lines_are_taken_out_of_the_output() -> None:
    data = json.dumps({"rate": 3.0, "task": "train"}) + "\n"
    plain, found = decode_smuggled(smuggle(data) + "step 1 loss 2\n")
    assert plain == "step 1 loss 2\n" and found == [data]
    bench, _ = new_bench()
    line, lines = DataChannel(bench).unsmuggle(smuggle(data) + smuggle(data) + "x\n")
    assert line == "x\n" and lines == [data.strip(), data.strip()]
    # An escape sequence that is not voir's stays in the output.
    assert decode_smuggled("\x1b[31mred\x1b[0m\n") == ("\x1b[31mred\x1b[0m\n", [])


# -- too few observations -----------------------------------------------------------------------
class Spec:
    def __init__(self, metric: str | None = None) -> None:
        self.metric = metric


def test_too_few_observations_warn_then_fail() -> None:
    from pytest_dlbench.run.external import CommandResult

    bench, stream = new_bench(skip=2, stop=8)
    for _ in range(9):
        bench.log_rate(1.0)
    check_observations(bench, Spec(), CommandResult(argv=[]))
    (warning,) = kinds(stream, "warning")
    assert warning == {"event": "warning", "source": "observations", "message": (
        "too few observations: the command ended after 9 of the 10 wanted (skip 2 + stop 8), "
        "7 steady")}
    bench, stream = new_bench(skip=2, stop=8)
    for _ in range(6):
        bench.log_rate(1.0)
    with pytest.raises(ExternalCommandError, match=(
            r"too few observations: voir said stop after 6 of the 10 wanted \(skip 2 \+ stop 8\), "
            r"4 steady; a figure needs 5 steady at least")):
        check_observations(bench, Spec(), CommandResult(argv=[], stopped=True))
    # A time-to-train command's stop only caps its steps; a full run says nothing.
    check_observations(bench, Spec("total_time_secs"), CommandResult(argv=[]))
    bench, stream = new_bench(skip=0, stop=3)
    for _ in range(3):
        bench.log_rate(1.0)
    check_observations(bench, Spec(), CommandResult(argv=[]))
    assert kinds(stream, "warning") == []


# -- the runner on the real voir folder ---------------------------------------------------------
def voir_run(tmp_path: Path, *argv: str, skip: int = 2, stop: int = 5,
             env: dict[str, str] | None = None) -> tuple[Any, NullStream, DataChannel, str]:
    """prepare.py, then ``voir --config FILE main.py ARGV`` in the folder, as run/voir.main."""
    bench, stream = new_bench(skip=skip, stop=stop)
    data = tmp_path / "base" / "data"
    menv = milabench_env(name="tv", folder=FOLDER, data_dir=data,
                         run_dir=tmp_path / "base" / "runs" / "r", config="s.yaml")
    out = io.StringIO()
    prepare_folder(bench, FOLDER, list(argv), data_dir=data, env=menv, out=out)
    config = tmp_path / "voirconf.json"
    config.write_text(json.dumps(voir_config({}, skip=skip, stop=stop)))
    channel = DataChannel(bench, keep=io.StringIO())
    defaults = {"BENCHMATE_EAGER_SYNC": "1", "BENCHMATE_LOG_MODE": "all"}
    try:
        result = run_command(bench, ["voir", "--config", str(config), "main.py", *argv],
                             parser=None, workdir=tmp_path / "work", cwd=FOLDER,
                             env={**menv, **defaults, **(env or {})}, out=out, channel=channel)
    finally:
        bench.close()
    return result, stream, channel, out.getvalue()


def test_a_voir_folder_runs_with_its_data_channel(tmp_path: Path) -> None:
    started = time.time()
    result, stream, channel, out = voir_run(tmp_path, "--epochs", "50", "--step-time", "0.02")
    assert result.stopped  # by the run's skip + stop, or voir's stop, whichever came first
    rates = kinds(stream, "rate")
    assert len(rates) == 7 and all(r["seconds"] > 0.015 for r in rates)  # elapsed: the step's
    # Observations arrive as the steps happen (eager sync), not in a burst at the end.
    times = [r["time"] for r in rates]
    assert times[-1] - times[0] > 0.1 and min(times) > started
    assert kinds(stream, "loss") and kinds(stream, "progress")
    assert "prepared 640 samples" in out and "step 3 loss" in out  # the output is kept
    assert "\x1b[" not in out  # nothing smuggled into it: the data went to the pipe
    (prepared,) = [r for r in kinds(stream, "command") if r["status"] == "prepare"]
    assert prepared["returncode"] == 0
    assert kinds(stream, "command")[-1]["steps"] == channel.rates >= 7


def test_without_eager_sync_the_rates_come_in_a_burst(tmp_path: Path) -> None:
    _, stream, _, _ = voir_run(tmp_path, "--epochs", "1", "--step-time", "0.02",
                               skip=2, stop=50, env={"BENCHMATE_EAGER_SYNC": "0"})
    times = [r["time"] for r in kinds(stream, "rate")]
    # 40 steps of 20 ms or more: at least 0.8 s apart from first to last as they happen; all
    # at the epoch's end here.
    assert len(times) == 40 and times[-1] - times[0] < 0.4


def test_voir_reports_the_programs_error(tmp_path: Path) -> None:
    with pytest.raises(ExternalCommandError, match=(
            r"the command exited with status 1: RuntimeError: tiny model diverged at step 4")):
        voir_run(tmp_path, "--mode", "raise")


def test_a_nan_loss_from_voir_stops_the_command(tmp_path: Path) -> None:
    with pytest.raises(NonFiniteLoss, match="loss is nan"):
        voir_run(tmp_path, "--mode", "nan")


def test_no_rate_on_the_channel_fails(tmp_path: Path) -> None:
    with pytest.raises(ExternalCommandError, match=(
            r"voir's data channel gave no train rate \(\d+ data lines, \d+ lines of output\): "
            r"does the voirfile log 'rate'\?")):
        voir_run(tmp_path, "--mode", "no-rates", "--epochs", "1")


def test_prepare_runs_once_per_data_folder_and_its_failure_is_one_line(tmp_path: Path) -> None:
    bench, stream = new_bench()
    data = tmp_path / "data"
    env = milabench_env(name="tv", folder=FOLDER, data_dir=data, run_dir=tmp_path / "r",
                        config="s")
    out = io.StringIO()
    assert prepare_folder(bench, FOLDER, ["--x", "1"], data_dir=data, env=env, out=out)
    assert not prepare_folder(bench, FOLDER, ["--x", "1"], data_dir=data, env=env, out=out)
    assert (tmp_path / "extra" / "tv" / "prepared").read_text() == "1"
    assert "already ran for" in out.getvalue()
    with pytest.raises(ExternalCommandError, match=(
            "^prepare.py exited with status 2: RuntimeError: cannot write the data set$")):
        prepare_folder(bench, FOLDER, ["--prepare-fail"], data_dir=data, env=env, out=out)
    assert "RuntimeError: cannot write the data set" in out.getvalue()  # in the log
    assert not prepare_folder(bench, tmp_path, [], data_dir=data, env=env, out=out)  # none


# -- dlbench resolve ------------------------------------------------------------------------------
def test_resolve_shows_the_folder_and_the_launch_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_dlbench.cli import main

    root = checkout(tmp_path)
    suite = str(root / "config" / "standard.yaml")
    assert main(["resolve", suite, "--bench-select=resnet50", "--launch",
                 f"--bench-base={tmp_path / 'base'}"]) == 0
    out = capsys.readouterr().out
    folder = (root / "benchmarks" / "torchvision").resolve()
    data = (tmp_path / "base" / "data").resolve()
    assert f"  cwd         {folder}\n  data        {data}\n" in out
    assert f"--data {data}/FakeImageNet --model resnet50" in out  # {milabench_data} at launch
    assert main(["resolve", suite, "--bench-select=resnet50", "--launch", "--json",
                 f"--bench-base={tmp_path / 'base'}"]) == 0
    shown = json.loads(capsys.readouterr().out)["resnet50"]
    assert shown["launch_data"] == str(data) and shown["command"]["cwd"] == str(folder)
