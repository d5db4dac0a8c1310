"""``--bench-against=REV`` for your own tests' benchmarks (the ``bench`` fixture, no suite).

Each test that uses the fixture runs ``--bench-rounds`` rounds of (base, candidate) pairs in ABBA
order, each side in a child ``pytest NODEID`` of its own tree: the base revision's worktree for
the base, this working tree for the candidate. The child's fixture streams to the file the
parent names (``$DLBENCH_STREAM``, repeat ``R<round>``); the parent writes ``against.json`` and
scores the pairs as a suite's ``--bench-against`` run is scored (results/judge/paired.py). The test
body does not run in the parent.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a run is paired: an ordinary test run loads no suite code
    from pytest_dlbench.core.protocol import Outcome
    from pytest_dlbench.plugin.against_setup import AgainstSetup
    from pytest_dlbench.run.forkserver import ForkServer

__all__ = ["FixtureAgainst", "child_stream", "run_test_child"]

#: The longest one side of one round may take (a fixture benchmark has no max_duration).
MAX_SIDE_SECONDS = 1800.0
#: Set in the child ``pytest NODEID`` of a round: its fixture writes ``$DLBENCH_STREAM``.
CHILD_VARIABLE = "DLBENCH_FIXTURE_ROUND"


def child_stream() -> Path | None:
    """The stream a paired run's parent told this child's fixture to write, or None."""
    from pytest_dlbench.core.protocol import Env

    path = os.environ.get(Env.STREAM)
    return Path(path) if path and os.environ.get(CHILD_VARIABLE) else None


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child ``pytest NODEID`` (before its side's ``PYTHONPATH``)."""
    env = {**(os.environ if env is None else env), CHILD_VARIABLE: "1"}
    env.pop("PYTEST_ADDOPTS", None)  # this run's --bench-* options are the parent's
    return env


def run_test_child(nodeid: str, *, root: Path, stream: Path, args: Sequence[str] = (),
                   env: dict[str, str] | None = None, server: ForkServer | None = None,
                   ) -> Outcome:
    """``pytest NODEID`` in a fresh interpreter whose ``bench`` fixture writes ``stream``: one
    side of a paired round, or a confirmation run (plugin/confirm.py). ``args``: more pytest
    options; the child's log is beside its stream. ``server``: forked from this round's warm
    server instead (:meth:`FixtureAgainst.round_server`), when the environment allows."""
    from pytest_dlbench import layout
    from pytest_dlbench.run.child import run_child

    return run_child(
        [sys.executable, "-m", "pytest", nodeid, "-p", "no:cacheprovider", "-q",
         "-p", "no:xdist", "--rootdir", str(root), *args],
        stream=stream, log=layout.log_path(stream), timeout=MAX_SIDE_SECONDS, cwd=root,
        env=child_env(env), server=server)


