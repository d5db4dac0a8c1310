"""A real smoke run, scored again from its raw stream records with this test's own arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.report.terminal import score_text

SMOKE = REPO_ROOT / "bench_suites" / "smoke.yaml"


def own_summary(run_dir: Path) -> dict:
    """perf, std%, perf_adj and the score per reference/scoring.md, from the JSON lines only."""
    benches: dict[str, dict] = {}
    for path in sorted(run_dir.glob("*.data")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        spec = records[0]["spec"]
        steady = [r for r in records if r["event"] == "rate" and not r["warmup"]]
        rate = sum(r["items"] for r in steady) / sum(r["seconds"] for r in steady)
        blocks = [steady[i:i + len(steady) // 5] for i in range(0, len(steady), len(steady) // 5)]
        block_rates = [sum(r["items"] for r in b) / sum(r["seconds"] for r in b) for b in blocks]
        mean = sum(block_rates) / len(block_rates)
        std = math.sqrt(sum((x - mean) ** 2 for x in block_rates) / len(block_rates))
        std_pct = min(std / rate, 1.0)
        assert records[-1]["status"] == "ok"
        benches[spec["name"]] = {
            # docs/reports.md: the variance discount is capped at 50 % (issue 15).
            "perf": rate, "std_pct": std_pct, "perf_adj": rate * (1 - min(std_pct, 0.5)),
            "weight": spec["weight"],
        }
    weighted = [(b["perf_adj"], b["weight"]) for b in benches.values() if b["weight"] > 0]
    score = math.exp(sum(w * math.log(p) for p, w in weighted) / sum(w for _, w in weighted))
    return {"benchmarks": benches, "score": score}


@pytest.mark.slow
def test_summary_of_a_real_smoke_run_matches_own_arithmetic(pytester: pytest.Pytester):
    # A copy: the suite's own definitions are importable modules, and a path inside this
    # repository would bring its conftest into the run.
    (pytester.path / "smoke.yaml").write_text(SMOKE.read_text())
    result = pytester.runpytest_subprocess(
        "--bench-suite=smoke.yaml", "-k", "toy or lm-tiny or matmul", "--bench-base=out",
        "--bench-save=summary.json",
        # 10 steady observations: 5 blocks of 2 (the single-run std is over 5 blocks).
        "--bench-override", "*.voir.options.stop=10",
    )
    assert result.ret == 0, result.stdout.str()
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    mine = own_summary(run_dir)
    saved = json.loads((pytester.path / "summary.json").read_text())
    assert set(saved["benchmarks"]) == set(mine["benchmarks"]) == {"toy", "lm-tiny", "matmul"}
    for name, expected in mine["benchmarks"].items():
        got = saved["benchmarks"][name]
        assert got["n"] == 1 and got["fail"] == 0
        assert got["perf"] == pytest.approx(expected["perf"], rel=1e-9), name
        assert got["std_pct"] == pytest.approx(expected["std_pct"], rel=1e-9, abs=1e-12), name
        assert got["perf_adj"] == pytest.approx(expected["perf_adj"], rel=1e-9), name
    assert saved["score"] == pytest.approx(mine["score"], rel=1e-9)
    # A -k subset: its score line says so ("score of 3 of the suite's 9 weighted ...: 1.116").
    result.stdout.fnmatch_lines([f"score of *: {score_text(mine['score'])}"])
