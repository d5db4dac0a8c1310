"""One check of every CUDA path of pytest-dlbench on a real GPU, with one table of figures.

Run by ``benchmarks/gpu_check.sh`` on a GPU machine (the project carried as source). Each step
records a row: what was checked, the figure, and ok/FAIL. Steps:

1. the device: torch, CUDA, GPU name and memory, driver (through NVML, as the monitor reads it);
2. the smoke suite on the GPU through pytest (children, the CUDA-event timer, NVML telemetry);
3. a standard subset: resnet50 (tf32-fp16) and matmul bf16, shortened;
4. the CUDA-event timer against ``torch.utils.benchmark`` on the same resnet50 training step;
5. NVML telemetry and energy in the streams of steps 2-3 (GPU utilisation, memory, joules).

    python benchmarks/gpu_check.py OUT_DIR [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROWS: list[tuple[str, str, str]] = []


def row(check: str, figure: str, ok: bool | None) -> None:
    status = "ok" if ok else ("FAIL" if ok is False else "-")
    ROWS.append((check, figure, status))
    print(f"  {check}: {figure} [{status}]", flush=True)


def device_facts() -> bool:
    import torch

    if not torch.cuda.is_available():
        row("CUDA device", "none: torch.cuda.is_available() is False", False)
        return False
    props = torch.cuda.get_device_properties(0)
    row("torch / CUDA", f"{torch.__version__} / {torch.version.cuda}", True)
    row("GPU", f"{props.name}, {props.total_memory / 2**30:.0f} GiB, "
               f"{torch.cuda.device_count()} visible", True)
    from pytest_dlbench.measure.monitor.nvml import gpu_inventory

    inventory = gpu_inventory()
    row("NVML inventory", str(inventory)[:90], bool(inventory))
    return True


def pytest_run(out: Path, name: str, args: list[str], timeout: float) -> tuple[int, Path | None,
                                                                               float]:
    base = out / name
    summary = out / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--bench-base={base}",
           f"--bench-save={summary}", *args]
    started = time.monotonic()
    with open(out / f"{name}.log", "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
    wall = time.monotonic() - started
    runs = sorted((base / "runs").glob("*")) if (base / "runs").is_dir() else []
    return code, (runs[-1] if runs else None), wall


def summary_rows(out: Path, name: str) -> dict[str, Any]:
    path = out / f"{name}.json"
    return json.loads(path.read_text())["benchmarks"] if path.is_file() else {}


def streams_telemetry(run_dir: Path | None) -> None:
    from pytest_dlbench.measure.stream import read_stream
    from pytest_dlbench.results.telemetry import summarize_telemetry
    from pytest_dlbench.run.layout import stream_paths

    if run_dir is None:
        row("NVML telemetry", "no run directory", False)
        return
    for stream in stream_paths(run_dir):
        telemetry = summarize_telemetry(read_stream(stream))
        util = telemetry.mean_gpu_util
        energy = telemetry.energy_j
        peak = telemetry.peak_gpu_mem_bytes
        figure = (f"gpu={telemetry.gpu} util={util if util is None else round(util, 2)} "
                  f"peak mem={None if peak is None else f'{peak / 2**30:.1f} GiB'} "
                  f"energy={None if energy is None else f'{energy:.0f} J'}")
        row(f"telemetry {stream.stem}", figure, telemetry.gpu and util is not None
            and energy is not None and energy > 0)


def timer_agreement(rounds: int) -> None:
    """Bench (CUDA events, one sync per window) vs torch.utils.benchmark on one step."""
    import torch
    import torchvision
    from torch.utils import benchmark

    from pytest_dlbench.measure.bench import Bench

    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = torchvision.models.resnet50(num_classes=1000).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = 64
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    ratios = []
    for _ in range(rounds):
        bench = Bench(name="agreement", device=device, skip=5, stop=50)
        backend = type(bench.timer.backend).__name__
        for _ in bench.iterate(range(55), batch_size=batch):
            step()
        bench.close()
        rates = [r for r in bench.stream.records if r["event"] == "rate" and not r["warmup"]]
        ours = sum(r["items"] for r in rates) / sum(r["seconds"] for r in rates)

        def synced() -> None:
            step()
            torch.cuda.synchronize()

        reference = batch / benchmark.Timer(stmt="synced()", globals={"synced": synced}) \
            .blocked_autorange(min_run_time=2.0).median
        ratios.append(ours / reference)
    median = statistics.median(ratios)
    row("timer backend", backend, backend.lower().startswith("cuda"))
    row("events timer / torch.utils.benchmark (resnet50 bs64 fp16)",
        f"{median:.4f} over {rounds} rounds (min {min(ratios):.3f}, max {max(ratios):.3f})",
        abs(median - 1) <= 0.03)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--quick", action="store_true", help="shorter windows, fewer rounds")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print("== device", flush=True)
    if not device_facts():
        return print_table(started, 1)
    stop = "10" if args.quick else "30"
    print("== smoke suite on the GPU", flush=True)
    code, smoke_dir, wall = pytest_run(out, "smoke", ["--bench-suite=smoke"], timeout=240)
    benches = summary_rows(out, "smoke")
    row("pytest --bench-suite=smoke", f"exit {code}, {len(benches)} benchmarks, {wall:.0f} s",
        code == 0)
    for name, b in benches.items():
        row(f"  smoke {name}", f"{b.get('perf') or 0:,.1f} {b.get('units', '')} "
            f"(std {100 * (b.get('std_pct') or 0):.1f}%)", not b.get("fail"))
    print("== standard subset", flush=True)
    code, std_dir, wall = pytest_run(
        out, "standard",
        ["--bench-suite=standard", "-k", "resnet50 and not ddp or matmul-bf16",
         "--bench-override", f"*.voir.options.stop={stop}"], timeout=300)
    benches = summary_rows(out, "standard")
    row("standard: resnet50, matmul-bf16", f"exit {code}, {wall:.0f} s", code == 0)
    for name, b in benches.items():
        row(f"  standard {name}", f"{b.get('perf') or 0:,.1f} {b.get('units', '')} "
            f"(std {100 * (b.get('std_pct') or 0):.1f}%)", not b.get("fail"))
    print("== CUDA-event timer agreement", flush=True)
    timer_agreement(3 if args.quick else 5)
    print("== NVML telemetry and energy", flush=True)
    streams_telemetry(smoke_dir)
    streams_telemetry(std_dir)
    return print_table(started, 0 if all(s != "FAIL" for _, _, s in ROWS) else 1)


def print_table(started: float, status: int) -> int:
    width = max(len(c) for c, _, _ in ROWS) if ROWS else 10
    print()
    print(f"gpu_check  {time.strftime('%Y-%m-%d %H:%M')}  "
          f"({(time.monotonic() - started) / 60:.1f} min, host {os.uname().nodename})")
    for check, figure, state in ROWS:
        print(f"{check:<{width}}  {state:<4}  {figure}")
    return status


if __name__ == "__main__":
    sys.exit(main())
