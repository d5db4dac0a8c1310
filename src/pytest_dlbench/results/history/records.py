"""A results history: every run's saved summary kept by machine and commit, and each
benchmark's rate over the commits with its steps (docs/history.md).

``--bench-autosave`` (and ``dlbench report --autosave``) writes the summary that ``--bench-save``
writes, with a ``history`` block (commit, its date, branch, uncommitted changes, machine id), to
``<history>/<machine-id>/<time>_<commit>.json``, whole and under a name of its own (``-2``,
``-3``, ... when a run of the same second has it: created exclusively, never renamed onto). The
history folder is ``<base>/history`` by default, or any folder given (a CI cache, an artifact
downloaded from earlier jobs). ``dlbench history`` reads it back (:func:`load_history`) and
shows each benchmark's series (:func:`bench_series`) with the steps that
:mod:`~pytest_dlbench.results.history.changes` finds in it.

The machine id names the hardware the numbers come from: ``$DLBENCH_MACHINE`` when set (CI
runners with changing host names), else the host name and a hash of the CPU model, its cores
and the GPUs' names and memory, all from the facts a saved summary records
(measure/machine.py: ``machine_info``). Numbers of two machines are never put in one series.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import math
import os
import re
import secrets
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import MAX_QUOTED, DlbenchError, quoted, shorten
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.layout import json_safe
from pytest_dlbench.measure.machine import machine_info
from pytest_dlbench.results.history.changes import Step, detect_steps
from pytest_dlbench.results.judge.history_drift import HistoryDrifts, history_drifts, session_key
from pytest_dlbench.results.judge.verdict import ALPHA, TOLERANCE
from pytest_dlbench.results.model.baseline import load_summary, summary_dict
from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = [
    "BenchSeries",
    "Entry",
    "GitInfo",
    "HistoryError",
    "Point",
    "autosave",
    "bench_series",
    "default_history",
    "drifts_from_history",
    "git_info",
    "keyword_matcher",
    "load_history",
    "machine_id",
    "summary_machine",
    "usable_rate",
]

#: The folder of a results base that holds the history.
HISTORY = "history"


class HistoryError(DlbenchError):
    """A history folder or a ``-k``/``--since`` argument that cannot be used: one line."""


# -- where a run's numbers come from ----------------------------------------------------------
def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit]
    return slug or "unknown"


def machine_id(machine: Mapping[str, Any] | None) -> str:
    """The id of the machine a summary was measured on (the module's docstring)."""
    override = os.environ.get(Env.MACHINE, "").strip()
    if override:
        return _slug(override, 80)
    machine = machine or {}
    facts = {
        "cpu": machine.get("cpu"),
        "cores": machine.get("cores"),
        "gpus": [(g.get("name"), g.get("memory")) for g in machine.get("gpus") or ()
                 if isinstance(g, Mapping)],
    }
    digest = hashlib.sha1(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
    return f"{_slug(str(machine.get('hostname') or 'unknown'))}-{digest[:8]}"


def summary_machine(summary: SuiteSummary) -> str | None:
    """The machine id a saved summary says it was measured on (None: it does not say)."""
    machine = (summary.provenance or {}).get("machine")
    return machine_id(machine) if isinstance(machine, Mapping) else None


@dataclass(frozen=True)
class GitInfo:
    """The commit a run measured: its hash, date (ISO, committer's), branch, and whether the
    working tree had uncommitted changes to tracked files."""

    commit: str | None = None
    date: str | None = None
    branch: str | None = None
    dirty: bool = False

    @property
    def short(self) -> str:
        return self.commit[:12] if self.commit else "nogit"

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "commit_date": self.date, "branch": self.branch,
                "dirty": self.dirty}


#: What the history's git commands run with, as run/against.py's: none of the repository's
#: hooks, and no fsmonitor daemon (``git status`` would start one, or wait on a hung one past
#: the timeout, and a status that times out says nothing about the tree).
GIT_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
#: Seconds a git command of the history may take.
GIT_TIMEOUT = 10.0


def _git(cwd: str | PathLike[str] | None, *args: str,
         timeout: float = GIT_TIMEOUT) -> str | None:
    """``git ARGS``'s output in ``cwd``; None when it failed or ran past ``timeout`` (then its
    process group is killed: whatever it started goes with it)."""
    try:
        proc = subprocess.Popen(["git", *GIT_CONFIG, *args], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
    except OSError:
        return None
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if isinstance(exc, subprocess.TimeoutExpired):
            return None
        raise
    return stdout.strip() if proc.returncode == 0 else None


def git_info(cwd: str | PathLike[str] | None = None) -> GitInfo:
    """The commit checked out in ``cwd`` (default: here); empty outside a repository. A tree
    whose status could not be read (git failed, or ran past its timeout) is dirty: filed as
    the commit's clean figures, changes nobody committed would be the commit's."""
    line = _git(cwd, "log", "-1", "--format=%H%x00%cI")
    if not line:
        return GitInfo()
    commit, _, date = line.partition("\0")
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(commit=commit, date=date or None,
                   branch=None if branch in (None, "HEAD") else branch,
                   dirty=status is None or bool(status))


# -- writing --------------------------------------------------------------------------------
def default_history(run_dir: str | PathLike[str]) -> Path:
    """``<base>/history`` of a run directory ``<base>/runs/<name>.<time>``."""
    run_dir = Path(run_dir).resolve()
    base = run_dir.parent.parent if run_dir.parent.name == "runs" else run_dir.parent
    return base / HISTORY


def autosave(
    saved: Mapping[str, Any],
    history: str | PathLike[str],
    *,
    git: GitInfo | None = None,
    now: _dt.datetime | None = None,
) -> Path:
    """Write the saved summary ``saved`` (what ``--bench-save`` writes: results/baseline's
    ``summary_dict``) into the history folder ``history``; return the file's path."""
    git = git if git is not None else git_info()
    when = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    machine = machine_id(saved.get("machine") if isinstance(saved.get("machine"), Mapping)
                         else None)
    block = {**git.to_dict(), "machine_id": machine,
             "saved": when.isoformat(timespec="seconds")}
    folder = Path(history) / machine
    stem = f"{when.strftime('%Y%m%dT%H%M%SZ')}_{git.short}" + ("-dirty" if git.dirty else "")
    text = json.dumps(json_safe({**saved, "history": block}), indent=2, allow_nan=False)
    return _write_new(folder, stem, text + "\n")


def _write_new(folder: Path, stem: str, text: str) -> Path:
    """Write ``text`` to a new file ``<stem>.json`` of ``folder``, else ``<stem>-2.json``, ...:
    the first name free. The whole file is written and synced under a temporary name, then
    linked to the name, which fails if the name exists: two runs in one second, in two
    processes, both keep their file (a check that the name is free, then a rename onto it,
    let the second overwrite the first). A file system without hard links: the name is
    created exclusively (empty for an instant), then the file renamed onto it."""
    folder.mkdir(parents=True, exist_ok=True)
    # Exclusive and never through a symlink placed at its name; 0666 less the umask, as a
    # plain write.
    tmp = str(folder / f".{stem}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        k = 1
        while True:
            path = folder / (f"{stem}.json" if k == 1 else f"{stem}-{k}.json")
            try:
                _claim(tmp, path)
                break
            except FileExistsError:
                k += 1
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):  # the new name itself reaches the disk
        dir_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def _claim(tmp: str, path: Path) -> None:
    """Give the written file ``tmp`` the name ``path`` if nobody has it (FileExistsError)."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise
    except OSError as exc:  # no hard links here (some network and FUSE file systems)
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                             errno.EMLINK, errno.ENOSYS):
            raise
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # ours now
    try:
        os.replace(tmp, path)
    except BaseException:  # a full disk: no empty entry left behind for a reader to warn of
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


# -- reading --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One saved run of the history."""

    path: Path
    machine: str
    commit: str | None
    commit_date: str | None
    branch: str | None
    dirty: bool
    saved: str
    summary: SuiteSummary
    #: Written by --bench-autosave (it has a ``history`` block), not a plain saved summary.
    autosaved: bool = False
    #: The benchmarks whose figures of this file were left out (not finite positive rates),
    #: and the warning line that names the file and them (None: none left out).
    left_out: tuple[str, ...] = ()
    warning: str | None = None

    @property
    def short(self) -> str:
        return (self.commit or "nogit")[:10] + ("+" if self.dirty else "")


def usable_rate(value: float | None) -> bool:
    """A rate a series or a drift can use: a finite number above 0 (a history file is data
    someone else wrote: ``1e999`` reads as infinity, ``NaN`` and ``-1`` are JSON too)."""
    return value is not None and math.isfinite(value) and value > 0


#: The benchmarks a warning about a file's left-out figures names; the rest are counted.
SHOWN_BENCHES = 3


def _usable_figures(path: Path, summary: SuiteSummary
                    ) -> tuple[SuiteSummary, tuple[str, ...], str | None]:
    """``summary`` with each perf and run rate that is not a finite positive number left out
    (None), the benchmarks it touched, and one warning line naming the file (None: none)."""
    benches, touched, what = [], [], []
    for bench in summary.benchmarks:
        bad_perf = bench.perf is not None and not usable_rate(bench.perf)
        runs = tuple(replace(r, rate=None) if r.rate is not None and not usable_rate(r.rate)
                     else r for r in bench.runs)
        bad_runs = sum(a is not b for a, b in zip(runs, bench.runs, strict=True))
        if bad_perf or bad_runs:
            touched.append(bench.name)
            parts = [f"perf {bench.perf!r}"] if bad_perf else []
            parts += [f"{bad_runs} run rate{'s' if bad_runs != 1 else ''}"] if bad_runs else []
            what.append(f"{bench.name} ({', '.join(parts)})")
            bench = replace(bench, perf=None if bad_perf else bench.perf, runs=runs)
        benches.append(bench)
    if not touched:
        return summary, (), None
    named = ", ".join(what[:SHOWN_BENCHES])
    if len(what) > SHOWN_BENCHES:
        named += f" and {len(what) - SHOWN_BENCHES} more benchmarks"
    line = (f"left out: {path}: {named}: not finite positive rates (the file's other "
            "figures are read)")
    return replace(summary, benchmarks=tuple(benches)), tuple(touched), line


def _entry(path: Path) -> Entry:
    summary = load_summary(path)  # one line naming the file when it cannot be used
    summary, left_out, warning = _usable_figures(path, summary)
    data = untrusted.loads(untrusted.read_bytes(path).decode("utf-8"))
    block = data.get("history") if isinstance(data, Mapping) else None
    block = block if isinstance(block, Mapping) else {}

    def text(key: str) -> str | None:
        value = block.get(key)
        return value if isinstance(value, str) and value else None

    return Entry(path=path, machine=text("machine_id") or path.parent.name,
                 commit=text("commit") or _str(summary.provenance, "commit"),
                 commit_date=text("commit_date"), branch=text("branch"),
                 dirty=block.get("dirty") is True,
                 saved=text("saved") or _str(summary.provenance, "created") or "",
                 summary=summary, autosaved=bool(block), left_out=left_out, warning=warning)


def _str(mapping: Mapping[str, Any] | None, key: str) -> str | None:
    value = (mapping or {}).get(key)
    return value if isinstance(value, str) else None


def load_history(
    history: str | PathLike[str], *, machine: str | None = None
) -> tuple[list[Entry], list[str]]:
    """Every saved run of the history folder (of one machine when given), oldest commit
    first (by commit date, then by when it was saved); and one line per file that could not
    be read (it is left out, the others are read) or whose figures were not all finite
    positive rates (those are left out, the file's others are read)."""
    root = Path(history)
    if not root.is_dir():
        raise HistoryError(f"history {root}: no such folder (write one with --bench-autosave)")
    entries: list[Entry] = []
    problems: list[str] = []
    for path in sorted(root.glob("*/*.json")):
        if machine is not None and path.parent.name != machine:
            continue
        try:
            entry = _entry(path)
        except (DlbenchError, OSError, ValueError) as exc:
            problems.append(f"left out: {' '.join(str(exc).split())}")
            continue
        entries.append(entry)
        if entry.warning:
            problems.append(entry.warning)
    entries.sort(key=lambda e: (_date_key(e.commit_date or e.saved), e.saved))
    return entries, problems


def _date_key(text: str) -> float:
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def since(entries: Sequence[Entry], rev: str, cwd: str | PathLike[str] | None = None
          ) -> list[Entry]:
    """The entries of ``rev`` and the commits after it (``git rev-list REV^!`` and
    ``REV..HEAD`` of the repository here)."""
    if not rev or rev.startswith("-"):
        raise HistoryError(f"--since={quoted(rev)}: not a revision")
    sha = _git(cwd, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if not sha:
        raise HistoryError(
            f"--since={shorten(rev, MAX_QUOTED)}: no such revision in the repository here")
    after = set((_git(cwd, "rev-list", f"{sha}..HEAD") or "").split())
    keep = after | {sha}
    return [e for e in entries if e.commit in keep]


# -- -k, as pytest's: names, and, or, not, parentheses --------------------------------------
_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


#: How deep ``not`` and parentheses may nest in ``-k``: the parser is recursive, and an
#: expression is text someone typed or a script built (Python's recursion limit is ~1,000).
MAX_K_DEPTH = 50


def keyword_matcher(expr: str) -> Callable[[str], bool]:
    """A test of benchmark names: ``expr`` as pytest's ``-k`` (a word matches a name that
    contains it, case-insensitively; ``and``, ``or``, ``not``, parentheses)."""
    tokens = _TOKEN.findall(expr)
    pos = depth = 0
    # pytest's -k is typed by hand: its first 60 characters name it in every message.
    shown = repr(expr if len(expr) <= 60 else expr[:57] + "...")

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        token = peek()
        if token is None:
            raise HistoryError(f"-k {shown}: the expression ends too early")
        pos += 1
        return token

    def alternatives() -> Callable[[str], bool]:
        terms = [conjunction()]
        while peek() == "or":
            take()
            terms.append(conjunction())
        return lambda name: any(t(name) for t in terms)

    def conjunction() -> Callable[[str], bool]:
        terms = [negation()]
        while peek() == "and":
            take()
            terms.append(negation())
        return lambda name: all(t(name) for t in terms)

    def deeper() -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_K_DEPTH:
            raise HistoryError(f"-k {shown}: 'not' and parentheses nested more than "
                               f"{MAX_K_DEPTH} deep")

    def negation() -> Callable[[str], bool]:
        nonlocal depth
        if peek() == "not":
            take()
            deeper()
            inner = negation()
            depth -= 1
            return lambda name: not inner(name)
        token = take()
        if token == "(":
            deeper()
            inner = alternatives()
            depth -= 1
            if take() != ")":
                raise HistoryError(f"-k {shown}: a parenthesis is not closed")
            return inner
        if token in (")", "and", "or"):
            raise HistoryError(f"-k {shown}: unexpected {quoted(token)}")
        word = token.lower()
        return lambda name: word in name.lower()

    if not tokens:
        return lambda name: True
    test = alternatives()
    if pos != len(tokens):
        raise HistoryError(f"-k {shown}: unexpected {quoted(tokens[pos])}")
    return test


# -- a benchmark over the commits ----------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One commit of a benchmark's series: its rate (the median of its runs there)."""

    commit: str | None
    short: str
    date: str | None
    rate: float
    runs: int  # the saved runs of this commit
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class BenchSeries:
    """A benchmark's rate per commit on one machine, and its steps."""

    bench: str
    machine: str
    units: str
    points: tuple[Point, ...]
    steps: tuple[Step, ...] = ()
    #: The point of the run being reported (the HTML report highlights it), if any.
    current: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def step_range(self, step: Step) -> str:
        """``<last commit before>..<first commit after>``: git's range of the change (what
        ``dlbench bisect`` takes)."""
        return f"{self.points[step.index - 1].short}..{self.points[step.index].short}"


def bench_series(
    entries: Iterable[Entry],
    *,
    select: Callable[[str], bool] = lambda name: True,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
) -> list[BenchSeries]:
    """Each selected benchmark's series per machine, commits in the entries' order (runs of
    one commit are one point, their median), with the steps of :func:`detect_steps`."""
    by_key: dict[tuple[str, str], dict[str, list[tuple[Entry, float]]]] = {}
    order: dict[str, int] = {}
    units: dict[tuple[str, str], str] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    sessions: set[str] = set()
    for entry in entries:
        session = session_key(entry.summary)
        if session in sessions:  # one session's file copied under a second name: one run
            continue
        sessions.add(session)
        key_commit = entry.commit or f"nogit:{entry.path.name}"
        if entry.dirty:
            key_commit += "+dirty"  # uncommitted changes are not the commit's code
        order.setdefault(key_commit, len(order))
        for bench in entry.summary.benchmarks:
            if not select(bench.name):
                continue
            key = (entry.machine, bench.name)
            if entry.warning and bench.name in entry.left_out:
                notes.setdefault(key, []).append(entry.warning)
            # A figure that is not a finite positive rate is no point of a series (the reader
            # leaves it out and says so; an entry made otherwise is checked here too).
            if bench.perf is None or not usable_rate(bench.perf):
                continue
            units.setdefault(key, bench.units)
            by_key.setdefault(key, {}).setdefault(key_commit, []).append((entry, bench.perf))
    out = []
    for (machine, name), commits in sorted(by_key.items()):
        points = []
        for commit_key in sorted(commits, key=lambda c: order[c]):
            runs = commits[commit_key]
            first = runs[0][0]
            points.append(Point(commit=first.commit, short=first.short, date=first.commit_date,
                                rate=math.exp(_median([math.log(r) for _, r in runs])),
                                runs=len(runs), entries=tuple(e for e, _ in runs)))
        steps = detect_steps([math.log(p.rate) for p in points], tolerance=tolerance,
                             alpha=alpha)
        out.append(BenchSeries(bench=name, machine=machine, units=units[(machine, name)],
                               points=tuple(points), steps=tuple(steps),
                               notes=tuple(dict.fromkeys(notes.get((machine, name), ())))))
    return out


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def run_machine(entries: Sequence[Entry], run_dir: str | PathLike[str] | None
                ) -> tuple[str, list[Entry]]:
    """(the machine id a run was measured on, its own autosaved entries): the machine its
    entries name, else this machine now (a run not saved into the history yet)."""
    here = Path(run_dir).resolve() if run_dir else None
    own = [e for e in entries if here is not None and e.summary.run_dir
           and Path(e.summary.run_dir).resolve() == here]
    if own:
        return own[-1].machine, own
    return machine_id(machine_info()), own


def history_folder(summary: SuiteSummary, folder: str | PathLike[str] | None) -> Path | None:
    """The history a run's summary goes to: ``folder``, else (``""`` or None)
    ``<base>/history`` of its run directory (None when it has none)."""
    if folder:
        return Path(folder)
    return default_history(summary.run_dir) if summary.run_dir else None


def autosave_summary(summary: SuiteSummary, folder: str | PathLike[str] | None, *,
                     suite: str | None = None) -> Path:
    """``--bench-autosave``: ``summary`` as ``--bench-save`` writes it, into the history."""
    target = history_folder(summary, folder)
    if target is None:
        raise OSError("no history folder: the summary has no run directory (give one)")
    return autosave(summary_dict(summary, suite=suite), target)


def report_series(summary: SuiteSummary, folder: str | PathLike[str] | None = None,
                  ) -> tuple[Path | None, list[BenchSeries]]:
    """The HTML report's histories: the series of ``summary``'s benchmarks on the machine it
    ran on, from ``folder`` (default ``<base>/history``), its own saved run marked ``current``;
    (None, []) when there is no history."""
    target = history_folder(summary, folder)
    if target is None or not target.is_dir():
        return None, []
    entries, _ = load_history(target)
    machine, own = run_machine(entries, summary.run_dir)
    names = {b.name for b in summary.benchmarks}
    series = bench_series([e for e in entries if e.machine == machine],
                          select=lambda name: name in names)
    marked = []
    for s in series:
        current = next((i for i, p in enumerate(s.points)
                        if any(e in own for e in p.entries)), None)
        marked.append(replace(s, current=current))
    return target, marked


def drifts_from_history(
    history: str | PathLike[str] | None, run_dir: str | PathLike[str] | None = None, *,
    machine: str | None = None,
) -> HistoryDrifts:
    """The drift between sessions (results/judge/history_drift.py) of the history folder ``history``
    (nothing without one), for ``machine``, else the machine the run ``run_dir`` was measured
    on: the machine its own autosaved entry names, else this machine. A file the history cannot
    read is left out, as ``dlbench history`` leaves it out, and named in
    ``HistoryDrifts.left_out``."""
    if history is None or not Path(history).is_dir():
        return HistoryDrifts()
    entries, problems = load_history(history)
    if machine is None:
        machine, _own = run_machine(entries, run_dir)
    leave_out = Path(run_dir).resolve() if run_dir else None
    drifts = history_drifts([e for e in entries if e.machine == machine], leave_out=leave_out)
    return HistoryDrifts(drifts, Path(history), tuple(problems))
