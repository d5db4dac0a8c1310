"""--bench-reference: milabench's published per-GPU figures as a verdict on the machine.

The figures are milabench's, from its sizer's scaling files at commit
faf39234e7ff35b45a49faa09c66383519f6ec55 (github.com/mila-iqia/milabench), written here from
the files, not from the project's data file:

- ``config/scaling/H100.yaml`` line 370: resnet50-noio, ``batch_size: 128, cpu: 8, ...
  perf: 3377.58``; line 371: ``batch_size: 248, cpu: 8, ... perf: 3968.86``; line 353:
  resnet50, ``batch_size: 128, cpu: 8, ... perf: 2458.92``;
- ``config/scaling/H100.yaml`` line 318: regnet_y_128gf, ``batch_size: 64, cpu: 8, ...
  perf: 221.88``;
- ``config/scaling/H200.yaml`` line 109: resnet50-noio, ``batch_size: 256, cpu: 8, ...
  perf: 4868.3``;
- H100.yaml, H200.yaml, L40S.yaml and MI325.yaml hold no ``fp32``, ``tf32``, ``bf16`` or
  ``fp16`` (``default.yaml`` names them with nothing: ``fp32: {}``; it holds memory per
  batch size, no rate);
- ``milabench/sizer.py`` lines 25-29: ``gpu_name_to_file``, the device names of H100.yaml,
  L40S.yaml and MI325.yaml.

A run is recorded as the harness writes one (``config``: the resolved spec; ``meta``: the
device and its name; ``rate`` records with the items of each step), on a fake H100.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO_ROOT, TESTS_DIR

from pytest_dlbench.measure.stream import StreamWriter
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.figures.milabench_score import MILABENCH_COMMIT
from pytest_dlbench.results.figures.reference import (
    SLOW_BELOW,
    nearest_published,
    published_figures,
    reference_lines,
    run_reference,
)
from pytest_dlbench.suite.locate import find_suite
from pytest_dlbench.suite.resolve import resolve_suite

GOLDEN = TESTS_DIR / "golden"
H100 = "NVIDIA H100 80GB HBM3"
# milabench's published figures, from its files (the docstring's lines).
H100_NOIO_BS128, H100_NOIO_BS248, H100_RESNET50_BS128 = 3377.58, 3968.86, 2458.92
H100_REGNET_BS64, H200_NOIO_BS256 = 221.88, 4868.3


def _specs(suite: str) -> dict[str, dict[str, Any]]:
    """A shipped suite's benchmarks as their ``config`` records hold them."""
    return {s.name: s.to_dict() for s in resolve_suite(find_suite(suite)).specs}


MILABENCH = _specs("milabench")


def record(run_dir: Path, name: str, *, rate: float, batch: int, device: str = "cuda:0",
           device_name: str = H100, spec: dict[str, Any] | None = None,
           **argv: Any) -> None:
    """One benchmark's run at ``rate`` items/s, ``batch`` items a step: 2 warm-up steps and 10
    steady ones. ``spec``: its config record's spec (the milabench suite's, by default), with
    ``--batch-size`` set to the batch and ``argv``'s changes (``image_size=224``)."""
    spec = dict(spec or MILABENCH[name])
    changes = {f"--{k.replace('_', '-')}": v for k, v in argv.items()}
    spec["argv"] = {**spec["argv"], "--batch-size": batch, **changes}
    seconds = batch / rate
    run_dir.mkdir(parents=True, exist_ok=True)
    with StreamWriter(run_dir / f"{name}.D0.data") as stream:
        stream.write("config", spec=spec, device=0, repeat=None)
        stream.write("meta", host="test", device=device, device_name=device_name)
        t = 1000.0
        for step in range(12):
            t += seconds
            stream.write("rate", value=rate, units="items/s", step=step, warmup=step < 2,
                         time=t, items=batch, seconds=seconds)
        stream.write("end", status="ok", reason="", time=t)


