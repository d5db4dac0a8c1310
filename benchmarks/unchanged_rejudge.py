"""The recorded gate_power trials (benchmarks/trials/) judged again by today's verdict core:
what the one definition of "unchanged" (the interval's lower bound at least 1 - tolerance)
changes on real paired runs, without running them again.

Each trial kept its last look's ratio, interval and p (the fixed design, 10 rounds); the
word it printed then is set beside the word the core gives now. Saved-baseline trials kept no
interval and are counted as "not re-judged". Real streams, judged offline: not a calibration
of the sequential design (its interim looks were not kept).

    PYTHONPATH=src python benchmarks/unchanged_rejudge.py [benchmarks/trials]
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pytest_dlbench.results.judge import Evidence, Rule, judge


def rejudge(trial: dict[str, Any], rule: Rule) -> str | None:
    """The core's word for a kept trial; None when it kept no interval."""
    if trial.get("ratio") is None or trial.get("ci") is None:
        return None
    low, high = trial["ci"]
    found = Evidence(trial["ratio"], trial.get("p_value"), (low, high),
                     paired=trial.get("mode") == "paired")
    return judge(found, rule).word


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).parent / "trials"
    rule = Rule()
    cells: dict[tuple[str, str, float, float], list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(root.glob("*/*.json")):
        for trial in json.loads(path.read_text())["trials"]:
            key = (path.parent.name, trial["mode"], float(trial.get("neighbour") or 0),
                   float(trial.get("slowdown") or 0))
            cells[key].append(trial)
    print("| trials of | mode | neighbour | slowdown | n | words then | words now |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (day, mode, neighbour, slowdown), trials in sorted(cells.items()):
        then = Counter(t.get("verdict") for t in trials)
        now = Counter(rejudge(t, rule) or "not re-judged" for t in trials)
        print(f"| {day} | {mode} | {neighbour:g} % | {slowdown:g} % | {len(trials)} | "
              f"{_words(then)} | {_words(now)} |")
    return 0


def _words(counts: Counter[Any]) -> str:
    return ", ".join(f"{word} {n}" for word, n in counts.most_common())


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
