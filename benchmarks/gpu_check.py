"""One check of every CUDA path of pytest-dlbench on a real GPU, with one table of figures.

Run by ``benchmarks/gpu_check.sh`` on a GPU machine (the project carried as source). Each check
records one row: what was checked, the figure, and ok / FAIL / skipped / - (not run). Checks:

1. the device: torch, CUDA, GPU names and memory;
2. the NVML inventory: NVML lists as many GPUs as torch counts (those CUDA_VISIBLE_DEVICES
   shows), with the same names; NVML's utilisation sample period on the part, and whether its
   sample timestamps are UNIX microseconds (``gpu_check_paths.nvml_probe``);
3. the reference rows, on one GPU, like with like: milabench's resnet50-noio as the shipped
   ``milabench`` suite runs it (one fixed 244 x 244 batch with soft labels, plain SGD,
   tf32-fp16, channels_last) at the batch of milabench's published figure for the GPU, through
   pytest, beside a bare PyTorch loop of the same step timed here (two CUDA events around a
   window, one synchronize) and milabench's published figure, each in img/s and TFLOP/s; and
   matmul bf16 8192^3 beside the bare loop and the datasheet's dense peak; the rows print the
   ratios;
4. the CUDA-event timer against a bare events window on the same resnet50 training step;
5. a standard subset on every GPU at once, shortened: resnet50 (tf32-fp16) long enough for a
   scored window of at least WINDOW_MIN_S (its load check on it is a row of its own), its
   ``torch.compile`` sibling, the ViT-B/16 and the GPT-small LM at GPU size in bf16, matmul bf16;
6. the ``paths`` run (``gpu_check_paths.PATHS``): CUDA graphs through ``torch.compile``
   (reduce-overhead), fp16 autocast on a ViT, CLIP in-process and OpenCLIP's own script;
7. the smoke suite on every GPU at once (``-n <GPUs>``: one xdist worker per GPU), through pytest
   (children, the CUDA-event timer, NVML telemetry), one row per benchmark, when the budget
   holds its whole expected time (it is the lowest priority: else a "-" row says it was dropped);
8. per stream of steps 3, 5, 6 and 7: the load over the scored window with its sample count,
   the suite's load check on it, the whole run's mean named as such, NVML's peak beside torch's
   reserved, TFLOP/s and MFU, joules; a benchmark that skipped itself gets a "skipped" row.

This process never initialises CUDA: the checks that need torch (the device facts, the bare
loops, the timer) each run in a child process of their own (``--worker``), whose CUDA context and
cached memory go with it, so no telemetry row's peak memory holds another process's gigabytes.

The short, decisive checks come first and the longest last, so a lease that runs short loses
the least. ``--budget SECONDS`` bounds the whole script: each run gets at most what is left
(less a reserve for what follows), a check with too little left is a "-" row saying so, and
with ``--quick`` each benchmark is cut at ``max_duration`` (a hang is one failed benchmark, not
the whole run). A pytest run cut by its timeout still gives the rows of the benchmarks that had
finished, read from the streams in its run directory.

The table is printed whatever happens: a check that raises or runs out of time is a FAIL row
saying so, and the table comes from a ``finally`` (SIGTERM and SIGHUP too, as from ``timeout``).
``OUT/gpu_check.txt`` is written before anything can hang (the device facts pending) and
rewritten after every row; it is copied, with the workers' log and each run's summary JSON,
to ``--copy-to DIR`` after every row, and one archive of the rest (logs, suite files, streams)
after every run (at most 8 files in all, ``COPIED``), so a run killed from outside (SIGKILL, a
lease taken back) leaves the rows measured so far.

``--dry-run`` runs the same code on a machine without a GPU: the facts of two fake H100s
instead of torch's and NVML's (``gpu_check_paths.FakeNvml`` for the sample period), a fake
``pytest`` (this script with ``--fake-pytest``, started the way the real one is, with its
timeout: ``gpu_check_fake.py``) that writes the streams and summary a real run writes, read
back by the project's own readers, and the bare loops and the timer comparison on the CPU with
tiny models. No figure of a dry run is a measurement.

    python benchmarks/gpu_check.py [OUT_DIR] [--quick] [--budget SECONDS] [--copy-to DIR]
                                   [--dry-run]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_check_fake import FAKE_GPU, FAKE_GPU_COUNT, fake_pytest
from gpu_check_paths import (
    ARCHIVE,
    PATHS,
    FakeNvml,
    dropped,
    gpu_load,
    nvml_probe,
    nvml_probe_row,
    paths_selection,
    paths_suite,
    stream_row,
    window_check_row,
    write_archive,
)

DEFAULT_OUT = Path(os.environ.get("OUT") or "/tmp/dlbench-gpu-check")
SMOKE_TIMEOUT_S = 240.0
STANDARD_TIMEOUT_S = 300.0
PATHS_TIMEOUT_S = 240.0
# The smoke suite is dropped unless this much is left (86 s on an H200, 2026-11-28): it ran on
# a GPU before, the checks before it had not.
SMOKE_NEEDS_S = 100.0
# The load check on a scored window of at least this long: NVML's utilisation is an average
# over its last sample period (up to 1 s), so a shorter window holds at most one whole sample.
WINDOW_MIN_S = 1.5
# The standard subset's resnet50 observations under --quick: 28 ms each at batch 64 on an H200
# (2,298 img/s, 2026-11-28: 2.2 s of scored window); at batch 256 (the suite's since) about 53 ms
# (the same step's 4,840 img/s on device data), about 4 s.
WINDOW_STOP = 80
# --quick: each benchmark's max_duration, so one that hangs is one failure and the suite goes on.
QUICK_MAX_DURATION_S = 60
# A pytest run is not started with less than this left of --budget: it could not finish.
MIN_RUN_S = 30.0
# Kept back from a run's timeout for the checks after it (reading streams, the table).
RESERVE_S = 15.0
# The timer check on a real GPU: the events timer within 3 % of torch.utils.benchmark. A dry run
# compares the CPU timer with the wall clock of the same steps (what is not timed: a few calls).
TIMER_TOLERANCE = 0.03
DRY_TIMER_TOLERANCE = 0.05
# The checks run in a child process each (--worker): their timeouts.
FACTS_TIMEOUT_S = 90.0
NVML_TIMEOUT_S = 60.0
BARE_TIMEOUT_S = 150.0
TIMER_TIMEOUT_S = 240.0
REFERENCE_TIMEOUT_S = 180.0
# The standard subset's resnet50-compiled under --quick: inductor's first compile of resnet50
# takes about a minute, past QUICK_MAX_DURATION_S.
COMPILED_CUT_S = 180
# The reference rows: the project's figure within 5 % of the bare loop's on the same GPU.
REFERENCE_TOLERANCE = 0.05
# The resnet50 reference row: milabench's resnet50-noio, its arguments those of the shipped
# `milabench` suite (bench_suites/milabench.yaml, held against milabench's own settings by
# tests/suite/test_milabench_suite.py), so the project's run, the bare loop and milabench's
# published figure (results/figures/milabench_reference.csv) are one step. Its batch: the suite's
# auto_batch(256) where milabench published a figure at it for the GPU, else the published
# batch nearest to it (results/figures/reference.nearest_published).
MILABENCH_BENCH = "resnet50-noio"
MILABENCH_BATCH = 256
MATMUL_SIZE = 8192
# What --copy-to receives, at most 8 files: the table, the workers' log, each run's summary
# and one archive of the rest (each run's log and suite file, the streams: gpu_check_paths).
CHECKS_LOG = "checks.log"
SUITES = ("reference", "standard", "paths", "smoke")
COPIED = ("gpu_check.txt", CHECKS_LOG, *(f"{suite}.json" for suite in SUITES), ARCHIVE)
STANDARD_BENCHES = ("resnet50", "resnet50-compiled", "vit_b_16", "lm-gpt-small", "matmul-bf16")
STANDARD_TITLE = f"standard: {', '.join(STANDARD_BENCHES)}"
PATHS_TITLE = "paths: " + ", ".join(name for name, _ in PATHS)
SMOKE_TITLE = "pytest --bench-suite=smoke"
WINDOW_TITLE = f"load check, scored window >= {WINDOW_MIN_S:g} s: standard resnet50"
NVML_TITLE = "NVML utilisation sample period"


# -- the table ---------------------------------------------------------------------------------
@dataclass
class Row:
    check: str
    figure: str
    status: str  # "ok", "FAIL", "skipped", "-" (not run)


@dataclass
class Table:
    """The rows so far, printed as they come and once more, aligned, at the end."""

    rows: list[Row] = field(default_factory=list)
    path: Path | None = None  # rewritten after every row: a kill from outside keeps them
    #: Also copied there after every row, with the pytest logs beside it: a folder that a
    #: lease brings back even when it kills the script (--copy-to).
    copy_to: Path | None = None
    write_failed: bool = False

    def add(self, check: str, figure: str, ok: bool | str | None) -> None:
        status = ok if isinstance(ok, str) else ("ok" if ok else ("FAIL" if ok is False else "-"))
        self.rows.append(Row(check, figure, status))
        print(f"  {check}: {figure} [{status}]", flush=True)
        self.save("gpu_check  (in progress: the rows so far)")

    def save(self, header: str) -> None:
        """Each file whole or not at all (a kill mid-write leaves the previous one); a file that
        cannot be written is said once and never fails a check nor hides the table."""
        from pytest_dlbench.core.output_files import write_atomic

        if self.path is None:
            return
        text = self.render(header).lstrip("\n") + "\n"
        try:
            write_atomic(self.path, text)
            if self.copy_to is not None:
                write_atomic(self.copy_to / self.path.name, text)
                for name in COPIED[1:]:
                    source = self.path.parent / name
                    if source.is_file() and name != ARCHIVE:
                        write_atomic(self.copy_to / name, source.read_text(errors="replace"))
        except OSError as exc:
            self._write_failed(exc)

    def archive(self) -> None:
        """The archive of what ``COPIED`` does not name (logs, suite files, streams), rebuilt
        after every run and copied beside the table."""
        if self.path is None:
            return
        out = self.path.parent
        try:
            write_archive(out, out / ARCHIVE, SUITES)
            if self.copy_to is not None:
                write_archive(out, self.copy_to / ARCHIVE, SUITES)
        except OSError as exc:
            self._write_failed(exc)

    def _write_failed(self, exc: OSError) -> None:
        if not self.write_failed:
            print(f"gpu_check: cannot write {exc.filename or self.path}: {exc.strerror}",
                  flush=True)
        self.write_failed = True

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[None]:
        """Any failure of the block is a FAIL row for ``name``, never the end of the script."""
        try:
            yield
        except OutOfBudget as exc:
            self.add(name, f"not run: {exc}", None)
        except subprocess.TimeoutExpired as exc:
            self.add(name, f"timed out after {exc.timeout:g} s", False)
        except Exception as exc:  # noqa: BLE001 - one check's failure is one row
            self.add(name, f"{type(exc).__name__}: {_one_line(str(exc))}", False)

    @property
    def failed(self) -> bool:
        return any(r.status == "FAIL" for r in self.rows)

    def render(self, header: str) -> str:
        width = max((len(r.check) for r in self.rows), default=10)
        lines = ["", header]
        lines += [f"{r.check:<{width}}  {r.status:<7}  {r.figure}" for r in self.rows]
        return "\n".join(lines)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class Budget:
    """The script's whole time (``--budget``; None: no bound): a run gets at most what is left,
    less a reserve for the checks after it."""

    seconds: float | None
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return float("inf") if self.seconds is None else self.seconds - self.elapsed()

    def timeout(self, default: float, reserve: float = RESERVE_S) -> float | None:
        """The run's timeout: ``default``, capped by what is left; None when under MIN_RUN_S."""
        allowed = min(default, self.left() - reserve)
        return allowed if allowed >= MIN_RUN_S else None