class FixtureAgainst:
    """The base side of a fixture run and its rounds (made by :class:`.FixtureRuns`)."""

    def __init__(self, setup: AgainstSetup, rounds: int) -> None:
        self.config = setup.config
        self.setup = setup
        self.side = setup.side
        self.rounds = rounds
        #: Why the rounds' children start fresh (--bench-launcher=fresh, or a round's warm
        #: server refused to serve: no later round tries again); None: warm.
        self.fresh_because: str | None = (
            None if self.config.getoption("bench_launcher", "warm") == "warm"
            else "--bench-launcher=fresh")

    @classmethod
    def create(cls, config: pytest.Config, rev: str) -> FixtureAgainst | None:
        """Check ``rev`` out (plugin/against_setup.py: removed when the session ends, on Ctrl-C
        and on SIGTERM); None under ``--collect-only``; a usage error when it cannot."""
        from pytest_dlbench.plugin.against_setup import AgainstSetup
        from pytest_dlbench.results.judge import ROUNDS

        setup = AgainstSetup.check_out(config, rev)
        if setup is None:
            return None
        return cls(setup, config.getoption("bench_rounds") or ROUNDS)

    def write_against(self, run_dir: Path) -> None:
        self.setup.write_against(run_dir, rounds=self.rounds,
                                 fixed_rounds=bool(self.config.getoption("bench_fixed_rounds")))

    def stopped(self, run_dir: Path, name: str, before: int) -> bool:
        """Whether the verdict of ``name`` is clear after its first ``before`` rounds (the
        sequential design, results/judge/paired.py), so that the rest need not run."""
        from pytest_dlbench.results.judge import PAIRED_RATE, PAIRED_TEST, stop_before

        option = self.config.getoption
        if option("bench_fixed_rounds"):
            return False
        return stop_before(run_dir, name, devices=[0], before=before, rounds=self.rounds,
                           tolerance=option("bench_tolerance"), alpha=option("bench_alpha"),
                           test=option("bench_paired_test") or PAIRED_TEST,
                           rate=option("bench_paired_rate") or PAIRED_RATE) is not None

    def run_item(self, item: pytest.Item, run_dir: Path) -> None:
        """Every round of ``item``, both sides; ``pytest.fail`` naming the first side and
        round that did not end ``ok``."""
        from pytest_dlbench import layout
        from pytest_dlbench.core.protocol import Status
        from pytest_dlbench.run.against import round_order, source_paths, with_python_path

        rootdir = Path(self.config.rootpath)
        base_root = self.side.map_path(rootdir)
        if not base_root.is_dir():  # the rootdir's folder is new since the base revision
            base_root = self.side.path
        roots = {layout.CANDIDATE: (rootdir, source_paths(self.side.repo, rootdir)),
                 layout.BASE: (base_root, source_paths(self.side.path, base_root))}
        from pytest_dlbench.plugin.fixture_names import row_name

        name = row_name(item)  # each child reads it back from the stream's name it is given
        # The candidate's marker (or the option) decides both sides' steps: a pair compares
        # the same work, whatever the base revision's marker said.
        from pytest_dlbench.plugin.fixture_steps import item_steps, steps_env

        steps = steps_env(item_steps(item, self.config))
        failures = []
        # Every child of a round forks from one server started for that round: the two sides of
        # a pair share one interpreter state (str hash seed, memory layout), drawn again each
        # round as fresh children would draw it. One server per side would give all of a side's
        # runs one draw, a difference no round pairs away (benchmarks/README.md, gate_power).
        base_env = child_env({**os.environ, **steps})
        for round_index in range(self.rounds):
            if self.stopped(run_dir, name, round_index):
                # Its verdict is clear: dlbench report judges the same rounds.
                self._say(f"dlbench: {name}: the verdict is clear after {round_index} rounds, "
                          f"the other {self.rounds - round_index} are not run")
                break
            started = time.monotonic()
            sides = []
            server = self.round_server(item, rootdir, base_env)
            try:
                for side_name in round_order(round_index):
                    root, paths = roots[side_name]
                    folder = layout.side_dir(run_dir, side_name)
                    stream = layout.stream_path(folder, name, 0, round_index)
                    outcome = run_test_child(item.nodeid, root=root, stream=stream,
                                             env=with_python_path(dict(base_env), paths),
                                             server=server)
                    sides.append((side_name, stream))
                    if outcome.status is not Status.OK:
                        failures.append(f"{side_name} side, round {round_index}: "
                                        f"{outcome.status}: {outcome.reason} "
                                        f"(log: {layout.log_path(stream)})")
            finally:
                if server is not None:
                    if server.broken and self.fresh_because is None:
                        self.fresh_because = server.broken
                    server.close()
            self._say_round(layout.item_name(name, 0, round_index), round_index, sides,
                            time.monotonic() - started)
        if failures:
            pytest.fail("; ".join(failures), pytrace=False)

    def round_server(self, item: pytest.Item, rootdir: Path, env: dict[str, str],
                     ) -> ForkServer | None:
        """A warm server for one round's two children (run/forkserver.py): it imports torch,
        pytest and the plugins once, and the round's children fork from it; it must import
        nothing from either side's tree (their ``src/`` go on each child's ``sys.path`` after
        the fork). None to start them fresh."""
        if self.fresh_because is not None:
            return None
        from pytest_dlbench.run.forkserver import ForkServer, ForkServerError
        from pytest_dlbench.run.preloads import preload_for

        server = ForkServer(cwd=rootdir, env=env, child_paths=True,
                            guarded=[self.side.repo, self.side.path],
                            preload=preload_for([str(item.path)], roots=[rootdir]))
        try:
            server.start()
        except (OSError, ForkServerError) as exc:
            self.fresh_because = f"the fork server did not start: {exc}"
            return None
        return server

    def _progress(self) -> Any:
        from pytest_dlbench.plugin.progress import ProgressReporter

        return self.config.pluginmanager.get_plugin(ProgressReporter.PLUGIN_NAME)

    def _say(self, line: str) -> None:
        progress = self._progress()
        if progress is not None:  # none with -q
            progress.say(line)

    def _say_round(self, label: str, round_index: int, sides: list[tuple[str, Path]],
                   seconds: float) -> None:
        """The round's line, each side's rate (a stream that cannot be read: its one line)."""
        progress = self._progress()
        if progress is None:
            return
        from pytest_dlbench.plugin.progress import round_line

        progress.say(round_line(label, round_index, self.rounds, sides, seconds))

    @staticmethod
    def uses_bench(item: Any) -> bool:
        return "bench" in getattr(item, "fixturenames", ())
