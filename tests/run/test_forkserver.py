"""The warm launcher: a fork server that imports once and forks one child per benchmark, each
child what a fresh ``python -m pytest`` child would be (its own process group, pinned, its
environment, working directory and log), supervised by ``run_child`` like a fresh one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from _procs import child_env, start_pytest

from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.run.child import run_child
from pytest_dlbench.run.forkserver import (
    ForkServer,
    ForkServerWarning,
    cuda_driver_initialized,
    cuda_driver_loaded,
    fork_blockers,
)
from pytest_dlbench.run.preloads import preload_for

# A "pytest" the server runs: a conftest-free directory whose test reports what the child saw.
# Its switches are DLBENCH_ variables: a variable the server does not know to be read at run time
# would make run_child start the child fresh (see the last run_child test).
PROBE_TEST = """
import json, os, sys

def test_probe():
    out = {
        "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
        "env": os.environ.get("DLBENCH_PROBE"), "cpus": sorted(os.sched_getaffinity(0)),
        "torch_preloaded": "torch" in sys.modules,
    }
    if "torch" in sys.modules:
        out["threads"] = sys.modules["torch"].get_num_threads()
    print("PROBE " + json.dumps(out))
    mode = os.environ.get("DLBENCH_PROBE_MODE")
    if mode == "sleep":
        import time
        time.sleep(60)
    if mode == "kill":
        os.kill(os.getpid(), 9)
    if mode == "exit3":
        os._exit(3)
