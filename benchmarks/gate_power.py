"""The regression gate's power through the real path: pytest itself, one child process per run,
the wall clock the plugin measures with.

A CPU benchmark (a fixed amount of pure-Python arithmetic per step, one thread) lives in a
scratch git repository, in the suite ``gp.yaml``; its ``--extra-pct`` argument makes every step
0 %, 3 %, 5 % or 10 % heavier. Every trial is a real ``pytest`` command, judged by its exit
status (6 = regressed; at 0 % a 6 is a false alarm). Two modes:

- **saved** (``--bench-compare``): per repetition, a baseline run
  ``pytest --bench-repeat=R --bench-save=base.json``, then, one after the other (so minutes
  apart), one run per slowdown with ``--bench-override=gp.argv.--extra-pct=X
  --bench-compare=base.json``: what a CI job comparing with a saved baseline does.
- **paired** (``--bench-against``): per repetition and slowdown, the working tree's ``gp.yaml``
  says ``--extra-pct: X`` (an uncommitted change, as a pull request differs from main: an
  override would apply to both sides) and ``pytest --bench-against=HEAD --bench-rounds=K`` runs
  both sides in ABBA order. At 0 % the tree is clean and both sides are the same code.

The slowdowns of a repetition run in a random order. Afterwards the same streams are judged again
offline (no new run): other tests (t, Wilcoxon), fewer rounds (the first k), other tolerances, so
one measurement can choose the defaults. Printed: the date and load, the detection rate per
slowdown and mode, the runs per side and the minutes per trial, whether the paired targets are
met (false alarms <= 5 %, 5 % detected >= 80 %, 10 % >= 95 %); ``--out`` keeps every trial and
every pair's rates as JSON.

    python benchmarks/gate_power.py --reps 20            # the measurement (see --help for cost)
    python benchmarks/gate_power.py --reps 1 --rounds 2 --repeats 2 --slowdowns 0,10 \\
        --stop 8 --step-ms 5                             # a smoke run: does it work end to end
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_dlbench.results import gate
from pytest_dlbench.results.compare import compare
from pytest_dlbench.results.paired import compare_paired
from pytest_dlbench.results.scoring import load_run, summarize_runs
from pytest_dlbench.results.stats import REGRESSED
from pytest_dlbench.run import layout

TARGETS = {0: ("<=", 0.05), 5: (">=", 0.80), 10: (">=", 0.95)}  # paired mode

BENCH = textwrap.dedent(
    '''
    """gate_power's CPU benchmark: UNITS multiply-adds of pure Python per step."""
    import argparse


    def main(bench):
        parser = argparse.ArgumentParser()
        parser.add_argument("--units", type=int, required=True)
        parser.add_argument("--extra-pct", type=float, default=0.0)
        args = parser.parse_args(list(bench.args))
        n = int(round(args.units * (1 + args.extra_pct / 100)))
        bench.set_units("steps/s")
        for _ in bench.iterate(range(10**9), batch_size=1):
            total = 0
            for i in range(n):
                total += i * i
    '''
)


def suite_text(units: int, extra: float, skip: int, stop: int) -> str:
    return textwrap.dedent(
        f"""\
        gp:
          definition: gp_bench.py:main
          weight: 1
          max_duration: 600
          argv:
            --units: {units}
            --extra-pct: {extra:g}
          voir: {{options: {{skip: {skip}, stop: {stop}}}}}
        """
    )


def calibrate(step_ms: float) -> int:
    """Loop iterations that take ``step_ms`` here (the median of a few tries)."""
    units = 10_000
    times = []
    for _ in range(7):
        start = time.perf_counter()
        total = 0
        for i in range(units):
            total += i * i
        times.append(time.perf_counter() - start)
    per_unit = sorted(times)[len(times) // 2] / units
    return max(1000, int(step_ms / 1000 / per_unit))


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gate_power", "GIT_AUTHOR_EMAIL": "gp@localhost",
           "GIT_COMMITTER_NAME": "gate_power", "GIT_COMMITTER_EMAIL": "gp@localhost"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()


@dataclass
class Trial:
    mode: str  # "paired" or "saved"
    rep: int
    slowdown: float  # % more work per step
    status: int  # pytest's exit status
    minutes: float
    run_dir: str
    baseline: str | None = None  # saved mode: the baseline file
    verdict: str = ""
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (base, candidate) rates

    @property
    def detected(self) -> bool:
        return self.status == gate.REGRESSED


class Scratch:
    """The scratch repository and the pytest commands run in it."""

    def __init__(self, root: Path, args: argparse.Namespace, units: int) -> None:
        self.root, self.args, self.units = root, args, units
        self.repo = root / "repo"
        self.out = root / "out"
        self.repo.mkdir(parents=True)
        (self.repo / "gp_bench.py").write_text(BENCH)
        (self.repo / "pytest.ini").write_text("[pytest]\n")
        (self.repo / ".gitignore").write_text("*.json\n")
        self.write_suite(0)
        git(self.repo.parent, "init", "-q", str(self.repo))
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-qm", "gate_power: the benchmark at 0 %")

    def write_suite(self, extra: float) -> None:
        (self.repo / "gp.yaml").write_text(
            suite_text(self.units, extra, self.args.skip, self.args.stop))

    def pytest(self, *extra: str) -> tuple[int, float, Path]:
        before = set(self.runs())
        cmd = [sys.executable, "-m", "pytest", "--bench-suite=gp.yaml", "-q",
               "-p", "no:cacheprovider", "-p", "no:randomly", f"--bench-base={self.out}", *extra]
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=self.repo, capture_output=True, text=True)
        minutes = (time.monotonic() - start) / 60
        new = sorted(set(self.runs()) - before)
        if done.returncode not in (0, gate.REGRESSED) or not new:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-2000:])
            if not new:  # nothing ran: the set-up is broken, stop here
                raise SystemExit(f"gate_power: pytest exited {done.returncode}: "
                                 f"{' '.join(cmd)}")
            # A failed run (exit 1): kept as a trial that detected nothing, counted apart.
            print(f"gate_power: pytest exited {done.returncode} (counted as an error)",
                  file=sys.stderr)
        return done.returncode, minutes, new[-1]

    def runs(self) -> list[Path]:
        runs = self.out / "runs"
        return sorted(runs.iterdir()) if runs.is_dir() else []

    # -- the two modes --------------------------------------------------------------------------
    def paired(self, rep: int, slowdown: float) -> Trial:
        self.write_suite(slowdown)  # uncommitted at X > 0; clean at 0
        try:
            status, minutes, run = self.pytest("--bench-against=HEAD",
                                               f"--bench-rounds={self.args.rounds}")
        finally:
            git(self.repo, "checkout", "--", "gp.yaml")
        trial = Trial("paired", rep, slowdown, status, minutes, str(run))
        judged = judge_paired(run, rounds=self.args.rounds, test=gate.PAIRED_TEST,
                              tolerance=gate.TOLERANCE, rate=gate.PAIRED_RATE)
        if judged is not None:
            trial.verdict, trial.ratio, trial.ci, trial.p_value, trial.pairs = judged
        return trial

    def baseline(self, rep: int) -> tuple[Path, float]:
        path = self.root / f"baseline-{rep}.json"
        _, minutes, _ = self.pytest(f"--bench-repeat={self.args.repeats}", f"--bench-save={path}")
        return path, minutes

    def saved(self, rep: int, slowdown: float, baseline: Path, base_minutes: float) -> Trial:
        status, minutes, run = self.pytest(
            f"--bench-repeat={self.args.repeats}", f"--bench-compare={baseline}",
            f"--bench-override=gp.argv.--extra-pct={slowdown:g}")
        trial = Trial("saved", rep, slowdown, status, minutes + base_minutes, str(run),
                      baseline=str(baseline))
        c = judge_saved(run, baseline, tolerance=gate.TOLERANCE)
        if c is not None:
            trial.verdict, trial.ratio, trial.p_value = c.verdict, c.ratio, c.p_value
        return trial


# -- judging recorded runs again ------------------------------------------------------------------
def _summary(run_dir: Path, rounds: int | None = None):
    runs = [load_run(p) for p in layout.stream_paths(run_dir)]
    if rounds is not None:
        runs = [r for r in runs if (r.repeat or 0) < rounds]
    return summarize_runs(runs, layout.read_manifest(run_dir), run_dir=str(run_dir))


def judge_paired(run: Path | str, *, rounds: int, test: str, tolerance: float,
                 rate: str = "window"):
    """(verdict, ratio, ci, p, pairs) of the first ``rounds`` rounds of a paired run."""
    run = Path(run)
    cand, base = _summary(run, rounds), _summary(layout.base_dir(run), rounds)
    comparison = compare_paired(cand, base, tolerance=tolerance, test=test, rate=rate)
    b = comparison.get("gp")
    if b is None:
        return None
    from pytest_dlbench.results.paired import pairs_of

    pairs = [(p.base, p.candidate) for p in pairs_of(base.get("gp"), cand.get("gp"), rate)]
    return b.verdict, b.ratio, b.ci, b.p_value, pairs


def judge_saved(run: Path | str, baseline: Path | str, *, tolerance: float):
    from pytest_dlbench.results.baseline import load_summary

    comparison = compare(_summary(Path(run)), load_summary(baseline), tolerance=tolerance)
    return comparison.get("gp")


# -- the report -----------------------------------------------------------------------------------
def rate_cell(trials: Sequence[Any], slowdown: float, hit) -> str:
    chosen = [t for t in trials if t.slowdown == slowdown]
    if not chosen:
        return "-"
    k = sum(1 for t in chosen if hit(t))
    return f"{k}/{len(chosen)} {100 * k / len(chosen):.0f} %"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(trials: list[Trial], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    slowdowns = args.slowdowns
    head = ["mode", "runs/side", "trials", *[f"{s:g} %" if s else "0 % (false alarms)"
                                             for s in slowdowns], "min/trial"]
    rows = [head]

    def row(label: str, runs: int, chosen: list[Any], hit, minutes: str) -> None:
        n = len({t.rep for t in chosen})
        rows.append([label, str(runs), str(n),
                     *[rate_cell(chosen, s, hit) for s in slowdowns], minutes])

    def mean_minutes(chosen: list[Trial]) -> str:
        return f"{sum(t.minutes for t in chosen) / len(chosen):.1f}" if chosen else "-"

    paired = [t for t in trials if t.mode == "paired"]
    saved = [t for t in trials if t.mode == "saved"]
    # What the trials' exit statuses were judged with: the defaults of the code that ran them.
    ran = facts.get("gate") or {"test": "t", "rate": "window", "tolerance": 0.03}
    if paired:
        row(f"paired --bench-against, {ran['test']}, {ran['rate']} rate, {args.rounds} rounds "
            "(exit 6)", args.rounds, paired, lambda t: t.detected, mean_minutes(paired))
    if saved:
        row(f"saved --bench-compare, {args.repeats} runs a side (exit 6)", args.repeats, saved,
            lambda t: t.detected, mean_minutes(saved))
    # The same streams judged again: other tests and rates, fewer rounds, other tolerances.
    offline: list[tuple[str, int, list[Any]]] = []

    def rejudge(test: str, rate: str, k: int, tol: float) -> None:
        judged = []
        for t in paired:
            j = judge_paired(t.run_dir, rounds=k, test=test, tolerance=tol, rate=rate)
            judged.append(argparse.Namespace(rep=t.rep, slowdown=t.slowdown,
                                             verdict=j[0] if j else ""))
        how = f"{test}, {rate} rate" if test != "quantile" else f"{test} (steps pooled)"
        offline.append((f"  paired, {how}, first {k} rounds, tolerance {tol:.0%}", k, judged))

    if paired:
        for test in gate.PAIRED_TESTS:
            # The quantile test pools the steps: what a run contributes does not apply.
            for rate in gate.PAIRED_RATES if test != "quantile" else gate.PAIRED_RATES[:1]:
                for k in sorted({4, args.rounds, *args.also_rounds}):
                    if k <= args.rounds:
                        rejudge(test, rate, k, gate.TOLERANCE)
                for tol in args.tolerances:
                    if tol != gate.TOLERANCE:
                        rejudge(test, rate, args.rounds, tol)
    for tol in args.tolerances:
        if tol == gate.TOLERANCE:
            continue
        judged = []
        for t in saved:
            b = judge_saved(t.run_dir, t.baseline, tolerance=tol)
            judged.append(argparse.Namespace(rep=t.rep, slowdown=t.slowdown,
                                             verdict=b.verdict if b is not None else ""))
        if judged:
            offline.append((f"  saved, tolerance {tol:.0%}", args.repeats, judged))
    if offline:
        rows.append(["offline, the same runs judged again:", "", "",
                     *["" for _ in slowdowns], ""])
        for label, runs, judged in offline:
            row(label, runs, judged, lambda t: t.verdict == REGRESSED, "")
    lines = [
        f"gate_power {facts['date']}: load {facts['load_before']} -> {facts['load_after']}, "
        f"{facts['cpus']} cores, python {facts['python']}",
        f"benchmark: {facts['units']} multiply-adds a step (~{args.step_ms:g} ms), skip "
        f"{args.skip} / stop {args.stop}; tolerance {gate.TOLERANCE:.0%}, alpha {gate.ALPHA:g}",
        "",
        table(rows),
    ]
    lines += noise_lines(paired, saved)
    errors = [t for t in trials if t.status not in (0, gate.REGRESSED)]
    if errors:
        lines.append(f"errors: {len(errors)} trials exited with neither 0 nor 6 (a failed run): "
                     + ", ".join(f"{t.mode} rep {t.rep} {t.slowdown:g} %" for t in errors[:5]))
    mismatch = sum(1 for t in trials if t.verdict and t.status in (0, gate.REGRESSED)
                   and (t.verdict == REGRESSED) != t.detected)
    if mismatch:
        lines.append(f"warning: {mismatch} trials whose exit status and recomputed verdict "
                     "disagree")
    if paired:
        verdicts = []
        for s, (op, level) in TARGETS.items():
            chosen = [t for t in paired if t.slowdown == s]
            if not chosen:
                continue
            rate = sum(t.detected for t in chosen) / len(chosen)
            ok = rate <= level if op == "<=" else rate >= level
            verdicts.append(f"{s:g} % {op} {level:.0%}: {'met' if ok else 'NOT met'} "
                            f"({rate:.0%})")
        lines += ["", "paired targets: " + "; ".join(verdicts)]
        if len({t.rep for t in paired}) < 20:
            lines.append("(fewer than 20 repetitions: the rates are too coarse to judge "
                         "the targets)")
    total = sum(t.minutes for t in trials)
    lines.append(f"cost: paired {args.rounds} runs per side per trial, saved {args.repeats} "
                 f"runs per side per trial; {total:.1f} minutes of pytest in all")
    return "\n".join(lines)


def noise_lines(paired: list[Trial], saved: list[Trial]) -> list[str]:
    """The noise the gate worked against: within a round (the spread of the pairs' log ratios
    over sqrt 2, one run's share), and between runs minutes apart (saved mode)."""
    import math
    import statistics

    lines = []
    for rate in gate.PAIRED_RATES:
        spreads = []
        for t in paired:
            judged = judge_paired(t.run_dir, rounds=10**6, test="t", tolerance=gate.TOLERANCE,
                                  rate=rate)
            d = [math.log(c / b) for b, c in (judged[4] if judged else []) if b > 0 and c > 0]
            if len(d) >= 2:
                spreads.append(statistics.stdev(d) / math.sqrt(2))
        if spreads:
            lines.append(f"noise within a round (paired, one run, {rate} rate): median "
                         f"{100 * statistics.median(spreads):.1f} %, max "
                         f"{100 * max(spreads):.1f} % (docs/reports.md: the smallest regression "
                         "caught at that noise)")
    if saved:
        from pytest_dlbench.results.scoring import summarize_dir

        cvs = []
        for t in saved:
            b = summarize_dir(t.run_dir).get("gp")
            if b is not None and b.std_pct is not None:
                cvs.append(b.std_pct)
        if cvs:
            lines.append(f"noise between runs of one side (saved mode, std%): median "
                         f"{100 * statistics.median(cvs):.1f} %")
    return lines


def parse_list(text: str, kind=float) -> list:
    return [kind(x) for x in text.split(",") if x.strip()]


def rejudge_saved_measurement(args: argparse.Namespace) -> int:
    """Print the report of a kept measurement again, judged by today's code (``--from``)."""
    data = json.loads(args.source.read_text())
    kept = dict(data["args"])
    for name in ("tolerances", "also_rounds"):  # this command's choices win
        kept[name] = getattr(args, name)
    trials = []
    for raw in data["trials"]:
        raw = dict(raw)
        raw["ci"] = tuple(raw["ci"]) if raw.get("ci") else None
        raw["pairs"] = [tuple(p) for p in raw.get("pairs") or []]
        trials.append(Trial(**raw))
    missing = [t.run_dir for t in trials if not Path(t.run_dir).is_dir()]
    if missing:
        raise SystemExit(f"gate_power: {len(missing)} run directories are gone "
                         f"(first: {missing[0]}); measure again with --keep")
    print(report(trials, argparse.Namespace(**kept), data["facts"]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="cost: each paired trial is 2 x ROUNDS child runs, each saved trial REPEATS "
               "(plus the baseline's REPEATS once per repetition); a child costs pytest's and "
               "torch's start-up (2-15 s) plus skip+stop steps. --reps 20 with the defaults "
               "is ~1,000 paired and ~600 saved runs: 1.5-3 hours on a quiet 2-core machine.",
    )
    parser.add_argument("--reps", type=int, default=20, help="repetitions of each trial")
    parser.add_argument("--rounds", type=int, default=gate.ROUNDS,
                        help=f"paired rounds (default {gate.ROUNDS})")
    parser.add_argument("--repeats", type=int, default=gate.ROUNDS,
                        help="saved mode: runs per side (default: as many as the rounds)")
    parser.add_argument("--slowdowns", type=parse_list, default=[0, 3, 5, 10],
                        help="%% more work per step to test (default 0,3,5,10)")
    parser.add_argument("--modes", default="paired,saved", help="paired, saved or both")
    parser.add_argument("--skip", type=int, default=5)
    parser.add_argument("--stop", type=int, default=50)
    parser.add_argument("--step-ms", type=float, default=10.0, help="a step's duration, about")
    parser.add_argument("--tolerances", type=parse_list, default=[0.02, 0.03, 0.05],
                        help="tolerances of the offline re-judging")
    parser.add_argument("--also-rounds", type=lambda t: parse_list(t, int), default=[],
                        help="more round counts for the offline re-judging (first k rounds)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="every trial as JSON")
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="no new run: judge the trials of an --out JSON again (their run "
                        "directories must have been kept with --keep)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the scratch repository and run directories here")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.repeats < 1 or args.reps < 1:
        parser.error("--rounds must be 2 or more, --repeats and --reps 1 or more")
    if args.source is not None:
        return rejudge_saved_measurement(args)
    modes = set(args.modes.split(","))
    rng = random.Random(args.seed)
    facts: dict[str, Any] = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load_before": f"{os.getloadavg()[0]:.1f}",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "units": calibrate(args.step_ms),
        "gate": {"test": gate.PAIRED_TEST, "rate": gate.PAIRED_RATE,
                 "tolerance": gate.TOLERANCE},
    }
    root = Path(tempfile.mkdtemp(prefix="gate-power-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    scratch = Scratch(root, args, facts["units"])
    trials: list[Trial] = []
    try:
        for rep in range(args.reps):
            order = list(args.slowdowns)
            rng.shuffle(order)
            if "saved" in modes:
                baseline, base_minutes = scratch.baseline(rep)
                for s in order:
                    trials.append(scratch.saved(rep, s, baseline, base_minutes / len(order)))
                    print(f"saved  rep {rep} {s:>4g} %: exit {trials[-1].status}", flush=True)
            if "paired" in modes:
                for s in order:
                    trials.append(scratch.paired(rep, s))
                    t = trials[-1]
                    print(f"paired rep {rep} {s:>4g} %: exit {t.status}, ratio "
                          f"{t.ratio if t.ratio is None else round(t.ratio, 4)}", flush=True)
        facts["load_after"] = f"{os.getloadavg()[0]:.1f}"
        text = report(trials, args, facts)
        print()
        print(text)
        if args.out is not None:
            args.out.write_text(json.dumps(
                {"facts": facts, "args": {k: v for k, v in vars(args).items()
                                          if k not in ("out", "keep")},
                 "trials": [asdict(t) for t in trials], "report": text},
                indent=1, default=str) + "\n")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
