"""The base side of a paired run (``--bench-against=REV``): a git worktree of REV, the base
revision's suites resolved from it, and the order the two sides run in.

No pytest here. A pytest session makes the worktree (:meth:`BaseSide.create`) through
plugin/against_setup.py, for a suite run and the ``bench`` fixture's run alike, which removes it
when the session ends, however it ends (:meth:`BaseSide.remove`; ``dlbench bisect`` makes and
removes its own, run/bisect.py); xdist workers rebuild the same object from the controller's
description (:meth:`BaseSide.from_dict`) without touching git.

**The order: ABBA.** Round ``r`` of a benchmark runs base then candidate when r is even, and
candidate then base when it is odd, so the runs go B C C B B C C B ... Each pair's two runs are
adjacent (what the machine's load does to one mostly does to the other), a steady drift is
cancelled over every two rounds (each side runs first equally often with an even number of
rounds), and so is any first-run or second-run effect (a cold page cache, a CPU boosting after
idling). A randomised order balances these only on average and, with 6 rounds, often lets one
side go first 4 times or more; it protects against load that is periodic at exactly the period
of two runs, which a shared runner does not have.

**What the base side imports.** Its children run with the worktree as working directory
(the rootdir mapped into it) and ``<worktree>/src`` first on ``PYTHONPATH`` when there is one;
the candidate's children get the working tree's own ``src`` the same way, so both sides import
their own tree's code:

- a ``src`` layout (``src/<package>``) installed in development mode (``pip install -e``,
  setuptools, hatchling, flit, pdm, uv) or not installed at all: ``PYTHONPATH`` comes before the
  editable install's path entry or import hook;
- a flat layout (``<package>/`` at the rootdir): ``python -m pytest`` puts the working
  directory first on ``sys.path``;
- benchmark definitions given as files (``defs.py:step``) are resolved against the base
  revision's suite file, inside the worktree.

Not covered: code that must be built (C/C++/CUDA extensions: the worktree is not built), a
package installed non-editable into site-packages under another directory name, and git
submodules (not checked out in the worktree): a suite, a test path or the rootdir inside a
submodule of REV is refused at set-up (:func:`submodule_of`), in one line naming it, where
every base run would fail; so is an external command whose path (its ``command`` words,
``{suite_dir}`` filled, or its ``cwd``) is in one (:func:`check_commands`).

**git without the repository's hooks.** Every git command here (:func:`_git`, which
``dlbench bisect`` uses too) runs with :data:`GIT_CONFIG`: the repository's hooks never run (a
post-checkout hook would run inside ``worktree add``), and in a process group of its own that
an interrupt kills, so a Ctrl-C or a SIGTERM while git runs leaves no git process behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.core.errors import MAX_QUOTED, DlbenchError, quoted, shorten
from pytest_dlbench.layout import BASE, CANDIDATE
from pytest_dlbench.suite import BenchSpec, ResolvedSuite, resolve_suite

__all__ = [
    "GIT_CONFIG",
    "AgainstError",
    "BaseSide",
    "LOCK_REASON",
    "WORKTREE_PREFIX",
    "check_commands",
    "check_paths",
    "remove_stale_worktrees",
    "round_order",
    "source_paths",
    "submodule_of",
]

#: Temporary worktrees are made under the system's temporary directory with this prefix.
WORKTREE_PREFIX = "dlbench-against-"
#: The lock a worktree is made with: the process that uses it. One whose process is gone (a
#: SIGKILLed session, which could not remove it) is removed when the next one starts.
LOCK_REASON = "pytest-dlbench --bench-against: pid {pid} on {host}"
_LOCKED_BY = re.compile(r"pytest-dlbench --bench-against: pid (\d+) on (\S+)")


class AgainstError(DlbenchError):
    """``--bench-against`` cannot be used here: one line for the user."""


def round_order(round_index: int) -> tuple[str, str]:
    """The sides of round ``r`` in the order they run: ABBA (see the module's docstring)."""
    return (BASE, CANDIDATE) if round_index % 2 == 0 else (CANDIDATE, BASE)


#: What every git command here runs with: none of the repository's hooks (``worktree add`` runs
#: its post-checkout hook, which may build or sleep for minutes, and a hook is not ours to run
#: on a scratch checkout), no fsmonitor daemon, no automatic gc left running behind us.
GIT_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gc.auto=0")


def _git(repo: Path | None, *args: str, check: bool = True, strip: bool = True) -> str:
    """Run ``git [-C repo] ARGS`` without the repository's hooks (:data:`GIT_CONFIG`), in a
    process group of its own that an interrupt kills: a Ctrl-C (or SIGTERM, which
    plugin/against_setup.py turns into one) while git runs leaves no git process behind."""
    from pytest_dlbench.run.process import pdeathsig_setter

    cmd = ["git", *GIT_CONFIG, *(["-C", str(repo)] if repo is not None else []), *args]
    try:
        # Its own session, so we choose when it ends; and it dies with us (PR_SET_PDEATHSIG),
        # should we be SIGKILLed while it runs.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=pdeathsig_setter())
    except FileNotFoundError:
        raise AgainstError("--bench-against needs git, and git is not installed") from None
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        # Its own group: a terminal's Ctrl-C never reached it, and what it started (a filter,
        # a credential helper) is in the group too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if check and proc.returncode != 0:
        lines = (stderr or stdout).strip().splitlines()
        raise AgainstError(f"git {args[0]} failed: {lines[-1] if lines else proc.returncode}")
    if proc.returncode != 0:
        return ""
    return stdout.strip() if strip else stdout


def find_repo(start: Path) -> Path:
    start = Path(start)
    top = _git(start if start.is_dir() else start.parent, "rev-parse", "--show-toplevel",
               check=False)
    if not top:
        raise AgainstError(f"--bench-against: {start} is not inside a git repository")
    return Path(top).resolve()


def resolve_rev(repo: Path, rev: str) -> str:
    """The commit ``rev`` names; one line when there is none."""
    if not rev or rev.startswith("-"):
        raise AgainstError(f"--bench-against={quoted(rev)}: not a revision")
    sha = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
               check=False)
    if not sha:
        raise AgainstError(f"--bench-against={shorten(rev, MAX_QUOTED)}: no such revision in "
                           f"{repo} "
                           "(fetch it first: git fetch origin main)")
    return sha