"""


@pytest.fixture
def server(tmp_path: Path):
    server = ForkServer(cwd=tmp_path, env=child_env(), preload=["torch", "pytest"])
    server.start()
    yield server
    server.close()


def _probe_dir(tmp_path: Path) -> Path:
    where = tmp_path / "probe"
    where.mkdir()
    (where / "test_probe.py").write_text(textwrap.dedent(PROBE_TEST))
    return where


def _probe(log: Path) -> dict:
    line = next(x for x in log.read_text().splitlines() if "PROBE {" in x)
    return json.loads(line.split("PROBE ", 1)[1])


@pytest.mark.slow  # real processes: a server importing torch
def test_a_forked_child_is_what_a_fresh_one_would_be(server: ForkServer, tmp_path: Path):
    where = _probe_dir(tmp_path)
    log = tmp_path / "child.log"
    cpus = sorted(os.sched_getaffinity(0))[:1]
    proc = server.spawn(["-p", "no:cacheprovider", "-s", "test_probe.py"],
                        env={**child_env(), "DLBENCH_PROBE": "yes", "OMP_NUM_THREADS": "1"},
                        cwd=where, log=log, cpus=cpus)
    assert proc.wait(timeout=60) == 0, log.read_text()
    seen = _probe(log)
    assert seen["pid"] == proc.pid
    assert seen["pgid"] == proc.pid  # a process group of its own: killed with its workers
    assert seen["ppid"] == server.ready["pid"]
    assert seen["cwd"] == str(where) and seen["env"] == "yes" and seen["cpus"] == cpus
    assert seen["torch_preloaded"] and seen["threads"] == 1
    assert "1 passed" in log.read_text()


@pytest.mark.slow  # real processes: a server importing torch
def test_exit_statuses_and_signals_read_as_popen_would(server: ForkServer, tmp_path: Path):
    where = _probe_dir(tmp_path)
    for mode, expected in (("exit3", 3), ("kill", -signal.SIGKILL)):
        proc = server.spawn(["-p", "no:cacheprovider", "-s", "test_probe.py"],
                            env={**child_env(), "DLBENCH_PROBE_MODE": mode}, cwd=where,
                            log=tmp_path / f"{mode}.log", cpus=None)
        assert proc.wait(timeout=60) == expected


@pytest.mark.slow  # real processes: a server importing torch
def test_a_wait_that_runs_out_raises_and_the_group_can_be_killed(server: ForkServer,
                                                                 tmp_path: Path):
    where = _probe_dir(tmp_path)
    proc = server.spawn(["-p", "no:cacheprovider", "-s", "test_probe.py"],
                        env={**child_env(), "DLBENCH_PROBE_MODE": "sleep"}, cwd=where,
                        log=tmp_path / "sleep.log", cpus=None)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    deadline = time.monotonic() + 30
    while "PROBE " not in (tmp_path / "sleep.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert proc.poll() == -signal.SIGTERM


@pytest.mark.slow  # real processes: a server importing torch
def test_run_child_forks_from_the_server_and_keeps_its_contract(server: ForkServer,
                                                                tmp_path: Path):
    """A benchmark that never ends: killed at its timeout, the parent writes the end."""
    where = _probe_dir(tmp_path)
    stream = tmp_path / "b.data"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_probe.py"]
    started = time.monotonic()
    outcome = run_child(cmd, stream=stream, log=tmp_path / "b.log", timeout=3, cwd=where,
                        env={**child_env(), "DLBENCH_PROBE_MODE": "sleep"}, server=server)
    assert outcome.status == "timeout" and time.monotonic() - started < 30
    assert _probe(tmp_path / "b.log")["ppid"] == server.ready["pid"]  # it was forked
    assert [r["event"] for r in read_stream(stream)] == ["end"]


@pytest.mark.slow  # real processes: a server importing torch
def test_an_environment_read_at_import_time_starts_the_child_fresh(server: ForkServer,
                                                                   tmp_path: Path):
    where = _probe_dir(tmp_path)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_probe.py"]
    env = {**child_env(), "TORCH_SHOW_CPP_STACKTRACES": "1"}  # read when torch loads
    outcome = run_child(cmd, stream=tmp_path / "c.data", log=tmp_path / "c.log", timeout=60,
                        cwd=where, env=env, server=server)
    assert outcome.status == "crash"  # no harness here: exited without an end
    seen = _probe(tmp_path / "c.log")
    assert server.wait_ready()
    assert seen["ppid"] != server.ready["pid"] and not seen["torch_preloaded"]


def test_fork_blockers():
    base = {"PATH": "/bin", "HOME": "/root"}
    assert fork_blockers(base, {**base, "OMP_NUM_THREADS": "2", "DLBENCH_STREAM": "x",
                                "CUDA_VISIBLE_DEVICES": "1", "NCCL_DEBUG": "INFO"}) == []
    assert fork_blockers(base, {**base, "TORCH_LOGS": "+dynamo"}) == ["TORCH_LOGS"]
    assert fork_blockers(base, {"PATH": "/usr/bin"}) == ["HOME", "PATH"]


def test_preload_names_the_workload_libraries_of_this_package_only():
    names = preload_for(["pytest_dlbench.workloads.vision:train", "defs.py:bench",
                         "mypkg.bench:main", None])
    assert "torch" in names and "pytest_dlbench.workloads.vision" in names
    assert not any(n.startswith(("mypkg", "defs")) for n in names)


def test_preload_leaves_torch_out_when_no_benchmark_imports_it(tmp_path: Path):
    (tmp_path / "sleepy.py").write_text("import time\ndef main(bench):\n    time.sleep(0)\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(
        "def main(bench):\n    from timm import create_model\n")
    (tmp_path / "broken.py").write_text("def main(:\n")
    plain = preload_for([f"{tmp_path}/sleepy.py:main", "pytest_dlbench.run.external:main"],
                        roots=[tmp_path])
    assert "torch" not in plain and "pytest" in plain and "numpy" in plain
    # An import inside the function counts (the child runs it), so does a module not found
    # without importing it, or one that cannot be parsed: the server imports torch.
    for definition in ("pkg.model:main", "elsewhere.bench:main", f"{tmp_path}/broken.py:main",
                       "pytest_dlbench.workloads.vision:train"):
        assert "torch" in preload_for([f"{tmp_path}/sleepy.py:main", definition],
                                      roots=[tmp_path]), definition


@pytest.mark.slow  # real processes: a server importing torch
def test_a_server_that_dies_takes_its_child_and_breaks(server: ForkServer, tmp_path: Path):
    where = _probe_dir(tmp_path)
    proc = server.spawn(["-p", "no:cacheprovider", "-s", "test_probe.py"],
                        env={**child_env(), "DLBENCH_PROBE_MODE": "sleep"}, cwd=where,
                        log=tmp_path / "d.log", cpus=None)
    assert server.proc is not None
    server.proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert server.broken == "the fork server died"
    deadline = time.monotonic() + 10
    while psutil.pid_exists(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # PR_SET_PDEATHSIG: the child went with its server
    assert not psutil.pid_exists(proc.pid) or (
        psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE)


SUITE = """
b: {definition: defs.py:probe, voir: {options: {skip: 1, stop: 3}}}
"""
DEFS = """
import json, os, sys
PRELOADED = "torch" in sys.modules

