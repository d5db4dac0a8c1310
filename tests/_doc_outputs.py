"""The example outputs of docs/*.md and README.md, and what says where each comes from.

Every fenced block without a language (or ``console``) is an example output, preceded by one
marker comment:

- ``<!-- output: COMMAND -->``: the output of COMMAND (a setup first: ``A && COMMAND``), run for
  real by tests/docs/test_docs_outputs.py in a scratch folder (:func:`run_command`: ``pytest`` and
  ``dlbench`` of this checkout, ``COLUMNS=80``, ``$DOCS`` the docs folder); the block must match
  it, numbers aside (every number is ``#`` on both sides: the measurements change from run to
  run, their columns and words do not). A line ``...`` stands for any lines (pytest's header,
  the progress); a first line ``$ COMMAND`` is the prompt;
- ``<!-- checked: tests/test_x.py -->``: a test of its own compares it (that file names the page);
- ``<!-- illustrative: WHY -->``: not produced here (a GPU run, a cluster, another machine).

A block with a language (``bash``, ``yaml``, ``python``, ``text`` for a layout or a diagram) is
not an output and needs no marker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
OUTPUT_LANGUAGES = ("", "console")
MARKER = re.compile(r"<!-- (output|checked|illustrative): (.+?) -->")
#: What differs from one run to the next, made the same on both sides before comparing.
NORMALIZE = [
    (re.compile(re.escape(str(ROOT)) + r"\b"), "/path/to"),  # this checkout
    (re.compile(r"/\S*/(runs/|\.dlbench)"), r"/path/to/\1"),  # where the run wrote
    (re.compile(r"\d[\d,.]*"), "#"),  # every measurement, count, time and date
    (re.compile(r"(?<=\s)-(?=\s|$)"), "#"),  # a figure this machine has not (MFU on a CPU)
    (re.compile(r"#\s?(ns|µs|ms|s)\b"), "# s"),  # a duration, in the unit that fits it
    (re.compile(r"#\s?(B|KiB|MiB|GiB|TiB)\b"), "# B"),  # a size, likewise
    (re.compile(r" cached\b"), ""),  # a compile found in inductor's cache, or not
    (re.compile(r"#x\?(?=\s|$)"), "#x"),  # a speed-up in doubt (a side's noise), or not
    (re.compile(r"={3,}"), "=="),  # pytest's rules pad to the width its timing leaves
    (re.compile(r"\s+"), " "),  # column widths follow the numbers' widths
]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    language: str
    text: str
    marker: tuple[str, str] | None  # (kind, argument)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` with the marker comment on the line before each."""
    lines = page.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        fence = lines[i]
        if not fence.startswith("```"):
            i += 1
            continue
        language = fence[3:].strip()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = lines[i - 1].strip() if i else ""
        match = MARKER.fullmatch(before)
        found.append(Block(page, i + 1, language, "\n".join(lines[i + 1:end]),
                           (match[1], match[2]) if match else None))
        i = end + 1
    return found


def is_output(block: Block) -> bool:
    """A bare block, or a ``console`` one with more than commands (``$ ...`` and their
    indented continuation lines)."""
    if block.language == "console":
        return any(line.strip() and not line.startswith(("$ ", " "))
                   for line in block.text.split("\n"))
    return block.language in OUTPUT_LANGUAGES


def output_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if is_output(b)]


def normalize(line: str) -> str:
    for pattern, replacement in NORMALIZE:
        line = pattern.sub(replacement, line)
    return line.strip()


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` (``...`` lines: any lines) against ``actual``, line by line, normalized."""
    want = [normalize(line) for line in expected]
    have = [normalize(line) for line in actual]

    def match(w: int, h: int) -> bool:
        if w == len(want):
            return h == len(have)
        if want[w] == "...":
            return any(match(w + 1, k) for k in range(h, len(have) + 1))
        return h < len(have) and want[w] == have[h] and match(w + 1, h + 1)

    return match(0, 0)


def run_command(command: str, folder: Path) -> str:
    """stdout and stderr of ``command``, a bash command line, run in the empty ``folder`` with
    this interpreter's ``pytest``, ``dlbench`` and ``python`` first on the PATH, ``$DOCS`` the
    docs folder and the results in ``folder/.dlbench``."""
    env = {**os.environ, "COLUMNS": "80", "DLBENCH_BASE": str(folder / ".dlbench"),
           "DOCS": str(ROOT / "docs"), "PYTEST_ADDOPTS": "-p no:cacheprovider",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    proc = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    return proc.stdout + proc.stderr