def submodule_of(repo: Path, sha: str, paths: Iterable[Path]) -> tuple[Path, str] | None:
    """The first of ``paths`` that is inside (or is) a git submodule of ``repo`` at commit
    ``sha``, and that submodule's path; None when none is. A worktree does not check
    submodules out: the base side would find an empty folder there."""
    repo = repo.resolve()
    wanted: dict[Path, str] = {}
    for path in paths:
        try:
            relative = Path(path).resolve().relative_to(repo)
        except ValueError:
            continue  # outside the repository: the same on both sides
        if relative.parts:
            wanted[Path(path)] = relative.as_posix()
    if not wanted:
        return None
    folders = {p.as_posix() for rel in wanted.values()
               for p in [Path(rel), *Path(rel).parents] if p.parts}
    listing = _git(repo, "ls-tree", "-z", "--full-tree", sha, "--", *sorted(folders),
                   check=False, strip=False)
    gitlinks = {entry.partition("\t")[2] for entry in listing.split("\0")
                if entry.startswith("160000 ")}
    for path, rel in wanted.items():
        for folder in [Path(rel), *Path(rel).parents]:
            if folder.parts and folder.as_posix() in gitlinks:
                return path, folder.as_posix()
    return None


def check_paths(repo: Path, rev: str, sha: str, paths: Iterable[Path]) -> None:
    """:class:`AgainstError`, one line naming the submodule, when one of ``paths`` is inside a
    git submodule at ``rev``: its base runs would all fail (an empty folder in the worktree)."""
    found = submodule_of(repo, sha, paths)
    if found is None:
        return
    path, folder = found
    raise AgainstError(
        f"--bench-against={rev}: {_shown(path, repo)} is in the git submodule {folder}, which a "
        "worktree does not check out: run pytest inside the submodule, against a revision of "
        "its own history"
    )


