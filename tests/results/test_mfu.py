"""TFLOP/s and MFU per GPU (issue 21): an njobs job's rate is the whole job's, a peak is one GPU's;
an MFU above 100 % is an error of measurement; the peak table's NVL parts; the compute type from
the config record, else from a list-form argv."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.report.html import render_html
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results.figures import (
    CEILING_ERROR,
    MFU_ERROR,
    dtype_of,
    summarize_dir,
    table_peak,
)

H100 = "NVIDIA H100 80GB HBM3"
H100_BF16 = 989.4e12  # dense bf16 FLOP/s of one H100 SXM (its datasheet)


def job_stream(
    run_dir: Path, name: str, *, rate: float, flops_per_item: float | None,
    device_name: str = H100, world_size: int = 1, precision: str | None = None,
    argv: Any = None, units: str = "items/s", definition: str | None = None,
) -> Path:
    """A run stream as the harness writes it: the ``config`` record (with the precision preset
    and, for an njobs job, ``distributed``, as run/launch/rank.py describes it), ``meta``, ten
    steady observations at ``rate`` (an njobs job's rank 0 reports the whole job's rate), the
    ``flops`` record and ``end``."""
    method = "njobs" if world_size > 1 else "per_gpu"
    spec: dict[str, Any] = {"name": name, "weight": 1.0, "enabled": True, "tags": [],
                            "plan": {"method": method, "n": world_size}, "units": units,
                            "skip": 0, "stop": 10}
    if argv is not None:
        spec["argv"] = argv
    if definition is not None:
        spec["definition"] = definition
    config: dict[str, Any] = {"spec": spec, "device": 0, "repeat": None}
    if precision is not None:
        config.update(precision=precision, compile=None)
    if world_size > 1:
        config["distributed"] = {"world_size": world_size, "nnodes": 1,
                                 "nproc_per_node": world_size, "rank": 0}
    path = run_dir / f"{name}.D0.data"
    with StreamWriter(path) as stream:
        stream.write("config", **config)
        stream.write("meta", host="test", torch="0", device_name=device_name)
        t = 1000.0
        for step in range(10):
            t += 1.0
            stream.write("rate", value=rate, units=units, step=step, warmup=False, time=t,
                         items=rate, seconds=1.0)
        if flops_per_item is not None:
            stream.write("flops", flops=flops_per_item * 4, items=4, reason="")
        stream.write("end", status="ok", reason="", time=t)
    return path


def test_an_8_rank_h100_bf16_njobs_job_reports_mfu_per_gpu(tmp_path: Path):
    rate, per_item = 4000.0, 3e11  # the job's items/s, FLOPs of one item's step
    job_stream(tmp_path, "ddp.bf16", rate=rate, flops_per_item=per_item, world_size=8,
               precision="bf16", argv={"--precision": "bf16"},
               definition="pytest_dlbench.workloads.ddp:train")
    bench = summarize_dir(tmp_path).get("ddp.bf16")
    assert bench.perf == pytest.approx(rate)  # the job's rate stays the job's
    assert bench.tflops == pytest.approx(rate / 8 * per_item / 1e12)  # 150 TFLOP/s per GPU
    assert bench.mfu == pytest.approx(rate / 8 * per_item / H100_BF16)  # 15.2 %
    assert bench.peak_source == f"{H100} datasheet, bf16" and bench.mfu_error is None


def test_a_per_gpu_run_keeps_its_rate(tmp_path: Path):
    job_stream(tmp_path, "resnet", rate=500.0, flops_per_item=3e11, precision="bf16")
    bench = summarize_dir(tmp_path).get("resnet")
    assert bench.tflops == pytest.approx(150.0)
    assert bench.mfu == pytest.approx(150e12 / H100_BF16)


def test_a_per_gpu_matmul_is_the_peak_of_an_njobs_jobs_gpus(tmp_path: Path):
    # A device without a datasheet: the peak is this run's matmul, one GPU's TFLOP/s.
    job_stream(tmp_path, "matmul", rate=100.0, flops_per_item=None, device_name="GPU X",
               units="TFLOP/s", argv={"--dtype": "fp32"})
    job_stream(tmp_path, "ddp", rate=8 * 500.0, flops_per_item=1e11, device_name="GPU X",
               world_size=8)  # 50 TFLOP/s per GPU
    bench = summarize_dir(tmp_path).get("ddp")
    assert bench.tflops == pytest.approx(50.0)
    assert bench.mfu == pytest.approx(0.5)
    assert bench.peak_source.startswith("matmul in this run (median of its fastest")


def test_an_njobs_matmul_is_a_peak_per_gpu(tmp_path: Path):
    # Rank 0 of an njobs matmul reports the job's TFLOP/s: 8 GPUs at 100 each.
    job_stream(tmp_path, "matmul", rate=800.0, flops_per_item=None, device_name="GPU X",
               units="TFLOP/s", world_size=8)
    job_stream(tmp_path, "resnet", rate=500.0, flops_per_item=1e11, device_name="GPU X")
    summary = summarize_dir(tmp_path)
    assert summary.get("matmul").tflops == pytest.approx(100.0)
    assert summary.get("resnet").mfu == pytest.approx(0.5)


def test_an_mfu_above_100_percent_is_flagged_never_shown(tmp_path: Path):
    # 1,200 TFLOP/s on one H100 in bf16: more than the datasheet's 989.4, so the count or the
    # rate is wrong (a miscounted batch, a timing without synchronisation).
    job_stream(tmp_path, "lm", rate=4000.0, flops_per_item=3e11, precision="bf16")
    job_stream(tmp_path, "resnet", rate=500.0, flops_per_item=3e11, precision="bf16")
    summary = summarize_dir(tmp_path)
    lm = summary.get("lm")
    # Neither the TFLOP/s nor the MFU is a figure: the 1,200 is in the error's text only.
    assert lm.tflops is None and lm.to_dict()["tflops"] is None
    assert lm.mfu is None and lm.to_dict()["mfu"] is None
    assert lm.mfu_error is not None and lm.mfu_error.startswith(MFU_ERROR)
    assert f"{H100} datasheet, bf16" in lm.mfu_error
    assert summary.get("resnet").mfu_error is None

    text = render_summary(summary, width=250)
    details = text.split("\n\n")[1]  # the second table: TFLOP/s, MFU...
    row = next(line for line in details.splitlines() if line.startswith("lm "))
    assert "121" not in row and "1200" not in row and row.count("error") == 2
    assert f"TFLOP/s and MFU not shown: lm ({MFU_ERROR} (1200 TFLOP/s per GPU" in text

    page = render_html(summary)
    assert "121.3 %" not in page and ">1200<" not in page and f'title="{MFU_ERROR}' in page
    assert "15.2 %" in page  # resnet's MFU is still a figure


def test_nvl_parts_have_their_own_peaks():
    assert table_peak("NVIDIA H100 NVL", "bf16") == 835.5
    assert table_peak("NVIDIA H100 NVL", "tf32") == 417.5
    assert table_peak("NVIDIA H100 NVL", "fp32") == 60.0
    assert table_peak("NVIDIA H200 NVL", "fp16") == 835.5
    # The SXM and PCIe parts keep theirs.
    assert table_peak(H100, "bf16") == 989.4
    assert table_peak("NVIDIA H200", "bf16") == 989.4
    assert table_peak("NVIDIA H100 PCIe", "bf16") == 756.0


@pytest.mark.parametrize(("argv", "dtype"), [
    (["--precision", "bf16"], "bf16"),
    (["--batch-size", "8", "--precision=bf16"], "bf16"),
    (["--precision", "tf32-fp16", "--steps", "5"], "fp16"),
    (["--dtype", "tf32"], "tf32"),
    (["--precision", "fp32", "--precision", "bf16"], "bf16"),  # argparse: the last wins
    (["--precision"], "fp32"),
    ({"--precision": "bf16"}, "bf16"),
])
def test_dtype_of_a_list_form_argv(argv: Any, dtype: str):
    assert dtype_of({"argv": argv}) == dtype


def test_the_config_records_precision_wins_over_the_arguments():
    spec: Mapping[str, Any] = {"argv": {"--batch-size": 8}}  # the workload's default preset
    assert dtype_of(spec, "bf16") == "bf16"
    assert dtype_of(spec, "tf32-fp16") == "fp16"
    assert dtype_of(spec, None) == "fp32"


def test_a_list_form_argv_job_is_compared_with_its_precisions_peak(tmp_path: Path):
    # A training workload: the config record says bf16.
    job_stream(tmp_path, "vit", rate=500.0, flops_per_item=3e11, precision="bf16",
               argv=["--precision", "bf16"], definition="pytest_dlbench.workloads.vision:train")
    # Not a training workload (no precision in its config record): its list-form argv says.
    job_stream(tmp_path, "custom", rate=500.0, flops_per_item=3e11,
               argv=["--steps", "10", "--precision=bf16"])
    summary = summarize_dir(tmp_path)
    for name in ("vit", "custom"):
        bench = summary.get(name)
        assert bench.peak_source == f"{H100} datasheet, bf16", name
        assert bench.mfu == pytest.approx(150e12 / H100_BF16), name


def steps_stream(run_dir: Path, name: str, steps: list[float], *, units: str = "items/s",
                 flops_per_item: float | None = None, busy: bool | None = None) -> None:
    """A CPU run whose steady steps have the rates ``steps`` (one second each); ``busy``: the
    monitor's samples of a 2-core machine, on which something else used a core all along
    (True) or nothing did (False)."""
    path = run_dir / f"{name}.D0.data"
    spec = {"name": name, "weight": 1.0, "units": units, "skip": 0, "stop": len(steps)}
    with StreamWriter(path) as stream:
        stream.write("config", spec=spec, device=0, repeat=None)
        stream.write("meta", host="test", torch="0", device_name="x86_64",
                     **({"state": {"cores": 2}} if busy is not None else {}))
        for step, rate in enumerate(steps):
            stream.write("rate", value=rate, units=units, step=step, warmup=False,
                         time=1000.0 + step, items=rate, seconds=1.0)
            if busy is not None:
                stream.write("telemetry", time=1000.0 + step, cpu_percent=100.0,
                             system_cpu_percent=100.0 if busy else 50.0, gpus=[])
        if flops_per_item is not None:
            stream.write("flops", flops=flops_per_item * 2, items=2, reason="")
        stream.write("end", status="ok", reason="", time=1000.0 + len(steps))


def test_a_noisy_cpu_matmul_gives_its_fastest_steps_as_the_peak(tmp_path: Path):
    # The smoke run's matmul alternated 59 and 4.3 GFLOP/s steps (std% 100 %): its mean, 31.6,
    # made resnet18's MFU swing with the alternation. The machine did 59 GFLOP/s in every fast
    # step: that is its peak; a model at 30 GFLOP/s uses half of it.
    fast, slow = 0.059, 0.0043
    steps_stream(tmp_path, "matmul", [fast, slow] * 6, units="TFLOP/s")
    steps_stream(tmp_path, "resnet18", [100.0] * 12, flops_per_item=3e8)  # 0.03 TFLOP/s
    summary = summarize_dir(tmp_path)
    resnet = summary.get("resnet18")
    assert summary.get("matmul").perf == pytest.approx((fast + slow) / 2)  # d023ee7's peak
    assert resnet.mfu == pytest.approx(0.03 / fast)
    assert resnet.peak_source == "matmul in this run (median of its fastest 3 of 12 steps)"


def test_a_matmul_whose_fastest_steps_disagree_gives_no_mfu(tmp_path: Path):
    steps_stream(tmp_path, "matmul", [0.06, 0.03, 0.01, 0.02, 0.015, 0.005], units="TFLOP/s")
    steps_stream(tmp_path, "resnet18", [100.0] * 6, flops_per_item=1e8)
    resnet = summarize_dir(tmp_path).get("resnet18")
    assert resnet.mfu is None and resnet.tflops == pytest.approx(0.01)
    assert resnet.peak_source is not None and "too noisy for a peak" in resnet.peak_source
    short = tmp_path / "short"
    short.mkdir()
    steps_stream(short, "matmul", [0.06, 0.06], units="TFLOP/s")
    steps_stream(short, "resnet18", [100.0] * 6, flops_per_item=1e8)
    resnet = summarize_dir(short).get("resnet18")
    assert resnet.mfu is None and "too few for a peak" in (resnet.peak_source or "")


def test_a_cpu_model_above_one_and_a_half_matmuls_is_an_error(tmp_path: Path):
    # 2.38 "TFLOP/s" from lm-tiny on a CPU whose matmul does 0.159: FLOPs counted per sequence
    # against a rate in tokens (issue 37, item 1). Past 1.5 x the machine's own matmul, the
    # figure is an error of measurement, never a number in the table.
    steps_stream(tmp_path, "matmul", [0.159] * 12, units="TFLOP/s")
    steps_stream(tmp_path, "lm-tiny", [2380.0] * 12, flops_per_item=1e9)  # 2.38 TFLOP/s
    steps_stream(tmp_path, "resnet18", [1000.0] * 12, flops_per_item=2e8)  # 0.2: no MFU only
    summary = summarize_dir(tmp_path)
    lm, resnet = summary.get("lm-tiny"), summary.get("resnet18")
    assert lm.tflops is None and lm.mfu is None
    assert lm.mfu_error is not None and lm.mfu_error.startswith(CEILING_ERROR)
    assert resnet.tflops == pytest.approx(0.2) and resnet.mfu is None
    assert resnet.mfu_error is None
    text = render_summary(summary, width=250)
    details = text.split("\n\n")[1]  # the second table: TFLOP/s, MFU...
    row = next(line for line in details.splitlines() if line.startswith("lm-tiny "))
    assert "2.38" not in row and row.count("error") == 2
    assert f"TFLOP/s and MFU not shown: lm-tiny ({CEILING_ERROR} (2.38 TFLOP/s" in text
    page = render_html(summary)
    assert 'title="TFLOP/s above 1.5 x this machine' in page and ">2.38<" not in page


def test_a_mig_slice_has_no_mfu_against_the_whole_gpus_peak(tmp_path: Path):
    """A MIG 1g slice has a seventh of an H100's SMs: the datasheet's peak is the whole GPU's,
    so an MFU against it would be a seventh of the truth. No MFU, and why."""
    from pytest_dlbench.results.figures import MIG_REASON

    mig = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    assert table_peak(mig, "bf16") is None and table_peak(H100, "bf16")
    job_stream(tmp_path, "resnet", rate=100.0, flops_per_item=3e11, precision="bf16",
               device_name=mig)
    bench = summarize_dir(tmp_path).get("resnet")
    assert bench.tflops == pytest.approx(30.0)  # the rate and its FLOPs stay
    assert bench.mfu is None and bench.mfu_error is None
    assert bench.peak_source == MIG_REASON == "MIG slice: no datasheet peak for a slice"


def test_a_matmul_on_a_busy_machine_is_no_peak_and_no_model_an_error(tmp_path: Path):
    # A neighbour loading the machine only while the matmul ran: its steps agree, 60 times
    # below this machine's; lm-tiny's usual 2.4 GFLOP/s was "an error of measurement" against
    # it. The monitor judged the matmul busy: no peak, no MFU, and lm-tiny's figure stands.
    steps_stream(tmp_path, "matmul", [0.00025] * 12, units="TFLOP/s", busy=True)
    steps_stream(tmp_path, "lm-tiny", [2.4] * 12, flops_per_item=1e9, busy=False)  # 0.0024
    summary = summarize_dir(tmp_path)
    assert summary.get("matmul").runs[0].telemetry.get("busy") is True
    lm = summary.get("lm-tiny")
    assert lm.mfu_error is None and lm.tflops == pytest.approx(0.0024) and lm.mfu is None
    assert lm.peak_source is not None and lm.peak_source.startswith(
        "matmul in this run was measured on a busy machine (other processes used")
    assert lm.peak_source.endswith("): no peak, no MFU")
    text = render_summary(summary, width=250)
    assert "error" not in text.split("\n\n")[1]
    # The same matmul on a quiet machine is the peak, and lm-tiny 10 x above it an error.
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    steps_stream(quiet, "matmul", [0.00025] * 12, units="TFLOP/s", busy=False)
    steps_stream(quiet, "lm-tiny", [2.4] * 12, flops_per_item=1e9, busy=False)
    assert (summarize_dir(quiet).get("lm-tiny").mfu_error or "").startswith(CEILING_ERROR)


def test_a_matmul_far_below_the_other_benchmarks_is_no_peak(tmp_path: Path):
    # No monitor reading: the matmul 60 x below the machine's, two models far above it. The
    # matmul was slowed, not both models miscounted: no MFU, no error of theirs.
    steps_stream(tmp_path, "matmul", [0.001] * 12, units="TFLOP/s")
    steps_stream(tmp_path, "lm-tiny", [24.0] * 12, flops_per_item=1e9)  # 0.024
    steps_stream(tmp_path, "resnet18", [150.0] * 12, flops_per_item=2e8)  # 0.03
    summary = summarize_dir(tmp_path)
    for name in ("lm-tiny", "resnet18"):
        bench = summary.get(name)
        assert bench.mfu_error is None and bench.tflops is not None and bench.mfu is None
        assert bench.peak_source == ("matmul in this run (0.001 TFLOP/s) is far below the "
                                     "other benchmarks (2 of 2 above 1.5 x it): no peak, no MFU")


def test_fp8_has_the_datasheets_dense_peak_and_none_on_an_a100() -> None:
    from pytest_dlbench.results.figures.peaks import dtype_of, table_peak

    assert dtype_of({"argv": {"--dtype": "fp8"}}) == "fp8"
    assert table_peak("NVIDIA H200", "fp8") == 1978.9  # 3,958 with sparsity
    assert table_peak("NVIDIA A100-SXM4-80GB", "fp8") is None


def test_a_gpu_is_matched_by_its_model_as_a_whole_word() -> None:
    """An "NVIDIA GH200 480GB" holds "H200" but is another part: no H200 peak for it."""
    from pytest_dlbench.results.figures.peaks import table_peak

    assert table_peak("NVIDIA GH200 480GB", "bf16") is None
    assert table_peak("NVIDIA H200", "bf16") == 989.4
    assert table_peak("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert table_peak("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
