"""The HTML report's layout in a real browser (issue 25, item 8): at 1280 px every column of a
noisy run's results (long names, "unreliable" badges, TFLOP/s, MFU, precision) and of its
comparison is visible without scrolling sideways; at 390 px (a phone) the page itself never
scrolls sideways, the plots fit, the benchmark names stay in view while a table scrolls, and
wrapped text is never a letter per line. Skipped without chromium (apt-get install chromium).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _html_runs import CHROMIUM, chromium, write_stream

from pytest_dlbench.report.html import write_html
from pytest_dlbench.results.figures import load_run, summarize_runs
from pytest_dlbench.results.judge import compare
from pytest_dlbench.results.model import SuiteSummary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install "
                                                "chromium)"),
]

NAMES = ("resnet50-ddp-bf16-channels-last", "llama-3-8b-fsdp-bf16", "bert-large-squad-compile",
         "vit-h14-clip", "toy")
WHY = ("std% 62%: a burst of load (one run at 31% of the median), too few observations "
       "(4 steady)")

# Injected into a copy of the page: what overflows, as JSON in the body's data-layout.
MEASURE = """<script>
var doc = document.documentElement, out = {page: [doc.scrollWidth, doc.clientWidth], wraps: {},
  svgs: [], wrapped: [], sticky: []};
document.querySelectorAll('.table-wrap').forEach(function (w) {
  var t = w.querySelector('table');
  out.wraps[t.id || t.className] = [w.scrollWidth, w.clientWidth];
});
document.querySelectorAll('svg.plot-svg').forEach(function (s) {
  out.svgs.push(Math.round(s.getBoundingClientRect().right));
});
document.querySelectorAll('td.wrap, td.name').forEach(function (c) {
  out.wrapped.push(Math.round(c.getBoundingClientRect().width));
});
document.querySelectorAll('#results-table td:first-child').forEach(function (c) {
  out.sticky.push(getComputedStyle(c).position);
});
var hint = document.getElementById('results-scroll-hint');
out.hint = hint ? getComputedStyle(hint).display : null;
document.body.setAttribute('data-layout', JSON.stringify(out));
</script>"""


def noisy_suite(tmp_path: Path) -> SuiteSummary:
    """Five benchmarks on two devices, each with an "unreliable" badge, TFLOP/s, MFU, a
    precision and peak memory (the process's, torch's): every optional column of the results
    table but a GPU's; one run failed with a long reason."""
    runs = []
    for b, name in enumerate(NAMES):
        for device in (0, 1):
            status, reason = "ok", ""
            if name == "toy" and device == 1:
                status, reason = "crash", "crash: " + "killed by SIGSEGV in a long stack " * 6
            path = write_stream(tmp_path / "run" / f"b{b}.D{device}.data", name, device=device,
                                base=100.0 * (b + 1) * (0.7 if device else 1.0),
                                seed=10 * b + device, status=status, reason=reason)
            # The memory columns too: the process's peak and torch's (docs/reports.md).
            telemetry = {"peak_rss_bytes": (3 + b) * 2**30,
                         "torch_max_allocated_bytes": (2 + b) * 2**30,
                         "torch_max_reserved_bytes": (2.5 + b) * 2**30}
            runs.append(dataclasses.replace(load_run(path), precision="bf16-mixed",
                                            telemetry=telemetry))
    suite = summarize_runs(runs, run_dir=str(tmp_path / "run"))
    benches = tuple(dataclasses.replace(b, unreliable=WHY, tflops=123.456 * (i + 1), mfu=0.4123,
                                        peak_source="datasheet")
                    for i, b in enumerate(suite.benchmarks))
    return dataclasses.replace(suite, benchmarks=benches)


def host(page: Path, tmp_path: Path, width: int, script: str = "") -> Path:
    """A page showing ``page`` in a ``width`` px wide frame: its viewport, media queries
    included, is ``width`` wide (headless chromium's window is never narrower than 500 px)."""
    import html as htmllib

    text = page.read_text(encoding="utf-8").replace("</body>", script + "</body>", 1)
    out = tmp_path / f"host-{width}.html"
    out.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;'
                   f'width:{width}px;height:2000px" srcdoc="{htmllib.escape(text)}"></iframe>'
                   "</body></html>", encoding="utf-8")
    return out


def measure(page: Path, tmp_path: Path, width: int) -> dict[str, Any]:
    # In the frame, the script writes to the host's body, which --dump-dom serializes.
    script = MEASURE.replace("document.body.setAttribute", "parent.document.body.setAttribute")
    dom = chromium(["--window-size=1400,2100", "--dump-dom",
                    host(page, tmp_path, width, script).as_uri()],
                   tmp_path / f"profile-{width}").stdout
    found = re.search(r"<body[^>]*data-layout=\"([^\"]+)\"", dom)
    assert found is not None, dom[-2000:]
    return dict(json.loads(htmllib_unescape(found[1])))


def htmllib_unescape(text: str) -> str:
    import html as htmllib

    return htmllib.unescape(text)


@pytest.fixture
def page(tmp_path: Path) -> Path:
    suite = noisy_suite(tmp_path)
    base = suite.to_dict()
    for bench in base["benchmarks"].values():
        if bench.get("perf"):
            bench["perf"] *= 1.3
            bench["samples"] = [x * 1.3 for x in bench.get("samples") or []]
    return write_html(suite, tmp_path / "report.html",
                      comparison=compare(suite, base, tolerance=0.05))


def test_every_column_fits_at_1280_px(page: Path, tmp_path: Path) -> None:
    html = page.read_text(encoding="utf-8")
    for column in ("perf_adj", "TFLOP/s", "MFU", "precision", "peak rss"):
        assert f">{column}</th>" in html
    assert html.count('<div class="badges"><span class="badge bad"') == len(NAMES)
    layout = measure(page, tmp_path, 1280)
    scroll, client = layout["page"]
    assert scroll <= client, layout
    assert layout["hint"] == "none"  # no cue to scroll where nothing scrolls
    for table in ("results-table", "comparison-table", "failures-table"):
        scroll, client = layout["wraps"][table]
        assert scroll <= client, (table, layout["wraps"])


def test_usable_at_390_px(page: Path, tmp_path: Path) -> None:
    layout = measure(page, tmp_path, 390)
    scroll, client = layout["page"]
    assert scroll <= client <= 390, layout  # the page never scrolls sideways
    assert layout["svgs"] and max(layout["svgs"]) <= client, layout["svgs"]  # the plots fit
    # The results table scrolls inside its box, the names stay in view, and a line above it
    # says so: cut after perf, it must not read as the whole table.
    scroll, client = layout["wraps"]["results-table"]
    assert scroll > client, layout["wraps"]
    assert layout["hint"] == "block"
    assert set(layout["sticky"]) == {"sticky"}
    # Wrapped cells (names, reasons) keep a readable width: words per line, not letters.
    assert min(layout["wrapped"]) >= 90, layout["wrapped"]
