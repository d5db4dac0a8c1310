"""``dlbench bisect GOOD BAD``: the first commit between two where a benchmark's rate changed,
each step a paired run against GOOD (docs/history.md). The search itself is run/bisect.py's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_dlbench.cli.common import add_gate_options
from pytest_dlbench.options import parse_fixture_steps, parse_rounds
from pytest_dlbench.results import gate
from pytest_dlbench.run.bisect import MAX_ROUNDS

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    bisect = commands.add_parser(
        "bisect", help="the first commit between GOOD and BAD where a benchmark's rate "
                       "changed beyond the tolerance, each step a paired run against GOOD",
        description="a suite's benchmark (--bench-suite=SUITE -k BENCH) or a test of your own "
                    "that uses the bench fixture (TEST: a node id, tests/test_train.py::"
                    "test_step; or --test FILE -k EXPR)",
        epilog="exit status: 0 ok (found, or BAD is not different), 2 interrupted, 4 bad "
               "input",
    )
    bisect.add_argument("good", metavar="GOOD", help="a revision with the old rate")
    bisect.add_argument("bad", metavar="BAD", help="a later revision with the new rate")
    bisect.add_argument("test", metavar="TEST", nargs="?", default=None,
                        help="a test that uses the bench fixture: a node id "
                             "(tests/test_train.py::test_step), or a file with -k")
    bisect.add_argument("--test", dest="test_option", metavar="FILE", default=None,
                        help="a test file (or node id) whose one bench fixture test -k selects")
    bisect.add_argument("--bench-suite", "--suite", action="append", dest="bench_suite",
                        metavar="SUITE", help="the suite (a name or a YAML file)")
    bisect.add_argument("-k", metavar="BENCH", default=None,
                        help="the suite's benchmark; with a test file, pytest's -k expression "
                             "that selects one test")
    bisect.add_argument("--bench-fixture-steps", "--fixture-steps", dest="bench_fixture_steps",
                        type=parse_fixture_steps, default=None, metavar="WARMUP,STEPS",
                        help="a test's warm-up and steady steps where its bench_steps marker "
                             "does not say (docs/writing-benchmarks.md)")
    bisect.add_argument("--rounds", "--bench-rounds", type=parse_rounds,
                        default=None, metavar="K",
                        help="rounds of a step's first paired run (default --max-rounds: it "
                             "stops at its first clear look; 4 rounds can never show a change "
                             "at the default alpha); below --max-rounds, twice as many while "
                             "the test cannot decide")
    bisect.add_argument("--max-rounds", type=parse_rounds, default=MAX_ROUNDS,
                        metavar="K", help="the most rounds of one paired run (default "
                        f"{MAX_ROUNDS}); not fewer than --rounds")
    bisect.add_argument("--bench-base", "--base", dest="bench_base", metavar="DIR",
                        default=None,
                        help="the results base that keeps each step's run, in DIR/bisect/"
                             "<bench>.<time>/ (default: $DLBENCH_BASE, else .dlbench)")
    bisect.add_argument("--resume", action="store_true",
                        help="continue the newest search of the same GOOD, BAD and benchmark "
                             "kept in the results base (an interrupted one): its completed "
                             "paired runs are judged again, not run")
    add_gate_options(bisect)
    bisect.set_defaults(handler=run)
    return bisect


def _shown(path: Path) -> str:
    """A kept path as the user can paste it: relative to here when it is under here."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _table(result: Any, *, fixed: Any, printable: Any) -> list[str]:
    """The commits the search measured, oldest first: ratio against GOOD, its interval, the
    step's verdict and its rounds; the first changed commit marked."""
    order = {commit: i for i, commit in enumerate(result.commits)}
    rows = [("commit", "ratio", "interval", "verdict", "rounds")]
    for probe in sorted(result.probes, key=lambda p: order.get(p.commit, len(order))):
        v = probe.verdict
        interval = f"[{fixed(v.ci[0], 3)}, {fixed(v.ci[1], 3)}]" if v.ci else "[-]"
        rows.append((probe.commit[:10], fixed(v.ratio, 3), interval,
                     "changed" if probe.changed else "unchanged", str(_ran(probe))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].ljust(widths[2]),
                 row[3].ljust(widths[3]), row[4].rjust(widths[4])]
        line = "  " + "  ".join(cells)
        if i and result.first is not None and result.first.startswith(row[0]):
            line += "  first changed"
        lines.append(printable(line.rstrip()))
    return lines


