"""A milabench benchmark folder run through voir, unmodified (docs/suites.md, "milabench's
folders through voir").

A suite entry whose ``definition`` is a folder holding ``main.py`` and ``voirfile.py`` (what
milabench's entries say: ``definition: ../benchmarks/torchvision``), or the explicit
``definition: {voir: path/to/folder, script: main.py}``, resolves to :func:`main`, a benchmark
function like any other (the same child process, supervision and isolation as an external
command, run/external.py). It runs, as milabench does:

1. the folder's ``prepare.py`` with the entry's arguments, once per data folder (a marker in
   ``<data>/.dlbench-prepared/``; a lock makes the replicas of a run wait for the one that
   prepares), its output in the run's log; a failure is the benchmark's one-line failure;
2. ``voir [--config FILE] main.py ARGS`` in the folder (so its voirfile is found), with the
   ``voir`` of the benchmark's environment (the one beside this interpreter, else
   ``python -m voir``). ``FILE`` holds the entry's ``voir:`` mapping as JSON, its ``skip`` and
   ``stop`` the run's. The environment: ``DATA_FD`` (a pipe read apart from the output,
   run/voir_data.py), ``BENCHMATE_EAGER_SYNC=1`` and ``BENCHMATE_LOG_MODE=all`` (benchmate
   pushes each step as it happens, with its ``elapsed`` seconds), and milabench's
   ``MILABENCH_*`` folders mapped onto the run's own (:func:`milabench_env`).

Pure Python, no torch; voir is the command's, never imported here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pytest_dlbench.measure.stream import Event
from pytest_dlbench.run.external import (
    BENCHMATE_ENV,
    LINE_CAP,
    ExternalCommandError,
    check_observations,
    command_process,
    holder_lines,
    kill_pipe_holders,
    read_lines,
    reason_line,
    run_command,
)
from pytest_dlbench.run.voir_data import DataChannel

__all__ = ["PREPARED", "main", "milabench_env", "prepare_folder", "voir_config"]

#: The folder of the data folder that remembers which benchmarks are prepared.
PREPARED = ".dlbench-prepared"


def milabench_env(*, name: str, folder: Path, data_dir: Path, run_dir: Path,
                  config: str) -> dict[str, str]:
    """milabench's variables on this run's folders: ``MILABENCH_BASE`` (the base, where
    ``data/`` and ``runs/`` are), ``MILABENCH_DIR_DATA`` (the data folder, ``{data}``),
    ``MILABENCH_DIR_CODE`` (the benchmark's folder), ``MILABENCH_DIR_RUNS`` (``<base>/runs``),
    ``MILABENCH_DIR_EXTRA`` (``<base>/extra/<bench>``), ``MILABENCH_DIR_CACHE``
    (``<base>/cache``), ``MILABENCH_CONFIG`` (the suite file) and, where the launcher did not
    set it per device slot, ``OMP_NUM_THREADS``."""
    base = data_dir.parent
    extra, cache = base / "extra" / name, base / "cache"
    for folder_made in (data_dir, extra, cache):
        folder_made.mkdir(parents=True, exist_ok=True)
    env = {
        "MILABENCH_BASE": str(base),
        "MILABENCH_DIR_DATA": str(data_dir),
        "MILABENCH_DIR_CODE": str(folder),
        "MILABENCH_DIR_RUNS": str(run_dir.parent),
        "MILABENCH_DIR_EXTRA": str(extra),
        "MILABENCH_DIR_CACHE": str(cache),
        "MILABENCH_CONFIG": config,
    }
    if not os.environ.get("OMP_NUM_THREADS"):
        env["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0))))
    return env


def voir_config(voir: Any, *, skip: int, stop: int) -> dict[str, Any]:
    """The ``--config`` file's content: the entry's ``voir:`` mapping, its ``options.skip`` and
    ``options.stop`` the run's own (a ``--bench-override`` or the defaults included)."""
    config = dict(voir) if isinstance(voir, Mapping) else {}
    options = config.get("options")
    config["options"] = {**(options if isinstance(options, Mapping) else {}),
                         "skip": skip, "stop": stop}
    return config


def _copy_output(proc: subprocess.Popen[bytes], out: IO[str]) -> list[str]:
    """Copy the output to ``out`` as the command's is (run/external.py): a line at most
    ``LINE_CAP`` bytes, the rest said and dropped; read until ``DRAIN_S`` after it exits."""
    tail: list[str] = []
    assert proc.stdout is not None
    command = command_process(proc.pid)
    streams = {proc.stdout.fileno(): ("out", LINE_CAP)}
    held_open: set[int] = set()
    for _, raw, dropped in read_lines(streams, exited=lambda: proc.poll() is not None,
                                      held_open=held_open):
        line = raw.decode("utf-8", errors="replace")
        out.write(line if line.endswith("\n") else line + "\n")
        if dropped:
            size = len(raw.rstrip(b"\n")) + dropped
            out.write(f"pytest-dlbench: the line above was cut: {size} bytes without a newline, "
                      f"its first {LINE_CAP} kept\n")
        out.flush()
        tail = [*tail[-29:], line.rstrip("\n")]
    if held_open:  # what it left running with its output open (killed), or another's (named)
        for note in holder_lines(kill_pipe_holders(sorted(held_open), command)):
            out.write(note + "\n")
        out.flush()
    return tail


def prepare_folder(bench: Any, folder: Path, argv: Sequence[str], *, data_dir: Path,
                   env: Mapping[str, str], out: IO[str] | None = None) -> bool:
    """Run ``folder/prepare.py ARGV`` once per data folder (module docstring); True when it ran
    now, False when there is none or it had run. Raises :class:`ExternalCommandError`."""
    script = folder / "prepare.py"
    if not script.is_file():
        return False
    out = sys.stdout if out is None else out
    key = hashlib.sha1("\0".join([str(folder), *argv]).encode()).hexdigest()[:16]
    marks = data_dir / PREPARED
    marks.mkdir(parents=True, exist_ok=True)
    done = marks / f"{folder.name}-{key}.done"
    with open(marks / f"{folder.name}-{key}.lock", "w") as lock:
        with contextlib.suppress(ImportError, OSError):
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)  # a replica waits for the one that prepares
        if done.exists():
            out.write(f"pytest-dlbench: {script} already ran for {data_dir} ({done.name})\n")
            return False
        args = [sys.executable, str(script), *argv]
        out.write(f"pytest-dlbench: preparing: {' '.join(args)}\n")
        out.flush()
        started = time.time()
        try:
            proc = subprocess.Popen(args, cwd=folder, env={**os.environ, **env},
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ExternalCommandError(f"cannot start {script}: {exc}") from exc
        try:
            tail = _copy_output(proc, out)
            code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        bench.stream.write(Event.COMMAND, status="prepare", argv=args, returncode=code,
                           seconds=round(time.time() - started, 3), time=time.time())
        if code != 0:
            said = reason_line(tail)
            raise ExternalCommandError(
                f"prepare.py exited with status {code}{': ' + said if said else ''}"
            )
        done.write_text(json.dumps({"argv": list(argv), "time": time.time()}) + "\n")
    return True


def main(bench: Any, request: Any) -> None:
    """The benchmark function of a voir definition (module docstring). ``request`` is pytest's:
    its node is the benchmark item, holding the resolved spec and the run."""
    from pytest_dlbench.layout import work_dir
    from pytest_dlbench.run.launch.rank import RankInfo

    node = request.node
    spec = node.spec
    command = spec.command or {}
    if not command.get("voir"):
        raise ExternalCommandError(f"{spec.name}: not a voir definition (no 'voir' folder)")
    folder = Path(command["voir"])
    if spec.units:
        bench.set_units(spec.units)
    words = len(command.get("command") or ())
    args = list(bench.args)
    script_argv = args[words:]  # what follows "voir main.py": the entry's argv, filled
    workdir = work_dir(node.run.path)
    workdir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(bench.data_dir).resolve()
    env = milabench_env(name=spec.name, folder=folder, data_dir=data_dir,
                        run_dir=Path(node.run.path).resolve().parent, config=spec.origin)
    # The entry's env wins over ours, as in milabench.
    env = {k: v for k, v in {**env, **BENCHMATE_ENV}.items() if k not in spec.env}
    rank = RankInfo.from_env()
    # Every replica and rank asks; the lock and the marker make it run once per data folder.
    prepare_folder(bench, folder, script_argv, data_dir=data_dir, env=env)
    config_file = workdir / "voirconf.json"
    config_file.write_text(json.dumps(voir_config(spec.config.get("voir"), skip=spec.skip,
                                                  stop=spec.stop), indent=2) + "\n")
    argv = [args[0], "--config", str(config_file), *args[1:]]
    with open(workdir / "voir.data.jsonl", "w", encoding="utf-8") as keep:
        channel = DataChannel(bench, keep=keep, units=spec.units)
        result = run_command(
            bench, argv, parser=None, workdir=workdir, cwd=folder,
            env=env, reporting=rank.is_main,
            # An njobs job runs to its end (its ranks stop together); per_gpu is stopped once
            # the window is measured, or when voir says stop.
            stop_when_done=not spec.is_njobs, channel=channel,
        )
    if rank.is_main:
        check_observations(bench, spec, result)

