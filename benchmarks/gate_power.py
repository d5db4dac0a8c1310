"""The regression gate's power through the real path: pytest itself, one child process per run,
the wall clock the plugin measures with, with and without a noisy neighbour.

A benchmark (``--workload``: ``spin``, pure-Python arithmetic, or ``mlp``, the toy MLP's real
training step on one thread; benchmarks/gate_workloads.py) lives in a scratch git repository, in
the suite ``gp.yaml``; its ``--extra-pct`` argument makes every step 0 %, 3 %, 5 % or 10 %
heavier (measured in-process at the start: "injected slowdowns measured"). Every trial is a real
``pytest`` command, judged by its exit status: 6 regressed (at 0 % a false alarm), 9
inconclusive (issue 26), 0 passed, anything else a failed run ("other", with its reason). Modes:

- **saved** (``--bench-compare``, the product's defaults, its confirmation included): per
  repetition a baseline run ``pytest --bench-repeat=R --bench-save=base.json`` on the quiet
  machine, then one run per neighbour level and slowdown with ``--bench-override=
  gp.argv.--extra-pct=X --bench-compare=base.json``: a CI job comparing with a saved baseline.
- **paired** (``--bench-against``): the working tree's ``gp.yaml`` says ``--extra-pct: X`` (an
  uncommitted change, as a pull request differs from main: an override would apply to both
  sides) and ``pytest --bench-against=HEAD`` runs both sides in ABBA order (``--rounds`` passes
  ``--bench-rounds``; none by default: the product's own, sequential or fixed).
  ``--paired-args``/``--saved-args`` add pytest options to a mode (e.g. to turn a default off).
- **saved-measured** (``--bench-compare`` against a baseline of several sessions, as
  docs/reports.md tells a user who gates on a saved baseline): per repetition
  ``--baseline-sessions`` K separate sessions ``pytest --bench-repeat=R --bench-save=s<k>.json``
  (R: ``--session-repeats``) on the quiet machine, merged by ``dlbench baseline``, so the drift
  between sessions is measured (its floor 1 %) instead of the default 5 %; then each trial
  ``pytest --bench-override=gp.argv.--extra-pct=X --bench-compare=<merged>`` with the product's
  defaults (one run, its confirmation). Each trial records the drift the baseline measured.
- **fixture** (``--bench-against`` of a user's own test file, the ``bench`` fixture, no suite):
  the workload's step in ``test_gp.py`` of a scratch repository of its own (branch ``main``);
  the working tree's file says ``EXTRA_PCT = X`` (uncommitted) and ``pytest test_gp.py
  --bench-against=main --bench-fixture-steps=SKIP,STOP`` runs the product's default rounds,
  test and tolerance (``--rounds`` and ``--paired-args`` apply as to paired).

The neighbour (``--neighbour=0,25,50``, duty cycles in %; benchmarks/neighbour.py) is
``--neighbour-procs`` processes (default: cores - 1) streaming memory in random bursts, started
before each trial's pytest and stopped after it. Neighbour levels and slowdowns of a repetition
run in a random order. Printed: one row per cell (mode x neighbour x slowdown) with the share
regressed / inconclusive / passed / other, the mean rounds (paired: rounds run; saved: the
candidate's runs) and the minutes per trial; then, per neighbour level, the same streams judged
again offline (benchmarks/gate_offline.py): as the product judged them (each run's paired design,
its doubts and confirmations; a warning where that disagrees with an exit status), and by other
rules. ``--out`` keeps every trial as JSON (rewritten after each one), with its exit status,
rounds, neighbour and the load before and after it.

    python benchmarks/gate_power.py --reps 20            # the measurement (see --help for cost)
    python benchmarks/gate_power.py --reps 1 --rounds 2 --repeats 2 --slowdowns 0,10 \\
        --stop 8 --step-ms 5                             # a smoke run: does it work end to end
    python benchmarks/gate_power.py --workload mlp --check-slowdown  # the injected slowdowns
    python benchmarks/gate_power.py --modes saved-measured,fixture --reps 1 --slowdowns 0,20 \\
        --baseline-sessions 5                            # the saved mode's measured drift, a test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Siblings in benchmarks/ (on sys.path when this file runs as a script).
from gate_cells import cell_rows, cells, confirmations_in, other_lines, outcome, rounds_in
from gate_offline import (
    BENCH,
    judge_paired,
    judge_saved,
    offline_report,
    sequential_on_same_rounds,
    table,
)
from gate_workloads import SOURCES, WORK_ARG, WORKLOADS, calibrate, measure_slowdown
from neighbour import (
    Neighbour,
    default_procs,
    last_level_cache_bytes,
    neighbour_command,
)

from pytest_dlbench.results import gate
from pytest_dlbench.results.judge import (
    ALPHA,
    PAIRED_RATE,
    PAIRED_TEST,
    ROUNDS,
    TOLERANCE,
    session_drift,
)
from pytest_dlbench.results.model import load_baseline

#: The exit statuses that are verdicts: passed, regressed, inconclusive. (gate.INCONCLUSIVE is
#: the verdict word, not its status: taking it here counted every exit 9 as "other".)
INCONCLUSIVE = gate.EXIT_INCONCLUSIVE
VERDICTS = (gate.OK, gate.EXIT_REGRESSED, INCONCLUSIVE)
#: The saved mode's runs per side (the paired default was their number before it became 20).
SAVED_REPEATS = 10
#: The modes (module docstring): the suite against a one-session baseline and paired, against a
#: baseline of several sessions, and a test of one's own paired.
MODES = ("saved", "paired", "saved-measured", "fixture")
#: The modes run as ``--bench-against``: their rounds and the sequential judgement are recorded.
PAIRED_MODES = ("paired", "fixture")
#: saved-measured: sessions merged into its baseline, and the runs of each (docs/reports.md's
#: example of ``dlbench baseline`` saves with ``--bench-repeat=3``).
BASELINE_SESSIONS = 5
SESSION_REPEATS = 3
#: fixture: the user's test, its file, and the branch its scratch repository compares with.
FIXTURE_TEST = "test_gp"
FIXTURE_FILE = f"{FIXTURE_TEST}.py"
FIXTURE_BRANCH = "main"


def suite_text(workload: str, work: int, extra: float, skip: int, stop: int) -> str:
    return textwrap.dedent(
        f"""\
        gp:
          definition: gp_bench.py:main
          weight: 1
          max_duration: 600
          argv:
            {WORK_ARG[workload]}: {work}
            --extra-pct: {extra:g}
          voir: {{options: {{skip: {skip}, stop: {stop}}}}}
        """
    )


def fixture_text(workload: str, work: int, extra: float) -> str:
    """A user's own test file of the workload's step (the ``bench`` fixture, no suite): the
    workload's source (its ``make_step``), then one test whose step does ``extra`` % more work.
    The fixture's steps come from the command line (``--bench-fixture-steps``)."""
    batch = "1" if workload == "spin" else "WORK * BATCH"  # as the suite's main() counts items
    return SOURCES[workload] + textwrap.dedent(
        f"""

        WORK = {work}
        EXTRA_PCT = {extra:g}


        def {FIXTURE_TEST}(bench):
            step = make_step(EXTRA_PCT, WORK)
            for _ in bench.iterate(range(10**9), batch_size={batch}):
                step()
        """
    )


