"""``dlbench bisect GOOD BAD``: the first commit between GOOD and BAD where a benchmark's rate
changed beyond the tolerance (docs/history.md).

The commits are GOOD's first-parent descendants up to BAD (``git rev-list --first-parent
GOOD..BAD``). Each step checks one commit out in a temporary worktree (run/against.py's
:class:`~pytest_dlbench.run.against.BaseSide`, the worktree ``--bench-against`` uses) and runs
there ``pytest --bench-suite=SUITE -k BENCH --bench-against=GOOD``, or for a test of your own
that uses the ``bench`` fixture ``pytest TEST [-k EXPR] --bench-against=GOOD`` (the fixture's
paired rounds, plugin/fixture_against.py; the test as it is at that commit): a paired run of
that commit against GOOD, ABBA rounds on one machine, judged by the paired test. The judge is given
(results/judge/paired.judge_paired_run: this layer does not read results); a step it cannot decide
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

**Resuming.** The search's folder holds ``bisect.json``: what it searches (GOOD, BAD, the
target) and each paired run it completed, named once its pytest ended. ``resume`` continues the
newest folder of the same search: a named run is judged again, not run; a run cut short is never
read (docs/history.md, "Resuming a search").

Every worktree is removed on every exit path: after each step, on an error, on Ctrl-C and on
SIGTERM (the pytest of a step is stopped first, and removes its own worktree of GOOD). A bisect
killed outright (SIGKILL, the out-of-memory killer, a batch job's end) runs none of that: while
it runs, it names the worktrees it made in ``<git dir>/dlbench-bisect/<host>-<pid>.json`` with
its process's start, and the next bisect, as it starts, removes what such a file names once its
process is gone (and a step's worktree of GOOD, locked by that step's pytest, once that process
is gone: run/against.py). A live bisect's worktrees, another machine's and the user's own are
left alone (docs/history.md, "A killed bisect").
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pytest_dlbench.core.errors import MAX_QUOTED, quoted, shorten
from pytest_dlbench.layout import (
    BISECT,
    BISECT_STEP_LOG,
    RUNS,
    base_dir,
    parse_stream_name,
    results_base,
    stream_paths,
)
from pytest_dlbench.run.against import (
    WORKTREE_PREFIX,
    AgainstError,
    BaseSide,
    _alive,
    _git,
    _remove_worktree,
    find_repo,
    remove_stale_worktrees,
    resolve_rev,
)
from pytest_dlbench.run.process import pdeathsig_setter

__all__ = ["BisectError", "BisectPlan", "BisectResult", "Probe", "Progress", "Target", "bisect",
           "commits_between", "remove_leftovers"]

#: The rounds of a step's first paired run, and the most one may take. The paired test's
#: smallest p after k rounds is 2**-k, and the sequential design first calls a change at round
#: 6 (results/judge/paired.py). A step's first run is asked for the most rounds and stops at
#: the first look where its verdict is clear: a first run of 8 that could not decide was run
#: again from its first round with 16, 24 rounds where one sequential run of 16 takes at most
#: 16, judged at the same looks (docs/history.md, "Rounds of a step"). ``dlbench bisect`` too:
#: its ``--rounds`` is ``--max-rounds`` unless given.
MAX_ROUNDS = 16
ROUNDS = MAX_ROUNDS
#: Seconds between two progress reports while a step runs (docs/history.md: a step of a slow
#: benchmark can take minutes, and a silent bisect looks hung).
PROGRESS_S = 10.0
#: The folder of the repository's git directory where each running bisect names the worktrees
#: it made (module docstring).
LEFTOVERS = "dlbench-bisect"
#: The file of a search's folder that names the paired runs it completed, for ``--resume``
#: (module docstring, "Resuming").
RECORD = "bisect.json"
#: The exit status of a step's pytest that was interrupted (pytest's ExitCode.INTERRUPTED, the
#: gate's too): its run is not complete, and never resumed from.
INTERRUPTED = 2


class BisectError(AgainstError):
    """``dlbench bisect`` cannot go on: one line for the user."""


class ProbeJudgement(Protocol):
    """What a judge says of one paired run (results/judge/paired.Judgement): whether the step is
    decided and changed, by the verdict core's words (results/judge/verdict.judge_probe), which this
    layer never reads itself."""

    word: str  # the verdict core's bisect word, for the reports
    ratio: float | None
    ci: tuple[float, float] | None
    pairs: int

    @property
    def decided(self) -> bool: ...

    @property
    def changed(self) -> bool: ...

    def closer_to(self, changed_ratio: float) -> bool: ...


Judge = Callable[[Path, str], "ProbeJudgement | None"]


@dataclass
class Probe:
    """One commit measured against GOOD: each paired run it took (rounds, verdict) and the run
    directory each left (kept for ``dlbench report``)."""

    commit: str
    subject: str
    runs: list[tuple[int, ProbeJudgement]] = field(default_factory=list)
    changed: bool = False
    decided_by: str = "paired test"
    run_dirs: list[Path] = field(default_factory=list)
    kept: int = 0  # its paired runs read again from an earlier search's folder (``resume``)

    @property
    def verdict(self) -> ProbeJudgement:
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
    removed: tuple[Path, ...] = ()  # the worktrees a killed bisect left, removed at the start
    resumed: bool = False  # ``folder`` is an earlier search's, continued
    kept: int = 0  # the paired runs it completed, read again instead of run


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
    bench: str | None = None  # the benchmark followed (a test file's -k: the one it selected)


@dataclass(frozen=True)
class Target:
    """What each step runs: a suite's benchmark (``suite`` and ``keyword``, its name), or a test
    that uses the ``bench`` fixture (``test``: a file or folder of the repository, ``node``: the
    rest of a node id, ``::test_step``; ``keyword``: pytest's ``-k``, if any)."""

    suite: Path | None = None
    test: Path | None = None
    node: str = ""
    keyword: str | None = None

    @classmethod
    def of(cls, *, suite: str | None, test: str | None, keyword: str | None, where: Path,
           repo: Path) -> Target:
        """The target of ``dlbench bisect``'s arguments; one line when they name none, or two."""
        if suite is not None and test is not None:
            raise BisectError("bisect takes a suite's benchmark (--bench-suite=SUITE -k BENCH) "
                              "or a test that uses the bench fixture, not both")
        if suite is None and test is None:
            raise BisectError("bisect needs one --bench-suite=SUITE with -k BENCH, or a test "
                              "that uses the bench fixture (a node id such as "
                              "tests/test_train.py::test_step, or --test FILE -k EXPR)")
        if suite is not None:
            if not keyword:
                raise BisectError("bisect --bench-suite needs -k BENCH: the benchmark")
            path = Path(suite)
            if path.suffix in (".yaml", ".yml") or path.exists():
                path = path.resolve()  # mapped into each worktree
            return cls(suite=path, keyword=keyword)
        assert test is not None
        file, sep, node = test.partition("::")
        path = Path(file)
        path = (path if path.is_absolute() else where / path).resolve()
        try:
            path.relative_to(repo)
        except ValueError:
            raise BisectError(f"{test}: not in the repository {repo} (each step runs the test "
                              "as it is at its commit)") from None
        return cls(test=path, node=sep + node, keyword=keyword or None)

    @property
    def bench(self) -> str | None:
        """The name the judge reads: a suite's benchmark, a node id's test (its stream's name,
        as the fixture writes it); None for a test file with ``-k``, known after a step."""
        if self.suite is not None:
            return self.keyword
        if self.node:  # its name and parameters (plugin/fixture_names.py): one test collected
            scopes, bracket, params = self.node.partition("[")
            return scopes.rpartition("::")[2] + bracket + params
        return None

    @property
    def label(self) -> str:
        return self.bench or (self.test.stem if self.test is not None else "bench")

    def argv(self, side: BaseSide) -> list[str]:
        """What selects it in the step's pytest, its paths in the step's worktree."""
        keyword = ["-k", self.keyword] if self.keyword else []
        if self.suite is not None:
            where = side.map_path(self.suite) if self.suite.is_absolute() else self.suite
            return [f"--bench-suite={where}", *keyword]
        assert self.test is not None
        return [f"{side.map_path(self.test)}{self.node}", *keyword]


def benches_run(run_dir: Path) -> list[str]:
    """The benchmarks whose streams a paired run wrote (either side)."""
    paths = [*stream_paths(run_dir), *stream_paths(base_dir(run_dir))]
    return sorted({parse_stream_name(p).bench for p in paths})


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
            raise BisectError(f"{name} {quoted(rev)} is not a revision (a revision may not start "
                              "with '-')")
    if rounds > max_rounds:
        raise BisectError(f"--rounds {rounds} is more than --max-rounds {max_rounds}: a step's "
                          "first paired run cannot take more rounds than any may")


def _resolve(repo: Path, name: str, rev: str) -> str:
    try:
        return resolve_rev(repo, rev)
    except AgainstError:  # its words name --bench-against
        raise BisectError(
            f"{name} {shorten(rev, MAX_QUOTED)}: no such revision in {repo}") from None


def _subject(repo: Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit, check=False)


def _folder_name(bench: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", bench).strip(".") or "bench"  # -k's text: a file name


def _session_folder(base: Path, bench: str) -> Path:
    """``<base>/bisect/<bench>.<time>``, made unique if that second is taken."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    parent = base / BISECT
    name = _folder_name(bench)
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


# -- resuming an interrupted search (module docstring, "Resuming") ---------------------------


class _Record:
    """A search's ``bisect.json``: what it searches (GOOD, BAD, the target, the step's pytest
    arguments) and each paired run it completed (commit, rounds, the step's folder), rewritten
    after each. A run interrupted or killed is never named: its folder stays, unread."""

    def __init__(self, folder: Path, search: dict[str, Any],
                 runs: list[dict[str, Any]] | None = None) -> None:
        self.folder, self.search, self.runs = folder, search, list(runs or [])

    @classmethod
    def newest(cls, parent: Path, label: str, search: dict[str, Any]) -> _Record | None:
        """The newest search folder ``<parent>/<label>.<time>`` of the same search, if any."""
        from pytest_dlbench.core import untrusted

        name = _folder_name(label)
        for folder in sorted(parent.glob(f"{name}.*"), key=lambda p: p.name, reverse=True):
            try:
                data = untrusted.read_json(folder / RECORD)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("search") == search \
                    and isinstance(data.get("runs"), list):
                runs = [r for r in data["runs"] if isinstance(r, dict)]
                return cls(folder, search, runs)
        return None

    def kept(self, commit: str, rounds: int) -> Path | None:
        """The folder of a completed paired run of ``commit`` with ``rounds`` rounds."""
        for run in self.runs:
            if run.get("commit") == commit and run.get("rounds") == rounds \
                    and isinstance(run.get("step"), str) and "/" not in run["step"]:
                step = self.folder / run["step"]
                if (step / RUNS).is_dir():  # else (its run deleted) the step runs again
                    return step
        return None

    def add(self, commit: str, rounds: int, step: Path) -> None:
        self.runs.append({"commit": commit, "rounds": rounds, "step": step.name})
        self.write()

    def write(self) -> None:
        from pytest_dlbench.core.output_files import write_atomic

        record = {"version": 1, "search": self.search, "runs": self.runs}
        # Unwritable: the runs are kept all the same; only --resume cannot find them.
        with contextlib.suppress(OSError):
            write_atomic(self.folder / RECORD, json.dumps(record, indent=2) + "\n")


def _search_key(good: str, bad: str, target: Target, pytest_args: Sequence[str]) -> dict[str, Any]:
    """What makes two searches the same one: a kept run of one is a step of the other."""
    return {"good": good, "bad": bad,
            "suite": str(target.suite) if target.suite is not None else None,
            "test": str(target.test) if target.test is not None else None,
            "node": target.node, "keyword": target.keyword, "pytest_args": list(pytest_args)}


def _unused(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``...: an interrupted run's folder keeps its name."""
    suffix = 1
    candidate = path
    while candidate.exists():
        suffix += 1
        candidate = path.with_name(f"{path.name}-{suffix}")
    return candidate


# -- what a bisect killed outright leaves (module docstring) -----------------------------------


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (/proc/PID/stat); None where it
    cannot be read (no such process, no /proc). With the pid it names one process: a pid given
    again to another process is not the bisect that wrote it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode("utf-8", "replace")
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"


def _leftovers_folder(repo: Path) -> Path | None:
    """``<git dir>/dlbench-bisect`` (the common one of all the repository's worktrees, where git
    keeps its record of them), None when git cannot say."""
    common = _git(repo, "rev-parse", "--git-common-dir", check=False)
    if not common:
        return None
    path = Path(common)
    return (path if path.is_absolute() else repo / path) / LEFTOVERS


class _Registry:
    """The worktrees this bisect made, named while it runs in ``<git dir>/dlbench-bisect/
    <host>-<pid>.json`` with its process's start; the file goes when the bisect ends."""

    def __init__(self, folder: Path | None) -> None:
        self.host, self.pid = _host(), os.getpid()
        self.started = _process_start(self.pid)
        self.path = folder / f"{self.host}-{self.pid}.json" if folder is not None else None
        self.worktrees: list[Path] = []

    def add(self, worktree: Path) -> None:
        self.worktrees.append(worktree)
        self._write()

    def discard(self, worktree: Path) -> None:
        if worktree in self.worktrees:
            self.worktrees.remove(worktree)
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        from pytest_dlbench.core.output_files import write_atomic

        record = {"version": 1, "host": self.host, "pid": self.pid, "started": self.started,
                  "worktrees": [str(p) for p in self.worktrees]}
        try:
            write_atomic(self.path, json.dumps(record, indent=2) + "\n")
        except OSError:  # a git directory we may not write: each worktree's lock remains
            self.path = None

    def close(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)


def _owner_gone(record: dict[str, Any]) -> bool:
    """Whether the bisect that wrote ``record`` is gone: this machine's, and its pid runs no
    process, or one started at another time. Another machine's is never judged from here."""
    pid, started = record.get("pid"), record.get("started")
    if record.get("host") != _host() or not isinstance(pid, int) or pid <= 0:
        return False
    if not _alive(pid):
        return True
    now = _process_start(pid)
    return isinstance(started, int) and now is not None and now != started


def _dlbench_worktrees(repo: Path) -> set[Path]:
    """The worktrees git lists for ``repo`` that pytest-dlbench makes (``dlbench-against-*``),
    never its main working tree."""
    listing = _git(repo, "worktree", "list", "--porcelain", check=False)
    paths = [Path(line.partition(" ")[2]) for line in listing.splitlines()
             if line.startswith("worktree ")]
    return {p for p in paths[1:] if p.name.startswith(WORKTREE_PREFIX)}


def remove_leftovers(repo: Path) -> list[Path]:
    """Remove what a bisect killed outright left in ``repo`` (module docstring): the worktrees
    a ``dlbench-bisect`` file names whose bisect is gone (:func:`_owner_gone`), then the file;
    and the worktrees of ``--bench-against`` sessions that are gone, a killed step's pytest
    among them (run/against.remove_stale_worktrees). Only ``dlbench-against-*`` worktrees git
    lists for ``repo``: a live bisect's, another machine's and the user's own are left alone.
    The worktrees removed; never raises for a file it cannot read (left as it is)."""
    from pytest_dlbench.core import untrusted

    removed: list[Path] = []
    folder = _leftovers_folder(repo)
    files = sorted(folder.glob("*.json")) if folder is not None and folder.is_dir() else []
    ours = _dlbench_worktrees(repo) if files else set()
    for path in files:
        try:
            record = untrusted.read_json(path)
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not _owner_gone(record):
            continue
        named = record.get("worktrees")
        for worktree in named if isinstance(named, list) else []:
            if isinstance(worktree, str) and Path(worktree) in ours:
                _remove_worktree(repo, Path(worktree))
                removed.append(Path(worktree))
        with contextlib.suppress(OSError):
            path.unlink()
    return [*removed, *remove_stale_worktrees(repo)]


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


def _round_under_way(run_dir: Path, bench: str | None) -> int:
    """The round whose streams are being written (from 1), 0 before the first: the highest
    round of either side's stream files (of any benchmark when ``bench`` is not known yet)."""
    paths = [*stream_paths(run_dir), *stream_paths(base_dir(run_dir))]
    found = [parse_stream_name(p) for p in paths]
    rounds = [n.repeat for n in found
              if (bench is None or n.bench == bench) and n.repeat is not None]
    return max(rounds) + 1 if rounds else 0


def _the_one_bench(run_dir: Path, target: Target) -> str | None:
    """The benchmark a test file's ``-k`` selected: the one its paired run wrote streams of;
    None when it wrote none (pytest's own line says why); one line when it wrote several."""
    names = benches_run(run_dir)
    if len(names) > 1:
        raise BisectError(f"{target.test}" + (f" -k {target.keyword}" if target.keyword else "")
                          + f": {len(names)} tests use the bench fixture ({', '.join(names)}); "
                          "bisect follows one: give its node id, or a -k that selects it alone")
    return names[0] if names else None


class _Watch:
    """What a step's progress report reads from its run directory while the paired run goes
    on; the judge only runs again when a round has ended (it reads every stream)."""

    def __init__(self, judge: Judge, bench: str | None, base: Path, template: Progress) -> None:
        self.judge, self.bench, self.base, self.template = judge, bench, base, template
        self.started = time.monotonic()
        self.judged: tuple[Path, int] | None = None
        self.last: ProbeJudgement | None = None

    def now(self) -> Progress:
        run_dir = _newest_run(self.base)
        elapsed = time.monotonic() - self.started
        if run_dir is None:
            return replace(self.template, elapsed=elapsed)
        under_way = _round_under_way(run_dir, self.bench)
        bench = self.bench
        if bench is None:  # a test file's -k: the one benchmark its run writes, once there
            names = benches_run(run_dir)
            bench = names[0] if len(names) == 1 else None
        if (run_dir, under_way) != self.judged and under_way > 1 and bench is not None:
            self.judged = (run_dir, under_way)
            try:
                self.last = self.judge(run_dir, bench)
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
    suite: str | None = None,
    bench: str | None = None,
    judge: Judge,
    test: str | None = None,
    start: Path | None = None,
    pytest_args: Sequence[str] = (),
    rounds: int | None = None,
    max_rounds: int = MAX_ROUNDS,
    keep: Path | None = None,
    report: Callable[[Probe], None] = lambda probe: None,
    started: Callable[[BisectPlan], None] = lambda plan: None,
    progress: Callable[[Progress], None] = lambda now: None,
    every: float | None = None,
    resume: bool = False,
) -> BisectResult:
    """Find the first commit after ``good`` up to ``bad`` where ``bench`` of ``suite`` changed,
    or the test ``test`` (a node id, or a file with ``bench``: pytest's ``-k``) that uses the
    ``bench`` fixture. ``keep`` is the results base that keeps each step's run (default:
    ``$DLBENCH_BASE``, else ``.dlbench``, in ``start``); ``started`` is called once the commits
    are known, ``progress`` every ``every`` seconds (:data:`PROGRESS_S`) while a step runs,
    ``report`` after each step. ``resume``: continue the newest search of the same GOOD, BAD
    and target kept in the results base, its completed paired runs read again, not run.
    ``rounds``: a step's first paired run's, default ``max_rounds`` (docs/history.md, "Rounds of
    a step")."""
    rounds = max_rounds if rounds is None else rounds
    check_options(good, bad, rounds, max_rounds)
    where = Path(start or os.getcwd())
    repo = find_repo(where)
    removed = remove_leftovers(repo)  # a killed bisect's worktrees, before anything can fail
    here = where if where.is_dir() else where.parent
    target = Target.of(suite=suite, test=test, keyword=bench, where=here, repo=repo)
    good_sha, bad_sha = _resolve(repo, "GOOD", good), _resolve(repo, "BAD", bad)
    commits = commits_between(repo, good_sha, bad_sha)
    base = keep if keep is not None else results_base()
    base = Path(base) if Path(base).is_absolute() else here / base
    search = _search_key(good_sha, bad_sha, target, pytest_args)
    record = _Record.newest(base.resolve() / BISECT, target.label, search) if resume else None
    if record is None:
        record = _Record(_session_folder(base.resolve(), target.label), search)
        record.write()
    folder = record.folder
    judged = [target.bench]  # a test file's -k: its benchmark, once the first step ran it
    steps = max_steps(len(commits))
    started(BisectPlan(commits=len(commits), max_steps=steps, folder=folder,
                       removed=tuple(removed), resumed=bool(record.runs),
                       kept=len(record.runs)))
    registry = _Registry(_leftovers_folder(repo))
    probes: list[Probe] = []
    result = BisectResult(first=None, probes=probes, commits=commits, folder=folder)

    def probe(commit: str, reference: float | None) -> Probe:
        step = Probe(commit=commit, subject=_subject(repo, commit))
        k = rounds
        while True:
            verdict = _measure(step, k)
            step.runs.append((k, verdict))
            if verdict.decided:
                step.changed = verdict.changed
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
        result.bench = judged[0]
        report(step)
        return step

    def _measure(step: Probe, k: int) -> ProbeJudgement:
        kept = record.kept(step.commit, k)
        if kept is not None:  # completed by the search this one resumes: judged again
            step.kept += 1
            return _judged(step, kept, kept / BISECT_STEP_LOG)
        number = len(probes) + 1
        # This paired run's own results base: its run directory, data and output, kept.
        step_base = _unused(folder / f"{number}-{step.commit[:10]}-{k}r")
        step_base.mkdir()
        log = step_base / BISECT_STEP_LOG
        watch = _Watch(judge, judged[0], step_base, Progress(
            step=number, max_steps=steps, commit=step.commit, bad=step.commit == bad_sha,
            round=0, rounds=k, elapsed=0.0))
        side = BaseSide.create(step.commit, repo)
        try:
            registry.add(side.path)  # removed by the next bisect should this one be killed
            argv = [*target.argv(side), f"--bench-against={good_sha}",
                    f"--bench-rounds={k}", f"--bench-base={step_base}", "-p", "no:cacheprovider",
                    "-q", *pytest_args]
            with _every(every or PROGRESS_S, lambda: progress(watch.now())):
                status = _run_pytest(argv, side.path, log)
        finally:
            side.remove()
            registry.discard(side.path)
        verdict = _judged(step, step_base, log)
        if status >= 0 and status != INTERRUPTED:  # a run stopped by a signal is not complete
            record.add(step.commit, k, step_base)
        return verdict

    def _judged(step: Probe, step_base: Path, log: Path) -> ProbeJudgement:
        run_dir = _newest_run(step_base)
        if run_dir is not None:
            step.run_dirs.append(run_dir)
            if judged[0] is None:
                judged[0] = _the_one_bench(run_dir, target)
        bench_name = judged[0] or target.label
        verdict = judge(run_dir, bench_name) if run_dir is not None else None
        if verdict is None:
            try:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
            except OSError:
                tail = ["?"]
            raise BisectError(f"{step.commit[:10]}: no paired verdict for {bench_name} "
                              f"(pytest said: {tail[0]}; its output: {log})")
        return verdict

    with _terminated_as_interrupt(), contextlib.closing(registry):
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