def _command_paths(spec: BenchSpec) -> list[Path]:
    """The paths an external command names: its absolute words (``{suite_dir}`` filled, the
    value of ``--opt=PATH``), its words relative to its ``cwd``, and that ``cwd``."""
    command = spec.command or {}
    words = command.get("command") or ()
    cwd = command.get("cwd")
    base = Path(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None
    found = [base] if base is not None else []
    for word in map(str, words):
        for text in {word, word.partition("=")[2]} - {""}:
            if os.path.isabs(text):
                found.append(Path(text))
            elif base is not None and not text.startswith("-") and "{" not in text:
                found.append(base / text)
    return found


def check_commands(repo: Path, rev: str, sha: str, specs: Iterable[BenchSpec]) -> None:
    """:class:`AgainstError`, one line naming the benchmark and the submodule, when an external
    command's path is inside a git submodule at ``rev``: the worktree has no files there, every
    base run would fail and the gate would compare nothing."""
    for spec in specs:
        found = submodule_of(repo, sha, _command_paths(spec))
        if found is None:
            continue
        path, folder = found
        raise AgainstError(
            f"--bench-against={rev}: {spec.name}'s command names {_shown(path, repo)}, in the "
            f"git submodule {folder}, which a worktree does not check out: every base run "
            "would fail and the gate compare nothing; run pytest inside the submodule, against "
            "a revision of its own history"
        )


def dirty_files(repo: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not); untracked files do not count."""
    out = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no", check=False,
               strip=False)
    files, entries = [], iter(out.split("\0"))
    for entry in entries:
        if len(entry) > 3:
            files.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy: its source path follows
                next(entries, None)
    return files


def source_paths(tree: Path, rootdir: Path) -> list[str]:
    """What goes first on a side's ``PYTHONPATH``: ``<rootdir>/src`` and ``<tree>/src``, those
    that exist (a src layout)."""
    found: list[str] = []
    for candidate in (rootdir / "src", tree / "src"):
        if candidate.is_dir() and str(candidate) not in found:
            found.append(str(candidate))
    return found


def with_python_path(env: dict[str, str], paths: Sequence[str]) -> dict[str, str]:
    if not paths:
        return env
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, *([rest] if rest else [])])}


@dataclass
class BaseSide:
    """The base revision checked out in a temporary worktree, and its suites."""

    rev: str  # as the user wrote it
    sha: str
    repo: Path  # the user's working tree (its top level)
    path: Path  # the worktree
    head: str = ""  # the candidate's HEAD commit
    dirty: tuple[str, ...] = ()
    owner: bool = False  # this process made the worktree and removes it
    # Benchmark name -> its spec at the base revision; suites that could not be used -> why.
    specs: dict[str, BenchSpec] = field(default_factory=dict)
    suite_paths: dict[str, Path] = field(default_factory=dict)  # bench -> base suite file
    notes: list[str] = field(default_factory=list)

    # -- making and removing the worktree ---------------------------------------------------
    @classmethod
    def create(cls, rev: str, start: Path, paths: Iterable[Path] = ()) -> BaseSide:
        """Check ``rev`` out in a temporary worktree of the repository around ``start``;
        :class:`AgainstError` first when one of ``paths`` (what the session runs: its suites,
        its test paths) is in a submodule at ``rev`` (:func:`check_paths`)."""
        repo = find_repo(start)
        sha = resolve_rev(repo, rev)
        check_paths(repo, rev, sha, [start, *paths])
        head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False)
        dirty = tuple(dirty_files(repo))
        stale = remove_stale_worktrees(repo)
        path = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX)).resolve()
        path.rmdir()  # git makes it
        side = cls(rev=rev, sha=sha, repo=repo, path=path, head=head, dirty=dirty, owner=True)
        side.notes += [f"removed {p}, a worktree an earlier --bench-against left (its session "
                       "was killed)" for p in stale]
        reason = LOCK_REASON.format(pid=os.getpid(), host=socket.gethostname())
        try:
            # Locked from the start, so that no other session takes it for a stale one; an
            # older git (before 2.36: no --reason with add) locks it right after.
            if not _git(repo, "worktree", "add", "--detach", "--quiet", "--lock", "--reason",
                        reason, str(path), sha, check=False) and not path.is_dir():
                _git(repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
                _git(repo, "worktree", "lock", "--reason", reason, str(path), check=False)
        except BaseException:
            side.remove()
            raise
        return side

    def remove(self) -> None:
        """Remove the worktree and git's record of it; safe to call twice, never raises."""
        if not self.owner:
            return
        _remove_worktree(self.repo, self.path)
        self.owner = False

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def label(self) -> str:
        return f"{self.rev} ({self.sha[:7]})"

    # -- paths in the worktree --------------------------------------------------------------
    def map_path(self, path: Path) -> Path:
        """``path`` of the working tree, at the same place in the worktree; a path outside the
        repository (a suite shipped with an installed package) is the same on both sides."""
        path = Path(path).resolve()
        try:
            return self.path / path.relative_to(self.repo)
        except ValueError:
            return path

    # -- the base revision's suites ---------------------------------------------------------
    def resolve(self, suites: Iterable[ResolvedSuite], overrides: Sequence[str],
                wanted: Iterable[str]) -> None:
        """Resolve each candidate suite as it is at the base revision; note every wanted
        benchmark the base side cannot run (no such suite, or no such benchmark there)."""
        wanted = set(wanted)
        suites = list(suites)
        check_paths(self.repo, self.rev, self.sha,
                    [s.path for s in suites
                     if any(x.name in wanted and x.enabled for x in s.specs)])
        check_commands(self.repo, self.rev, self.sha,
                       [x for s in suites for x in s.specs if x.name in wanted and x.enabled])
        for suite in suites:
            names = [s.name for s in suite.specs if s.name in wanted and s.enabled]
            if not names:
                continue
            base_path = self.map_path(suite.path)
            shown = _shown(suite.path, self.repo)
            if not base_path.is_file():
                self.notes.append(f"{shown} does not exist at {self.label}: "
                                  f"{_listing(names)} run on the candidate side only")
                continue
            try:
                resolved = resolve_suite(base_path, overrides)
            except DlbenchError as exc:
                self.notes.append(f"{shown} at {self.label} cannot be resolved ({exc}): "
                                  f"{_listing(names)} run on the candidate side only")
                continue
            by_name = {s.name: s for s in resolved.specs if s.enabled}
            missing = [n for n in names if n not in by_name]
            if missing:
                self.notes.append(f"{shown} at {self.label} has no benchmark "
                                  f"{_listing(missing)}: candidate side only, no verdict")
            for name in names:
                if name in by_name:
                    self.specs[name] = by_name[name]
                    self.suite_paths[name] = base_path

    def dirty_note(self) -> str | None:
        """One line when the candidate has uncommitted changes (they are measured with it)."""
        if not self.dirty:
            return None
        shown = ", ".join(self.dirty[:3]) + (", ..." if len(self.dirty) > 3 else "")
        return (f"uncommitted changes in {len(self.dirty)} tracked "
                f"file{'s' if len(self.dirty) != 1 else ''} ({shown}) are part of the "
                f"candidate side, measured against {self.label}")

    # -- handing it to xdist workers, and to the run directory -------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "rev": self.rev,
            "sha": self.sha,
            "repo": str(self.repo),
            "worktree": str(self.path),
            "head": self.head,
            "dirty": list(self.dirty),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaseSide:
        return cls(rev=str(data["rev"]), sha=str(data["sha"]), repo=Path(data["repo"]),
                   path=Path(data["worktree"]), head=str(data.get("head") or ""),
                   dirty=tuple(data.get("dirty") or ()), owner=False)


def _remove_worktree(repo: Path, path: Path) -> None:
    """Remove the worktree ``path`` of ``repo`` (locked or not, its folder there or not) and
    git's record of it; never raises."""
    with contextlib.suppress(AgainstError):
        _git(repo, "worktree", "unlock", str(path), check=False)
        _git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
    if path.exists():  # git refused (a broken worktree): remove it ourselves
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(AgainstError):
        _git(repo, "worktree", "prune", check=False)  # the record of a folder that is gone


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. A zombie (killed, not yet reaped by a parent that
    lives on, as a CI runner's shell may leave it) answers signal 0 but runs nothing: gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    import psutil  # only here: a dependency of the telemetry, not of importing the module

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def remove_stale_worktrees(repo: Path) -> list[Path]:
    """Remove the worktrees of ``repo`` that an earlier ``--bench-against`` session left (it was
    SIGKILLed: nothing could remove them; ``git worktree prune`` does not, as their folders are
    still there). Stale: named ``dlbench-against-*``, and locked by a process of this machine
    that is gone, or not locked and in this temporary directory (made before worktrees were
    locked). A live session's worktree, and one on another machine's, are left alone."""
    listing = _git(repo, "worktree", "list", "--porcelain", check=False)
    here, tmp = socket.gethostname(), Path(tempfile.gettempdir()).resolve()
    removed: list[Path] = []
    for block in listing.split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in block.splitlines() if line)
        path = Path(fields.get("worktree", ""))
        if not path.name.startswith(WORKTREE_PREFIX):
            continue
        if "locked" in fields:
            owner = _LOCKED_BY.fullmatch(fields["locked"].strip())
            if owner is None or owner.group(2) != here or _alive(int(owner.group(1))):
                continue
        elif path.parent != tmp:
            continue
        _remove_worktree(repo, path)
        removed.append(path)
    return removed


def _shown(path: Path, repo: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(repo))
    except ValueError:
        return str(path)


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names)
