"""``gpu_check.py --dry-run``'s fake ``pytest``: the streams and the summary a real run on
FAKE_GPU_COUNT fake H100s writes, through the project's own StreamWriter and summary, so the
check's readers run on them as on a GPU's (docs/gpu.md, "Reading the table": the dry run).

    python benchmarks/gpu_check.py --fake-pytest --bench-base DIR --bench-save FILE ...
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FAKE_GPU = "NVIDIA H100 80GB HBM3"
FAKE_GPU_COUNT = 2


# -- --dry-run: a fake pytest ------------------------------------------------------------------
# What a real run on two H100s writes, per suite: (benchmark, units, items/s per GPU, how it
# ends). clip-tiny-openclip skips itself on the GPU machines (no open_clip there); ddp is an
# njobs job (one stream, every GPU).
FAKE_SUITES: dict[str, list[tuple[str, str, float, str]]] = {
    "smoke": [("toy", "items/s", 51234.0, "ok"), ("resnet18", "items/s", 2950.0, "ok"),
              ("ddp", "items/s", 10400.0, "njobs"),
              ("clip-tiny-openclip", "items/s", 0.0, "skipped")],
    "standard": [("resnet50", "items/s", 2480.0, "ok"),
                 ("resnet50-compiled", "items/s", 2710.0, "ok"),
                 ("vit_b_16", "items/s", 1450.0, "ok"), ("lm-gpt-small", "tokens/s", 2.1e5, "ok"),
                 ("matmul-bf16", "TFLOP/s", 731.0, "ok")],
    "paths": [("resnet50-reduce-overhead", "items/s", 2950.0, "ok"),
              ("vit-fp16", "items/s", 1500.0, "ok"), ("clip-b32", "items/s", 5200.0, "njobs"),
              ("openclip-b32", "items/s", 0.0, "skipped")],
    "reference": [("resnet50-noio", "items/s", 3900.0, "ok"),
                  ("matmul-bf16", "TFLOP/s", 760.0, "ok")],
}
# A dry run's FLOPs per image of the reference run's resnet50-noio (the order of resnet50's
# forward and backward at 244 px): the fake's, no count; its precision, whose datasheet peak
# the TFLOP/s stays under (an fp32 peak would make them an error of measurement).
FAKE_FLOPS_PER_ITEM = {"resnet50-noio": 30.6e9, "resnet50": 24.3e9}
FAKE_PRECISION = "tf32-fp16"


def fake_pytest(argv: Sequence[str]) -> int:
    """Stands for ``python -m pytest`` in a dry run: the streams a run on FAKE_GPU_COUNT GPUs
    writes (the project's StreamWriter) and the summary that --bench-save writes from them."""
    from pytest_dlbench.results.figures import summarize_dir
    from pytest_dlbench.results.model import save_summary

    parser = argparse.ArgumentParser(prog="fake-pytest")
    parser.add_argument("--bench-base", type=Path, required=True)
    parser.add_argument("--bench-save", type=Path, required=True)
    parser.add_argument("--bench-suite", required=True)
    parser.add_argument("-n", type=int, default=1)
    parser.add_argument("-k", default="")
    args, _rest = parser.parse_known_args(list(argv))
    suite = args.bench_suite
    if suite.endswith(".yaml"):  # a suite file (the reference rows'): resolved as pytest would
        from pytest_dlbench.suite.resolve import resolve_suite

        resolved = resolve_suite(suite)
        suite = resolved.name
        # The benchmarks -k selects (pytest's way: any term a substring of the name, case
        # aside): the fake's, no other (a shipped entry whose name holds a term would run).
        terms = [term.lower() for term in args.k.split(" or ")] if args.k else []
        names = sorted(spec.name for spec in resolved.enabled
                       if not terms or any(term in spec.name.lower() for term in terms))
        if names != sorted(b for b, *_ in FAKE_SUITES.get(suite, [])):
            print(f"fake pytest: {suite} names {names}, not the fake's benchmarks")
            return 4
        for spec in resolved.enabled:
            if spec.name in names:
                print(f"fake pytest: {spec.name} {spec.definition} {' '.join(spec.args)}")
    if os.environ.get("GPU_CHECK_FAKE_HANG") == suite:  # tests: a run that hangs
        print(f"fake pytest: {suite} hangs (process group {os.getpgrp()})", flush=True)
        time.sleep(600)
    run_dir = args.bench_base / "runs" / f"{suite}.{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    for bench, units, rate, how in FAKE_SUITES.get(suite, []):
        if how == "njobs":
            fake_stream(run_dir, bench, units, rate * args.n, 0, how, gpus=range(args.n))
            continue
        for device in range(args.n):
            fake_stream(run_dir, bench, units, rate, device, how, gpus=[device])
    save_summary(summarize_dir(run_dir), args.bench_save, suite=suite)
    print(f"fake pytest: {suite} on {args.n} fake GPUs in {run_dir}")
    print(f"fake pytest: arguments {' '.join(argv)}")
    return 0


def fake_stream(run_dir: Path, bench: str, units: str, rate: float, device: int, how: str,
                 gpus: Sequence[int] | range) -> None:
    from pytest_dlbench.measure.stream import StreamWriter

    skip, stop, t = 2, 10, time.time()
    spec = {"name": bench, "weight": 1.0, "enabled": True, "tags": [], "skip": skip,
            "stop": stop, "units": units,
            "plan": {"method": "njobs" if how == "njobs" else "per_gpu"},
            "validation": {"usage": {"gpu_load_threshold": 0.5}},
            **({"argv": {"--precision": FAKE_PRECISION}} if bench in FAKE_FLOPS_PER_ITEM
               else {})}
    with StreamWriter(run_dir / f"{bench}.D{device}.data") as stream:
        stream.write("config", spec=spec, device=device, repeat=None, launcher="fresh")
        stream.write("meta", host="dry-run", device=f"cuda:{device}", device_name=FAKE_GPU,
                     time=t)
        stream.write("monitor", gpu=True, interval=0.5, time=t,
                     gpus=[{"index": g, "name": FAKE_GPU, "energy": "counter"} for g in gpus])
        if how == "skipped":  # ran nothing: one sample, the counter has not ticked
            stream.write("telemetry", time=t, gpus=[_fake_gpu_sample(g, 0, 0.0) for g in gpus])
            stream.write("end", status="skipped", reason="open_clip is not installed", time=t)
            return
        per_item = FAKE_FLOPS_PER_ITEM.get(bench)
        if per_item is not None:
            stream.write("flops", flops=per_item * 4, items=4, reason="")
        for step in range(skip + stop):
            t += 0.5
            stream.write("rate", value=rate, units=units, step=step, warmup=step < skip,
                         time=t, items=rate * 0.5, seconds=0.5)
            # The warm-up's samples idle (cuDNN's autotuning, the loader's start): the whole
            # run's mean is below the scored window's, as on a GPU. Each sample is taken in the
            # middle of its step, inside the step's window.
            stream.write("telemetry", time=t - 0.25, gpus=[_fake_gpu_sample(
                g, step + 1, 350.0, util=97.0 if step >= skip else 5.0) for g in gpus])
        stream.write("monitor_summary", errors=0, torch_max_allocated_bytes=14 * 2**30,
                     torch_max_reserved_bytes=16 * 2**30)
        stream.write("end", status="ok", reason="", time=t)


def _fake_gpu_sample(index: int, step: int, power_w: float, util: float = 0.0
                     ) -> dict[str, Any]:
    return {"index": index, "util": util,
            "mem_used": (2 + min(step, 4) * 5) * 2**30, "mem_total": 81559 * 2**20,
            "power_w": power_w, "temp_c": 45.0, "sm_clock_mhz": 1980.0,
            "energy_j": power_w * 0.5 * step}