class OutOfBudget(Exception):
    """Too little of --budget is left to start a check: a "-" row, not a failure."""


# -- the device --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Facts:
    """What torch and NVML say about the GPUs; read by :func:`real_facts` (or faked)."""

    torch_version: str
    cuda_version: str | None
    cuda_reason: str  # why CUDA is not usable; "" when it is
    torch_gpus: tuple[tuple[str, int], ...]  # (name, total memory in bytes) per visible device
    nvml_gpus: tuple[str, ...]  # names of the GPUs NVML lists that CUDA_VISIBLE_DEVICES shows
    nvml_reason: str  # why NVML gave no answer; "" when it did
    driver: str | None = None

    @property
    def gpu_count(self) -> int:
        return len(self.torch_gpus) if not self.cuda_reason else 0


def real_facts() -> Facts:
    import torch

    from pytest_dlbench.measure.monitor.nvml import (
        gpu_inventory,
        nvml_session,
        visible_nvml_indices,
    )

    reason = "" if torch.cuda.is_available() else "torch.cuda.is_available() is False"
    gpus: tuple[tuple[str, int], ...] = ()
    if not reason:
        gpus = tuple((torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i)
                      .total_memory) for i in range(torch.cuda.device_count()))
    inventory = gpu_inventory()
    names: tuple[str, ...] = ()
    if not inventory.reason:
        with nvml_session() as (binding, _):
            indices, _notes = (visible_nvml_indices(binding, os.environ.get("CUDA_VISIBLE_DEVICES"),
                                                    len(inventory.gpus))
                               if binding is not None else ([], []))
        by_index = {g.index: g.name or "?" for g in inventory.gpus}
        names = tuple(by_index.get(i, "?") for i in indices)
    return Facts(torch.__version__, torch.version.cuda, reason, gpus, names, inventory.reason,
                 inventory.driver)


