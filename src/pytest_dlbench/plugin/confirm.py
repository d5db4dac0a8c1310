"""Running the confirmation of ``--bench-confirm`` at the end of a run (docs/reports.md,
"Confirmation"): a suite run's, or the ``bench`` fixture's run of your own tests.

The first pass against a saved baseline is scored; each benchmark it suspects (regressed or
improved, or a slowdown beyond the tolerance the noise left inconclusive) runs again here, in
the controller, once the suite is done: one benchmark at a time, nothing else of the suite
beside it, up to ``--bench-confirm`` rounds, each a fresh child
started by the session's :class:`~.launcher.Launcher` as a side of its own (no warm server:
a confirmation must not share the first pass's interpreter state). A round runs the
benchmark on all its device slots at once, as the first pass did (replicas on several slots
slow each other: one replica alone would not measure the same thing); under xdist the
workers are idle by then, and the controller's launcher starts the children itself. A test
that uses the ``bench`` fixture runs again as a fresh ``pytest NODEID`` (the test item alone,
with this run's ``--bench-base``, ini file and ``-p`` plugins), as a side of a paired fixture
run does (plugin/fixture_against.py); the rule that keeps or withdraws the verdict is the same.

Each round's runs are an ordinary run folder, ``<run>/confirm/<k>/`` (streams, logs, specs,
manifest). ``confirm/confirmed.json`` is written when every round ran: only then does
:func:`~pytest_dlbench.results.evaluation.evaluate` count them (results/judge/confirm.py decides),
so that Ctrl-C during a confirmation leaves the first pass's verdicts, here and in
``dlbench report``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_dlbench import layout
from pytest_dlbench.core.numbers import printable
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import read_stream
from pytest_dlbench.options import results_base
from pytest_dlbench.plugin.fixture_against import run_test_child
from pytest_dlbench.plugin.launcher import Launched, Launcher, Side, plugin_args
from pytest_dlbench.plugin.session import BenchSession
from pytest_dlbench.results import judge
from pytest_dlbench.results.evaluation import evaluate
from pytest_dlbench.results.figures import load_run
from pytest_dlbench.results.judge import Rule, repeats

if TYPE_CHECKING:
    import pytest

    from pytest_dlbench.results.evaluation import Evaluation
    from pytest_dlbench.results.judge import BenchComparison
    from pytest_dlbench.results.model import RunResult
    from pytest_dlbench.suite import BenchSpec

__all__ = ["confirm_suspects"]


def confirm_suspects(run: object, evaluation: Evaluation, *, limit: int,
                     say: Callable[[str], None]) -> Evaluation | None:
    """Run the suspected benchmarks of ``evaluation`` again, up to ``limit`` rounds each; the
    evaluation with their confirmation, or None when nothing was to be (or could be) confirmed.
    ``run``: a suite run's session, or the ``bench`` fixture's runs (each suspected test
    again in a fresh ``pytest NODEID``). ``say`` shows one line per round. Ctrl-C propagates
    (the caller keeps the first pass)."""
    comparison = evaluation.comparison
    if (limit <= 0 or comparison is None or evaluation.paired
            or evaluation.confirmation is not None):
        return None
    names = judge.suspected(comparison)
    if not names:
        return None
    # A suite run's session, else the bench fixture's runs (plugin/fixture_runs.py, which
    # imports the reporter that imports this module: named by what it has, its config).
    if isinstance(run, BenchSession):
        rounds = _suite_rounds(run, tuple(names), say)
    else:
        config = getattr(run, "config", None)
        rounds = (None if config is None
                  else _fixture_rounds(config, evaluation.run_dir, tuple(names)))
    if rounds is None:
        return None
    for name in names:
        bench = comparison.get(name)
        if name in rounds and bench is not None:
            _confirm_one(name, rounds[name], bench, names[name], limit=limit,
                         tolerance=evaluation.options.tolerance, say=say)
    done = layout.confirm_done(evaluation.run_dir)
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps({"version": 1, "limit": limit, "benchmarks": list(names)}) + "\n")
    return evaluate(evaluation.run_dir, evaluation.options)


#: One confirmation round of one benchmark: round k (from 1) -> its runs.
RunRound = Callable[[int], "list[RunResult]"]


def _confirm_one(name: str, run_round: RunRound, first: BenchComparison, suspected: str, *,
                 limit: int, tolerance: float, say: Callable[[str], None]) -> None:
    """Up to ``limit`` rounds of one benchmark; stops at a round that does not repeat the
    change the first pass suspected (the rule needs every confirmation run to repeat it)."""
    ratio = f"{first.ratio:.3f}" if first.ratio is not None else "?"
    for k in range(1, limit + 1):
        ratios = [r.rate / first.baseline if first.baseline > 0 else None
                  for r in run_round(k) if r.ok and r.rate is not None]
        shown = ", ".join(f"{x:.3f}" for x in ratios if x is not None) or "failed"
        say(f"dlbench: confirming {printable(name)} (first pass {first.verdict}, ratio "
            f"{ratio}): run {k} of {limit}: ratio {shown}")
        if ratios and not all(repeats(suspected, x, Rule(tolerance)) for x in ratios):
            return  # not repeated: the verdict cannot hold, the other rounds would not count


def _suite_rounds(run: BenchSession, names: Sequence[str], say: Callable[[str], None]
                  ) -> dict[str, RunRound] | None:
    """A suite benchmark's round: a fresh child per device slot, from the session's launcher."""
    launcher = run.launcher
    if launcher is None:
        return None
    if run.options.isolation == "inline":
        say("dlbench: not confirmed (--bench-isolation=inline runs no children): "
            + printable(", ".join(names)))
        return None
    specs = {spec.name: (spec, suite.path) for suite in run.suites for spec in suite.specs}
    return {name: _suite_round(run, launcher, *specs[name]) for name in names if name in specs}


def _suite_round(run: BenchSession, launcher: Launcher, spec: BenchSpec, suite_path: Path
                 ) -> RunRound:
    config = run.config
    # The child selects its item by name: with --bench-repeat the items are name[Dk-R0...].
    repeat = None if run.options.repeat == 1 else 0

    def run_round(k: int) -> list[RunResult]:
        folder = layout.confirm_round_dir(run.run_dir(), k)
        folder.mkdir(parents=True, exist_ok=True)
        layout.write_manifest(folder, run.run_name, [spec], facts={"confirm": k})
        side = Side(f"confirm{k}", spec, suite_path, folder, Path(config.rootpath),
                    config.inipath, ())
        launched = _launch_round(launcher, spec, run.device_slots(spec), repeat, side)
        return [load_run(item.stream) for item in launched]

    return run_round


def _fixture_rounds(config: pytest.Config, run_dir: Path, names: Sequence[str]
                    ) -> dict[str, RunRound]:
    """A ``bench`` fixture test's round: the test item again, alone, in a fresh ``pytest
    NODEID`` (the node id its first run recorded), streaming into ``confirm/<k>/``."""
    args = [f"--bench-base={results_base(config)}",
            *([f"--config-file={config.inipath}"] if config.inipath is not None else []),
            *plugin_args(config.invocation_params.args)]
    rounds: dict[str, RunRound] = {}
    for name in names:
        stream = layout.stream_path(run_dir, name, 0)
        record = RunRecords.of(read_stream(stream)).config if stream.is_file() else None
        spec = (record or {}).get("spec") or {}
        nodeid = spec.get("nodeid")
        if isinstance(nodeid, str):
            # The steps the first run took (its marker or --bench-fixture-steps): the rerun
            # measures the same work without being given the option again.
            skip, stop = spec.get("skip"), spec.get("stop")
            steps = (skip, stop) if isinstance(skip, int) and isinstance(stop, int) else None
            rounds[name] = _fixture_round(name, nodeid, Path(config.rootpath), run_dir, args,
                                          steps)
    return rounds


def _fixture_round(name: str, nodeid: str, root: Path, run_dir: Path, args: Sequence[str],
                   steps: tuple[int, int] | None = None) -> RunRound:
    from pytest_dlbench.plugin.fixture_steps import steps_env

    env = {**os.environ, **steps_env(steps)} if steps is not None else None

    def run_round(k: int) -> list[RunResult]:
        stream = layout.stream_path(layout.confirm_round_dir(run_dir, k), name, 0)
        # Its end is in the stream.
        run_test_child(nodeid, root=root, stream=stream, args=args, env=env)
        return [load_run(stream)]

    return run_round


def _launch_round(launcher: Launcher, spec: BenchSpec, devices: list[int], repeat: int | None,
                  side: Side) -> list[Launched]:
    """One child per device slot, all at once (they meet at the start barrier, when the run
    has one), as the first pass ran the benchmark's replicas."""
    # Launcher._run is the one path that starts an item's child (spec, command, environment,
    # supervision); a Side gives it the confirmation's folder and a fresh interpreter.
    if len(devices) == 1:
        return [launcher._run(spec, devices[0], repeat, side=side)]
    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        return list(pool.map(lambda d: launcher._run(spec, d, repeat, side=side), devices))
