"""The set-up of ``--bench-against=REV``, one for both paths: a suite run
(plugin/controller.py) and the ``bench`` fixture's run of your own tests
(plugin/fixture_against.py).

:meth:`AgainstSetup.check_out` refuses ``--bench-compare`` beside it, only checks the revision
under ``--collect-only``, and otherwise checks REV out in a temporary worktree
(run/against.py's :class:`~pytest_dlbench.run.against.BaseSide`) that is removed however the
session ends: when pytest unconfigures, at exit, on Ctrl-C (pytest's KeyboardInterrupt) and on
SIGTERM (a cancelled CI job), turned here into that same KeyboardInterrupt. Only SIGKILL leaves
it behind; the next ``--bench-against`` removes it (``remove_stale_worktrees``).
:func:`write_against` writes the run's ``against.json`` the same way for both.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from pytest_dlbench import layout
from pytest_dlbench.run.against import (
    AgainstError,
    BaseSide,
    check_paths,
    find_repo,
    resolve_rev,
    round_order,
)

__all__ = ["AGAINST_AND_COMPARE", "AgainstSetup", "Removal", "write_against"]

AGAINST_AND_COMPARE = ("--bench-against and --bench-compare: use one (the first measures the "
                       "base revision now, the second reads a file)")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills
    raise KeyboardInterrupt("SIGTERM")


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the worktree is made, as Ctrl-C does (where no
    one else handles SIGTERM): run/against.py then kills the git command running, in its own
    process group, and removes what was made; SIGTERM's default would leave both."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)):
        yield
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Removal:
    """Removes ``side``'s worktree once, whenever it is called first: by pytest's clean-up, at
    exit, or after SIGTERM interrupted the session as Ctrl-C does. Only a SIGTERM handler nobody
    else set is replaced, and it is put back when the worktree is removed."""

    def __init__(self, side: BaseSide) -> None:
        self.side = side
        self._handler: Callable[[int, FrameType | None], None] | None = None
        atexit.register(self)
        self._interrupt_on_sigterm()

    def _interrupt_on_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals are the main thread's
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return  # someone else's handler: theirs to decide

        def interrupt(signum: int, frame: FrameType | None) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)
        self._handler = interrupt

    def __call__(self) -> None:
        self.side.remove()  # safe to call twice, never raises
        atexit.unregister(self)
        handler, self._handler = self._handler, None
        if handler is not None and signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


class AgainstSetup:
    """The base side of this session's paired run, and its removal."""

    def __init__(self, config: pytest.Config, side: BaseSide) -> None:
        self.config = config
        self.side = side
        self.remove = Removal(side)
        config.add_cleanup(self.remove)

    @classmethod
    def check_out(cls, config: pytest.Config, rev: str) -> AgainstSetup | None:
        """Check ``rev`` out in a temporary worktree; None under ``--collect-only`` (nothing
        runs: the revision is checked, no worktree made). One line as a usage error (exit
        status 4) when that cannot be done."""
        if config.getoption("bench_compare"):
            raise pytest.UsageError(AGAINST_AND_COMPARE)
        paths = _session_paths(config)
        try:
            if config.option.collectonly:
                repo = find_repo(config.rootpath)
                check_paths(repo, rev, resolve_rev(repo, rev), paths)
                return None
            with _sigterm_interrupts():  # git killed, nothing left, on SIGTERM as on Ctrl-C
                side = BaseSide.create(rev, Path(config.rootpath), paths)
        except AgainstError as exc:
            raise pytest.UsageError(str(exc)) from None
        return cls(config, side)

    def warnings(self) -> list[str]:
        """What the user is told about the base side (and ``against.json`` keeps)."""
        return _warnings(self.side)

    def write_against(self, run_dir: Path, *, rounds: int, fixed_rounds: bool) -> None:
        """``against.json``, with this session's paired test and rate."""
        from pytest_dlbench.results.judge import PAIRED_RATE, PAIRED_TEST

        option = self.config.getoption
        write_against(self.side, run_dir, rounds=rounds,
                      test=option("bench_paired_test") or PAIRED_TEST,
                      rate=option("bench_paired_rate") or PAIRED_RATE, fixed_rounds=fixed_rounds)


def _session_paths(config: pytest.Config) -> list[Path]:
    """What the session runs, as paths: its suite files and the test paths it was given (a
    submodule among them is refused before a worktree is made: run/against.check_paths)."""
    from pytest_dlbench.core.errors import DlbenchError
    from pytest_dlbench.suite.locate import find_suite

    found: list[Path] = []
    for name in config.getoption("bench_suite") or ():
        try:
            found.append(find_suite(name, config.rootpath))
        except DlbenchError:
            continue  # the suite's own loading says what is wrong with it
    here = Path(config.invocation_params.dir)
    for arg in config.args:
        text = str(arg).split("::", 1)[0]
        if text and not text.startswith("-"):
            found.append(here / text)
    return found


def _warnings(side: BaseSide) -> list[str]:
    dirty = side.dirty_note()
    return [*side.notes, *([dirty] if dirty else [])]


def write_against(side: BaseSide, run_dir: Path, *, rounds: int, test: str, rate: str,
                  fixed_rounds: bool) -> None:
    """The base side's folder and ``against.json``: what the base is, the rounds and their
    order, the paired test and rate, the design, the notes."""
    from pytest_dlbench.results.judge import FIXED, SEQUENTIAL

    layout.base_dir(run_dir).mkdir(parents=True, exist_ok=True)
    layout.write_against(run_dir, {
        **side.to_dict(),
        "rounds": rounds,
        "order": "ABBA",
        "first": [round_order(r)[0] for r in range(rounds)],
        "test": test,
        "rate": rate,
        # Whether a benchmark's rounds stop once its verdict is clear (docs/reports.md,
        # "Stopping early").
        "design": FIXED if fixed_rounds else SEQUENTIAL,
        "warnings": _warnings(side),
    })
