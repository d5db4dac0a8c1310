"""The paired gate's design judged on real rounds, offline: how often identical code ends
"inconclusive", and how often a real slowdown reads "unchanged", at several most-rounds.

A trial draws its rounds (with replacement) from real rounds that gate_power kept (``--keep``):
a round is its base run and its candidate run, each the steady step rates of one child process
of the same code, so each round carries that machine's real noise, shared load included. A
slowdown divides the candidate's rates. Each trial is judged as the product judges it: the
quantile test (sequential_gate's vectorised twin of results/judge/stats.quantile_stats), the
sequential design's looks (results/judge/paired.first_stop) and the verdict rule (results/verdict).
It is a model of more rounds of the same machine, not the real path: the design it picks is
then measured through pytest (gate_power.py, benchmarks/README.md).

    python benchmarks/design_resample.py --keep /tmp/keep_* --save rounds.json
    python benchmarks/design_resample.py --rounds-file benchmarks/trials/2026-11-28/rounds_mlp.json
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sequential_gate import judge_trial  # noqa: E402

#: Steps a round keeps from each run (every run kept has at least this many steady steps).
STEPS = 45


def steady_rates(stream: Path) -> list[float]:
    """A kept run's steady step rates (its ``rate`` records, warm-up left out)."""
    rates = []
    for line in stream.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "rate" and not record.get("warmup"):
            rates.append(float(record["value"]))
    return rates


def kept_rounds(keeps: Sequence[str]) -> list[tuple[list[float], list[float]]]:
    """(base rates, candidate rates) of every complete round in gate_power ``--keep`` folders."""
    rounds = []
    for keep in keeps:
        for base in sorted(glob.glob(f"{keep}/out/runs/*/base/*.D0.R*.data")):
            cand = Path(base).parent.parent / Path(base).name
            if not cand.exists():
                continue
            b, c = steady_rates(Path(base)), steady_rates(cand)
            if len(b) >= STEPS and len(c) >= STEPS:
                rounds.append((b[:STEPS], c[:STEPS]))
    return rounds


def resample(rounds: np.ndarray, *, trials: int, most: int, slowdown: float,
             rng: np.random.Generator) -> tuple[Counter[str], float]:
    """(verdict counts, mean rounds run) of ``trials`` trials of at most ``most`` rounds."""
    words: Counter[str] = Counter()
    used = []
    for _ in range(trials):
        pick = rounds[rng.integers(0, len(rounds), most)]
        _, stop = judge_trial(pick[:, 0], pick[:, 1] / (1 + slowdown))
        words[stop.word] += 1
        used.append(stop.rounds)
    return words, float(np.mean(used))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--keep", nargs="+", help="gate_power --keep folders (A/A trials)")
    source.add_argument("--rounds-file", help="rounds saved by --save")
    parser.add_argument("--save", help="write the rounds read from --keep here (JSON)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--most", default="10,15,20", help="most rounds to try (comma list)")
    parser.add_argument("--slowdowns", default="0,5,20", help="slowdowns, %% (comma list)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.keep:
        found = kept_rounds(args.keep)
        if args.save:
            Path(args.save).write_text(json.dumps(found))
    else:
        found = json.loads(Path(args.rounds_file).read_text())
    if not found:
        parser.error("no complete round found")
    rounds = np.asarray(found, float)  # (rounds, 2, STEPS)
    spread = np.std(np.log(np.percentile(rounds[:, 1], 75, axis=1)
                           / np.percentile(rounds[:, 0], 75, axis=1)))
    print(f"{len(rounds)} real rounds; a round's p75 log ratio spreads {spread:.3f} (sd)")
    rng = np.random.default_rng(args.seed)
    for slowdown in (float(x) / 100 for x in args.slowdowns.split(",")):
        for most in (int(x) for x in args.most.split(",")):
            words, mean = resample(rounds, trials=args.trials, most=most, slowdown=slowdown,
                                   rng=rng)
            counts = ", ".join(f"{w} {n}" for w, n in sorted(words.items()))
            print(f"slowdown {slowdown:4.0%}, at most {most:2d} rounds: {counts}; "
                  f"mean rounds {mean:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
