"""Scoring: run streams -> per run rate, per benchmark perf/std/perf_adj, the suite score."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench.results.figures import (
    MAX_STD_PENALTY,
    UNRELIABLE_STD,
    block_rates,
    load_run,
    run_from_records,
    summarize_dir,
    summarize_runs,
)
from pytest_dlbench.results.gate import run_failed


# -- the whole pipeline against hand arithmetic -----------------------------------------------
def _noisy(rng: random.Random, rate: float, n: int = 10) -> list[tuple[float, float]]:
    """Steps of varying size and speed: Σitems/Σseconds differs from the mean step rate."""
    out = []
    for _ in range(n):
        items = rng.choice([8, 16, 32])
        out.append((items, items / (rate * rng.uniform(0.85, 1.15))))
    return out


def _own_numbers(run_dir: Path) -> dict[str, dict]:
    """perf, std%, perf_adj per benchmark from the raw JSON lines, independently of scoring.py."""
    runs: dict[str, list[dict]] = {}
    for path in sorted(run_dir.glob("*.data")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        config = records[0]
        steady = [r for r in records if r["event"] == "rate" and not r["warmup"]]
        end = [r for r in records if r["event"] == "end"][-1]
        rate = sum(r["items"] for r in steady) / sum(r["seconds"] for r in steady)
        # 10 observations: 5 blocks of 2 consecutive ones.
        blocks = [
            sum(r["items"] for r in steady[i:i + 2]) / sum(r["seconds"] for r in steady[i:i + 2])
            for i in range(0, 10, 2)
        ]
        runs.setdefault(config["spec"]["name"], []).append(
            {"ok": end["status"] == "ok", "rate": rate, "blocks": blocks,
             "weight": config["spec"]["weight"], "device": config["device"]}
        )
    out = {}
    for name, rs in runs.items():
        ok = [r["rate"] for r in rs if r["ok"]]
        perf = sum(ok) / len(ok)
        sample = ok if len(ok) >= 2 else next(r["blocks"] for r in rs if r["ok"])
        mean = sum(sample) / len(sample)
        std = math.sqrt(sum((x - mean) ** 2 for x in sample) / len(sample))  # population
        std_pct = min(std / perf, 1.0)
        fail = sum(not r["ok"] for r in rs)
        devices = {r["device"] for r in rs if r["ok"]}
        total = sum(
            sum(r["rate"] for r in rs if r["ok"] and r["device"] == d)
            / sum(1 for r in rs if r["ok"] and r["device"] == d)
            for d in devices
        )
        out[name] = {
            "perf": perf, "std_pct": std_pct, "n": len(rs), "fail": fail, "total": total,
            "perf_adj": perf * (1 - std_pct) * (1 - fail / len(rs)), "weight": rs[0]["weight"],
        }
    weighted = [(v["perf_adj"], v["weight"]) for v in out.values() if v["weight"] > 0]
    score = math.exp(sum(w * math.log(x) for x, w in weighted) / sum(w for _, w in weighted))
    return {"benchmarks": out, "score": score}


def test_summarize_dir_agrees_with_hand_arithmetic(tmp_path: Path) -> None:
    rng = random.Random(1)
    for device in (0, 1):
        for repeat in (0, 1):
            write_run(tmp_path, "alpha", _noisy(rng, 100 + 10 * device), device=device,
                      repeat=repeat, weight=2.0)
    write_run(tmp_path, "beta", _noisy(rng, 50), weight=1.0)
    for repeat in range(3):
        status = "crash" if repeat == 1 else "ok"
        write_run(tmp_path, "gamma", _noisy(rng, 7), repeat=repeat, status=status, weight=1.0)
    write_run(tmp_path, "delta", _noisy(rng, 3), weight=0.0)

    expected = _own_numbers(tmp_path)
    summary = summarize_dir(tmp_path)
    assert [b.name for b in summary.benchmarks] == ["alpha", "beta", "delta", "gamma"]
    for bench in summary.benchmarks:
        want = expected["benchmarks"][bench.name]
        assert (bench.n, bench.fail) == (want["n"], want["fail"]), bench.name
        assert bench.perf == pytest.approx(want["perf"], rel=1e-12), bench.name
        assert bench.total == pytest.approx(want["total"], rel=1e-12), bench.name
        assert bench.std_pct == pytest.approx(want["std_pct"], rel=1e-9), bench.name
        assert bench.perf_adj == pytest.approx(want["perf_adj"], rel=1e-9), bench.name
    assert summary.score == pytest.approx(expected["score"], rel=1e-9)
    assert summary.failure_rate == pytest.approx(1 / 9)
    assert summary.incomplete == ()


# -- one run ----------------------------------------------------------------------------------
def test_rate_is_total_items_over_total_seconds_not_mean_of_step_rates(tmp_path: Path) -> None:
    # 100 items in 1 s, then 100 items in 3 s: 200/4 = 50 items/s (mean of rates would be 66.7).
    run = load_run(write_run(tmp_path, "b", [(100, 1.0), (100, 3.0)], warmup=[(1, 100.0)]))
    assert run.rate == pytest.approx(50.0)
    assert run.ok and run.status == "ok"
    assert [v for _, v in run.warmup] == [0.01]
    assert len(run.steady) == 2


def test_warmup_is_never_scored(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "b", steady_at(10.0), warmup=[(1, 1000.0)] * 3))
    assert run.rate == pytest.approx(10.0)
    assert len(run.warmup) == 3


def test_log_rate_values_without_items_use_the_mean(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "flops", [1.0, 2.0, 3.0, 6.0, 8.0], log_rate=True,
                             units="TFLOP/s"))
    assert run.rate == pytest.approx(4.0)
    assert run.block_rates == (1.0, 2.0, 3.0, 6.0, 8.0)
    assert run.units == "TFLOP/s"


def test_block_rates_are_five_consecutive_blocks() -> None:
    records = [{"items": i + 1, "seconds": 1.0} for i in range(12)]
    # 12 observations: blocks of 3, 3, 2, 2, 2 (the first ones take the remainder).
    assert block_rates(records) == (2.0, 5.0, 7.5, 9.5, 11.5)
    assert block_rates(records[:3]) == (1.0, 2.0, 3.0)  # fewer than 5: one per observation
    assert block_rates([]) == ()


def test_stream_without_end_is_a_failed_incomplete_run(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "b", status=None))
    assert not run.ok
    assert run.status == "fail"
    assert "incomplete stream" in run.reason
    assert run.rate == pytest.approx(10.0)  # what it measured is still read


def test_ok_run_with_a_nan_loss_fails(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "b", losses=[1.0, float("nan")]))
    assert run.status == "nan"
    assert "nan" in run.reason


def test_ok_run_without_steady_observation_fails(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "b", steady=[]))
    assert run.status == "fail"
    assert run.rate is None


def test_failed_status_and_reason_are_kept(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "b", status="oom", reason="out of memory: x"))
    assert (run.status, run.reason) == ("oom", "out of memory: x")


def test_corrupt_stream_is_a_failed_run(tmp_path: Path) -> None:
    path = write_run(tmp_path, "b", device=3, repeat=2)
    lines = path.read_text().splitlines()
    lines[1] = "{not json"
    path.write_text("\n".join(lines) + "\n")
    run = load_run(path)
    assert not run.ok
    assert "corrupt stream" in run.reason
    assert (run.bench, run.device, run.repeat) == ("b", 3, 2)  # from the file name


def test_identity_comes_from_the_config_record() -> None:
    run = run_from_records(
        [{"event": "config", "spec": {"name": "x.y", "weight": 3, "plan": {"method": "njobs"}},
          "device": 2, "repeat": 1},
         {"event": "rate", "value": 5.0, "items": 5, "seconds": 1.0, "warmup": False},
         {"event": "end", "status": "ok", "reason": ""}]
    )
    assert (run.bench, run.device, run.repeat, run.weight, run.method) == ("x.y", 2, 1, 3.0,
                                                                           "njobs")
    assert run.label == "x.y[D2-R1]"


# -- one benchmark ----------------------------------------------------------------------------
def test_failed_runs_count_in_n_and_fail(tmp_path: Path) -> None:
    write_run(tmp_path, "b", steady_at(10.0), repeat=0)
    write_run(tmp_path, "b", steady_at(12.0), repeat=1)
    write_run(tmp_path, "b", steady_at(99.0), repeat=2, status="crash", reason="segfault")
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert (bench.n, bench.fail) == (3, 1)
    assert bench.perf == pytest.approx(11.0)  # the failed run's rate is not in perf
    assert bench.std == pytest.approx(1.0)  # population std of 10 and 12
    assert bench.perf_adj == pytest.approx(11.0 * (1 - 1 / 11) * (1 - 1 / 3))
    assert len(bench.runs) == 3


def test_single_run_std_comes_from_its_block_rates(tmp_path: Path) -> None:
    # 10 observations, blocks of 2: block rates 8, 9, 10, 11, 12.
    steady = [(r, 1.0) for r in (8, 8, 9, 9, 10, 10, 11, 11, 12, 12)]
    write_run(tmp_path, "b", steady)
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert bench.runs[0].block_rates == (8.0, 9.0, 10.0, 11.0, 12.0)
    assert bench.std == pytest.approx(math.sqrt(2.0))  # population std of 8..12
    assert bench.std_pct == pytest.approx(math.sqrt(2.0) / 10.0)
    assert bench.noise_samples == (8.0, 9.0, 10.0, 11.0, 12.0) and bench.noise_from == "blocks"


def test_the_noise_is_on_the_summary_and_the_device_std_pct_follows_its_rule(
    tmp_path: Path,
) -> None:
    """Where a benchmark's noise comes from is decided once, by scoring: the runs' rates with
    two runs or more (here D0's two runs), else one run's blocks (D1's single run)."""
    blocks = [(r, 1.0) for r in (8, 8, 9, 9, 10, 10, 11, 11, 12, 12)]  # block rates 8..12
    write_run(tmp_path, "b", steady_at(100.0), device=0, repeat=0)
    write_run(tmp_path, "b", steady_at(110.0), device=0, repeat=1)
    write_run(tmp_path, "b", blocks, device=1, repeat=0)
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert bench.noise_from == "runs" and bench.noise_samples == (100.0, 10.0, 110.0)
    assert bench.std == pytest.approx(statistics.pstdev([100.0, 10.0, 110.0]))
    assert bench.device_std_pct(0) == pytest.approx(5.0 / 105.0)  # its two runs' rates
    assert bench.device_std_pct(1) == pytest.approx(math.sqrt(2.0) / 10.0)  # its run's blocks
    assert bench.device_std_pct(7) is None  # no run there


def test_std_pct_is_clipped_to_one_and_noise_never_zeroes_a_passing_run(tmp_path: Path) -> None:
    write_run(tmp_path, "b", steady_at(1.0), repeat=0)
    write_run(tmp_path, "b", steady_at(1000.0), repeat=1)
    write_run(tmp_path, "b", steady_at(1.0), repeat=2)
    summary = summarize_dir(tmp_path)
    bench = summary.benchmarks[0]
    assert bench.std_pct == 1.0
    # Issue 15: the variance penalty is capped, the run is flagged instead of scored 0.
    assert bench.perf_adj == pytest.approx(bench.perf * (1 - MAX_STD_PENALTY))
    assert bench.unreliable is not None and "burst of load" in bench.unreliable
    assert summary.incomplete == () and summary.score == pytest.approx(bench.perf_adj)


def test_a_short_noisy_run_is_flagged_for_too_few_observations(tmp_path: Path) -> None:
    # 10 steady observations (blocks of 2) with a std% above the threshold.
    steady = [(r, 1.0) for r in (4, 4, 9, 9, 10, 10, 11, 11, 15, 15)]
    write_run(tmp_path, "b", steady)
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert bench.std_pct > UNRELIABLE_STD
    assert bench.unreliable == (f"std% {bench.std_pct:.0%}: too few observations (10 steady), "
                                "a burst of load (one block at 40% of the median)")


def test_a_quiet_benchmark_is_not_flagged(tmp_path: Path) -> None:
    write_run(tmp_path, "b", [(r, 1.0) for r in (10, 10, 10.1, 10, 9.9) * 4])
    assert summarize_dir(tmp_path).benchmarks[0].unreliable is None


def test_per_gpu_total_sums_device_means(tmp_path: Path) -> None:
    for repeat, (r0, r1) in enumerate([(10.0, 20.0), (12.0, 22.0)]):
        write_run(tmp_path, "b", steady_at(r0), device=0, repeat=repeat)
        write_run(tmp_path, "b", steady_at(r1), device=1, repeat=repeat)
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert bench.per_device == {0: pytest.approx(11.0), 1: pytest.approx(21.0)}
    assert bench.perf == pytest.approx(16.0)  # per device
    assert bench.total == pytest.approx(32.0)  # the whole node at once


def test_njobs_total_is_perf(tmp_path: Path) -> None:
    write_run(tmp_path, "j", steady_at(40.0), device=0, repeat=0, method="njobs")
    write_run(tmp_path, "j", steady_at(44.0), device=0, repeat=1, method="njobs")
    bench = summarize_dir(tmp_path).benchmarks[0]
    assert bench.method == "njobs"
    assert bench.perf == pytest.approx(42.0)
    assert bench.total == pytest.approx(42.0)


# -- the suite --------------------------------------------------------------------------------
def test_score_is_the_weighted_geometric_mean_of_perf_adj(tmp_path: Path) -> None:
    write_run(tmp_path, "a", steady_at(100.0), weight=1.0)
    write_run(tmp_path, "b", steady_at(10.0), weight=3.0)
    write_run(tmp_path, "c", steady_at(1e6), weight=0.0)  # unweighted: not in the score
    write_run(tmp_path, "d", steady_at(1e6), weight=5.0, enabled=False)  # disabled: neither
    summary = summarize_dir(tmp_path)
    assert summary.score == pytest.approx(math.exp((math.log(100) + 3 * math.log(10)) / 4))
    assert summary.incomplete == ()


def test_incomplete_names_weighted_benchmarks_that_did_not_run_or_all_failed(
    tmp_path: Path,
) -> None:
    write_run(tmp_path, "ok", steady_at(100.0))
    write_run(tmp_path, "broken", status="crash", repeat=0)
    write_run(tmp_path, "broken", status="timeout", repeat=1)
    write_manifest(tmp_path, {
        "ok": {}, "broken": {}, "never": {"weight": 2.0}, "optional": {"weight": 0.0},
    })
    summary = summarize_dir(tmp_path)
    assert summary.suite == "t"
    assert [b.name for b in summary.benchmarks] == ["ok", "broken", "never", "optional"]
    assert summary.incomplete == ("broken", "never")
    assert summary.score == pytest.approx(100.0)  # over the others
    never = summary.get("never")
    assert never is not None and (never.n, never.perf, never.perf_adj) == (0, None, 0.0)
    broken = summary.get("broken")
    assert broken is not None and (broken.n, broken.fail, broken.perf_adj) == (2, 2, 0.0)
    assert summary.failure_rate == pytest.approx(2 / 3)
    assert run_failed(summary)


def test_manifest_weights_win_over_the_stream(tmp_path: Path) -> None:
    write_run(tmp_path, "a", steady_at(100.0), weight=1.0)
    write_run(tmp_path, "b", steady_at(10.0), weight=1.0)
    write_manifest(tmp_path, {"a": {"weight": 0.0}, "b": {"weight": 1.0}})
    assert summarize_dir(tmp_path).score == pytest.approx(10.0)


def test_without_manifest_only_streams_are_known(tmp_path: Path) -> None:
    write_run(tmp_path, "a", steady_at(100.0))
    summary = summarize_dir(tmp_path)
    assert summary.suite is None and summary.incomplete == ()
    assert summary.run_dir == str(tmp_path)


def test_no_runs_no_score() -> None:
    summary = summarize_runs([])
    assert (summary.score, summary.failure_rate, summary.benchmarks) == (None, 0.0, ())
    assert not run_failed(summary)


def test_to_dict_is_plain_json(tmp_path: Path) -> None:
    write_run(tmp_path, "a", steady_at(100.0), device=1, repeat=0)
    write_run(tmp_path, "a", steady_at(110.0), device=1, repeat=1)
    data = json.loads(json.dumps(summarize_dir(tmp_path).to_dict()))
    bench = data["benchmarks"]["a"]
    assert bench["rates"] == [100.0, 110.0]
    assert bench["samples"] == [100.0, 110.0]
    assert bench["per_device"] == {"1": 105.0}
    assert [r["block_rates"] for r in bench["runs"]] == [[100.0] * 5, [110.0] * 5]
