"""The public fixtures: thin wrappers over the domain objects (``Bench`` and ``data``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.options import results_base

__all__ = [
    "bench",
    "bench_data_dir",
    "image_text_pairs",
    "jpeg_images",
    "process_group",
    "synthetic_images",
    "token_sequences",
]

#: Why an ordinary test's body failed (``pytest_runtest_makereport``), for its ``bench``'s end.
CALL_FAILED = pytest.StashKey[str]()
_TESTS_RUN_DIR = pytest.StashKey[Path]()


def default_device() -> Any:
    """The pinned device: the (only) visible GPU of this worker, else the CPU; in a torchrun
    rank, ``cuda:LOCAL_RANK`` or the rank's share of the CPU cores.

    On a machine without a GPU driver, outside torchrun, it is ``"cpu"`` without importing
    torch: a benchmark that never touches torch (a command, a sleep) starts seconds sooner,
    and ``bench.device`` still gives a ``torch.device`` to one that does. A slot that names a
    GPU always asks torch, and fails (``DeviceError``, torch's reason in one line) when torch
    cannot use CUDA, rather than running on the CPU."""
    from pytest_dlbench.run.devices import gpu_driver_present, gpu_required
    from pytest_dlbench.run.launch.rank import RankInfo, rank_device

    if ("torch" not in sys.modules and not gpu_driver_present() and not gpu_required()
            and not RankInfo.from_env().launched):
        return "cpu"
    return rank_device()


@pytest.fixture(scope="session")
def bench_data_dir(pytestconfig: pytest.Config) -> Path:
    """Where synthetic on-disk data sets are written once and reused: ``<base>/data``."""
    # Here, not at the top: layout stands on suite/, which a plain test run never loads.
    from pytest_dlbench.layout import DATA

    path = results_base(pytestconfig) / DATA
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def bench(request: pytest.FixtureRequest, bench_data_dir: Path) -> Iterator[Any]:
    """The run context of a benchmark: ``device``, ``args``, ``iterate``, ``log_loss``, ``timer``.

    In a suite item it is configured from the suite; in an ordinary test function it streams to
    ``<base>/runs/tests.<time>/<test>.D0.data`` (its name: plugin/fixture_names.py) with the
    warm-up and steady steps of its ``bench_steps`` marker or ``--bench-fixture-steps``
    (plugin/fixture_steps.py), and the run ends with the same table and score as a suite's
    (plugin/fixture_runs.py).
    """
    run = getattr(request.node, "run", None)
    if run is not None:
        yield run.make_bench(default_device())
        return
    from pytest_dlbench.core.protocol import Status
    from pytest_dlbench.layout import stream_path
    from pytest_dlbench.measure.bench import Bench
    from pytest_dlbench.measure.machine import machine_meta
    from pytest_dlbench.measure.monitor import Monitor
    from pytest_dlbench.measure.stream import Event, StreamWriter
    from pytest_dlbench.plugin.fixture_against import child_stream
    from pytest_dlbench.plugin.fixture_steps import item_steps
    from pytest_dlbench.run.harness import execute

    runs = request.config.pluginmanager.get_plugin("dlbench-fixture-runs")
    if runs is not None and runs.against is not None:
        yield None  # --bench-against: the rounds run in children (plugin/fixture_against.py)
        return
    plugin = request.config.pluginmanager.get_plugin("dlbench-session") or runs
    path, repeat, launched = child_stream(), None, {}
    round_child = path is not None
    if path is not None:  # a round of a paired run: the parent named the stream
        from pytest_dlbench.layout import parse_stream_name
        from pytest_dlbench.run.harness import launch_facts

        # The parent's name (of all the tests it collected): this child collected one.
        given = parse_stream_name(path)
        name, repeat = given.bench, given.repeat
        launched = launch_facts()  # forked from the round's warm server, or fresh
    else:
        from pytest_dlbench.plugin.fixture_names import row_name

        name = row_name(request.node)  # its test id, qualified when another test has its name
        run_dir = plugin.run_dir() if plugin is not None else _tests_run_dir(request.config)
        path = stream_path(run_dir, name, 0)
    device = default_device()
    warmup, steps = item_steps(request.node, request.config)  # plugin/fixture_steps.py
    with StreamWriter(path) as stream:
        # Weight 1: each test's benchmark counts in the run's score, as a suite's would; skip
        # and stop as a suite's spec has them (the progress line's count, a rerun's steps).
        stream.write(Event.CONFIG, spec={"name": name, "nodeid": request.node.nodeid,
                                         "weight": 1, "skip": warmup, "stop": steps},
                     device=0, repeat=repeat, **launched)
        stream.write(Event.META, **machine_meta(device))
        instance = Bench(name=name, device=device, stream=stream, data_dir=bench_data_dir,
                         skip=warmup, stop=steps)
        # The suite child's telemetry, before the first timed step: results/figures/busy.py judges
        # from its samples whether something else used the machine, as for a suite's run.
        # Its process tree: a paired round's child is its parent's run (the marker it was
        # given); otherwise the test's process and its children, whatever marker or session
        # the shell's environment passed on.
        monitor = Monitor(stream, inherit_run=round_child).start()
        yield instance
        failed = request.node.stash.get(CALL_FAILED, None)
        outcome, exc = execute(lambda: _close_monitored(instance, monitor, flops=not failed),
                               stream, final=False)
        if exc is not None:
            raise exc
        if failed:
            stream.write(Event.END, status=Status.FAIL, reason=failed)
        else:
            stream.write(Event.END, status=Status.OK, reason="")


def _close_monitored(bench: Any, monitor: Any, *, flops: bool = True) -> None:
    """Read the last window, then stop the monitor: its last sample comes after the last timed
    step, and its ``monitor_summary`` before ``end``, whatever reading the window raised. Then,
    as a suite's child does (run/harness.py, ``finish_bench``), count the FLOPs of one step of
    the model the test handed to ``bench.watch``: the table's TFLOP/s and MFU come from that
    record, and it is counted outside every timed step (``flops``: not after a failed body)."""
    try:
        bench.close()
    finally:
        monitor.stop()
    if flops and bench.watched is not None:
        from pytest_dlbench.measure.flops import count_step_flops
        from pytest_dlbench.measure.stream import Event

        model, example = bench.watched
        count = count_step_flops(model, example, items_per_example=bench.items_per_example)
        bench.stream.write(Event.FLOPS, **count.record())


def _tests_run_dir(config: pytest.Config) -> Path:
    from pytest_dlbench.layout import make_run_dir

    cached = config.stash.get(_TESTS_RUN_DIR, None)
    if cached is None:
        cached = make_run_dir(results_base(config), "tests")
        config.stash[_TESTS_RUN_DIR] = cached
    return cached


def _factory(name: str) -> Callable[..., Any]:
    from pytest_dlbench import data

    return getattr(data, name)


@pytest.fixture
def synthetic_images() -> Callable[..., Any]:
    """Factory of in-memory fake ImageNet-like datasets: ``synthetic_images(n=256, ...)``."""
    return _factory("synthetic_images")


@pytest.fixture
def jpeg_images(bench_data_dir: Path) -> Callable[..., Path]:
    """Factory of an on-disk JPEG ImageFolder under the data dir, written once and reused."""
    from pytest_dlbench import data

    def make(name: str = "jpeg", **kwargs: Any) -> Path:
        return data.jpeg_folder(bench_data_dir / name, **kwargs)

    return make


@pytest.fixture
def image_text_pairs() -> Callable[..., Any]:
    """Factory of image-text pair datasets with token ids (for CLIP-like models)."""
    return _factory("image_text_pairs")


@pytest.fixture
def token_sequences() -> Callable[..., Any]:
    """Factory of token-sequence datasets (for language models)."""
    return _factory("token_sequences")


@pytest.fixture(scope="session")
def process_group() -> Iterator[Any]:
    """The default process group when this process is a torchrun rank, else ``None``.

    ``nccl`` on the rank's GPU (``cuda:LOCAL_RANK``), ``gloo`` on the CPU. Made once per process
    (each rank runs one benchmark item) and destroyed at the end of the session. Outside
    torchrun (an ordinary inline run, one process) there is no group: a benchmark runs without
    DistributedDataParallel then.
    """
    from pytest_dlbench.run.launch.rank import (
        RankInfo,
        destroy_process_group,
        init_process_group,
        rank_device,
    )

    rank = RankInfo.from_env()
    if not rank.is_distributed:
        yield None
        return
    group = init_process_group(rank_device(rank))
    try:
        yield group
    finally:
        destroy_process_group()
