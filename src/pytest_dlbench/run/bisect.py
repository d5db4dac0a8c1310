"""``dlbench bisect GOOD BAD``: the first commit between GOOD and BAD where a benchmark's rate
changed beyond the tolerance (docs/history.md).

The commits are GOOD's first-parent descendants up to BAD (``git rev-list --first-parent
GOOD..BAD``). Each step checks one commit out in a temporary worktree (run/against.py's
:class:`~pytest_dlbench.run.against.BaseSide`, the worktree ``--bench-against`` uses) and runs
there ``pytest --bench-suite=SUITE -k BENCH --bench-against=GOOD``: a paired run of that commit
against GOOD, ABBA rounds on one machine, judged by the paired test. The judge is given
(results/paired.judge_paired_run: this layer does not read results); a step it cannot decide
is run again with twice the rounds, up to ``max_rounds``, then decided by whether its ratio is
nearer BAD's or 1. BAD is measured first: without a change there, there is nothing to find.

**What is kept.** Each paired run's results base is a folder of its own under
``<results base>/bisect/<bench>.<time>/`` (``<k>-<commit>-<rounds>r``: its ``runs/<run>`` for
``dlbench report``, and ``pytest.log``, the step's pytest output), kept after the search, also
when it is interrupted: nothing of a step goes to the temporary directory but its worktree.

**Progress.** A step's paired run takes minutes; while it runs, ``progress`` is called every
``every`` seconds (10 by default) with where the search stands: the step and the most steps
it may take, the commit, the round under way and, once a pair of rounds is done, the ratio and
its interval so far.

Every worktree is removed on every exit path: after each step, on an error, on Ctrl-C and on
SIGTERM (the pytest of a step is stopped first, and removes its own worktree of GOOD). A
worktree of a bisect that was SIGKILLed is removed by the next one (run/against.py).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pytest_dlbench.layout import (
    BISECT,
    BISECT_STEP_LOG,
    RUNS,
    base_dir,
    parse_stream_name,
    results_base,
    stream_paths,
)
from pytest_dlbench.run.against import AgainstError, BaseSide, _git, find_repo, resolve_rev
from pytest_dlbench.run.process import pdeathsig_setter

__all__ = ["BisectError", "BisectPlan", "BisectResult", "Probe", "Progress", "bisect",
           "commits_between"]

#: The rounds of a step's first paired run, and the most one may take. The paired test's
#: smallest p after k rounds is 2**-k, and the sequential design first calls a change at round
#: 6 (results/paired.py): with 4, every changed step ran again with 8 (a 13 % step: 4 + 6
#: rounds instead of 6). It stops early when its verdict is clear. ``dlbench bisect`` too.
ROUNDS = 8
MAX_ROUNDS = 16
#: Seconds between two progress reports while a step runs (issue 41: up to 8 minutes passed
#: between two lines before).
PROGRESS_S = 10.0


class BisectError(AgainstError):
    """``dlbench bisect`` cannot go on: one line for the user."""


class Verdict(Protocol):
    """What a judge says of one paired run (results/paired.Judgement)."""

    word: str  # "changed", "same" or "unsure"
    ratio: float | None
    ci: tuple[float, float] | None
    pairs: int

    def closer_to(self, changed_ratio: float) -> bool: ...


Judge = Callable[[Path, str], "Verdict | None"]


@dataclass
class Probe:
    """One commit measured against GOOD: each paired run it took (rounds, verdict) and the run
    directory each left (kept for ``dlbench report``)."""

    commit: str
    subject: str
    runs: list[tuple[int, Verdict]] = field(default_factory=list)
    changed: bool = False
    decided_by: str = "paired test"
    run_dirs: list[Path] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        return self.runs[-1][1]

    @property
    def rounds(self) -> int:
        return sum(r for r, _ in self.runs)


@dataclass(frozen=True)
class BisectPlan:
    """What the search is about to do: said before its first step."""

    commits: int  # GOOD's descendants up to BAD
    max_steps: int  # BAD, then a binary search over the others
    folder: Path  # where every step's run is kept


@dataclass(frozen=True)
class Progress:
    """Where the search stands while a step's paired run goes on."""

    step: int  # 1 for BAD
    max_steps: int
    commit: str
    bad: bool  # the step measures BAD
    round: int  # the round under way, from 1; 0 before the first stream
    rounds: int  # the rounds of this paired run
    elapsed: float  # seconds since the step started
    pairs: int = 0  # rounds both sides finished, in the ratio below
    ratio: float | None = None  # the ratio and its interval so far, once there is one
    ci: tuple[float, float] | None = None
    run_dir: Path | None = None