def fake_facts() -> Facts:
    """Two H100s, as torch and NVML would describe them (no torch import: a dry run is quick)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return Facts(version, "13.0", "", ((FAKE_GPU, 81559 * 2**20),) * FAKE_GPU_COUNT,
                 (FAKE_GPU,) * FAKE_GPU_COUNT, "", "580.159.04")


def device_rows(table: Table, facts: Facts) -> None:
    table.add("torch / CUDA", f"{facts.torch_version} / {facts.cuda_version}",
              facts.cuda_version is not None)
    if facts.cuda_reason or not facts.torch_gpus:
        table.add("CUDA device", f"none: {facts.cuda_reason or 'torch counts no GPU'}", False)
        return
    name, memory = facts.torch_gpus[0]
    table.add("CUDA device", f"{len(facts.torch_gpus)} x {name}, {memory / 2**30:.0f} GiB", True)


def inventory_row(facts: Facts) -> tuple[str, bool]:
    """NVML and torch must see the same GPUs: as many, with the same names. A difference means
    telemetry would sample other GPUs than the benchmarks run on (or none)."""
    if facts.nvml_reason:
        return f"NVML gave no answer: {facts.nvml_reason}", False
    torch_names = [n for n, _ in facts.torch_gpus] if not facts.cuda_reason else []
    nvml, torch_ = sorted(facts.nvml_gpus), sorted(torch_names)
    figure = (f"NVML lists {len(nvml)} ({_names(nvml)}), torch counts {len(torch_)} "
              f"({_names(torch_)}), driver {facts.driver}")
    if len(nvml) != len(torch_):
        return f"count differs: {figure}", False
    if nvml != torch_:
        return f"names differ: {figure}", False
    return figure, bool(nvml)


def _names(names: Sequence[str]) -> str:
    distinct = dict.fromkeys(names)
    return ", ".join(f"{names.count(n)} x {n}" for n in distinct) or "none"


# -- pytest runs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PytestRun:
    code: int
    run_dir: Path | None  # the run's directory of streams
    wall: float


def pytest_command(out: Path, name: str, args: Sequence[str], *, dry_run: bool) -> list[str]:
    program = [sys.executable, str(Path(__file__).resolve()), "--fake-pytest"] if dry_run \
        else [sys.executable, "-m", "pytest"]
    return [*program, "-p", "no:cacheprovider", f"--bench-base={out / name}",
            f"--bench-save={out / f'{name}.json'}", *args]


def run_logged(cmd: Sequence[str], log_path: Path, timeout: float, *,
               env: Mapping[str, str] | None = None, append: bool = False) -> int:
    """Run ``cmd`` in a session of its own, its output into ``log_path``; past ``timeout`` (or
    on any interruption) its whole process group is killed and the exception raised again."""
    with open(log_path, "a" if append else "w") as log:
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                env=None if env is None else dict(env))
        try:
            return proc.wait(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def pytest_run(out: Path, name: str, args: Sequence[str], timeout: float, *,
               dry_run: bool = False, env: Mapping[str, str] | None = None) -> PytestRun:
    """Run pytest (its log in ``OUT/<name>.log``); past ``timeout`` its whole process group (the
    xdist workers and the benchmark children too) is killed and TimeoutExpired raised."""
    started = time.monotonic()
    # A warm machine keeps OUT: a run that writes no summary must not show the last one's.
    (out / f"{name}.json").unlink(missing_ok=True)
    code = run_logged(pytest_command(out, name, args, dry_run=dry_run), out / f"{name}.log",
                      timeout, env=env)
    return PytestRun(code, latest_run_dir(out / name), time.monotonic() - started)


def latest_run_dir(base: Path) -> Path | None:
    runs = sorted((base / "runs").glob("*")) if (base / "runs").is_dir() else []
    return runs[-1] if runs else None


def summary_benchmarks(out: Path, name: str) -> dict[str, Any]:
    path = out / f"{name}.json"
    return json.loads(path.read_text())["benchmarks"] if path.is_file() else {}


def benchmark_row(table: Table, label: str, bench: dict[str, Any]) -> None:
    runs = bench.get("runs") or []
    statuses = [str(r.get("status")) for r in runs]
    if runs and all(s == "skipped" for s in statuses):
        reason = next((r.get("reason") for r in runs if r.get("reason")), "")
        table.add(label, f"skipped itself: {_one_line(str(reason))}", "skipped")
        return
    perf = bench.get("perf")
    devices = sorted({r.get("device") for r in runs}, key=str)
    figure = (f"{perf or 0:,.1f} {bench.get('units', '')} (std "
              f"{100 * (bench.get('std_pct') or 0):.1f}%, {_count(len(runs), 'run')} on "
              f"{_count(len(devices), 'device')})")
    failed = [r for r in runs if r.get("status") not in ("ok", "skipped")]
    if failed:
        figure += f"; {failed[0].get('status')}: {_one_line(str(failed[0].get('reason')), 80)}"
    table.add(label, figure, perf is not None and not bench.get("fail") and not failed)


def suite_rows(table: Table, out: Path, name: str, title: str, args: Sequence[str],
               timeout: float, *, dry_run: bool, env: Mapping[str, str] | None = None,
               budget_cut: bool = False) -> Path | None:
    """Run one suite; a row for the run and one per benchmark. Returns the run directory. A run
    cut by its timeout (or interrupted) still gives the rows of the benchmarks that finished.
    ``budget_cut``: the timeout is what --budget left, not the run's own: a run cut there is
    a "-" row (its benchmarks not reached were dropped), not a failure; a benchmark cut mid-run
    is still a failed row."""
    try:
        run = pytest_run(out, name, args, timeout, dry_run=dry_run, env=env)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as exc:
        run_dir = latest_run_dir(out / name)
        benches = streamed_benchmarks(run_dir)
        dropped_by_budget = isinstance(exc, subprocess.TimeoutExpired) and budget_cut
        if isinstance(exc, subprocess.TimeoutExpired):
            why = (f"{'cut by --budget' if budget_cut else 'timed out'} after "
                   f"{exc.timeout:g} s")
        else:
            why = f"interrupted ({exc or 'SIGINT'})"
        table.add(title, f"{why}; {_count(len(benches), 'benchmark')} read from the streams "
                         f"written before (log {out / f'{name}.log'})",
                  None if dropped_by_budget else False)
        for bench_name, bench in benches.items():
            benchmark_row(table, f"  {name} {bench_name}", bench)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return run_dir
    benches = summary_benchmarks(out, name)
    table.add(title, f"exit {run.code}, {len(benches)} benchmarks, {run.wall:.0f} s "
                     f"(log {out / f'{name}.log'})", run.code == 0)
    for bench_name, bench in benches.items():
        benchmark_row(table, f"  {name} {bench_name}", bench)
    return run.run_dir


def streamed_benchmarks(run_dir: Path | None) -> dict[str, Any]:
    """The benchmarks of a run that did not finish, scored from the streams it wrote (the
    project's own reader: a stream cut mid-run is a failed run with its reason), in the saved
    summary's form."""
    from pytest_dlbench.layout import json_safe
    from pytest_dlbench.results.figures import summarize_dir

    if run_dir is None or not run_dir.is_dir():
        return {}
    benchmarks: dict[str, Any] = json_safe(summarize_dir(run_dir).to_dict())["benchmarks"]
    return benchmarks


# -- telemetry ---------------------------------------------------------------------------------
def telemetry_rows(table: Table, out: Path, name: str, run_dir: Path | None) -> None:
    """One row per stream (gpu_check_paths.stream_row): the load over the scored window with
    its sample count and the suite's load check on it, the whole run's mean named as such,
    NVML's peak beside torch's reserved, TFLOP/s and MFU (from the run's summary) and energy.
    A benchmark that skipped itself ran no work: its row says so."""
    from pytest_dlbench.layout import stream_paths
    from pytest_dlbench.measure.stream import read_stream

    if run_dir is None:
        table.add(f"telemetry {name}", "no run directory (the run did not start or finish)",
                  False)
        return
    benches = summary_benchmarks(out, name) or streamed_benchmarks(run_dir)
    for stream in stream_paths(run_dir):
        label = f"telemetry {name} {stream.name.removesuffix('.data')}"
        records = read_stream(stream)
        end = next((r for r in reversed(records) if r.get("event") == "end"), None)
        if end is not None and end.get("status") == "skipped":
            table.add(label, f"benchmark skipped itself: {_one_line(str(end.get('reason')))}",
                      "skipped")
            continue
        bench = stream.name.removesuffix(".data").rsplit(".D", 1)[0]
        figure, ok = stream_row(records, benches.get(bench))
        table.add(label, figure, ok)


def window_row(table: Table, run_dir: Path | None) -> None:
    """The standard resnet50's load check on its scored window (sized to at least
    WINDOW_MIN_S), on the first GPU's stream."""
    from pytest_dlbench.measure.stream import read_stream

    stream = run_dir / "resnet50.D0.data" if run_dir is not None else None
    if stream is None or not stream.is_file():
        table.add(WINDOW_TITLE, "no resnet50 stream (the standard run did not write one)", False)
        return
    figure, ok = window_check_row(read_stream(stream), WINDOW_MIN_S)
    table.add(WINDOW_TITLE, figure, ok)


# -- the bare loop: a rate timed without the project's code ------------------------------------
def window_rate(step: Callable[[], None], items_per_step: float, *, steps: int, warmup: int,
                cuda: Any = None, clock: Callable[[], float] = time.perf_counter) -> float:
    """Items per second of ``steps`` calls of ``step`` after ``warmup`` untimed ones.

    On a GPU (``cuda``: ``torch.cuda`` or a fake with its Event API) two events around the
    window and one synchronize at its end: the host runs ahead, as in training (pipelined; a
    sync per step would add the host's time to every step). On the CPU, ``clock`` around it."""
    for _ in range(warmup):
        step()
    if cuda is None:
        started = clock()
        for _ in range(steps):
            step()
        return items_per_step * steps / (clock() - started)
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()  # stamped when the device reaches it: after the warm-up's work
    for _ in range(steps):
        step()
    end.record()
    end.synchronize()  # the one sync
    return items_per_step * steps / (start.elapsed_time(end) / 1000.0)


def _cuda_of(device: str) -> Any:
    import torch

    return torch.cuda if device == "cuda" else None


@dataclass(frozen=True)
class NoioStep:
    """What the bare loop takes of the ``milabench`` suite's resnet50-noio (its arguments, read
    by the vision workload's own parser): the image side, the learning rate, the classes."""

    image_size: int
    lr: float
    classes: int
    momentum: float
    fused: bool
    soft_labels: bool
    channels_last: bool
    precision: str


def milabench_noio() -> NoioStep:
    """The shipped ``milabench`` suite's resnet50-noio, as its workload will read it."""
    from pytest_dlbench.results.figures import milabench_arguments
    from pytest_dlbench.workloads.vision import make_parser

    known = milabench_arguments(MILABENCH_BENCH)
    if known is None:
        raise RuntimeError(f"the milabench suite holds no {MILABENCH_BENCH}")
    args = make_parser().parse_args(_argv_words({**known[0], "--batch-size": 1}))
    return NoioStep(args.image_size, args.lr, args.num_classes, args.momentum, args.fused,
                    args.soft_labels, args.channels_last, args.precision)


def _argv_words(argv: Mapping[str, Any]) -> list[str]:
    """A suite's argv mapping as a command line (true: the flag alone; null, false: left out)."""
    words: list[str] = []
    for flag, value in argv.items():
        if value is None or value is False:
            continue
        words += [flag] if value is True else [flag, str(value)]
    return words


def bare_training_step(batch: int, *, device: str, tiny: bool = False,
                       noio: NoioStep | None = None) -> BareStep:
    """One training step of the ``milabench`` suite's resnet50-noio, written with torch alone:
    one fixed batch on the device of ``noio.image_size`` px images and soft labels (each class's
    target drawn in [0, 1), as milabench's synthetic loader makes them), plain SGD (no momentum,
    torch's default implementation: milabench's ``torch.optim.SGD(params, lr)``), tf32 and fp16
    autocast with a gradient scaler (tf32-fp16), channels_last. ``tiny``: a small convnet on
    32 px images (bf16 autocast on the CPU), for a test."""
    import torch

    noio = noio or milabench_noio()
    cuda = device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True  # as the vision workload sets it on a GPU
    if tiny:
        classes, size = 10, 32
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, classes))
    else:
        import torchvision

        classes, size = noio.classes, noio.image_size
        model = torchvision.models.resnet50(num_classes=classes)
    model = model.to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]
    images = torch.randn(batch, 3, size, size, device=device).contiguous(
        memory_format=torch.channels_last)
    labels = torch.rand(batch, classes, device=device)  # soft targets: probabilities per class
    optimizer = torch.optim.SGD(model.parameters(), lr=noio.lr)  # no momentum, not fused
    scaler = torch.amp.GradScaler(device, enabled=cuda)
    dtype = torch.float16 if cuda else torch.bfloat16
    return BareStep(model, images, labels, optimizer, scaler, device, dtype)


