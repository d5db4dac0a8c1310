"""A scratch repository whose history slows a sleep-based benchmark at one commit, and fakes of
`dlbench bisect`'s steps (run/bisect.py): what the bisect tests share."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _git import git

from pytest_dlbench.run import bisect as bisect_module

STEP = textwrap.dedent(
    """
    import time

    FACTOR = {factor}


    def run(bench):
        for _ in bench.iterate(range(1000), batch_size=1):
            time.sleep(0.1 * FACTOR)
    """
)
SUITE = "_base: {voir: {options: {skip: 2, stop: 8}}}\nsleepy: {inherits: _base, " \
        "definition: defs.py:run, weight: 1}\n"
SLOW_COMMIT = 6  # the 7th of ten commits makes the benchmark 15 % slower


def make_repo(path: Path, slow: int = SLOW_COMMIT, n: int = 10,
              ini: str = "[pytest]\n") -> tuple[Path, list[str]]:
    """``n`` commits; from commit ``slow`` on, each step sleeps 15 % longer."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "pytest.ini").write_text(ini)
    (path / "s.yaml").write_text(SUITE)
    shas = []
    for i in range(n):
        factor = 1.15 if i >= slow else 1.0
        (path / "defs.py").write_text(STEP.format(factor=factor))
        (path / "notes.txt").write_text(f"commit {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"commit {i}" + (" (slower)" if i == slow else ""))
        shas.append(git(path, "rev-parse", "HEAD"))
    return path, shas


@dataclass
class FakeVerdict:
    """A step's verdict as bisect reads it from its judge: the word, ratio, interval and pairs
    given, and decided, changed and closer_to by the rules of the real paired Judgement."""

    word: str
    ratio: float | None
    ci: tuple[float, float] | None = None
    pairs: int = 4

    def _judgement(self) -> Any:
        from pytest_dlbench.results.judge import Judgement

        return Judgement(self.word, self.ratio, None, None, 0, "")

    @property
    def decided(self) -> bool:
        return bool(self._judgement().decided)

    @property
    def changed(self) -> bool:
        return bool(self._judgement().changed)

    def closer_to(self, changed_ratio: float) -> bool:
        return bool(self._judgement().closer_to(changed_ratio))


def fake_steps(monkeypatch: pytest.MonkeyPatch, verdicts: dict[int, list[str]],
               slow: int) -> tuple[list[tuple[int, int]], Any]:
    """Each step: a run directory is made; the judge reads the commit from the worktree's
    notes.txt and answers from ``verdicts`` (per commit, one word per try; default: by
    ``slow``). Returns the (commit index, rounds) of each try, and the judge."""
    tries: list[tuple[int, int]] = []
    seen: dict[int, int] = {}

    def run_pytest(argv: list[str], cwd: Path, log: Path) -> int:
        index = int((cwd / "notes.txt").read_text().split()[1])
        rounds = int(next(a for a in argv if a.startswith("--bench-rounds=")).split("=")[1])
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        run = base / "runs" / "x.1"
        run.mkdir(parents=True)
        (run / "commit").write_text(str(index))
        tries.append((index, rounds))
        log.write_text("ran\n")
        return 0

    def judge(run_dir: Path, bench: str) -> FakeVerdict:
        index = int((run_dir / "commit").read_text())
        k = seen.get(index, 0)
        seen[index] = k + 1
        words = verdicts.get(index) or ["changed" if index >= slow else "same"]
        word = words[min(k, len(words) - 1)]
        ratio = {"changed": 0.85, "same": 1.0, "unsure": 0.95 if index >= slow else 0.99}[word]
        return FakeVerdict(word, ratio, (ratio - 0.02, ratio + 0.02))

    monkeypatch.setattr(bisect_module, "_run_pytest", run_pytest)
    return tries, judge