def pytest_command(base: Path, *extra: str, suite: bool = True) -> list[str]:
    """A trial's ``python -m pytest`` (the suite ``gp.yaml``, or with ``suite=False`` the test
    files ``extra`` names), its run directories under ``base``."""
    return [sys.executable, "-m", "pytest", *(["--bench-suite=gp.yaml"] if suite else []), "-q",
            "-p", "no:cacheprovider", "-p", "no:randomly", f"--bench-base={base}", *extra]


def session_args(path: Path, repeats: int, more: Sequence[str] = ()) -> list[str]:
    """saved-measured: one session of the baseline, saved to ``path`` as a user saves one."""
    return [f"--bench-repeat={repeats}", f"--bench-save={path}", *more]


def merge_command(merged: Path, sessions: Sequence[Path]) -> list[str]:
    """``dlbench baseline MERGED SESSION...``: the sessions as one baseline, drift measured."""
    return [sys.executable, "-m", "pytest_dlbench.cli", "baseline", str(merged),
            *map(str, sessions)]


def measured_compare_args(baseline: Path, slowdown: float, more: Sequence[str] = ()
                          ) -> list[str]:
    """saved-measured: a trial's compare with the merged baseline, the product's defaults (one
    run, its confirmation): only the slowdown is set."""
    return [f"--bench-override=gp.argv.--extra-pct={slowdown:g}", f"--bench-compare={baseline}",
            *more]


