"""Real processes for the fault tests: start pytest, find what a run left in the process table."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil


def child_env(**extra: str) -> dict[str, str]:
    """This environment, with the pytest_dlbench under test first on a subprocess's path."""
    import pytest_dlbench

    source = str(Path(pytest_dlbench.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "400", **extra}


def start_pytest(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def processes_of(marker: str | Path) -> list[psutil.Process]:
    """Live processes (zombies aside) whose command line or environment mentions ``marker``
    (a run's folder: the children get it in their arguments and in DLBENCH_RUN_DIR)."""
    marker = str(marker)
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.pid == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            text = " ".join(proc.info["cmdline"] or [])
            if marker not in text:
                text = " ".join(f"{k}={v}" for k, v in proc.environ().items())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if marker in text:
            found.append(proc)
    return found


def kill_all(procs: list[psutil.Process]) -> None:
    """Clean up after a failed assertion (only processes the test's run started)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def records(path: Path) -> list[dict]:
    """A stream's records; a torn last line (a process killed mid-write) is left out."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                break
    return out


def ends(path: Path) -> list[dict]:
    return [r for r in records(path) if r.get("event") == "end"]