@dataclass
class BisectResult:
    first: str | None  # the first changed commit (None: BAD did not change)
    probes: list[Probe]
    commits: list[str]
    folder: Path | None = None  # where the runs are kept


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD's first-parent descendants up to BAD, oldest first (BAD last)."""
    try:  # git without the repository's hooks, killed with us, as every git call here
        _git(repo, "merge-base", "--is-ancestor", good, bad)
    except AgainstError:  # exit status 1: not an ancestor
        raise BisectError(f"GOOD ({good[:10]}) is not an ancestor of BAD ({bad[:10]})") from None
    commits = _git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    if not commits:
        raise BisectError(f"no commit between GOOD ({good[:10]}) and BAD ({bad[:10]})")
    return commits


def max_steps(commits: int) -> int:
    """BAD, then the most steps of a binary search over the ``commits - 1`` others (the first
    changed one may be any of the ``commits``)."""
    return 1 + (math.ceil(math.log2(commits)) if commits > 1 else 0)


def check_options(good: str, bad: str, rounds: int, max_rounds: int) -> None:
    """What can be refused before git or pytest runs: one line each."""
    for name, rev in (("GOOD", good), ("BAD", bad)):
        if not rev or rev.startswith("-"):
            # git would read it as an option (--upload-pack=...): never passed on.
            raise BisectError(f"{name} {rev!r} is not a revision (a revision may not start "
                              "with '-')")
    if rounds > max_rounds:
        raise BisectError(f"--rounds {rounds} is more than --max-rounds {max_rounds}: a step's "
                          "first paired run cannot take more rounds than any may")


def _resolve(repo: Path, name: str, rev: str) -> str:
    try:
        return resolve_rev(repo, rev)
    except AgainstError:  # its words name --bench-against
        raise BisectError(f"{name} {rev}: no such revision in {repo}") from None


def _subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit, check=False)


def _session_folder(base: Path, bench: str) -> Path:
    """``<base>/bisect/<bench>.<time>``, made unique if that second is taken."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    parent = base / BISECT
    name = re.sub(r"[^A-Za-z0-9._-]", "_", bench).strip(".") or "bench"  # -k's text: a file name
    suffix = 1
    try:
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            folder = parent / (f"{name}.{stamp}" + (f"-{suffix}" if suffix > 1 else ""))
            try:
                folder.mkdir()
                return folder
            except FileExistsError:
                suffix += 1
    except OSError as exc:  # before any step: one line, nothing measured yet
        raise BisectError(f"results directory {base}: cannot make {exc.filename or parent}: "
                          f"{exc.strerror or exc}") from None


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt here, so that every ``finally`` runs."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _every(seconds: float, tick: Callable[[], None]) -> Iterator[None]:
    """Call ``tick`` every ``seconds`` on a thread while the body runs (the body waits for a
    child process: the main thread keeps the signals)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            try:
                tick()
            except OSError:  # the output is gone (a closed pipe): the search goes on silently
                return

    thread = threading.Thread(target=loop, name="dlbench-bisect-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _run_pytest(argv: Sequence[str], cwd: Path, log: Path) -> int:
    """Run one step's pytest; stop it (SIGTERM, then SIGKILL) if this process is stopped, and
    SIGTERM it if this process is killed (SIGKILL runs no ``finally``): it removes its own
    worktree of GOOD on SIGTERM."""
    with open(log, "w", encoding="utf-8") as out:
        child = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=cwd, stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 preexec_fn=pdeathsig_setter(signal.SIGTERM))
        try:
            return child.wait()
        except BaseException:
            child.terminate()  # it removes its own worktree of GOOD on SIGTERM
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise


def _newest_run(base: Path) -> Path | None:
    runs = sorted(p for p in (base / RUNS).glob("*") if p.is_dir()) if (base / RUNS).is_dir() \
        else []
    return runs[-1] if runs else None


def _round_under_way(run_dir: Path, bench: str) -> int:
    """The round whose streams are being written (from 1), 0 before the first: the highest
    round of either side's stream files."""
    paths = [*stream_paths(run_dir), *stream_paths(base_dir(run_dir))]
    found = [parse_stream_name(p) for p in paths]
    rounds = [n.repeat for n in found if n.bench == bench and n.repeat is not None]
    return max(rounds) + 1 if rounds else 0


class _Watch:
    """What a step's progress report reads from its run directory while the paired run goes
    on; the judge only runs again when a round has ended (it reads every stream)."""

    def __init__(self, judge: Judge, bench: str, base: Path, template: Progress) -> None:
        self.judge, self.bench, self.base, self.template = judge, bench, base, template
        self.started = time.monotonic()
        self.judged: tuple[Path, int] | None = None
        self.last: Verdict | None = None

    def now(self) -> Progress:
        run_dir = _newest_run(self.base)
        elapsed = time.monotonic() - self.started
        if run_dir is None:
            return replace(self.template, elapsed=elapsed)
        under_way = _round_under_way(run_dir, self.bench)
        if (run_dir, under_way) != self.judged and under_way > 1:
            self.judged = (run_dir, under_way)
            try:
                self.last = self.judge(run_dir, self.bench)
            except Exception:  # a run read while it is written: no ratio in this report
                self.last = None
        verdict = self.last
        pairs = verdict.pairs if verdict else 0
        # A round whose two runs are done and the next not begun: the next is under way.
        round_ = min(max(under_way, pairs + 1 if under_way else 0), self.template.rounds)
        return replace(self.template, elapsed=elapsed, run_dir=run_dir, round=round_,
                        pairs=pairs,
                        ratio=verdict.ratio if verdict else None,
                        ci=verdict.ci if verdict else None)