def fixture_args(args: argparse.Namespace) -> list[str]:
    """fixture: a trial's pytest arguments, the test file and ``--bench-against`` of the
    branch, its steps; the rest the product's defaults unless ``--rounds``/``--paired-args``."""
    rounds = [] if args.rounds is None else [f"--bench-rounds={args.rounds}"]
    return [FIXTURE_FILE, f"--bench-against={FIXTURE_BRANCH}",
            f"--bench-fixture-steps={args.skip},{args.stop}", *rounds, *args.paired_args]


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "gate_power", "GIT_AUTHOR_EMAIL": "gp@localhost",
           "GIT_COMMITTER_NAME": "gate_power", "GIT_COMMITTER_EMAIL": "gp@localhost"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()


@dataclass
class Trial:
    mode: str  # one of MODES
    rep: int
    slowdown: float  # % more work per step
    status: int  # pytest's exit status
    minutes: float
    run_dir: str
    baseline: str | None = None  # saved mode: the baseline file
    verdict: str = ""  # the benchmark's, as the product judged the run (gate_offline)
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    #: Paired: the (base, candidate) rates of the rounds the verdict used.
    pairs: list[tuple[float, float]] = field(default_factory=list)
    neighbour: float = 0.0  # its duty cycle, %; 0 = none
    neighbour_procs: int = 0
    rounds: int | None = None  # paired: rounds run; saved: the candidate's runs, confirmations in
    confirmations: int = 0  # saved: the rounds of --bench-confirm among them
    load_before: float | None = None  # the 1-minute load average before and after the trial
    load_after: float | None = None
    reason: str = ""  # why a trial that is neither 0, 6 nor 9 failed: pytest's last words
    #: Paired, run with every round (--bench-fixed-rounds): the exit status the sequential rule
    #: at the product's defaults gives on the same rounds, and the rounds it would have run
    #: (gate_offline.sequential_on_same_rounds; gate_pool --designs pools them).
    sequential_status: int | None = None
    sequential_rounds: int | None = None
    #: saved-measured: the drift between sessions the merged baseline measured (its cv), and
    #: the sessions merged.
    drift: float | None = None
    baseline_sessions: int = 0

    @property
    def detected(self) -> bool:
        return self.status == gate.EXIT_REGRESSED