class BareStep:
    """One bare training step, callable; ``last_loss`` is the latest step's loss, on the device
    (read once, after the timing, to tell a training rate from a diverged one)."""

    def __init__(self, model: Any, images: Any, labels: Any, optimizer: Any, scaler: Any,
                 device: str, dtype: Any) -> None:
        self.model, self.images, self.labels = model, images, labels
        self.optimizer, self.scaler, self.device, self.dtype = optimizer, scaler, device, dtype
        self.last_loss: Any = None

    def __call__(self) -> None:
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=self.dtype):
            loss = torch.nn.functional.cross_entropy(self.model(self.images), self.labels)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.last_loss = loss.detach()


def bare_matmul_step(size: int, *, device: str, number: int) -> tuple[Callable[[], None], float]:
    """``number`` matmuls of two (size, size) matrices (bf16 on a GPU, fp32 on the CPU) and the
    TFLOP of one step, 2·size³·number / 1e12."""
    import torch

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)

    def step() -> None:
        for _ in range(number):
            torch.matmul(a, b, out=out)

    return step, 2.0 * size**3 * number / 1e12


def median_window(step: Callable[[], None], items: float, *, windows: int, steps: int,
                  warmup: int, device: str) -> float:
    """The median of ``windows`` window rates, the first after ``warmup`` steps."""
    cuda = _cuda_of(device)
    rates = [window_rate(step, items, steps=steps, warmup=warmup if i == 0 else 0, cuda=cuda)
             for i in range(windows)]
    return statistics.median(rates)


