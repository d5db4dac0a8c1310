"""A real CPU run: resnet18 (the vision workload, 32x32 images, batch 2) through Bench with every
report on, then finish_profile; the reports are checked against what they must say."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.measure.bench import Bench
from pytest_dlbench.measure.monitor import Monitor
from pytest_dlbench.measure.stream import StreamWriter, read_stream
from pytest_dlbench.profile import (
    NoteReport,
    ProfileConfig,
    ProfiledWindow,
    finish_profile,
    load_reports,
    render_reports,
)
from pytest_dlbench.results.figures import run_from_records
from pytest_dlbench.workloads import vision

pytestmark = pytest.mark.slow

ROOT = REPO_ROOT
ARGS = ["--model", "resnet18", "--synthetic-data", "--image-size", "32", "--batch-size", "2",
        "--num-images", "8"]
WINDOW = {"warmup": 1, "steps": 2}
CONFIG = ProfileConfig.merge(
    ProfileConfig.parse_cli(""),  # --bench-profile: everything
    ProfileConfig.from_mapping({name: WINDOW for name in ("time", "memory", "snapshot")}),
)


def train(run_dir: Path, profile: ProfileConfig | None) -> tuple[Bench, Path]:
    stream_path = run_dir / "resnet18.D0.data"
    with StreamWriter(stream_path) as stream:
        bench = Bench(name="resnet18", args=ARGS, device="cpu", stream=stream, skip=1, stop=2,
                      window=2, data_dir=run_dir / "data",
                      profiled=ProfiledWindow(profile) if profile is not None else None)
        with Monitor(stream, interval=0.25):
            vision.train(bench)
        bench.close()
        stream.write("end", status="ok", reason="")
    return bench, stream_path


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    # Two intra-op threads on a shared 2-core machine run 5-20x slower than one.
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("run")
    bench, stream_path = train(run_dir, CONFIG)
    paths = finish_profile(bench, run_dir, stream_path,
                           scored_rate=lambda records: run_from_records(records).rate)
    out = run_dir / "resnet18.D0.profile"
    return {"bench": bench, "stream": stream_path, "paths": paths, "out": out,
            "reports": load_reports(out), "records": read_stream(stream_path)}


def test_every_cpu_report_is_written(profiled: dict[str, Any]) -> None:
    reports = profiled["reports"]
    assert list(reports) == ["speed", "time", "memory", "system", "summary", "snapshot",
                             "trace"]
    for name in ("speed", "time", "memory", "system", "summary", "trace"):
        assert not isinstance(reports[name], NoteReport), reports[name].render()
        assert (profiled["out"] / f"{name}.json").is_file() or name == "trace"
    names = {p.name for p in profiled["paths"]}
    assert {"speed.csv", "time.csv", "memory.csv", "system.csv", "summary.csv", "trace.json",
            "index.json"} <= names
    text = render_reports(reports)
    assert text.count("\n") < 60  # concise
    print(text)


def test_snapshot_is_skipped_with_one_line_on_cpu(profiled: dict[str, Any]) -> None:
    assert profiled["reports"]["snapshot"].render() == "snapshot needs CUDA; skipped"
    assert not (profiled["out"] / "snapshot.pickle").exists()


def test_time_report_adds_up(profiled: dict[str, Any]) -> None:
    report = profiled["reports"]["time"]
    assert report.steps == 2
    top = {r.key: r for r in report.top_level}
    assert set(top) == {"io", "forward", "backward", "optimizer"}
    step = report.step.total
    # forward + backward + io + optimizer + rest = step, and rest is a real remainder:
    # the regions do not overlap, and they account for most of the step.
    assert sum(r.total for r in top.values()) + report.rest.total == pytest.approx(step)
    assert report.overlap <= 0.02 * step
    assert -0.02 * step <= report.rest.total <= 0.25 * step
    assert top["backward"].total > top["io"].total


def test_memory_report_lists_real_aten_ops(profiled: dict[str, Any]) -> None:
    report = profiled["reports"]["memory"]
    assert not report.device and report.steps == 2
    by_cpu = report.tables["self_cpu_time"]
    assert len(by_cpu) == 20
    assert all(op.name.startswith("aten::") for op in by_cpu)
    assert all(op.self_cpu_time > 0 for op in by_cpu)
    assert any(op.name == "aten::convolution_backward" for op in by_cpu[:5])
    assert all(op.name.startswith("aten::") and op.self_cpu_memory > 0
               for op in report.tables["self_cpu_memory"])
    data = json.loads((profiled["out"] / "memory.json").read_text())
    assert set(data["tables"]) == {"self_cpu_time", "self_cpu_memory"}
    assert not any("device" in key for row in data["tables"]["self_cpu_time"] for key in row)
    header = (profiled["out"] / "memory.csv").read_text().splitlines()[0]
    assert "device" not in header


def test_summary_counts_resnet18_parameters(profiled: dict[str, Any]) -> None:
    summary = profiled["reports"]["summary"]
    assert summary.total_params == 11_689_512 == summary.trainable_params
    assert summary.model == "ResNet" and summary.example == "2x3x32x32"
    assert summary.mult_adds > 0 and summary.layers
    assert "11,689,512 parameters" in summary.render()


def test_trace_is_a_chrome_trace_with_the_regions_named(profiled: dict[str, Any]) -> None:
    trace = json.loads((profiled["out"] / "trace.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"forward", "backward", "io", "optimizer"} <= names
    assert any(str(n).startswith("aten::") for n in names)
    assert profiled["reports"]["trace"].steps == 2


def test_speed_and_system(profiled: dict[str, Any]) -> None:
    speed = profiled["reports"]["speed"]
    assert speed.throughput and speed.throughput > 0
    assert speed.profiled_steps == 2 and speed.profiler_cpu_s and speed.profiler_cpu_s > 0
    assert speed.io_time_per_batch and speed.io_time_per_batch > 0
    assert speed.profiler_device_s is None
    system = profiled["reports"]["system"]
    assert system.samples >= 2 and system.rss_peak and system.rss_peak > 0
    assert [d.label for d in system.dirs] == ["data", "results"]


def test_scored_records_do_not_change_with_profiling(
    profiled: dict[str, Any], tmp_path: Path
) -> None:
    _, plain_path = train(tmp_path, None)
    plain = read_stream(plain_path)

    def scored(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["step"], r["warmup"], r["items"]) for r in records if r["event"] == "rate"]

    assert scored(profiled["records"]) == scored(plain) == [(0, True, 2), (1, False, 2),
                                                            (2, False, 2)]
    profiled_only = [r for r in profiled["records"] if r.get("profiled")]
    assert profiled_only and not any(r["event"] == "rate" for r in profiled_only)
    assert not (tmp_path / "resnet18.D0.profile").exists()


def test_standalone_timer_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process (torch is already imported): the script uses no pytest and no harness.
    script = ROOT / "docs" / "examples" / "profiling" / "standalone_timer.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--steps", "12", "--warmup", "2"])
    runpy.run_path(str(script), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("time: 12 timed steps (steps 2-13); step ")
    assert [line.split()[0] for line in lines[2:]][-2:] == ["rest", "step"]
    assert {line.split()[0] for line in lines[2:6]} == {"forward", "backward", "optimizer", "io"}