def failure_reason(stdout: str, stderr: str) -> str:
    """One line saying why a pytest run failed: its last error line, else its last line."""
    lines = [line.strip() for line in (stdout + "\n" + stderr).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E ", "ERROR", "FAILED", "error"))]
    return ((errors or lines or ["(no output)"])[-1])[:200]


class Scratch:
    """The scratch repository and the pytest commands run in it."""

    def __init__(self, root: Path, args: argparse.Namespace, work: int) -> None:
        self.root, self.args, self.work = root, args, work
        self.repo = root / "repo"
        self.out = root / "out"
        self.repo.mkdir(parents=True)
        (self.repo / "gp_bench.py").write_text(SOURCES[args.workload])
        (self.repo / "pytest.ini").write_text("[pytest]\n")
        (self.repo / ".gitignore").write_text("*.json\n")
        self.write_suite(0)
        git(self.repo.parent, "init", "-q", str(self.repo))
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-qm", "gate_power: the benchmark at 0 %")

    def write_suite(self, extra: float) -> None:
        (self.repo / "gp.yaml").write_text(suite_text(
            self.args.workload, self.work, extra, self.args.skip, self.args.stop))

    def neighbour(self, duty: float) -> Neighbour:
        a = self.args
        return Neighbour(duty, a.neighbour_procs,
                         neighbour_command(duty, burst_s=a.neighbour_burst, seed=a.seed))

    def pytest(self, *extra: str, neighbour: float = 0.0, fixture: bool = False
               ) -> tuple[Trial, Path]:
        """A pytest run (the neighbour at ``neighbour`` % around it), as a trial to fill in:
        the suite in the suite's repository, or with ``fixture`` the test file in its own."""
        before = set(self.runs())
        cmd = pytest_command(self.out, *extra, suite=not fixture)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread: the real step, pinned
        cwd = self.fixture_repo() if fixture else self.repo
        with self.neighbour(neighbour) as running:
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
            minutes = (time.monotonic() - start) / 60
            load_after = os.getloadavg()[0]
        new = sorted(set(self.runs()) - before)
        reason = ""
        if done.returncode not in VERDICTS or not new:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-2000:])
            if not new:  # nothing ran: the set-up is broken, stop here
                raise SystemExit(f"gate_power: pytest exited {done.returncode}: "
                                 f"{' '.join(cmd)}")
            # A failed run (exit 1): kept as a trial, counted as "other" with its reason.
            reason = failure_reason(done.stdout, done.stderr)
            print(f"gate_power: pytest exited {done.returncode}: {reason}", file=sys.stderr)
        trial = Trial("", -1, 0.0, done.returncode, minutes, str(new[-1]), neighbour=neighbour,
                      neighbour_procs=len(running.processes), load_before=load_before,
                      load_after=load_after, reason=reason)
        return trial, new[-1]

    def fixture_repo(self) -> Path:
        """The fixture mode's scratch repository (made on first use): the test file at 0 %,
        committed on the branch the trials compare with."""
        repo = self.root / "fixture"
        if not repo.is_dir():
            repo.mkdir(parents=True)
            (repo / FIXTURE_FILE).write_text(fixture_text(self.args.workload, self.work, 0))
            (repo / "pytest.ini").write_text("[pytest]\n")
            (repo / ".gitignore").write_text("*.json\n__pycache__/\n")
            git(repo.parent, "init", "-q", str(repo))
            git(repo, "symbolic-ref", "HEAD", f"refs/heads/{FIXTURE_BRANCH}")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", "gate_power: the test at 0 %")
        return repo

    def runs(self) -> list[Path]:
        runs = self.out / "runs"
        return sorted(runs.iterdir()) if runs.is_dir() else []

    # -- the two modes --------------------------------------------------------------------------
    def paired(self, rep: int, slowdown: float, neighbour: float) -> Trial:
        self.write_suite(slowdown)  # uncommitted at X > 0; clean at 0
        rounds = [] if self.args.rounds is None else [f"--bench-rounds={self.args.rounds}"]
        try:
            trial, run = self.pytest("--bench-against=HEAD", *rounds, *self.args.paired_args,
                                     neighbour=neighbour)
        finally:
            git(self.repo, "checkout", "--", "gp.yaml")
        trial.mode, trial.rep, trial.slowdown = "paired", rep, slowdown
        record_paired(trial, run, BENCH)
        return trial

    def fixture(self, rep: int, slowdown: float, neighbour: float) -> Trial:
        """A user's test paired: the working tree's file ``slowdown`` % heavier (uncommitted),
        ``pytest test_gp.py --bench-against=main``."""
        repo = self.fixture_repo()
        (repo / FIXTURE_FILE).write_text(fixture_text(self.args.workload, self.work, slowdown))
        try:
            trial, run = self.pytest(*fixture_args(self.args), neighbour=neighbour,
                                     fixture=True)
        finally:
            git(repo, "checkout", "--", FIXTURE_FILE)
        trial.mode, trial.rep, trial.slowdown = "fixture", rep, slowdown
        record_paired(trial, run, FIXTURE_TEST)
        return trial

    def baseline(self, rep: int) -> tuple[Path, float]:
        """A baseline saved on the quiet machine (no neighbour): the trials then compare with
        it under their cell's neighbour, as a CI job on a busier runner does."""
        path = self.root / f"baseline-{rep}.json"
        trial, _ = self.pytest(f"--bench-repeat={self.args.repeats}", f"--bench-save={path}",
                               *self.args.saved_args)
        return path, trial.minutes

    def saved(self, rep: int, slowdown: float, neighbour: float, baseline: Path,
              base_minutes: float) -> Trial:
        trial, run = self.pytest(
            f"--bench-repeat={self.args.repeats}", f"--bench-compare={baseline}",
            f"--bench-override=gp.argv.--extra-pct={slowdown:g}", *self.args.saved_args,
            neighbour=neighbour)
        trial.mode, trial.rep, trial.slowdown = "saved", rep, slowdown
        trial.minutes += base_minutes
        trial.baseline, trial.confirmations = str(baseline), confirmations_in(run, "gp")
        trial.rounds = (rounds_in(run, "gp") or 0) + trial.confirmations or None
        c = judge_saved(run, baseline)  # as the product judged it: confirmations included
        trial.verdict, trial.ratio, trial.p_value = c.verdict, c.ratio, c.p_value
        return trial

    def measured_baseline(self, rep: int) -> tuple[Path, float]:
        """saved-measured: ``--baseline-sessions`` sessions saved on the quiet machine, one
        after the other, merged by ``dlbench baseline`` as a user does (docs/reports.md, "A
        baseline of several sessions"); the merged file and the minutes it took."""
        a = self.args
        sessions, minutes = [], 0.0
        for k in range(a.baseline_sessions):
            path = self.root / f"session-{rep}-{k}.json"
            trial, _ = self.pytest(*session_args(path, a.session_repeats, a.saved_args))
            if trial.status != gate.OK or not path.is_file():
                raise SystemExit(f"gate_power: a baseline session exited {trial.status}: "
                                 f"{trial.reason or 'no summary saved'}")
            sessions.append(path)
            minutes += trial.minutes
        merged = self.root / f"measured-{rep}.json"
        start = time.monotonic()
        done = subprocess.run(merge_command(merged, sessions), cwd=self.repo,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"gate_power: dlbench baseline exited {done.returncode}: "
                             f"{failure_reason(done.stdout, done.stderr)}")
        return merged, minutes + (time.monotonic() - start) / 60

    def saved_measured(self, rep: int, slowdown: float, neighbour: float, baseline: Path,
                       base_minutes: float) -> Trial:
        trial, run = self.pytest(*measured_compare_args(baseline, slowdown, self.args.saved_args),
                                 neighbour=neighbour)
        trial.mode, trial.rep, trial.slowdown = "saved-measured", rep, slowdown
        trial.minutes += base_minutes
        trial.baseline, trial.confirmations = str(baseline), confirmations_in(run, BENCH)
        trial.rounds = (rounds_in(run, BENCH) or 0) + trial.confirmations or None
        c = judge_saved(run, baseline)  # as the product judged it: confirmations included
        trial.verdict, trial.ratio, trial.ci, trial.p_value = c.verdict, c.ratio, c.ci, c.p_value
        trial.drift = measured_drift(baseline)
        trial.baseline_sessions = self.args.baseline_sessions
        return trial