def _ran(probe: Any) -> int:
    """The rounds a step's paired runs took: each stops early once its verdict is clear."""
    return sum(verdict.pairs or rounds for rounds, verdict in probe.runs)


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.core.numbers import fixed, printable
    from pytest_dlbench.results.judge import judge_paired_run
    from pytest_dlbench.run.bisect import BisectPlan, Probe, Progress, bisect

    def judge(run_dir: Path, bench: str) -> Any:
        return judge_paired_run(run_dir, bench, tolerance=args.tolerance, alpha=args.alpha)

    def ratio(value: float | None, ci: tuple[float, float] | None) -> str:
        shown = f"[{fixed(ci[0], 3)}, {fixed(ci[1], 3)}]" if ci else "[-]"
        return f"ratio {fixed(value, 3)} {shown}"

    folder: list[Path] = []  # where the runs are kept, once the search has started
    live = sys.stdout.isatty()  # a terminal: the progress line is rewritten in place
    pending = [False]  # a live line is on the terminal, to be cleared before the next line

    def say(line: str) -> None:
        if pending[0]:
            print("\r\x1b[K", end="")
            pending[0] = False
        print(line, flush=True)

    def started(plan: BisectPlan) -> None:
        folder.append(plan.folder)
        for worktree in plan.removed:  # run/bisect.remove_leftovers
            say(f"bisect: removed {printable(str(worktree))}, a worktree a killed run left")
        say(f"bisect: {plan.commits} commit{'s' if plan.commits != 1 else ''} after "
            f"{printable(args.good)} up to {printable(args.bad)}, at most {plan.max_steps} "
            f"step{'s' if plan.max_steps != 1 else ''} (BAD first); each step's run kept in "
            f"{printable(_shown(plan.folder))}")
        if plan.resumed:
            say(f"bisect: resuming that search: {plan.kept} paired "
                f"run{'s' if plan.kept != 1 else ''} it completed, judged again")
        elif args.resume:
            say("bisect: no kept search of these commits and benchmark to resume: a new one")

    def progress(now: Progress) -> None:
        what = "BAD " if now.bad else ""
        line = f"  step {now.step} of at most {now.max_steps}: {what}{now.commit[:10]} "
        line += (f"round {now.round} of {now.rounds}" if now.round else
                 f"starting its {now.rounds} rounds")
        if now.ratio is not None:
            line += f", {ratio(now.ratio, now.ci)} over {now.pairs} pair" + \
                ("s" if now.pairs != 1 else "")
        line += f", {_duration(now.elapsed)}"
        if live:
            print(f"\r\x1b[K{line}", end="", flush=True)
            pending[0] = True
        else:
            print(line, flush=True)

    def report(probe: Probe) -> None:
        v = probe.verdict
        word = "changed" if probe.changed else "unchanged"
        how = "" if probe.decided_by == "paired test" else f", {probe.decided_by}"
        how += ", kept" if probe.kept else ""
        say(f"{probe.commit[:10]} {word:<9} {ratio(v.ratio, v.ci)}"
            f" ({_ran(probe)} rounds{how})  {printable(probe.subject)}")
        for run_dir in probe.run_dirs:
            say(f"  run: {printable(_shown(run_dir))}")

    suites = args.bench_suite or []
    if args.test and args.test_option:
        print("dlbench: error: bisect takes one test: TEST or --test, not both",
              file=sys.stderr)
        return gate.USAGE_ERROR
    test = args.test or args.test_option
    if len(suites) > 1 or (not suites and test is None):
        print("dlbench: error: bisect needs one --bench-suite=SUITE with -k BENCH, or a test "
              "that uses the bench fixture (a node id such as tests/test_train.py::test_step, "
              "or --test FILE -k EXPR)", file=sys.stderr)
        return gate.USAGE_ERROR
    # A test's steps: each step's pytest is given them (plugin/fixture_steps.py).
    steps = args.bench_fixture_steps
    pytest_args = [f"--bench-fixture-steps={steps[0]},{steps[1]}"] if steps else []
    try:
        result = bisect(args.good, args.bad, suite=suites[0] if suites else None, test=test,
                        bench=args.k, judge=judge, pytest_args=pytest_args,
                        rounds=args.rounds, max_rounds=args.max_rounds, report=report,
                        keep=Path(args.bench_base) if args.bench_base else None,
                        started=started, progress=progress, resume=args.resume)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every worktree is already removed
        kept = (f": the runs so far are kept in {printable(_shown(folder[0]))}; the same "
                "command with --resume continues the search") if folder else ""
        if pending[0]:
            print(flush=True)  # end the live line before the message
            pending[0] = False
        print(f"dlbench: bisect interrupted (its worktrees are removed){kept}", file=sys.stderr)
        return gate.INTERRUPTED
    finally:
        if pending[0]:
            print(flush=True)  # end the live line
            pending[0] = False
    runs = sum(_ran(p) for p in result.probes)
    print(f"commits measured against {printable(args.good)}, oldest first:")
    for line in _table(result, fixed=fixed, printable=printable):
        print(line)
    if result.first is None:
        print(f"{printable(args.bad)} is not beyond the tolerance from {printable(args.good)} "
              f"({len(result.probes)} step, {runs} rounds): nothing to find")
        return gate.OK
    found = next(p for p in result.probes if p.commit == result.first)
    v = found.verdict
    what = args.k if suites else (result.bench or test)
    print(f"first changed commit: {found.commit} {printable(found.subject)}\n"
          f"  {printable(str(what))}: {ratio(v.ratio, v.ci)} against {printable(args.good)} "
          f"({len(result.probes)} steps over {len(result.commits)} commits, {runs} rounds "
          "of paired runs)")
    return gate.OK
