"""gate_power's trials from several ``--out`` files pooled into one cell table, with the
bounds a count of that size allows.

A measurement of 40 trials a cell takes hours at a real training step, longer than one sitting;
it is taken as several gate_power invocations (a few repetitions each, cells interleaved so a
change of the machine's load falls on all of them), each writing its ``--out`` JSON after every
trial. This script reads them all and prints, per cell (mode x neighbour x slowdown; each of
gate_power's modes, saved, paired, saved-measured and fixture, its own cells):

- the outcome counts and mean rounds (gate_cells' table);
- "regressed" as k/n with its exact 95 % Clopper-Pearson interval: for identical code the
  upper bound says how large the false-alarm rate may still be; for a slowdown the lower
  bound says how small the detection may be;
- for identical code, the trials' log ratios (the candidate's rate over the base's, as the
  product judged): their mean and spread, which show a side that is systematically slower;
- the rounds a paired or fixture trial used, as a histogram; for saved-measured trials the
  drift between sessions their baselines measured; for inconclusive trials the narrowest and
  the widest interval;
- with ``--designs``, the two paired designs on the same rounds: trials run with every round
  (``--paired-args=--bench-fixed-rounds``) judged by the sequential rule at the product's
  defaults over their first rounds (``gate_offline.sequential_on_same_rounds``: the same
  ``first_stop`` the plugin asks before each round). gate_power records that judgement in each
  such trial (``sequential_status``, ``sequential_rounds``), so files of several sittings pool
  without their run directories; an older file's trial is judged from its run directory when
  it was kept (``--keep``). The sequential gate decides only when to stop, so the rounds it would
  have seen are the first rounds of the fixed trial: each trial gives both designs' verdicts and
  the rounds the sequential one would have run, paired, without the trial-to-trial noise of two
  measurements;
- with ``--sequential``, every paired cell as the product's default gate (the sequential rule)
  judges it: a trial run with every round counts with the sequential rule's recorded status and
  rounds on its first rounds, a trial run in the default design counts as it ran. So the fixed
  trials of one sitting and the default-design trials of another (about half as long each) pool
  into one count for the gate users run. A fixed trial with no recorded judgement is left out,
  and said so; its ratio stays the one of all its rounds.

Nothing runs here; only files are read. ``python benchmarks/gate_pool.py OUT.json...``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_cells import cell_rows, cells, other_lines  # noqa: E402
from gate_offline import table  # noqa: E402

REGRESSED = 6
INCONCLUSIVE = 9
#: gate_power's modes run as ``--bench-against`` (a suite, a test of one's own): their rounds
#: are counted and the sequential rule's judgement pooled (gate_power.PAIRED_MODES).
PAIRED_MODES = ("paired", "fixture")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact two-sided interval of a binomial share k/n."""
    from scipy.stats import beta

    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return low, high


FIXED_ROUNDS = "--bench-fixed-rounds"


def ran_every_round(data: dict[str, Any]) -> bool:
    """Whether the file's paired trials ran with every round (the fixed design)."""
    return FIXED_ROUNDS in (data.get("args", {}).get("paired_args") or [])


def as_sequential(found: Sequence[Any], fixed: bool) -> tuple[list[Any], int]:
    """A file's trials as the default (sequential) paired gate judges them (``--sequential``),
    and how many fixed trials were left out for want of a recorded judgement. ``fixed``: the
    file's paired trials ran every round."""
    if not fixed:
        return list(found), 0
    kept, left_out = [], 0
    for t in found:
        if t.mode not in PAIRED_MODES:
            kept.append(t)
        elif t.sequential_status is None:
            left_out += 1
        else:
            kept.append(dataclasses.replace(t, status=t.sequential_status,
                                            rounds=t.sequential_rounds))
    return kept, left_out


def load(paths: Sequence[Path], *, sequential: bool = False
         ) -> tuple[list[Any], list[dict[str, Any]]]:
    """Every trial of the files (as gate_power's Trial), and each file's facts; with
    ``sequential``, the paired trials as the default gate judges them (:func:`as_sequential`)."""
    from gate_power import load_trials

    trials, facts = [], []
    for path in paths:
        try:
            text = path.read_text()
        except OSError as exc:
            raise SystemExit(f"gate_pool: {path}: cannot read it ({exc.strerror})") from None
        try:
            data = json.loads(text)
            found = load_trials(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"gate_pool: {path}: not a gate_power --out file ({exc})") from None
        left_out, fixed = 0, ran_every_round(data)
        if sequential:
            found, left_out = as_sequential(found, fixed)
        trials += found
        facts.append({"file": str(path), "trials": len(found), "left_out": left_out,
                      "paired_every_round": sum(fixed and t.mode in PAIRED_MODES
                                                for t in found),
                      **data.get("facts", {})})
    return trials, facts