def bare_figures(batch: int, *, dry_run: bool, quick: bool) -> dict[str, Any]:
    """The bare loops of the reference rows: resnet50-noio img/s and matmul TFLOP/s (a dry
    run: a tiny convnet and a small fp32 matmul on the CPU)."""
    device = "cpu" if dry_run else "cuda"
    steps = 5 if dry_run else (40 if quick else 100)
    training = bare_training_step(batch, device=device, tiny=dry_run)
    resnet = median_window(training, batch, windows=3, steps=steps,
                           warmup=3 if dry_run else 20, device=device)
    loss = float(training.last_loss) if training.last_loss is not None else math.nan
    size = 256 if dry_run else MATMUL_SIZE
    step, tflop = bare_matmul_step(size, device=device, number=10)
    matmul = median_window(step, tflop, windows=3, steps=3 if dry_run else 10, warmup=2,
                           device=device)
    return {"resnet50": resnet, "resnet50_loss": loss, "batch": batch, "matmul": matmul,
            "size": size, "device": device}


# -- the reference rows --------------------------------------------------------------------------
@dataclass(frozen=True)
class Reference:
    """What the reference rows compare with on one GPU: milabench's published resnet50-noio
    figure (None: none for this GPU) and the batch the rows run at, the datasheet's dense bf16
    peak (results/figures/peaks.py)."""

    gpu: str
    batch: int
    milabench: Any  # results/figures/reference.PublishedFigure | None
    peak: float | None  # TFLOP/s


def reference_for(gpu: str) -> Reference:
    from pytest_dlbench.results.figures import nearest_published, table_peak

    figure = nearest_published(gpu, MILABENCH_BENCH, MILABENCH_BATCH)
    batch = figure.batch_size if figure is not None else MILABENCH_BATCH
    return Reference(gpu, batch, figure, table_peak(gpu, "bf16"))


def reference_suite(batch: int, *, quick: bool) -> str:
    """The reference run's suite: the ``milabench`` suite's resnet50-noio, its arguments copied
    from the shipped suite but for the batch, and matmul bf16 8192^3, one replica on one GPU;
    shorter windows than milabench's (its stop is 500), the same step."""
    import yaml

    from pytest_dlbench.results.figures import milabench_arguments

    known = milabench_arguments(MILABENCH_BENCH)
    if known is None:
        raise RuntimeError(f"the milabench suite holds no {MILABENCH_BENCH}")
    argv, definition = known
    suite = {
        "_defaults": {
            "max_duration": QUICK_MAX_DURATION_S * 2 if quick else 300,
            "plan": {"method": "per_gpu"},
            "voir": {"options": {"skip": 10, "stop": 60 if quick else 150, "interval": "1s"}},
        },
        MILABENCH_BENCH: {"inherits": "_defaults", "definition": definition, "weight": 1,
                          "argv": {**argv, "--batch-size": batch}},
        "matmul-bf16": {
            "inherits": "_defaults", "definition": "pytest_dlbench.workloads.matmul:main",
            "weight": 1,
            "argv": {"--m": MATMUL_SIZE, "--n": MATMUL_SIZE, "--k": MATMUL_SIZE, "--number": 30,
                     "--dtype": "bf16"},
        },
    }
    return ("# Written by benchmarks/gpu_check.py: the reference rows' run (one GPU); "
            f"{MILABENCH_BENCH}'s\n# arguments are bench_suites/milabench.yaml's, batch aside.\n"
            + yaml.safe_dump(suite, sort_keys=False))


def _ratio(a: float | None, b: float | None) -> str:
    return "?" if a is None or not b else f"{a / b:.3f}"


def _figure(x: float | None, units: str) -> str:
    return "none" if x is None else f"{x:,.1f} {units}" if x >= 10 else f"{x:.3g} {units}"


def _tflops(rate: float | None, flops_per_image: float | None) -> str:
    """`` (147.2 TFLOP/s)``: a rate at the FLOPs per image the project counted; "" without."""
    if rate is None or not flops_per_image:
        return ""
    return f" ({_figure(rate * flops_per_image / 1e12, 'TFLOP/s')})"


def resnet_reference_row(project: float | None, bare: float | None, ref: Reference, *,
                         dry_run: bool, bare_loss: float | None = None,
                         flops_per_image: float | None = None
                         ) -> tuple[str, bool | str | None]:
    """The project's resnet50-noio img/s beside the bare loop's and milabench's published
    figure for this GPU at this batch (one configuration: the ``milabench`` suite's), each with
    its TFLOP/s at the FLOPs per image the project's run counted, and the ratios; milabench's
    says "slow" below results/figures/reference.SLOW_BELOW. Ok when the project is within
    REFERENCE_TOLERANCE of the bare loop (same GPU, same step): milabench's figure is a verdict
    on the machine, shown, not judged here. A bare loop whose last loss is not finite diverged:
    its rate is no reference (FAIL)."""
    from pytest_dlbench.results.figures import SLOW_BELOW

    figure = (f"project {_figure(project, 'img/s')}{_tflops(project, flops_per_image)}; bare "
              f"loop {_figure(bare, 'img/s')}{_tflops(bare, flops_per_image)} (project/bare "
              f"{_ratio(project, bare)}); ")
    published = ref.milabench
    if published is not None:
        ratio = project / published.items_per_s if project is not None else None
        verdict = "" if ratio is None else (", slow" if ratio < SLOW_BELOW else ", not slow")
        figure += (f"milabench {published.gpu} {_figure(published.items_per_s, 'img/s')}"
                   f"{_tflops(published.items_per_s, flops_per_image)} at bs{published.batch_size}"
                   f" (project/milabench {_ratio(project, published.items_per_s)}{verdict}; "
                   f"{published.source})")
    else:
        figure += f"milabench: no published {MILABENCH_BENCH} figure for {ref.gpu}"
    if bare_loss is not None and not math.isfinite(bare_loss):
        return f"{figure}; the bare loop's loss is {bare_loss}: it diverged, no reference", False
    return _judged(figure, project, bare, dry_run=dry_run)