def toy(run_dir: Path, device: str = "cuda:0", device_name: str = H100) -> None:
    """A benchmark of another name: nothing is said of it."""
    spec = {"name": "toy", "weight": 1.0, "plan": {"method": "per_gpu"}, "skip": 2, "stop": 10,
            "argv": {"--batch-size": 128}}
    record(run_dir, "toy", rate=1000.0, batch=128, spec=spec, device=device,
           device_name=device_name)


def test_the_data_file_holds_milabenchs_figures_with_their_source_and_commit() -> None:
    figures = published_figures()
    by_key = {(f.gpu, f.benchmark, f.batch_size): f for f in figures}
    assert by_key["H100", "resnet50-noio", 128].items_per_s == H100_NOIO_BS128
    assert by_key["H100", "resnet50-noio", 128].source == "config/scaling/H100.yaml:370"
    assert by_key["H100", "resnet50-noio", 248].items_per_s == H100_NOIO_BS248
    assert by_key["H100", "resnet50", 128].items_per_s == H100_RESNET50_BS128
    assert by_key["H100", "regnet_y_128gf", 64].items_per_s == H100_REGNET_BS64
    assert by_key["H200", "resnet50-noio", 256].items_per_s == H200_NOIO_BS256
    for figure in figures:
        assert figure.commit == MILABENCH_COMMIT  # the suite's and the score's commit
        assert re.fullmatch(rf"config/scaling/{figure.gpu}\.yaml:\d+", figure.source)
        assert figure.benchmark in MILABENCH  # only what --bench-reference needs
        assert figure.workers == 8  # auto({n_worker}, 8): milabench's default, the suite's
    assert not {"fp32", "tf32", "bf16", "fp16"} & {f.benchmark for f in figures}


def test_a_fake_h100_run_gets_the_ratio_for_the_same_benchmark_and_batch(tmp_path: Path
                                                                          ) -> None:
    run = tmp_path / "run"
    record(run, "resnet50-noio", rate=3300.0, batch=128)  # a figure: 0.977, not slow
    record(run, "regnet_y_128gf", rate=200.0, batch=64)  # a figure: 0.901, slow
    record(run, "resnet50", rate=2400.0, batch=256)  # none at batch 256 on an H100
    record(run, "fp32", rate=40.0, batch=1)  # milabench published no matmul figure
    toy(run)
    ref = run_reference(summarize_dir(run))
    assert not ref.reason and not ref.unpublished_gpus
    by_name = {b.bench: b for b in ref.benches}
    assert set(by_name) == {"resnet50-noio", "regnet_y_128gf", "resnet50", "fp32"}  # no toy
    noio = by_name["resnet50-noio"]
    assert noio.batch == 128 and noio.ratio == pytest.approx(3300.0 / H100_NOIO_BS128)
    assert noio.figure is not None and noio.figure.source == "config/scaling/H100.yaml:370"
    assert not noio.slow
    regnet = by_name["regnet_y_128gf"]
    assert regnet.ratio == pytest.approx(200.0 / H100_REGNET_BS64) and regnet.slow
    assert 200.0 / H100_REGNET_BS64 < SLOW_BELOW <= 3300.0 / H100_NOIO_BS128
    for name in ("resnet50", "fp32"):  # no figure: no ratio, a reason
        assert by_name[name].ratio is None and by_name[name].reason
    assert "at batch 256" in by_name["resnet50"].reason
    assert "128, 248" in by_name["resnet50"].reason  # the batches milabench published
    lines = reference_lines(summarize_dir(run))
    _golden("reference_h100.txt", "\n".join(lines))
    assert not any("toy" in line for line in lines)
    assert sum("×" in line for line in lines) == 2  # the two ratios, nothing for the rest