def cell_lines(trials: Sequence[Any]) -> list[str]:
    """Per cell: regressed k/n with its interval, the A/A log ratios, the rounds used."""
    lines = []
    groups: dict[tuple[str, float, float], list[Any]] = {}
    for t in trials:
        groups.setdefault((t.mode, t.neighbour, t.slowdown), []).append(t)
    for (mode, level, slowdown), chosen in sorted(groups.items()):
        n = len(chosen)
        k = sum(t.status == REGRESSED for t in chosen)
        low, high = clopper_pearson(k, n)
        name = f"{mode} / neighbour {level:g} % / slowdown {slowdown:g} %"
        lines.append(f"{name}: regressed {k}/{n} ({100 * k / n:.1f} %, 95 % interval "
                     f"{100 * low:.1f}-{100 * high:.1f} %)")
        if slowdown == 0:
            logs = [math.log(t.ratio) for t in chosen if t.ratio]
            if len(logs) >= 2:
                mean, sd = statistics.mean(logs), statistics.stdev(logs)
                lines.append(f"  log ratio over {len(logs)} trials: mean {mean:+.4f}, "
                             f"sd {sd:.4f}, {sum(v < 0 for v in logs)} below 0")
        rounds = Counter(t.rounds for t in chosen if t.rounds is not None)
        if rounds and mode in PAIRED_MODES:
            used = ", ".join(f"{r} x{c}" for r, c in sorted(rounds.items()))
            lines.append(f"  rounds used: {used}")
        drifts = [d for t in chosen if (d := getattr(t, "drift", None)) is not None]
        if drifts:  # saved-measured: the drift between sessions each baseline measured
            lines.append(f"  drift between sessions measured: median "
                         f"{100 * statistics.median(drifts):.1f} %, "
                         f"{100 * min(drifts):.1f}-{100 * max(drifts):.1f} % over "
                         f"{len(drifts)} trials")
        inconclusive = [t for t in chosen if t.status == INCONCLUSIVE and t.ci]
        if inconclusive:  # what "cannot tell" looked like: the widest and the narrowest
            widths = sorted(inconclusive, key=lambda t: t.ci[1] - t.ci[0])
            lines.append("  inconclusive intervals: narrowest "
                         + interval(widths[0]) + ", widest " + interval(widths[-1]))
    return lines


def interval(t: Any) -> str:
    return f"{t.ratio:.3f} [{t.ci[0]:.3f}, {t.ci[1]:.3f}]" if t.ratio else "-"


