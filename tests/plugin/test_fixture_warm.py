"""The warm launcher for a ``bench`` fixture test's paired rounds: one fork server per round,
shared by its two sides (plugin/fixture_against.py ``round_server``), each child with its own
side's ``src/`` on its ``sys.path``; a server that imported anything from a side's tree
refuses, and the children start fresh (run/forkserver.py)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
import types
from pathlib import Path

import pytest
from _git import git
from _procs import child_env

from pytest_dlbench.run import forkserver
from pytest_dlbench.run.forkserver import ForkServer, ForkServerWarning, fork_blockers


def test_a_childs_own_python_path_does_not_block_a_server_that_takes_it() -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/x"}
    child = {**base, "PYTHONPATH": "/tree/src:/x"}
    assert fork_blockers(base, child) == ["PYTHONPATH"]
    assert fork_blockers(base, child, child_paths=True) == []
    assert fork_blockers(base, {**child, "TORCH_LOGS": "+dynamo"}, child_paths=True) == [
        "TORCH_LOGS"]


def test_guarded_imports_are_a_trees_modules_outside_the_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "side_module_xyz.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tree))
    importlib.import_module("side_module_xyz")
    # torch makes ``torch.ops`` in memory with a bare ``__file__``: it says nothing of where.
    bare = types.ModuleType("bare_file_module_xyz")
    bare.__file__ = "_ops.py"
    monkeypatch.setitem(sys.modules, "bare_file_module_xyz", bare)
    monkeypatch.chdir(tree)
    try:
        assert forkserver._guarded_imports([str(tree.resolve())]) == ["side_module_xyz"]
        # A virtual environment inside a repository is every side's: never guarded.
        assert forkserver._guarded_imports([os.path.realpath(sys.prefix)]) == []
        assert forkserver._guarded_imports([]) == []
    finally:
        sys.modules.pop("side_module_xyz", None)


PROBE = textwrap.dedent(
    """
    import json, os, sys

    def test_probe():
        import sidelib
        print("PROBE " + json.dumps({"ppid": os.getppid(), "sidelib": sidelib.__file__}))
    """
)


@pytest.mark.slow  # real processes: a server and its children
def test_a_child_finds_its_sides_source_and_a_server_that_imported_it_refuses(
        tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "sidelib.py").write_text("WHO = 'tree'\n")
    (tree / "test_probe.py").write_text(PROBE)
    env = child_env()
    server = ForkServer(cwd=tree, env=env, preload=["pytest"], child_paths=True,
                        guarded=[tree])
    server.start()
    try:
        log = tmp_path / "child.log"
        child = {**env, "PYTHONPATH": os.pathsep.join([str(tree / "src"), env["PYTHONPATH"]])}
        proc = server.spawn(["-p", "no:cacheprovider", "-s", "test_probe.py"], env=child,
                            cwd=tree, log=log, cpus=None)
        assert proc.wait(timeout=60) == 0, log.read_text()
        seen = json.loads(next(li for li in log.read_text().splitlines()
                               if "PROBE {" in li).split("PROBE ", 1)[1])
        assert server.ready is not None and seen["ppid"] == server.ready["pid"]  # forked
        assert seen["sidelib"] == str(tree / "src" / "sidelib.py")
    finally:
        server.close()
    # A server whose preload comes from a side's tree: that module would be one side's in
    # both sides' children.
    tainted = ForkServer(cwd=tree, env=child, preload=["pytest", "sidelib"], child_paths=True,
                         guarded=[tree])
    tainted.start()
    try:
        with pytest.warns(ForkServerWarning, match="fresh interpreters"):
            assert not tainted.wait_ready()
        assert "imported sidelib from a tree a side runs" in (tainted.broken or "")
    finally:
        tainted.close()


# A src layout: the step's delay is the library's, and the base revision's is half.
LIB = "DELAY = {delay}\n"
TEST = textwrap.dedent(
    """
    import time

    import pytest
    import sidelib
    {import_torch}

    @pytest.mark.bench_steps(warmup=1, steps=6)
    def test_fast(bench):
        for _ in bench.iterate(range(100), batch_size=4):
            time.sleep(sidelib.DELAY)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["warm", "fresh"])
def test_each_side_runs_its_own_source_warm_or_fresh(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     launcher: str) -> None:
    # This tree's src/ on the path, as a development install puts it: each side's child must
    # still import its own (run/against.py puts the side's src/ first).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(pytester.path / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    (pytester.path / "src").mkdir()
    (pytester.path / "src" / "sidelib.py").write_text(LIB.format(delay=0.004))
    # Warm: the round's server imports torch, whose in-memory modules are no side's. Fresh:
    # no server; torch would only cost each of the four children its import.
    pytester.makepyfile(test_dl=TEST.format(import_torch="import torch" if launcher == "warm"
                                            else ""))
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    (pytester.path / "src" / "sidelib.py").write_text(LIB.format(delay=0.008))  # slower
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out", "-q",
                                           "--bench-against=main", "--bench-rounds=2",
                                           f"--bench-launcher={launcher}")
    assert result.ret in (6, 9), result.stdout.str()  # slower: regressed, or too few rounds
    assert "warm launcher off" not in result.stdout.str()
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    rates = {}
    for side, folder in (("candidate", run_dir), ("base", run_dir / "base")):
        for path in sorted(folder.glob("test_fast.D0.R*.data")):
            records = [json.loads(li) for li in path.read_text().splitlines()]
            assert records[0]["launcher"] == launcher, path
            assert records[-1]["status"] == "ok", path
            steady = [r for r in records if r["event"] == "rate" and not r["warmup"]]
            rates.setdefault(side, []).extend(r["value"] for r in steady)
    # Each side imported its own library: the base's steps are about twice as fast.
    ratio = (sum(rates["candidate"]) / len(rates["candidate"])) / (
        sum(rates["base"]) / len(rates["base"]))
    assert 0.35 < ratio < 0.75, ratio


def test_the_launcher_option_is_used_by_a_paired_fixture_run() -> None:
    from pytest_dlbench.plugin.fixture_runs import unused_options_line

    assert unused_options_line(["--bench-launcher"], benchmarks_ran=True, paired=True) is None
    line = unused_options_line(["--bench-launcher"], benchmarks_ran=True)
    assert line is not None and "--bench-launcher not used" in line