def matmul_reference_row(project: float | None, bare: float | None, ref: Reference, *,
                         dry_run: bool) -> tuple[str, bool | str | None]:
    """The project's matmul TFLOP/s beside the bare loop's and the datasheet's dense peak; a
    figure above the peak is an error of measurement (FAIL)."""
    figure = (f"project {_figure(project, 'TFLOP/s')}; bare loop {_figure(bare, 'TFLOP/s')} "
              f"(project/bare {_ratio(project, bare)}); ")
    figure += (f"datasheet dense peak {ref.peak:,.1f} (project/peak {_ratio(project, ref.peak)})"
               if ref.peak else f"no datasheet peak for {ref.gpu}")
    over = [name for name, x in (("project", project), ("bare loop", bare))
            if x is not None and ref.peak and x > ref.peak and not dry_run]
    if over:
        return (f"{figure}; {' and '.join(over)} above the datasheet's peak: an error of "
                f"measurement"), False
    return _judged(figure, project, bare, dry_run=dry_run)


def _judged(figure: str, project: float | None, bare: float | None, *,
            dry_run: bool) -> tuple[str, bool | str | None]:
    if project is None or bare is None:  # the check that did not give it has its own row
        return figure, None
    if dry_run:  # a fake pytest's figure beside a tiny model's on the CPU: nothing to judge
        return f"{figure} (dry run: not judged)", None
    return figure, abs(project / bare - 1) <= REFERENCE_TOLERANCE