def design_lines(trials: Sequence[Any]) -> list[str]:
    """Per paired cell, the fixed design (the trials' exit status) against the sequential rule
    on the same rounds (module docstring): each design's regressed / inconclusive / passed, the
    sequential rule's mean rounds as a share of the fixed design's, and the trials where the two
    disagree. Trials not run with every round, or with neither a recorded judgement nor their
    run directory, are counted apart."""
    from gate_offline import BENCH, sequential_on_same_rounds
    from gate_power import FIXTURE_TEST

    groups: dict[tuple[str, float, float], list[tuple[Any, tuple[int, int | None]]]] = {}
    skipped = 0
    for t in trials:
        if t.mode not in PAIRED_MODES:
            continue
        judged: tuple[int, int | None] | None = None
        if t.sequential_status is not None:
            judged = (t.sequential_status, t.sequential_rounds)
        elif Path(t.run_dir).is_dir():
            again = sequential_on_same_rounds(
                t.run_dir, bench=FIXTURE_TEST if t.mode == "fixture" else BENCH)
            judged = (again.status, again.rounds) if again is not None else None
        if judged is None or t.status not in (0, REGRESSED, INCONCLUSIVE):
            skipped += 1
            continue
        groups.setdefault((t.mode, t.neighbour, t.slowdown), []).append((t, judged))
    left_out = (f"{skipped} paired trials left out: not run with every round "
                "(--bench-fixed-rounds), no verdict, or neither a recorded judgement nor their "
                "run directory")
    if not groups:
        return [f"--designs: no paired trial ran every round with its judgement recorded or its "
                f"run directory kept ({left_out})"]
    rows = [["mode", "neighbour", "slowdown", "trials", "fixed: regr / inconcl / passed",
             "sequential: regr / inconcl / passed", "rounds (fixed)", "rounds (sequential)",
             "share", "disagree"]]

    def counts(statuses: Sequence[int]) -> str:
        return " / ".join(str(sum(s == want for s in statuses))
                          for want in (REGRESSED, INCONCLUSIVE, 0))

    all_fixed = all_sequential = 0
    for (mode, level, slowdown), chosen in sorted(groups.items()):
        fixed_rounds = [t.rounds or 0 for t, _ in chosen]
        seq_rounds = [rounds or 0 for _, (_, rounds) in chosen]
        all_fixed += sum(fixed_rounds)
        all_sequential += sum(seq_rounds)
        differ = [f"rep {t.rep}: {t.status} vs {status} at round {rounds}"
                  for t, (status, rounds) in chosen if t.status != status]
        rows.append([mode, f"{level:g} %", f"{slowdown:g} %", str(len(chosen)),
                     counts([t.status for t, _ in chosen]),
                     counts([status for _, (status, _) in chosen]),
                     f"{statistics.mean(fixed_rounds):.1f}", f"{statistics.mean(seq_rounds):.1f}",
                     f"{100 * sum(seq_rounds) / max(1, sum(fixed_rounds)):.0f} %",
                     "; ".join(differ) or "-"])
    lines = ["the two paired designs on the same rounds (exit statuses 6 / 9 / 0):",
             table(rows),
             f"the sequential rule over every cell: {all_sequential} of {all_fixed} rounds "
             f"({100 * all_sequential / max(1, all_fixed):.0f} % of the fixed design's)"]
    if skipped:
        lines.append(left_out)
    return lines


def sequential_lines(trials: Sequence[Any], facts: Sequence[dict[str, Any]]) -> list[str]:
    """What ``--sequential`` did: how many paired trials came from each design."""
    from_fixed = sum(f["paired_every_round"] for f in facts)
    left_out = sum(f["left_out"] for f in facts)
    as_ran = sum(t.mode in PAIRED_MODES for t in trials) - from_fixed
    line = (f"paired trials judged as the default (sequential) gate: {from_fixed} run with every "
            f"round, each by the sequential rule on its first rounds; {as_ran} run in the "
            f"default design")
    return [line + (f"; {left_out} fixed trials left out (no recorded judgement)"
                    if left_out else "")]


def report(trials: Sequence[Any], facts: Sequence[dict[str, Any]],
           designs: bool = False, sequential: bool = False) -> str:
    loads = [f"{f.get('load_before', '?')}->{f.get('load_after', '?')}" for f in facts]
    dates = sorted(str(f.get("date", "?")) for f in facts)
    found = cells(trials, inconclusive=INCONCLUSIVE)
    return "\n".join([
        f"{len(trials)} trials from {len(facts)} files, {dates[0]} to {dates[-1]}; "
        f"load before->after each: {' '.join(loads)}",
        *(sequential_lines(trials, facts) if sequential else []),
        "",
        table(cell_rows(found)),
        *other_lines(found),
        "",
        *cell_lines(trials),
        *(["", *design_lines(trials)] if designs else []),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="gate_power --out JSON files")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--designs", action="store_true",
                     help="compare the paired designs on the same rounds: trials run with "
                     "every round, by the sequential rule's judgement gate_power recorded (or "
                     "from their run directories, kept with --keep)")
    how.add_argument("--sequential", action="store_true",
                     help="pool the paired trials as the default (sequential) gate judges "
                     "them: a trial run with every round by the judgement recorded for its "
                     "first rounds, a default-design trial as it ran")
    args = parser.parse_args(argv)
    trials, facts = load(args.files, sequential=args.sequential)
    if not trials:
        raise SystemExit("gate_pool: no trials in " + ", ".join(map(str, args.files)))
    print(report(trials, facts, designs=args.designs, sequential=args.sequential))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