def record_paired(trial: Trial, run: Path, bench: str) -> None:
    """A ``--bench-against`` trial's rounds and verdict as the product judged them (its design,
    doubts included), and, when it ran every round, the sequential rule's on its first rounds."""
    trial.rounds = rounds_in(run, bench)
    judged = judge_paired(run, bench=bench)
    trial.verdict, trial.ratio, trial.ci, trial.p_value = (
        judged.verdict, judged.ratio, judged.ci, judged.p_value)
    trial.pairs = judged.pairs
    sequential = sequential_on_same_rounds(run, bench=bench)
    if sequential is not None:
        trial.sequential_status, trial.sequential_rounds = sequential.status, sequential.rounds


def measured_drift(baseline: Path) -> float | None:
    """The drift between sessions the gate takes from a merged baseline (its cv), as
    results/judge/noise.session_drift reads it; None when the file has no ``gp``."""
    loaded = load_baseline(str(baseline))
    bench = loaded.summary.get(BENCH) if loaded.summary is not None else None
    return None if bench is None else session_drift(bench).cv


def parse_list(text: str, kind=float) -> list:
    return [kind(x) for x in text.split(",") if x.strip()]


def report(trials: list[Trial], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    """The cell table (every mode x neighbour x slowdown), then, per neighbour level, the
    detection by slowdown and the same streams judged again offline."""
    workload = getattr(args, "workload", "spin")
    work = facts.get("work", facts.get("units"))
    injected = "; ".join(f"{pct} % -> {measured:+.1f} % (+-{spread:.1f})"
                         for pct, (measured, spread) in (facts.get("injected") or {}).items())
    lines = [
        f"gate_power {facts['date']}: load {facts['load_before']} -> {facts['load_after']}, "
        f"{facts['cpus']} cores, python {facts['python']}",
        f"benchmark: {workload}, {WORK_ARG.get(workload, 'work')}={work} (~{args.step_ms:g} ms "
        f"a step), skip {args.skip} / stop {args.stop}; tolerance {TOLERANCE:.0%}, "
        f"alpha {ALPHA:g}",
    ]
    if injected:
        lines.append(f"injected slowdowns measured in-process (CPU time, median of "
                     f"alternated pairs, +- half the quartile range): {injected}")
    if facts.get("neighbour_procs"):
        lines.append(f"neighbour: {facts['neighbour_procs']} process(es) streaming "
                     f"{facts['neighbour_mib']} MiB arrays, bursts of {args.neighbour_burst:g} s "
                     "on average")
    found = cells(trials, inconclusive=INCONCLUSIVE)
    lines += ["", table(cell_rows(found)), *other_lines(found)]
    # The offline re-judging reads the suite's paired and one-session saved runs; the other
    # modes' verdicts, ratios and intervals are in --out (gate_pool.py pools them).
    rejudged = [t for t in trials if t.mode in ("saved", "paired")]
    for level in sorted({t.neighbour for t in rejudged}):
        chosen = [t for t in rejudged if t.neighbour == level]
        lines += ["", f"neighbour {level:g} %:", offline_report(chosen, args, facts)]
    return "\n".join(lines)


def load_trials(data: dict[str, Any]) -> list[Trial]:
    trials = []
    for raw in data["trials"]:
        raw = dict(raw)
        raw["ci"] = tuple(raw["ci"]) if raw.get("ci") else None
        raw["pairs"] = [tuple(p) for p in raw.get("pairs") or []]
        trials.append(Trial(**raw))
    return trials


def rejudge_saved_measurement(args: argparse.Namespace) -> int:
    """Print the report of a kept measurement again, judged by today's code (``--from``)."""
    data = json.loads(args.source.read_text())
    kept = {**vars(args), **data["args"]}  # options an older file lacks: today's defaults
    for name in ("tolerances", "also_rounds"):  # this command's choices win
        kept[name] = getattr(args, name)
    trials = load_trials(data)
    missing = [t.run_dir for t in trials if not Path(t.run_dir).is_dir()]
    if missing:
        raise SystemExit(f"gate_power: {len(missing)} run directories are gone "
                         f"(first: {missing[0]}); measure again with --keep")
    print(report(trials, argparse.Namespace(**kept), data["facts"]))
    return 0


def save(path: Path | None, facts: dict[str, Any], args: argparse.Namespace,
         trials: list[Trial], text: str | None) -> None:
    """``--out``: written after every trial, so an interrupted measurement keeps its trials."""
    if path is None:
        return
    kept = {k: v for k, v in vars(args).items() if k not in ("out", "keep", "source")}
    path.write_text(json.dumps({"facts": facts, "args": kept,
                                "trials": [asdict(t) for t in trials], "report": text},
                               indent=1, default=str) + "\n")


def measure(scratch: Scratch, args: argparse.Namespace, facts: dict[str, Any]) -> list[Trial]:
    """Every repetition: a quiet baseline (saved mode), then each neighbour level and slowdown
    in a random order, a trial per mode."""
    rng = random.Random(args.seed)
    trials: list[Trial] = []
    for rep in range(args.reps):
        levels = list(args.neighbour)
        rng.shuffle(levels)
        trials_a_baseline = len(levels) * len(args.slowdowns)
        if "saved" in args.modes:
            baseline, base_minutes = scratch.baseline(rep)
            share = base_minutes / trials_a_baseline
        if "saved-measured" in args.modes:
            measured, measured_minutes = scratch.measured_baseline(rep)
            measured_share = measured_minutes / trials_a_baseline
        for level in levels:
            order = list(args.slowdowns)
            rng.shuffle(order)
            for s in order:
                for mode in args.modes:
                    if mode == "saved":
                        t = scratch.saved(rep, s, level, baseline, share)
                    elif mode == "saved-measured":
                        t = scratch.saved_measured(rep, s, level, measured, measured_share)
                    elif mode == "fixture":
                        t = scratch.fixture(rep, s, level)
                    else:
                        t = scratch.paired(rep, s, level)
                    trials.append(t)
                    save(args.out, facts, args, trials, None)
                    print(trial_line(t), flush=True)
    return trials


def trial_line(t: Trial) -> str:
    """A trial as it ends: its cell, exit status, verdict, ratio and interval, rounds, load."""
    judged = "" if t.ratio is None else f", {t.verdict} {t.ratio:.3f}"
    if t.ratio is not None and t.ci is not None:
        judged += f" [{t.ci[0]:.3f}, {t.ci[1]:.3f}]"
    drift = "" if t.drift is None else f", drift {100 * t.drift:.1f} %"
    return (f"{t.mode:6} rep {t.rep} neighbour {t.neighbour:>2g} % slowdown {t.slowdown:>2g} %: "
            f"exit {t.status} ({outcome(t.status, inconclusive=INCONCLUSIVE)}){judged}{drift}, "
            f"rounds {t.rounds}, load {t.load_before:.1f} -> {t.load_after:.1f}, "
            f"{t.minutes:.2f} min")


def check_injected(args: argparse.Namespace, work: int) -> dict[str, tuple[float, float]]:
    """Each slowdown as measured in this process (steps timed in alternation, quiet)."""
    return {f"{s:g}": measure_slowdown(args.workload, work, s)
            for s in args.slowdowns if s > 0}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="cost: each paired trial is 2 x ROUNDS child runs, each saved trial REPEATS "
               "(plus the baseline's REPEATS once per repetition), each saved-measured trial "
               "one run and its confirmations (plus BASELINE_SESSIONS x SESSION_REPEATS once "
               "per repetition), each fixture trial as a paired one; a child costs pytest's and "
               "the workload's start-up (2-15 s; mlp imports torch) plus skip+stop steps. "
               "Trials: reps x modes x neighbour levels x slowdowns.",
    )
    parser.add_argument("--reps", type=int, default=20, help="repetitions of each trial")
    parser.add_argument("--rounds", type=int, default=None,
                        help="paired: --bench-rounds to pass (default: none, the product's "
                        f"default: at most {ROUNDS} rounds, its sequential gate stopping "
                        "earlier)")
    parser.add_argument("--repeats", type=int, default=SAVED_REPEATS,
                        help=f"saved mode: runs per side (default {SAVED_REPEATS})")
    parser.add_argument("--slowdowns", type=parse_list, default=[0, 3, 5, 10],
                        help="%% more work per step to test (default 0,3,5,10)")
    parser.add_argument("--modes", type=lambda t: parse_list(t, str), default=["saved", "paired"],
                        help=f"any of {', '.join(MODES)} (default saved,paired)")
    parser.add_argument("--baseline-sessions", type=int, default=BASELINE_SESSIONS,
                        help="saved-measured: sessions merged by dlbench baseline per "
                        f"repetition (default {BASELINE_SESSIONS})")
    parser.add_argument("--session-repeats", type=int, default=SESSION_REPEATS,
                        help="saved-measured: --bench-repeat of each baseline session "
                        f"(default {SESSION_REPEATS})")
    parser.add_argument("--workload", choices=WORKLOADS, default="spin",
                        help="spin: pure-Python arithmetic; mlp: the toy MLP's training step, "
                        "one thread (default spin)")
    parser.add_argument("--neighbour", type=parse_list, default=[0],
                        help="the neighbour's duty cycles, %% (0: none; default 0)")
    parser.add_argument("--neighbour-procs", type=int, default=default_procs(),
                        help=f"neighbour processes (default: cores - 1 = {default_procs()})")
    parser.add_argument("--neighbour-burst", type=float, default=0.5,
                        help="the neighbour's mean burst, seconds (default 0.5)")
    parser.add_argument("--paired-args", type=shlex.split, default=[],
                        help="more pytest options for the paired and fixture runs (one string)")
    parser.add_argument("--saved-args", type=shlex.split, default=[],
                        help="more pytest options for the saved modes' runs, baselines' "
                        "sessions included (one string)")
    parser.add_argument("--check-slowdown", action="store_true",
                        help="only measure the injected slowdowns in-process, and stop")
    parser.add_argument("--skip", type=int, default=5,
                        help="warm-up steps (the suite's skip, the fixture's warm-up)")
    parser.add_argument("--stop", type=int, default=50,
                        help="the suite's stop; the fixture's steady steps")
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
    if (args.rounds is not None and args.rounds < 2) or args.repeats < 1 or args.reps < 1:
        parser.error("--rounds must be 2 or more, --repeats and --reps 1 or more")
    if not set(args.modes) <= set(MODES) or not args.modes:
        parser.error(f"--modes: any of {', '.join(MODES)}, got {','.join(args.modes)}")
    if args.baseline_sessions < 2 or args.session_repeats < 1:
        parser.error("--baseline-sessions must be 2 or more (dlbench baseline merges two or "
                     "more), --session-repeats 1 or more")
    if any(not 0 <= d <= 100 for d in args.neighbour) or args.neighbour_procs < 1:
        parser.error("--neighbour: duty cycles from 0 to 100; --neighbour-procs: 1 or more")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.source is not None:
        return rejudge_saved_measurement(args)
    # A cancelled job (SIGTERM) unwinds like Ctrl-C: the neighbours stop, the scratch goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    work = calibrate(args.workload, args.step_ms)
    facts: dict[str, Any] = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load_before": f"{os.getloadavg()[0]:.1f}",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "work": work,
        "injected": check_injected(args, work),
        "neighbour_procs": args.neighbour_procs if any(args.neighbour) else 0,
        "neighbour_mib": 2 * last_level_cache_bytes() >> 20,
        "gate": {"test": PAIRED_TEST, "rate": PAIRED_RATE,
                 "tolerance": TOLERANCE},
    }
    if args.check_slowdown:
        for pct, (measured, spread) in facts["injected"].items():
            print(f"{args.workload} {WORK_ARG[args.workload]}={work}: +{pct} % injected, "
                  f"{measured:+.1f} % measured (CPU time, median of 31 alternated pairs, "
                  f"+-{spread:.1f}: half their quartile range)")
        return 0
    root = Path(tempfile.mkdtemp(prefix="gate-power-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    try:
        trials = measure(Scratch(root, args, work), args, facts)
        facts["load_after"] = f"{os.getloadavg()[0]:.1f}"
        text = report(trials, args, facts)
        print()
        print(text)
        save(args.out, facts, args, trials, text)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
