"""Does the sequential design's stopping rule alone make identical code lean? A model, offline.

Beside a neighbour, gate_power's A/A trials of the suite's spin step ended with more ratios
above 1 than below (28 of 40, benchmarks/README.md). Its rounds came from real child processes;
here they come from sequential_gate's model (pair_stream: both sides drawn alike, so no round
leans), and each trial is judged as the product judges it (judge_trial: the quantile test, the
sequential looks, the verdict rule). A trial's reported ratio is the one at the round it
stopped at. If the stopping rule alone leans, the ratios at stop lean here too, while the
ratios of the first 4 rounds and of all 20 rounds do not.

    PYTHONPATH=src python benchmarks/stopping_lean.py --trials 400 --noise 0.10
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sequential_gate import judge_trial, pair_stream, quantile_twin  # noqa: E402


def _share_above_one(logs: list[float]) -> str:
    above = sum(v > 0 for v in logs)
    below = sum(v < 0 for v in logs)
    n = above + below
    k = max(above, below)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n) if n else 1.0
    return (f"{above} of {n} above 1, mean log ratio {np.mean(logs):+.4f} "
            f"(sign test p {p:.3g})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=20, help="the most rounds (default 20)")
    parser.add_argument("--noise", type=float, default=0.10,
                        help="each run's own log-normal speed noise (0.10: beside the neighbour, "
                             "a round's log ratio spread about 0.14 as gate_power measured)")
    parser.add_argument("--steps", type=int, default=45)
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    at_stop, first4, whole, words, rounds = [], [], [], Counter(), []
    for _ in range(args.trials):
        base, cand = pair_stream(rng, rounds=args.rounds, steps=args.steps, change=0.0,
                                 noise=args.noise, spells=True)
        _, stop = judge_trial(base, cand)
        words[stop.word] += 1
        rounds.append(stop.rounds)
        at_stop.append(math.log(quantile_twin(base[:stop.rounds], cand[:stop.rounds]).ratio))
        first4.append(math.log(quantile_twin(base[:4], cand[:4]).ratio))
        whole.append(math.log(quantile_twin(base, cand).ratio))
    spread = np.std([math.log(np.median(c) / np.median(b)) for b, c in
                     zip(*pair_stream(rng, rounds=2000, steps=args.steps, change=0.0,
                                      noise=args.noise, spells=True), strict=True)])
    print(f"{args.trials} A/A trials, noise {args.noise}, up to {args.rounds} rounds; a round's "
          f"log ratio spread {spread:.3f}; mean rounds {np.mean(rounds):.1f}; "
          f"verdicts {dict(words)}")
    print(f"ratio at the stop:     {_share_above_one(at_stop)}")
    print(f"ratio of rounds 1-4:   {_share_above_one(first4)}")
    print(f"ratio of all rounds:   {_share_above_one(whole)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
