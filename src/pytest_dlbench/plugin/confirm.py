"""Running the confirmation of ``--bench-confirm`` at the end of a suite run (issue 26 item 2).

The first pass against a saved baseline is scored; each benchmark it suspects (regressed or
improved) runs again here, in the controller, once the suite is done: one benchmark at a time,
nothing else of the suite beside it, up to ``--bench-confirm`` rounds, each a fresh child
started by the session's :class:`~.launcher.Launcher` as a side of its own (no warm server:
a confirmation must not share the first pass's interpreter state). A round runs the
benchmark on all its device slots at once, as the first pass did (replicas on several slots
slow each other: one replica alone would not measure the same thing); under xdist the
workers are idle by then, and the controller's launcher starts the children itself.

Each round's runs are an ordinary run folder, ``<run>/confirm/<k>/`` (streams, logs, specs,
manifest). ``confirm/confirmed.json`` is written when every round ran: only then does
:func:`~pytest_dlbench.results.evaluation.evaluate` count them (results/confirm.py decides),
so that Ctrl-C during a confirmation leaves the first pass's verdicts, here and in
``dlbench report``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_dlbench.numbers import printable
from pytest_dlbench.plugin.launcher import Launched, Launcher, Side
from pytest_dlbench.plugin.session import BenchSession
from pytest_dlbench.results import confirm as confirming
from pytest_dlbench.run import layout

if TYPE_CHECKING:
    from pytest_dlbench.results.compare import BenchComparison
    from pytest_dlbench.results.evaluation import Evaluation
    from pytest_dlbench.suite import BenchSpec

__all__ = ["confirm_suspects"]


def confirm_suspects(run: object, evaluation: Evaluation, *, limit: int,
                     say: Callable[[str], None]) -> Evaluation | None:
    """Run the suspected benchmarks of ``evaluation`` again, up to ``limit`` rounds each; the
    evaluation with their confirmation, or None when nothing was to be (or could be) confirmed.
    ``say`` shows one line per round. Ctrl-C propagates (the caller keeps the first pass)."""
    comparison = evaluation.comparison
    if (limit <= 0 or comparison is None or evaluation.paired
            or evaluation.confirmation is not None or not isinstance(run, BenchSession)):
        return None  # a bench-fixture run (not a suite) has no launcher to run it again
    names = confirming.suspects(comparison)
    if not names or run.launcher is None:
        return None
    if run.options.isolation == "inline":
        say("dlbench: not confirmed (--bench-isolation=inline runs no children): "
            + printable(", ".join(names)))
        return None
    specs = {spec.name: (spec, suite.path) for suite in run.suites for spec in suite.specs}
    for name in names:
        bench = comparison.get(name)
        if name in specs and bench is not None:
            spec, suite_path = specs[name]
            _confirm_one(run, run.launcher, spec, suite_path, bench, limit=limit,
                         tolerance=evaluation.options.tolerance, say=say)
    done = confirming.confirm_dir(evaluation.run_dir) / confirming.DONE_FILE
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps({"version": 1, "limit": limit, "benchmarks": list(names)}) + "\n")
    from pytest_dlbench.results.evaluation import evaluate

    return evaluate(evaluation.run_dir, evaluation.options)


def _confirm_one(run: BenchSession, launcher: Launcher, spec: BenchSpec, suite_path: Path,
                 first: BenchComparison, *, limit: int, tolerance: float,
                 say: Callable[[str], None]) -> None:
    """Up to ``limit`` rounds of one benchmark; stops at a round that does not repeat the
    first pass's verdict (the rule needs every confirmation run to repeat it)."""
    from pytest_dlbench.results.scoring import load_run

    config = run.config
    # The child selects its item by name: with --bench-repeat the items are name[Dk-R0...].
    repeat = None if run.options.repeat == 1 else 0
    ratio = f"{first.ratio:.3f}" if first.ratio is not None else "?"
    for k in range(1, limit + 1):
        folder = confirming.round_dir(run.run_dir(), k)
        folder.mkdir(parents=True, exist_ok=True)
        layout.write_manifest(folder, run.run_name, [spec], facts={"confirm": k})
        side = Side(f"confirm{k}", spec, suite_path, folder, Path(config.rootpath),
                    config.inipath, ())
        launched = _launch_round(launcher, spec, run.device_slots(spec), repeat, side)
        results = [load_run(item.stream) for item in launched]
        ok = [r for r in results if r.ok and r.rate is not None]
        ratios = ", ".join(f"{r.rate / first.baseline:.3f}" for r in ok
                           if r.rate is not None and first.baseline > 0) or "failed"
        say(f"dlbench: confirming {printable(spec.name)} (first pass {first.verdict}, ratio "
            f"{ratio}): run {k} of {limit}: ratio {ratios}")
        if ok and not all(confirming.repeats(first.verdict, r.rate, first.baseline, tolerance)
                          for r in ok):
            return  # not repeated: the verdict cannot hold, the other rounds would not count


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