def one_gpu_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with only the first visible GPU: the reference rows are per GPU. CUDA's
    order is the PCI bus's, as NVML's is: the GPU the rows run on is the one NVML samples."""
    environ = dict(os.environ if environ is None else environ)
    visible = [d.strip() for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return {**environ, "CUDA_VISIBLE_DEVICES": visible[0] if visible else "0",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


REFERENCE_RESNET = f"reference {MILABENCH_BENCH}"
REFERENCE_MATMUL = "reference matmul bf16"


def reference_checks(table: Table, out: Path, budget: Budget, facts: Facts, *, quick: bool,
                     dry_run: bool) -> Path | None:
    """The reference rows on the first GPU: the bare loops (a worker), then the project's run of
    the same configurations (pytest); returns the run directory."""
    ref = reference_for(facts.torch_gpus[0][0])
    env = one_gpu_env()
    bare: dict[str, Any] = {}
    print("== reference rows", flush=True)
    with table.check("reference: bare loops"):
        bare = in_subprocess(out, "bare", ["--batch", str(ref.batch)], _run_timeout(
            budget, BARE_TIMEOUT_S), dry_run=dry_run, quick=quick, env=env)
    run_dir = None
    title = f"reference: pytest {MILABENCH_BENCH} bs{ref.batch}, matmul bf16 on 1 GPU"
    with table.check(title):
        suite = out / "reference.yaml"
        suite.write_text(reference_suite(ref.batch, quick=quick))
        # --bench-reference: its resnet50-noio is the milabench suite's, so the run's own
        # verdict against milabench's figure is in reference.log too.
        run_dir = suite_rows(table, out, "reference", title,
                             [f"--bench-suite={suite}", "--bench-reference"],
                             _run_timeout(budget, REFERENCE_TIMEOUT_S), dry_run=dry_run,
                             env=env)
    project = summary_benchmarks(out, "reference")
    if not project and run_dir is not None:
        project = streamed_benchmarks(run_dir)
    resnet = project.get(MILABENCH_BENCH, {})
    perf, tflops = resnet.get("perf"), resnet.get("tflops")
    figure, ok = resnet_reference_row(perf, bare.get("resnet50"), ref, dry_run=dry_run,
                                      bare_loss=bare.get("resnet50_loss"),
                                      flops_per_image=tflops * 1e12 / perf if perf and tflops
                                      else None)
    table.add(f"{REFERENCE_RESNET} bs{ref.batch}", figure, ok)
    figure, ok = matmul_reference_row(project.get("matmul-bf16", {}).get("perf"),
                                      bare.get("matmul"), ref, dry_run=dry_run)
    table.add(f"{REFERENCE_MATMUL} {MATMUL_SIZE}^3", figure, ok)
    return run_dir


# -- the checks that run in a child process of their own -----------------------------------------
class WorkerFailed(RuntimeError):
    """A worker exited without its result: the last line of its log says why."""


def worker_result(out: Path, name: str) -> Path:
    return out / "workers" / f"{name}.json"


def in_subprocess(out: Path, name: str, options: Sequence[str], timeout: float, *,
                  dry_run: bool, quick: bool = False,
                  env: Mapping[str, str] | None = None) -> Any:
    """Run the worker ``name`` (this script with ``--worker``) and return its JSON result. It
    initialises CUDA, never this process; its output is appended to ``OUT/checks.log``."""
    result = worker_result(out, name)
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--result",
           str(result), *(["--dry-run"] if dry_run else []), *(["--quick"] if quick else []),
           *options]
    log = out / CHECKS_LOG
    with open(log, "a") as f:
        f.write(f"== {name}: {' '.join(cmd)}\n")
    code = run_logged(cmd, log, timeout, env=env, append=True)
    if code != 0 or not result.is_file():
        lines = log.read_text(errors="replace").strip().splitlines()
        raise WorkerFailed(f"the {name} worker exited {code}: {lines[-1] if lines else ''}")
    return json.loads(result.read_text())


def worker_main(argv: Sequence[str]) -> int:
    """``--worker NAME``: one check in this process, its result as JSON in ``--result``."""
    from pytest_dlbench.core.output_files import write_atomic

    parser = argparse.ArgumentParser(prog="gpu_check --worker")
    parser.add_argument("name", choices=("facts", "nvml", "bare", "timer"))
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args(list(argv))
    value: Any
    if args.name == "facts":
        value = dataclasses.asdict(fake_facts() if args.dry_run else real_facts())
    elif args.name == "nvml":
        value = nvml_worker(dry_run=args.dry_run)
        print(f"nvml samples: {value}", flush=True)
    elif args.name == "bare":
        value = bare_figures(args.batch, dry_run=args.dry_run, quick=args.quick)
        print(f"bare loops: {value}", flush=True)
    else:
        table = Table()
        timer_rows(table, 3 if args.dry_run or args.quick else 5,
                   DRY_TIMER if args.dry_run else GPU_TIMER)
        value = [[r.check, r.figure, r.status] for r in table.rows]
    write_atomic(args.result, json.dumps(value))
    return 0


def nvml_worker(*, dry_run: bool) -> dict[str, Any]:
    """NVML's utilisation samples on the first visible GPU after a load of a few seconds
    (gpu_check_paths.nvml_probe); a dry run reads FakeNvml and loads nothing."""
    if dry_run:
        return nvml_probe(FakeNvml(), None, lambda seconds: None)
    from pytest_dlbench.measure.monitor.nvml import nvml_session, visible_nvml_indices

    with nvml_session() as (binding, reason):
        if binding is None:
            raise RuntimeError(f"NVML: {reason}")
        indices, _notes = visible_nvml_indices(binding, os.environ.get("CUDA_VISIBLE_DEVICES"),
                                               binding.nvmlDeviceGetCount())
        handle = binding.nvmlDeviceGetHandleByIndex(indices[0] if indices else 0)
        return nvml_probe(binding, handle, gpu_load)


def subprocess_facts(out: Path, budget: Budget, *, dry_run: bool) -> Facts:
    data = in_subprocess(out, "facts", [], _run_timeout(budget, FACTS_TIMEOUT_S),
                         dry_run=dry_run)
    return Facts(**{**data, "torch_gpus": tuple(tuple(g) for g in data["torch_gpus"]),
                    "nvml_gpus": tuple(data["nvml_gpus"])})


# -- the timer ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimerSetup:
    """The step the timers measure; the Bench's rate is judged against the wall clock of the
    very same timed steps (a synchronize before the first and after the last). On the GPU a
    bare window of the same step measured apart (two CUDA events, one synchronize) is shown
    beside it, not judged: on an H200 (2026-11-27) two separate loops differed by up to 8 %
    round to round (0.949 to 1.083), the loops' difference, not the timer's."""

    device: str
    label: str
    backend_prefix: str  # what the Bench's timer backend must be called
    separate_window: bool  # also time a bare events window apart (shown, not judged)
    tolerance: float


GPU_TIMER = TimerSetup("cuda", "resnet50 bs64 fp16", "cuda", True, TIMER_TOLERANCE)
DRY_TIMER = TimerSetup("cpu", "dry run: MLP bs64 x 512 on the CPU", "cpu", False,
                       DRY_TIMER_TOLERANCE)
SKIP, STOP = 5, 50


def _training_step(setup: TimerSetup) -> tuple[Callable[[], None], int]:
    import torch

    device = torch.device(setup.device)
    batch = 64
    if setup.device == "cuda":
        import torchvision

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        model = torchvision.models.resnet50(num_classes=1000).to(device)
        x = torch.randn(batch, 3, 224, 224, device=device)
        classes = 1000
    else:
        # Steps of several milliseconds: the window reads (which the wall clock holds and the
        # Bench does not) stay a fraction of a per cent on a loaded CPU, as on the GPU.
        width = 512
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                    torch.nn.Linear(width, width), torch.nn.ReLU(),
                                    torch.nn.Linear(width, 10))
        x = torch.randn(batch, width)
        classes = 10
    y = torch.randint(0, classes, (batch,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(setup.device, dtype=torch.float16 if setup.device == "cuda"
                            else torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step, batch


def _synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _bench_round(step: Callable[[], None], batch: int, setup: TimerSetup) -> tuple[float, float,
                                                                                   str]:
    """One timed loop through Bench: (its steady rate, the wall clock's rate of the same steady
    steps, the timer backend's name)."""
    import torch

    from pytest_dlbench.measure.bench import Bench

    bench = Bench(name="agreement", device=torch.device(setup.device), skip=SKIP, stop=STOP)
    started = time.perf_counter()
    for i, _ in enumerate(bench.iterate(range(SKIP + STOP), batch_size=batch)):
        if i == SKIP:
            _synchronize(setup.device)
            started = time.perf_counter()
        step()
    _synchronize(setup.device)
    wall = time.perf_counter() - started
    bench.close()
    records = getattr(bench.stream, "records", [])
    rates = [r for r in records if r["event"] == "rate" and not r["warmup"]]
    ours = sum(r["items"] for r in rates) / sum(r["seconds"] for r in rates)
    return ours, STOP * batch / wall, type(bench.timer.backend).__name__


def timer_rows(table: Table, rounds: int, setup: TimerSetup) -> None:
    """Bench (CUDA events, one sync per window) against the reference on one training step."""
    step, batch = _training_step(setup)
    for _ in range(10):
        step()
    _synchronize(setup.device)
    ratios, apart, backend = [], [], "?"
    for _ in range(rounds):
        ours, wall_rate, backend = _bench_round(step, batch, setup)
        ratios.append(ours / wall_rate)
        if setup.separate_window:
            apart.append(ours / window_rate(step, batch, steps=STOP, warmup=0,
                                            cuda=_cuda_of(setup.device)))
    table.add("timer backend", backend, backend.lower().startswith(setup.backend_prefix))
    median = statistics.median(ratios)
    figure = (f"Bench / wall clock of the same steps = {median:.4f} ({setup.label}; {rounds} "
              f"rounds, min {min(ratios):.3f}, max {max(ratios):.3f}; within "
              f"{setup.tolerance:.0%})")
    if apart:
        figure += (f"; Bench / a separate events window = {statistics.median(apart):.4f} "
                   f"(min {min(apart):.3f}, max {max(apart):.3f}; not judged)")
    table.add("timer agreement", figure, abs(median - 1) <= setup.tolerance)


# -- the script --------------------------------------------------------------------------------
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?", default=DEFAULT_OUT,
                        help="where the runs, logs and gpu_check.txt go")
    parser.add_argument("--quick", action="store_true",
                        help=f"shorter windows, fewer rounds, each benchmark cut at "
                             f"{QUICK_MAX_DURATION_S} s")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="the whole script's time: each run gets at most what is left")
    parser.add_argument("--copy-to", type=Path, metavar="DIR",
                        help="copy gpu_check.txt and the pytest logs there after every row")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: fake GPUs, fake pytest runs, the timer on the CPU")
    args = parser.parse_args(list(argv))
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be a positive number of seconds, not {args.budget:g}")
    return args


def _run_timeout(budget: Budget, default: float, needs: float = 0.0) -> float:
    """A run's timeout; OutOfBudget when under MIN_RUN_S would be left, or (``needs``: a run
    that is dropped rather than cut) under the whole time it needs."""
    if needs and budget.left() - RESERVE_S < needs:
        raise OutOfBudget(f"dropped (the lowest priority): {max(budget.left(), 0):.0f} s of "
                          f"--budget left, it needs about {needs + RESERVE_S:.0f} s")
    timeout = budget.timeout(default)
    if timeout is None:
        raise OutOfBudget(f"{max(budget.left(), 0):.0f} s of --budget left, under the "
                          f"{MIN_RUN_S + RESERVE_S:.0f} s a run needs")
    return timeout


