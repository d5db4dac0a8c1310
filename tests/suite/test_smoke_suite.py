"""The shipped smoke suite is reliable by the tool's own rule: a user's first run must not flag
"too few observations" (docs/figures.md, "std% and its blocks")."""

from __future__ import annotations

from _paths import REPO_ROOT

from pytest_dlbench.results.figures.scoring import BLOCKS, MIN_STEADY
from pytest_dlbench.suite.resolve import resolve_suite

SMOKE = REPO_ROOT / "bench_suites" / "smoke.yaml"


def _arg(args: tuple[str, ...], flag: str) -> int:
    return int(args[args.index(flag) + 1])


def test_every_smoke_benchmark_keeps_the_rules_minimum_of_steady_observations() -> None:
    specs = resolve_suite(SMOKE).specs
    assert len(specs) == 13
    few = {s.name: s.stop for s in specs if s.stop < MIN_STEADY}
    assert few == {}, f"fewer than {MIN_STEADY} steady observations ({BLOCKS} blocks of 4)"
    # And a warm-up step before them: a run's first step is its slowest.
    assert all(s.skip >= 1 for s in specs)


def test_the_clip_pair_trains_one_whole_epoch_of_the_same_pairs() -> None:
    """Time-to-train: every step of the epoch is observed, in both the in-process benchmark and
    OpenCLIP's script, so their times measure the same work."""
    suite = resolve_suite(SMOKE)
    for spec in (suite["clip-tiny"], suite["clip-tiny-openclip"]):
        steps = spec.skip + spec.stop
        assert steps * _arg(spec.args, "--batch-size") == _arg(spec.args, "--train-num-samples")
        assert spec.stop >= MIN_STEADY