def test_a_cpu_run_says_once_that_there_is_no_reference(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name, batch in (("resnet50-noio", 128), ("resnet50", 128), ("fp16", 1)):
        record(run, name, rate=30.0, batch=batch, device="cpu", device_name="x86_64")
    toy(run, device="cpu", device_name="x86_64")
    lines = reference_lines(summarize_dir(run))
    assert len(lines) == 1 and "none on a CPU" in lines[0], lines


def test_a_gpu_model_without_published_figures_says_so_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name in ("resnet50-noio", "resnet50", "regnet_y_128gf"):
        record(run, name, rate=1000.0, batch=256, device_name="NVIDIA A100-SXM4-80GB")
    lines = reference_lines(summarize_dir(run))
    assert not any("×" in line for line in lines)
    (gpu,) = [line for line in lines if "A100" in line]
    assert "milabench published no figure for NVIDIA A100-SXM4-80GB" in gpu
    assert len(lines) == 2  # the title and that line


def test_another_configuration_gets_no_ratio(tmp_path: Path) -> None:
    """The standard suite's resnet50 (another loader, optimizer and batch) and the milabench
    suite's resnet50-noio at 224 px are not milabench's configuration, at any batch."""
    run = tmp_path / "run"
    record(run, "resnet50", rate=2458.92, batch=128, spec=_specs("standard")["resnet50"])
    record(run, "resnet50-noio", rate=3377.58, batch=128, image_size=224)
    ref = run_reference(summarize_dir(run))
    by_name = {b.bench: b for b in ref.benches}
    assert by_name["resnet50"].ratio is None and by_name["resnet50-noio"].ratio is None
    assert "--image-size 224, not 244" in by_name["resnet50-noio"].reason
    assert "not the milabench suite's configuration" in by_name["resnet50"].reason


def test_a_run_without_a_milabench_benchmark_says_so_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    toy(run)
    lines = reference_lines(summarize_dir(run))
    assert len(lines) == 1 and "no benchmark of the milabench suite" in lines[0]


def test_the_nearest_published_batch(tmp_path: Path) -> None:
    """benchmarks/gpu_check.py's reference batch: milabench's at the suite's 256 where it
    published one, else the nearest (the smaller of two as near: 248 and 264 on an H100)."""
    h100 = nearest_published(H100, "resnet50-noio", 256)
    assert h100 is not None and (h100.batch_size, h100.items_per_s) == (248, H100_NOIO_BS248)
    h200 = nearest_published("NVIDIA H200", "resnet50-noio", 256)
    assert h200 is not None and h200.items_per_s == H200_NOIO_BS256
    assert nearest_published("NVIDIA H100 PCIe", "resnet50-noio", 256) is None
    assert nearest_published(H100, "fp32", 256) is None


def test_dlbench_report_and_pytest_take_the_option(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_dlbench.cli import main
    from pytest_dlbench.options import REPORT_OPTIONS

    run = tmp_path / "run"
    record(run, "resnet50-noio", rate=3300.0, batch=128)
    assert "reference" in {o.name for o in REPORT_OPTIONS}  # --bench-reference in pytest
    main(["report", str(run)])
    assert "milabench reference" not in capsys.readouterr().out  # only when asked
    for flag in ("--reference", "--bench-reference"):
        main(["report", str(run), flag])
        out = capsys.readouterr().out
        assert f"= {3300 / H100_NOIO_BS128:.3f} × milabench's 3,378" in out, out


def test_the_docs_example_is_the_golden_output() -> None:
    """docs/milabench.md shows the fake H100 run's lines: the golden file's, as they are."""
    page = (REPO_ROOT / "docs" / "milabench.md").read_text(encoding="utf-8")
    marker = "<!-- checked: tests/results/test_reference.py -->\n```\n"
    block = page.split(marker, 1)[1].split("```")[0]
    assert block == (GOLDEN / "reference_h100.txt").read_text(encoding="utf-8")


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DLBENCH_UPDATE_GOLDEN"):
        path.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == path.read_text(encoding="utf-8")