def run_checks(table: Table, args: argparse.Namespace,
               facts_of: Callable[[], Facts] | None = None, budget: Budget | None = None) -> None:
    """Every check in the budget's order. ``facts_of``: the device facts (default: read by a
    worker process, so that this one never initialises CUDA)."""
    out: Path = args.out
    budget = budget or Budget(getattr(args, "budget", None))
    print("== device", flush=True)
    facts: Facts | None = None
    with table.check("device facts"):
        facts = (facts_of or (lambda: subprocess_facts(out, budget, dry_run=args.dry_run)))()
        device_rows(table, facts)
        figure, ok = inventory_row(facts)
        table.add("NVML inventory", figure, ok)
    gpus = facts.gpu_count if facts is not None else 0
    if facts is not None and gpus:
        # First: the figure the load over a scored window relies on (one worker, ~10 s).
        with table.check(NVML_TITLE):
            probe = in_subprocess(out, "nvml", [], _run_timeout(budget, NVML_TIMEOUT_S),
                                  dry_run=args.dry_run, env=one_gpu_env())
            figure, ok = nvml_probe_row(probe)
            table.add(NVML_TITLE, figure, ok)
    if facts is None or gpus == 0:
        for check in ("reference rows", "timer agreement", STANDARD_TITLE, PATHS_TITLE,
                      SMOKE_TITLE, "telemetry"):
            table.add(check, "not run: no CUDA device", None)
        return
    # The headline first: the project's figures beside references no one here wrote.
    ref_dir = reference_checks(table, out, budget, facts, quick=args.quick, dry_run=args.dry_run)
    # A worker process of about a minute: before the suites, so a short lease checks the timer.
    print("== timer agreement", flush=True)
    with table.check("timer agreement"):
        rows = in_subprocess(out, "timer", [], _run_timeout(budget, TIMER_TIMEOUT_S),
                             dry_run=args.dry_run, quick=args.quick)
        for check, figure, status in rows:
            table.add(check, figure, status)
    spread = ["-n", str(gpus)]  # one xdist worker per GPU: every GPU at once
    stop = "10" if args.quick else "30"
    # --quick: a benchmark that hangs is cut at max_duration, one failure; the suite goes on.
    cut = (["--bench-override", f"*.max_duration={QUICK_MAX_DURATION_S}"] if args.quick
           else [])
    print("== standard subset", flush=True)
    runs: dict[str, Path | None] = {}
    with table.check(STANDARD_TITLE):
        timeout = _run_timeout(budget, STANDARD_TIMEOUT_S)
        runs["standard"] = suite_rows(
            table, out, "standard", STANDARD_TITLE,
            # -k matches substrings: name the variants to leave out (-ddp, -noio, the LM's
            # compiled sibling)
            ["--bench-suite=standard", "-k",
             "resnet50 and not (ddp or noio or reduce) or vit_b_16 or matmul-bf16 "
             "or lm-gpt-small and not compiled",
             "--bench-override", f"*.voir.options.stop={stop}", *cut,
             # the load check's window: long enough to hold whole NVML samples
             "--bench-override", f"resnet50.voir.options.stop={WINDOW_STOP}",
             "--bench-override", f"resnet50-compiled.max_duration={COMPILED_CUT_S}", *spread],
            timeout, dry_run=args.dry_run, budget_cut=timeout < STANDARD_TIMEOUT_S)
    table.archive()
    with table.check(WINDOW_TITLE):
        window_row(table, runs.get("standard"))
    print("== paths no shipped run takes", flush=True)
    with table.check(PATHS_TITLE):
        runs["paths"] = paths_rows(table, out, spread, _run_timeout(budget, PATHS_TIMEOUT_S),
                                   quick=args.quick, dry_run=args.dry_run)
    table.archive()
    print(f"== smoke suite on {gpus} GPUs at once", flush=True)
    with table.check(SMOKE_TITLE):
        runs["smoke"] = suite_rows(table, out, "smoke", SMOKE_TITLE,
                                   ["--bench-suite=smoke", *cut, *spread],
                                   _run_timeout(budget, SMOKE_TIMEOUT_S, needs=SMOKE_NEEDS_S),
                                   dry_run=args.dry_run)
    table.archive()
    print("== per stream: the load over the scored window, memory, FLOPs, energy", flush=True)
    for name, run_dir in (("reference", ref_dir), *runs.items()):
        with table.check(f"telemetry {name}"):
            telemetry_rows(table, out, name, run_dir)


def paths_rows(table: Table, out: Path, spread: Sequence[str], timeout: float, *, quick: bool,
               dry_run: bool) -> Path | None:
    """The ``paths`` run (gpu_check_paths.PATHS, in priority order); the benchmarks its timeout
    left unreached get a "-" row each, saying they were dropped."""
    suite = out / "paths.yaml"
    suite.write_text(paths_suite(Path(__file__).resolve().parents[1] / "bench_suites"
                                 / "standard.yaml", quick=quick))
    run_dir = suite_rows(table, out, "paths", PATHS_TITLE,
                         [f"--bench-suite={suite}", "-k", paths_selection(), *spread],
                         timeout, dry_run=dry_run, budget_cut=timeout < PATHS_TIMEOUT_S)
    ran = summary_benchmarks(out, "paths") or streamed_benchmarks(run_dir)
    what = dict(PATHS)
    for name in dropped([n for n, _ in PATHS], ran):
        table.add(f"  paths {name}", f"dropped: the run's time ran out before it ({what[name]})",
                  None)
    return run_dir


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP (``timeout``, a closing session) end the script the way Ctrl-C does:
    the running pytest's process group is killed and the table printed."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None, *, facts_of: Callable[[], Facts] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--fake-pytest"]:
        return fake_pytest(argv[1:])
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / CHECKS_LOG).unlink(missing_ok=True)  # this run's workers only
    table = Table(path=args.out / "gpu_check.txt", copy_to=args.copy_to)
    # Before anything can hang (the device facts start CUDA): a lease killed there still
    # brings back a table saying how far it got.
    table.save("gpu_check  (in progress: the device facts pending)")
    budget = Budget(args.budget)
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    interrupted = ""
    try:
        run_checks(table, args, facts_of, budget)
    except KeyboardInterrupt as exc:
        interrupted = str(exc) or "SIGINT"
    finally:  # the table, whatever happened
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        header = (f"gpu_check  {time.strftime('%Y-%m-%d %H:%M')}  "
                  f"({budget.elapsed() / 60:.1f} min, host "
                  f"{os.uname().nodename}{', quick' if args.quick else ''}"
                  f"{f', budget {args.budget:g} s' if args.budget is not None else ''})")
        if interrupted:
            header += f"\nINTERRUPTED ({interrupted}): the checks after the last row did not run"
        if args.dry_run:
            header += "\nDRY RUN: fake GPUs and fake pytest runs; no figure here is a measurement"
        print(table.render(header), flush=True)
        table.save(header)
        table.archive()
    return 130 if interrupted else (1 if table.failed else 0)


if __name__ == "__main__":
    sys.exit(main())