def bisect(
    good: str,
    bad: str,
    *,
    suite: str,
    bench: str,
    judge: Judge,
    start: Path | None = None,
    pytest_args: Sequence[str] = (),
    rounds: int = ROUNDS,
    max_rounds: int = MAX_ROUNDS,
    keep: Path | None = None,
    report: Callable[[Probe], None] = lambda probe: None,
    started: Callable[[BisectPlan], None] = lambda plan: None,
    progress: Callable[[Progress], None] = lambda now: None,
    every: float | None = None,
) -> BisectResult:
    """Find the first commit after ``good`` up to ``bad`` where ``bench`` changed. ``keep`` is
    the results base that keeps each step's run (default: ``$DLBENCH_BASE``, else ``.dlbench``,
    in ``start``); ``started`` is called once the commits are known, ``progress`` every
    ``every`` seconds (:data:`PROGRESS_S`) while a step runs, ``report`` after each step."""
    check_options(good, bad, rounds, max_rounds)
    where = Path(start or os.getcwd())
    repo = find_repo(where)
    good_sha, bad_sha = _resolve(repo, "GOOD", good), _resolve(repo, "BAD", bad)
    commits = commits_between(repo, good_sha, bad_sha)
    suite_path = Path(suite)
    if suite_path.suffix in (".yaml", ".yml") or suite_path.exists():
        suite_path = suite_path.resolve()  # mapped into each worktree
    base = keep if keep is not None else results_base()
    base = Path(base) if Path(base).is_absolute() else (where if where.is_dir() else
                                                         where.parent) / base
    folder = _session_folder(base.resolve(), bench)
    steps = max_steps(len(commits))
    started(BisectPlan(commits=len(commits), max_steps=steps, folder=folder))
    probes: list[Probe] = []
    result = BisectResult(first=None, probes=probes, commits=commits, folder=folder)

    def probe(commit: str, reference: float | None) -> Probe:
        step = Probe(commit=commit, subject=_subject(repo, commit))
        k = rounds
        while True:
            verdict = _measure(step, k)
            step.runs.append((k, verdict))
            if verdict.word != "unsure":
                step.changed = verdict.word == "changed"
                break
            if k * 2 > max_rounds:
                if reference is None:  # BAD itself: no verdict is no change found
                    step.changed = False
                else:
                    step.changed = verdict.closer_to(reference)
                step.decided_by = "nearer BAD's ratio than 1" if step.changed \
                    else "nearer 1 than BAD's ratio"
                break
            k *= 2
        probes.append(step)
        report(step)
        return step

    def _measure(step: Probe, k: int) -> Verdict:
        number = len(probes) + 1
        # This paired run's own results base: its run directory, data and output, kept.
        step_base = folder / f"{number}-{step.commit[:10]}-{k}r"
        step_base.mkdir()
        log = step_base / BISECT_STEP_LOG
        watch = _Watch(judge, bench, step_base, Progress(
            step=number, max_steps=steps, commit=step.commit, bad=step.commit == bad_sha,
            round=0, rounds=k, elapsed=0.0))
        side = BaseSide.create(step.commit, repo)
        try:
            where = side.map_path(suite_path) if suite_path.is_absolute() else suite_path
            argv = [f"--bench-suite={where}", "-k", bench, f"--bench-against={good_sha}",
                    f"--bench-rounds={k}", f"--bench-base={step_base}", "-p", "no:cacheprovider",
                    "-q", *pytest_args]
            with _every(every or PROGRESS_S, lambda: progress(watch.now())):
                _run_pytest(argv, side.path, log)
        finally:
            side.remove()
        run_dir = _newest_run(step_base)
        if run_dir is not None:
            step.run_dirs.append(run_dir)
        verdict = judge(run_dir, bench) if run_dir is not None else None
        if verdict is None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise BisectError(f"{step.commit[:10]}: no paired verdict for {bench} "
                              f"(pytest said: {tail[0]}; its output: {log})")
        return verdict

    with _terminated_as_interrupt():
        last = probe(bad_sha, None)
        if not last.changed:
            return result
        reference = last.verdict.ratio or 1.0
        lo, hi = -1, len(commits) - 1  # commits[lo] (or GOOD) unchanged, commits[hi] changed
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(commits[mid], reference).changed:
                hi = mid
            else:
                lo = mid
        result.first = commits[hi]
        return result
