"""``dlbench bisect GOOD BAD``: the first commit between GOOD and BAD where a benchmark's rate
changed beyond the tolerance (docs/history.md).

The commits are GOOD's first-parent descendants up to BAD (``git rev-list --first-parent
GOOD..BAD``). Each step checks one commit out in a temporary worktree (run/against.py's
:class:`~pytest_dlbench.run.against.BaseSide`, the worktree ``--bench-against`` uses) and runs
there ``pytest --bench-suite=SUITE -k BENCH --bench-against=GOOD``: a paired run of that commit
against GOOD, ABBA rounds on one machine, judged by the paired test. The judge is given
(results/probe.py: this layer does not read results); a step it cannot decide is run again
with twice the rounds, up to ``max_rounds``, then decided by whether its ratio is nearer BAD's
or 1. BAD is measured first: without a change there, there is nothing to find.

Every worktree is removed on every exit path: after each step, on an error, on Ctrl-C and on
SIGTERM (the pytest of a step is stopped first, and removes its own worktree of GOOD).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_dlbench.layout import RUNS
from pytest_dlbench.run.against import AgainstError, BaseSide, _git, find_repo, resolve_rev

__all__ = ["BisectError", "BisectResult", "Probe", "bisect", "commits_between"]

#: The rounds of a step's first paired run, and the most it may take.
ROUNDS = 4
MAX_ROUNDS = 16


class BisectError(AgainstError):
    """``dlbench bisect`` cannot go on: one line for the user."""


class Verdict(Protocol):
    """What a judge says of one paired run (results/probe.Judgement)."""

    word: str  # "changed", "same" or "unsure"
    ratio: float | None
    ci: tuple[float, float] | None
    pairs: int

    def closer_to(self, changed_ratio: float) -> bool: ...


Judge = Callable[[Path, str], "Verdict | None"]


@dataclass
class Probe:
    """One commit measured against GOOD: each paired run it took (rounds, verdict)."""

    commit: str
    subject: str
    runs: list[tuple[int, Verdict]] = field(default_factory=list)
    changed: bool = False
    decided_by: str = "paired test"

    @property
    def verdict(self) -> Verdict:
        return self.runs[-1][1]

    @property
    def rounds(self) -> int:
        return sum(r for r, _ in self.runs)


@dataclass
class BisectResult:
    first: str | None  # the first changed commit (None: BAD did not change)
    probes: list[Probe]
    commits: list[str]


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD's first-parent descendants up to BAD, oldest first (BAD last)."""
    ancestor = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad],
                              capture_output=True, check=False, stdin=subprocess.DEVNULL)
    if ancestor.returncode != 0:
        raise BisectError(f"GOOD ({good[:10]}) is not an ancestor of BAD ({bad[:10]})")
    commits = _git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    if not commits:
        raise BisectError(f"no commit between GOOD ({good[:10]}) and BAD ({bad[:10]})")
    return commits


def _subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit, check=False)


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


def _run_pytest(argv: Sequence[str], cwd: Path, log: Path) -> int:
    """Run one step's pytest; stop it (SIGTERM, then SIGKILL) if this process is stopped."""
    with open(log, "w", encoding="utf-8") as out:
        child = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=cwd, stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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
    report: Callable[[Probe], None] = lambda probe: None,
) -> BisectResult:
    """Find the first commit after ``good`` up to ``bad`` where ``bench`` changed; ``report``
    is called after each step."""
    repo = find_repo(Path(start or os.getcwd()))
    good_sha, bad_sha = resolve_rev(repo, good), resolve_rev(repo, bad)
    commits = commits_between(repo, good_sha, bad_sha)
    suite_path = Path(suite)
    if suite_path.suffix in (".yaml", ".yml") or suite_path.exists():
        suite_path = suite_path.resolve()  # mapped into each worktree
    probes: list[Probe] = []
    with tempfile.TemporaryDirectory(prefix="dlbench-bisect-") as scratch, \
            _terminated_as_interrupt():

        def probe(commit: str, reference: float | None) -> Probe:
            step = Probe(commit=commit, subject=_subject(repo, commit))
            k = rounds
            while True:
                verdict = _measure(commit, k, len(probes) * 100 + len(step.runs))
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

        def _measure(commit: str, k: int, index: int) -> Verdict:
            side = BaseSide.create(commit, repo)
            try:
                where = side.map_path(suite_path) if suite_path.is_absolute() else suite_path
                base = Path(scratch) / f"step{index}"
                argv = [f"--bench-suite={where}", "-k", bench, f"--bench-against={good_sha}",
                        f"--bench-rounds={k}", f"--bench-base={base}", "-p", "no:cacheprovider",
                        "-q", *pytest_args]
                log = Path(scratch) / f"step{index}.log"
                _run_pytest(argv, side.path, log)
                runs = sorted((base / RUNS).glob("*")) if (base / RUNS).is_dir() else []
                verdict = judge(runs[-1], bench) if runs else None
                if verdict is None:
                    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                    raise BisectError(f"{commit[:10]}: no paired verdict for {bench} "
                                      f"(pytest said: {tail[0]})")
                return verdict
            finally:
                side.remove()

        last = probe(bad_sha, None)
        if not last.changed:
            return BisectResult(first=None, probes=probes, commits=commits)
        reference = last.verdict.ratio or 1.0
        lo, hi = -1, len(commits) - 1  # commits[lo] (or GOOD) unchanged, commits[hi] changed
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(commits[mid], reference).changed:
                hi = mid
            else:
                lo = mid
        return BisectResult(first=commits[hi], probes=probes, commits=commits)
