"""Where the drift between sessions comes from: the warm launcher's server, or the minutes.

A saved baseline's gate adds each side's drift between sessions to its noise
(results/judge/noise.py), and on the development machine that drift, measured between pytest
sessions a minute apart, is 1-9 %: it keeps a single candidate run from ever being "unchanged"
at a 3 % tolerance. Runs of one session fork from one warm server (``--bench-launcher=warm``);
``--bench-confirm``'s reruns and ``--bench-launcher=fresh`` start new interpreters. If the
session effect is the server's state, fresh runs of one session scatter as widely as sessions
do and the drift measured between fresh sessions falls to its floor; if it is the minutes (the
machine's clocks and load), fresh sessions drift as much as warm ones.

The same workload as gate_power's saved mode (its scratch repository and suite), ``--sessions``
sessions of each launcher in alternation (ABBA), each ``pytest --bench-repeat=R
--bench-save=...``; printed per launcher: the within-session spread of a run, the spread of the
session means, and the drift the product would estimate from them (noise.estimate_drift).

    python benchmarks/session_effect.py --sessions 12 --repeats 3 --out session_effect.json
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_offline import BENCH  # noqa: E402
from gate_power import Scratch, session_args  # noqa: E402
from gate_power import parse_args as gate_args  # noqa: E402
from gate_workloads import calibrate  # noqa: E402

from pytest_dlbench.results.judge import estimate_drift  # noqa: E402
from pytest_dlbench.results.model import load_baseline  # noqa: E402

LAUNCHERS = ("warm", "fresh")


def session_rates(path: Path) -> list[float]:
    """The run rates of ``gp`` a saved session holds."""
    summary = load_baseline(str(path)).summary
    bench = summary.get(BENCH) if summary is not None else None
    return [] if bench is None else list(bench.rates)


def spread(sessions: list[list[float]]) -> dict[str, float]:
    """A launcher's figures: one run's cv within a session (pooled), the sd of the session
    log means, what the runs alone would give that sd, and the drift noise.py estimates."""
    logs = [[math.log(x) for x in s] for s in sessions if len(s) >= 2]
    within = math.sqrt(statistics.fmean(statistics.variance(s) for s in logs))
    means = [statistics.fmean(s) for s in logs]
    expected = within / math.sqrt(statistics.fmean(len(s) for s in logs))
    drift = estimate_drift([sessions], "sessions")
    return {"sessions": len(logs), "within_run_cv": within,
            "session_mean_sd": statistics.stdev(means), "runs_alone_sd": expected,
            "drift_cv": drift.cv if drift is not None else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12, help="sessions per launcher")
    parser.add_argument("--repeats", type=int, default=3, help="--bench-repeat of a session")
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.sessions < 2 or args.repeats < 2:
        parser.error("--sessions and --repeats: 2 or more")
    gp = gate_args(["--workload", "mlp", "--step-ms", str(args.step_ms)])
    root = Path(tempfile.mkdtemp(prefix="session-effect-"))
    rates: dict[str, list[list[float]]] = {name: [] for name in LAUNCHERS}
    order: list[str] = []
    try:
        scratch = Scratch(root, gp, calibrate("mlp", args.step_ms))
        for k in range(args.sessions):
            pair = LAUNCHERS if k % 2 == 0 else LAUNCHERS[::-1]  # ABBA: time hits both alike
            for name in pair:
                path = root / f"{name}-{k}.json"
                trial, _ = scratch.pytest(*session_args(path, args.repeats,
                                                        [f"--bench-launcher={name}"]))
                if trial.status != 0 or not path.is_file():
                    raise SystemExit(f"session_effect: a {name} session exited {trial.status}")
                rates[name].append(session_rates(path))
                order.append(name)
                runs = ", ".join(f"{x:,.0f}" for x in rates[name][-1])
                print(f"session {k} {name}: {runs} ({trial.minutes:.2f} min)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {name: spread(rates[name]) for name in LAUNCHERS}
    print()
    print("launcher  sessions  run cv in a session  sd of session means  runs alone  drift")
    for name, f in figures.items():
        print(f"{name:<8}  {f['sessions']:>8}  {f['within_run_cv']:>19.2%}  "
              f"{f['session_mean_sd']:>19.2%}  {f['runs_alone_sd']:>10.2%}  {f['drift_cv']:.2%}")
    if args.out is not None:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "rates": rates, "order": order,
                                        "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
