"""External commands as benchmarks (run/external.py, docs/time-to-train.md): the suite format,
the runner on its own, and real runs in child processes (slow)."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.core.errors import SuiteError
from pytest_dlbench.core.protocol import Status
from pytest_dlbench.measure.bench import Bench, NonFiniteLoss
from pytest_dlbench.measure.stream import NullStream
from pytest_dlbench.results.figures import run_from_records
from pytest_dlbench.run.external import ExternalCommandError, command_argv, run_command
from pytest_dlbench.run.harness import classify_exception
from pytest_dlbench.suite import resolve_suite
from pytest_dlbench.suite.definitions import EXTERNAL_RUNNER

#: A stand-in for a training script: prints "step i took Xs for N items loss L" lines.
TRAIN = textwrap.dedent(
    """
    import argparse, os, signal, sys, time

    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="good")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    a = p.parse_args()
    with open("pid", "w") as f:  # in the working directory: the run's work folder
        f.write(str(os.getpid()))
    print("starting", " ".join(sys.argv[1:]), "WORLD_SIZE=" + os.environ.get("WORLD_SIZE", "-"),
          flush=True)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.mode == "silent":
        print("nothing to see", flush=True)
        sys.exit(0)
    for i in range(a.steps):
        if a.mode == "exit3" and i == 3:
            print("Traceback (most recent call last):", flush=True)
            print("RuntimeError: boom at step 3", flush=True)
            sys.exit(3)
        if a.mode == "kill9" and i == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        if a.mode == "hang" and i == 2:
            time.sleep(600)
        loss = "nan" if a.mode == "nan" and i == 2 else "1.5"
        time.sleep(0.01)
        if rank == 0:
            seconds = 0.5 if i == 0 else 0.125 * (1 + i % 2)
            print(f"step {i} took {seconds}s for {a.batch_size * world} items loss {loss}",
                  flush=True)
    print("done", flush=True)
    """
)
REGEX = r"took (?P<seconds>[\d.]+)s for (?P<items>\d+) items loss (?P<loss>\S+)"


def write_train(folder: Path) -> Path:
    path = folder / "train.py"
    path.write_text(TRAIN)
    return path


def run(tmp_path: Path, *argv: str, skip: int = 1, stop: int = 20, **kwargs: Any) -> tuple[
        Any, NullStream]:
    script = write_train(tmp_path)
    stream = NullStream()
    stream.write("config", spec={"name": "ext", "metric": "total_time_secs"}, device=0)
    bench = Bench(name="ext", stream=stream, skip=skip, stop=stop)
    kwargs.setdefault("parser", {"regex": REGEX})
    kwargs.setdefault("out", io.StringIO())
    try:
        result = run_command(bench, ["python", str(script), *argv],
                             workdir=tmp_path / "work", **kwargs)
    finally:
        bench.close()
    return result, stream


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


# -- the suite format ---------------------------------------------------------------------------
def suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_an_external_definition_resolves_to_the_runner(tmp_path: Path) -> None:
    path = suite(tmp_path, """
        _ext:
          metric: total_time_secs
          definition:
            command: [python, "{suite_dir}/train.py", --log-every, 1]
            parser: open_clip
        one:
          inherits: _ext
          argv: {--batch-size: 16, --name: '{run_name}'}
        """)
    (spec,) = resolve_suite(path).specs
    assert spec.definition == EXTERNAL_RUNNER
    assert spec.metric == "total_time_secs"
    assert spec.command == {"command": ["python", f"{tmp_path.resolve()}/train.py",
                                        "--log-every", "1"], "parser": "open_clip"}
    # args: the command, then the rendered argv (launch-time placeholders left for later).
    assert list(spec.args) == ["python", f"{tmp_path.resolve()}/train.py", "--log-every", "1",
                               "--batch-size", "16", "--name", "{run_name}"]
    assert spec.to_dict()["command"]["parser"] == "open_clip"
    assert type(spec).from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_a_command_line_string_and_a_regex_parser(tmp_path: Path) -> None:
    path = suite(tmp_path, r"""
        one:
          definition:
            command: python -m some.module --flag "two words"
            parser: {regex: 'took (?P<seconds>\d+\.\d+)s'}
            prepare: prep.py:setup
            cwd: '{workdir}/sub'
        """)
    (spec,) = resolve_suite(path).specs
    assert spec.args == ("python", "-m", "some.module", "--flag", "two words")
    assert spec.command["prepare"] == f"{tmp_path.resolve()}/prep.py:setup"  # type: ignore
    assert spec.command["cwd"] == "{workdir}/sub"  # type: ignore[index]


@pytest.mark.parametrize(
    ("definition", "match"),
    [
        ("{command: [python, x.py]}", "needs a 'parser'"),
        ("{command: [], parser: open_clip}", "'command' must be a non-empty list"),
        ("{command: [python], parser: nope}", "unknown parser 'nope'"),
        ("{command: [python], parser: {regex: '(?P<x>1)'}}", "named group"),
        ("{command: [python], parser: open_clip, timeout: 3}", "unknown keys"),
    ],
)
def test_bad_external_definitions(tmp_path: Path, definition: str, match: str) -> None:
    path = suite(tmp_path, f"one: {{definition: {definition}}}\n")
    with pytest.raises(SuiteError, match=match):
        resolve_suite(path)


def test_metric_and_plan_nodes_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="'metric' must be one of"):
        resolve_suite(suite(tmp_path, "one: {definition: 'm:f', metric: seconds}\n"))
    with pytest.raises(SuiteError, match="'plan.nodes' needs 'method: njobs'"):
        resolve_suite(suite(tmp_path, "one: {definition: 'm:f', plan: {nodes: 2}}\n"))
    with pytest.raises(SuiteError, match="'plan.nodes' must be a positive integer"):
        resolve_suite(suite(tmp_path, "one: {definition: 'm:f', plan: {method: njobs, "
                                      "nodes: 0}}\n"))


def test_a_matrix_over_nodes_formats_the_plan(tmp_path: Path) -> None:
    path = suite(tmp_path, """
        sweep:
          matrix: {nodes: [1, 2], gpus: [1, 4]}
          job:
            name: 'sw-n{nodes}-g{gpus}'
            definition: m:f
            plan: {method: njobs, nodes: '{nodes}', slots: '{gpus}'}
            argv: {--batch-size: 512}
        """)
    specs = {s.name: s for s in resolve_suite(path).specs}
    assert specs["sw-n2-g4"].plan == {"method": "njobs", "nodes": 2, "slots": 4}
    assert specs["sw-n1-g1"].to_dict()["matrix"] == {"nodes": 1, "gpus": 1}


def test_plan_nodes_runs_where_the_system_has_that_many(tmp_path: Path) -> None:
    from pytest_dlbench.run.launch.torchrun import job_nodes, plan_nodes_reason
    from pytest_dlbench.suite.system import load_system, local_system

    assert plan_nodes_reason(None, local_system()) is None
    assert plan_nodes_reason(1, local_system()) is None
    assert plan_nodes_reason(4, local_system()) == (
        "needs 4 nodes, the system has 1 (run it with a 4-node --bench-system file or "
        "allocation)")
    system = tmp_path / "system.yaml"
    system.write_text("system:\n  launcher: slurm\n  nodes: [{name: a, ip: 10.0.0.1}]\n")
    assert job_nodes(load_system(system), {"SLURM_JOB_NUM_NODES": "4"}) == 4


# -- the runner, without pytest -------------------------------------------------------------------
def test_command_argv_fills_python_and_workdir() -> None:
    assert command_argv(["python", "-m", "x", "--logs", "{workdir}/logs", "{python}", "{n}"],
                        workdir="/w", python="/py") == ["/py", "-m", "x", "--logs", "/w/logs",
                                                        "/py", "{n}"]


def test_steps_are_recorded_from_the_output(tmp_path: Path) -> None:
    out = io.StringIO()
    result, stream = run(tmp_path, "--steps", "6", out=out, reporting=True)
    assert result.returncode == 0 and not result.stopped
    assert (result.steps, result.recorded) == (6, 6)
    assert "starting --steps 6" in out.getvalue() and "done" in out.getvalue()  # copied
    assert Path(tmp_path / "work" / "pid").is_file()  # the work folder is the command's cwd
    stream.write("end", status="ok")
    r = run_from_records(stream.records)
    assert r.ok and r.total_time_secs == 0.25 + 0.125 + 0.25 + 0.125 + 0.25
    assert r.rate == 5 * 16 / r.total_time_secs
    commands = [x for x in stream.records if x["event"] == "command"]
    assert [c["status"] for c in commands] == ["start", "end"]
    assert commands[1]["returncode"] == 0 and commands[1]["steps"] == 6


def test_a_per_gpu_command_is_stopped_once_the_run_has_its_observations(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "--steps", "500", skip=1, stop=3)
    assert result.stopped and result.recorded == 4
    assert not alive(int((tmp_path / "work" / "pid").read_text()))


def test_an_njobs_command_runs_to_its_end(tmp_path: Path) -> None:
    result, stream = run(tmp_path, "--steps", "8", skip=1, stop=3, stop_when_done=False,
                         time_to_train=True)
    assert not result.stopped and (result.steps, result.recorded) == (8, 4)
    warnings = [r["message"] for r in stream.records if r["event"] == "warning"]
    assert warnings == ["time-to-train: only the first 4 steps are recorded (skip + stop); "
                        "total_time_secs covers those"]


def test_a_non_zero_exit_fails_with_its_error_line(tmp_path: Path) -> None:
    with pytest.raises(ExternalCommandError) as info:
        run(tmp_path, "--mode", "exit3")
    assert str(info.value) == "the command exited with status 3: RuntimeError: boom at step 3"
    assert classify_exception(info.value).status is Status.FAIL


def test_no_parsable_line_fails(tmp_path: Path) -> None:
    with pytest.raises(ExternalCommandError, match=r"printed no line the 'regex' parser reads "
                                                   r"\(2 lines of output\)"):
        run(tmp_path, "--mode", "silent")
    # A rank that does not report needs no line.
    result, _ = run(tmp_path, "--mode", "silent", reporting=False)
    assert result.returncode == 0


def test_sigkill_is_reported_as_out_of_memory(tmp_path: Path) -> None:
    with pytest.raises(ExternalCommandError, match="killed by SIGKILL") as info:
        run(tmp_path, "--mode", "kill9")
    assert classify_exception(info.value).status is Status.OOM


def test_a_nan_loss_stops_the_command(tmp_path: Path) -> None:
    with pytest.raises(NonFiniteLoss, match="loss is nan at step 2"):
        run(tmp_path, "--mode", "nan", "--steps", "500")
    assert not alive(int((tmp_path / "work" / "pid").read_text()))


def test_ctrl_c_stops_the_command(tmp_path: Path) -> None:
    class Interrupting(io.StringIO):
        def write(self, text: str) -> int:
            if text.startswith("step 1 "):
                raise KeyboardInterrupt
            return super().write(text)

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "--mode", "hang", out=Interrupting())
    assert time.monotonic() - started < 30
    assert not alive(int((tmp_path / "work" / "pid").read_text()))


def test_a_missing_program_fails_cleanly(tmp_path: Path) -> None:
    bench = Bench(name="x", stream=NullStream())
    with pytest.raises(ExternalCommandError, match="cannot start"):
        run_command(bench, ["/no/such/program"], parser="open_clip", workdir=tmp_path,
                    out=io.StringIO())


# -- real runs: child processes, torchrun ---------------------------------------------------
SUITE = textwrap.dedent(
    r"""
    _ext:
      max_duration: 60
      metric: total_time_secs
      voir: {options: {skip: 1, stop: 20}}
      definition:
        command: [python, "{suite_dir}/train.py"]
        parser: {regex: 'took (?P<seconds>[\d.]+)s for (?P<items>\d+) items loss (?P<loss>\S+)'}
    good: {inherits: _ext, argv: {--mode: good}}
    exits: {inherits: _ext, argv: {--mode: exit3}}
    hang: {inherits: _ext, argv: {--mode: hang}, max_duration: 8}
    silent: {inherits: _ext, argv: {--mode: silent}}
    killed: {inherits: _ext, argv: {--mode: kill9}}
    """
)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_failing_commands_fail_alone_with_one_line_and_their_output(
    pytester: pytest.Pytester,
) -> None:
    write_train(pytester.path)
    pytester.makefile(".yaml", external=SUITE)
    result = pytester.runpytest("--bench-suite=external.yaml", "--bench-base=out", "-rf")
    result.assert_outcomes(passed=1, failed=4)
    # One line each, in the report's list of failed runs (the short summary cuts them).
    result.stdout.fnmatch_lines_random([
        "  failed exits[[]D0]: fail: ExternalCommandError: the command exited with status 3: "
        "RuntimeError: boom at step 3 (it measured * items/s, not scored)",
        "  failed hang[[]D0]: timeout: ran past max_duration (8 s)*",
        "  failed silent[[]D0]: fail: ExternalCommandError: the command printed no line the "
        "'regex' parser reads (2 lines of output)",
        "  failed killed[[]D0]: oom: out of memory: ExternalCommandError: the command was "
        "killed by SIGKILL *",
        "FAILED external.yaml::exits[[]D0] - ExternalCommandError: *",
    ])
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    status = {n: read(run_dir / f"{n}.D0.data")[-1]["status"]
              for n in ("good", "exits", "hang", "silent", "killed")}
    assert status == {"good": "ok", "exits": "fail", "hang": "timeout", "silent": "fail",
                      "killed": "oom"}
    # Their output is kept in the run's log, the command's lines included.
    assert "RuntimeError: boom at step 3" in (run_dir / "exits.D0.log").read_text()
    assert "step 1 took" in (run_dir / "hang.D0.log").read_text()
    assert "nothing to see" in (run_dir / "silent.D0.log").read_text()
    # The hung command died with its benchmark (same process group).
    pid = int((run_dir / "hang.D0.work" / "pid").read_text())
    assert not alive(pid)
    good = [r for r in read(run_dir / "good.D0.data") if r["event"] == "rate"]
    assert len(good) == 8
    assert "total_time_secs" in result.stdout.str()


@pytest.mark.slow
def test_an_njobs_command_runs_under_torchrun_with_the_jobs_numbers(
    pytester: pytest.Pytester,
) -> None:
    write_train(pytester.path)
    pytester.makefile(".yaml", external=SUITE + textwrap.dedent(
        """
        job:
          inherits: _ext
          plan: {method: njobs, n: 1}
          argv: {--mode: good, --batch-size: 4}
        """))
    result = pytester.runpytest("--bench-suite=external.yaml", "--bench-base=out", "-k", "job",
                                "--bench-cpus-per-slot=1", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    records = read(run_dir / "job.D0.data")
    world = records[0]["distributed"]["world_size"]
    assert world == min(2, os.cpu_count() or 1)
    rates = [r for r in records if r["event"] == "rate"]
    # The command's own numbers count the whole job: not multiplied again by the world size.
    assert {r["items"] for r in rates} == {4 * world}
    log = (run_dir / "job.D0.log").read_text()
    assert f"WORLD_SIZE={world}" in log  # the command saw torchrun's environment


def test_external_runner_is_importable_without_torch() -> None:
    import subprocess

    code = "import sys, pytest_dlbench.run.external; assert 'torch' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
