"""git for the tests that build a repository: one environment, one call, one worktree listing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: A fixed author, so that ``commit`` works on a machine with no git identity.
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t"}
#: Variables of a surrounding git (a hook running the tests) that would point git elsewhere.
_OUTER_REPOSITORY = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                     "GIT_COMMON_DIR")


def git_env() -> dict[str, str]:
    """This environment with the fixed identity, and neither the user's nor the system's git
    configuration (a global ``commit.gpgsign`` or hook path would change what a test builds)."""
    env = {k: v for k, v in os.environ.items() if k not in _OUTER_REPOSITORY}
    return {**env, **IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``; its output, stripped. Raises CalledProcessError on failure."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=git_env(), check=True)
    return done.stdout.strip()


def worktrees(repo: Path) -> list[str]:
    """``git worktree list --porcelain``'s ``worktree PATH`` lines, the main one first."""
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def worktree_paths(repo: Path) -> list[Path]:
    """The paths of ``repo``'s added worktrees (the main one left out)."""
    return [Path(line.split(" ", 1)[1]) for line in worktrees(repo)][1:]