def probe(bench):
    with open("probe.json", "w") as out:
        json.dump({"preloaded": PRELOADED, "ppid": os.getppid()}, out)
    for _ in bench.iterate(range(10), batch_size=1):
        pass
"""
# A definition that may need torch (the server reads the source): it preloads torch.
TORCH_HINT = """
def _never_called():
    import torch  # noqa: F401
"""
DEFS = DEFS.replace("\ndef probe", TORCH_HINT + "\ndef probe")


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["warm", "fresh"])
def test_the_launcher_option_picks_how_children_start(tmp_path: Path, launcher: str):
    (tmp_path / "s.yaml").write_text(SUITE)
    (tmp_path / "defs.py").write_text(textwrap.dedent(DEFS))
    proc = start_pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out",
                        f"--bench-launcher={launcher}")
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    seen = json.loads((tmp_path / "probe.json").read_text())
    assert seen["preloaded"] is (launcher == "warm")
    assert (seen["ppid"] == proc.pid) is (launcher == "fresh")
    # The stream says how and when its child started (benchmarks/startup.py reads it).
    (stream,) = (tmp_path / "out" / "runs").glob("*/b.D0.data")
    records = read_stream(stream)
    config = next(r for r in records if r["event"] == "config")
    meta = next(r for r in records if r["event"] == "meta")
    assert config["launcher"] == launcher
    assert config["launched"] <= config["started"] <= meta["time"]


@pytest.mark.slow
def test_the_server_imports_for_the_selected_benchmarks_only(tmp_path: Path):
    """``-k b`` leaves out a benchmark that needs torch: the server does not import it."""
    (tmp_path / "s.yaml").write_text(SUITE + "torchy: {definition: torchy.py:main}\n")
    torch_free = DEFS.replace(TORCH_HINT, "")
    assert "torch" not in torch_free.replace('"torch" in sys.modules', "")
    (tmp_path / "defs.py").write_text(textwrap.dedent(torch_free))
    (tmp_path / "torchy.py").write_text("def main(bench):\n    import torch  # noqa: F401\n")
    proc = start_pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out", "-k", "b")
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    seen = json.loads((tmp_path / "probe.json").read_text())
    assert seen["preloaded"] is False and seen["ppid"] != proc.pid  # forked, torch left out


# -- the CUDA guard: a spy on what the preloads load -------------------------------------------
# On a GPU machine, torch.cuda.is_available() or device_count() in a preload calls cuInit, which
# loads the driver (libcuda.so.1) and leaves torch.cuda.is_initialized() False: every forked
# child then fails at its first CUDA call. Here a preload "touches the driver" by loading a copy
# of a small shared library named libcuda.so.1, which is what the server's mappings then show.
HAS_MAPS = Path("/proc/self/maps").is_file()
DRIVER_TOUCHER = """
import ctypes
HANDLE = ctypes.CDLL({path!r})  # as cuInit's dlopen of the driver would map it
"""


def _fake_driver(where: Path) -> Path:
    import _ctypes  # a shared library that is surely here

    driver = where / "libcuda.so.1"
    driver.write_bytes(Path(_ctypes.__file__).read_bytes())
    return driver


def _spy_server(tmp_path: Path, preload: str) -> tuple[ForkServer, dict[str, str]]:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "touches_cuda.py").write_text(DRIVER_TOUCHER.format(path=str(_fake_driver(mods))))
    (mods / "clean_preload.py").write_text("import ctypes  # loads nothing named libcuda\n")
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(mods), env["PYTHONPATH"]])
    server = ForkServer(cwd=tmp_path, env=env, preload=["pytest", preload])
    server.start()
    return server, env


def _server_env(server: ForkServer) -> dict[str, str]:
    assert server.proc is not None
    return psutil.Process(server.proc.pid).environ()


@pytest.mark.skipif(not HAS_MAPS, reason="reads /proc/self/maps (Linux)")
@pytest.mark.slow  # real processes: a server and a fresh child
def test_a_preload_that_loads_the_cuda_driver_makes_the_server_refuse(tmp_path: Path):
    server, env = _spy_server(tmp_path, "touches_cuda")
    try:
        assert _server_env(server)["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
        with pytest.warns(ForkServerWarning, match="fresh interpreters") as notes:
            assert not server.wait_ready()
        (note,) = notes
        assert "'touches_cuda' loaded the CUDA driver" in str(note.message)
        assert "touches_cuda" in (server.broken or "")
        # The benchmark still runs, in a fresh interpreter (started by this process).
        where = _probe_dir(tmp_path)
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_probe.py"]
        run_child(cmd, stream=tmp_path / "b.data", log=tmp_path / "b.log", timeout=60,
                  cwd=where, env=dict(env), server=server)
        assert _probe(tmp_path / "b.log")["ppid"] == os.getpid()
    finally:
        server.close()


@pytest.mark.skipif(not HAS_MAPS, reason="reads /proc/self/maps (Linux)")
@pytest.mark.slow  # real processes: a server and a forked child
def test_a_clean_preload_is_served(tmp_path: Path):
    server, env = _spy_server(tmp_path, "clean_preload")
    try:
        assert _server_env(server)["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
        assert server.wait_ready(), server.broken
        assert server.ready is not None and server.ready["cuda_driver"] is False
        where = _probe_dir(tmp_path)
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_probe.py"]
        run_child(cmd, stream=tmp_path / "c.data", log=tmp_path / "c.log", timeout=60,
                  cwd=where, env=dict(env), server=server)
        assert _probe(tmp_path / "c.log")["ppid"] == server.ready["pid"]  # forked
    finally:
        server.close()


def test_the_driver_is_found_in_the_mappings_by_its_file_name(tmp_path: Path):
    maps = tmp_path / "maps"
    line = "7f00-7f01 r-xp 00000000 08:01 1234                       {}\n"
    maps.write_text(line.format("/usr/lib/x86_64-linux-gnu/libcudart.so.13") + "7f02-7f03 rw-p "
                    "00000000 00:00 0 \n" + line.format("/opt/my dir/libnvidia-ml.so.1"))
    assert cuda_driver_loaded(maps) is False  # the runtime, NVML: not the driver
    with maps.open("a") as out:
        out.write(line.format("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"))
    assert cuda_driver_loaded(maps) is True
    assert cuda_driver_loaded(tmp_path / "absent") is None  # not Linux: torch's flag decides


class _FakeDriver:
    """The driver's ``cuDeviceGetCount`` answering ``status``."""

    def __init__(self, status: int) -> None:
        self.status = status

    def cuDeviceGetCount(self, count: object) -> int:  # noqa: N802 - the driver's name
        return self.status


def test_a_mapped_driver_is_asked_whether_it_was_initialised(tmp_path: Path):
    """torch 2.11 + CUDA 13 maps libcuda at import without cuInit (an H200, 2026-11-27): the
    warm launcher may fork then; only an initialised driver, or one that cannot say, refuses."""
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1234  /usr/lib/libcudart.so.13\n")
    assert cuda_driver_initialized(maps, driver=_FakeDriver(0)) is False  # not even mapped
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1234  /usr/lib/libcuda.so.580.159.04\n")
    assert cuda_driver_initialized(maps, driver=_FakeDriver(3)) is False  # NOT_INITIALIZED
    assert cuda_driver_initialized(maps, driver=_FakeDriver(0)) is True
    assert cuda_driver_initialized(maps, driver=_FakeDriver(100)) is True  # no device: unsure
    assert cuda_driver_initialized(maps, driver=object()) is True  # cannot be asked
    assert cuda_driver_initialized(tmp_path / "absent") is None
