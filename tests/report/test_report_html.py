"""The self-contained HTML report (report/html.py), down to how it looks in a real browser.

Summaries are built the way the plugin builds them: streams written with ``StreamWriter``, read
back and scored by ``pytest_dlbench.results.figures.scoring``; comparisons by ``results.compare``
against a baseline summary dict (as ``load_summary`` returns it).
"""

from __future__ import annotations

import html as htmllib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _html_runs import (
    CHROMIUM,
    EVIL,
    baseline,
    chromium,
    comparison,
    make_suite,
)

from pytest_dlbench.report.html import render_html, write_html
from pytest_dlbench.results.figures import summarize_runs
from pytest_dlbench.results.judge import compare
from pytest_dlbench.results.model import SuiteSummary


@pytest.fixture
def suite(tmp_path: Path) -> SuiteSummary:
    return make_suite(tmp_path)


# -- content --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_score_table_and_plots(suite: SuiteSummary) -> None:
    page = render_html(suite)
    assert page.startswith("<!DOCTYPE html>")
    assert suite.score is not None
    assert f'id="score-value">{suite.score:#.4g}<' in page
    assert page.count('<tr class="bench') == len(suite.benchmarks) == 3
    # One rate plot per benchmark with observations, the per-device bars, the distribution.
    assert page.count("<svg") == 3 + 1 + 1
    assert page.count('class="plot rate-plot"') == 3
    assert "device-plot" in page and "distribution-plot" in page
    assert "warm-up" in page  # the shaded warm-up's legend entry
    # Where std comes from is the summary's word (BenchSummary.noise_from): two runs' rates for
    # resnet18, the single successful run's 5 blocks for bert-base, nothing for vit-b16.
    assert page.count('title="std over the rates of 2 runs"') == 2  # std and std% cells
    assert page.count('title="std over 5 blocks of the single run&#39;s window"') == 2
    assert {b.name: b.noise_from for b in suite.benchmarks} == {
        "resnet18": "runs", "bert-base": "blocks", "vit-b16": None}


@pytest.mark.slow
def test_failed_runs_and_incomplete_listed(suite: SuiteSummary) -> None:
    page = render_html(suite)
    failures = page[page.index('id="failures"') :]
    assert failures.count('<tr class="failed-run">') == 3  # bert-base D1, vit-b16 D0 and D1
    assert "oom" in failures and "CUDA out of memory. Tried to allocate 2 GiB" in failures
    assert "crash: killed by SIGSEGV" in failures
    assert suite.incomplete == ("vit-b16",)
    banner = page[page.index('id="incomplete"') :]
    assert "<code>vit-b16</code>" in banner[: banner.index("</div>")]
    assert "the score shown is over the other 2." in banner  # resnet18 and bert-base


@pytest.mark.slow
def test_comparison_section_only_when_given(suite: SuiteSummary) -> None:
    assert 'id="comparison"' not in render_html(suite)
    page = render_html(suite, comparison=comparison(suite))
    section = page[page.index('id="comparison"') :]
    assert section.count('<tr class="comparison-row">') == 2
    assert "regressed" in section and "unchanged" in section
    assert "× 0.93" in page and "tolerance 5.0 %" in section
    assert "<code>clip-vit</code>" in section  # only in the baseline: reported, not dropped


@pytest.mark.slow
def test_comparison_values_and_verdicts_without_a_test(suite: SuiteSummary) -> None:
    resnet = suite.get("resnet18")
    assert resnet is not None
    assert resnet.perf is not None
    # The verdict and the baseline column are on the rate (perf) since issue 14.
    twice = {**resnet.to_dict(), "perf": 2 * resnet.perf, "perf_adj": 2 * resnet.perf_adj,
             "samples": []}  # no p-value
    never = {**resnet.to_dict(), "perf": None, "perf_adj": 0.0}  # the baseline never succeeded
    cmp = compare(suite, baseline(suite, resnet18=twice, **{"bert-base": never}))
    page = render_html(suite, comparison=cmp)
    section = page[page.index('id="comparison"') :]
    assert "<th>baseline</th>" in section and f"{2 * resnet.perf:,.0f}" in section
    assert "-50.0 %" in section and "nan" not in section
    assert '<span class="badge other" style="margin-left:0">incomparable</span>' in section


@pytest.mark.slow
def test_a_baseline_from_another_machine_is_a_warning(
    suite: SuiteSummary, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_dlbench.measure import machine

    def side(gpu: str, torch: str) -> dict[str, Any]:
        return {"machine": {"cpu": "Xeon", "gpus": [{"index": 0, "name": gpu}]},
                "versions": {"torch": torch}}

    monkeypatch.setattr(machine, "current_machine", lambda: side("NVIDIA H100", "2.11.0"))
    cmp = compare(suite, {**baseline(suite), **side("NVIDIA A100", "2.14.1")})
    section = render_html(suite, comparison=cmp).split('id="comparison"', 1)[1]
    assert ("<strong>Warning:</strong> baseline machine differs: GPU H100 vs A100, "
            "torch 2.11.0 vs 2.14.1</div>") in section
    assert "Warning:" not in render_html(suite, comparison=compare(suite, baseline(suite)))


@pytest.mark.slow
def test_price_title_and_write(suite: SuiteSummary, tmp_path: Path) -> None:
    assert suite.score is not None
    page = render_html(suite, price=1000.0, title="nightly & co")
    assert "Price / score" in page and f"{1000.0 / suite.score:#.4g}" in page
    assert "<title>nightly &amp; co</title>" in page
    out = write_html(suite, tmp_path / "deep" / "er" / "r.html")
    assert out == tmp_path / "deep" / "er" / "r.html"
    assert out.read_text(encoding="utf-8") == render_html(suite)  # deterministic too


def test_empty_summary_renders() -> None:
    empty = summarize_runs([], {"suite": "s", "benchmarks": {"never": {"weight": 1.0}}})
    page = render_html(empty)
    assert "did not run" in page and "<svg" not in page
    assert 'id="score-value">—<' in page


# -- safety -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_self_contained(suite: SuiteSummary) -> None:
    page = render_html(suite, comparison=comparison(suite))
    # Nothing fetched when viewed: no external src/href, no CSS url() or @import, no fonts.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?(?!#)", page)
    assert "@import" not in page and "@font-face" not in page
    assert "<link" not in page and "<script" not in page and "<img" not in page
    # Every in-page reference points at an id that exists, and ids are unique across the SVGs.
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', page))
    assert refs and refs <= set(ids)


@pytest.mark.slow
def test_names_and_reasons_are_escaped(tmp_path: Path) -> None:
    page = render_html(make_suite(tmp_path, evil=True), title=EVIL)
    assert "<script" not in page  # neither in the HTML nor in the SVG text
    assert "<b>bold</b>" not in page
    assert htmllib.escape(EVIL, quote=False) in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def test_import_is_cheap() -> None:
    code = (
        "import sys, pytest_dlbench.report.html\n"
        "heavy = {'matplotlib', 'jinja2', 'torch', 'pytest'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- in a real browser ------------------------------------------------------------------------

# Injected into a copy of the report (the report itself has no script): it records each plot's
# rendered size in the DOM, which --dump-dom then serializes.
MEASURE = """<script>
document.querySelectorAll('svg.plot-svg').forEach(function (s) {
  var r = s.getBoundingClientRect();
  s.setAttribute('data-size', Math.round(r.width) + 'x' + Math.round(r.height));
});
document.body.setAttribute('data-measured', 'yes');
</script></body>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_renders_in_chromium(suite: SuiteSummary, tmp_path: Path) -> None:
    from PIL import Image

    report = write_html(suite, tmp_path / "report.html", comparison=comparison(suite))
    measured = tmp_path / "measured.html"
    measured.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE, 1))

    dom = chromium(["--dump-dom", measured.as_uri()], tmp_path / "profile-dom").stdout
    assert 'data-measured="yes"' in dom  # the page loaded and the script ran to the end
    assert suite.score is not None
    assert f"{suite.score:#.4g}" in dom
    assert dom.count('<tr class="bench') == 3
    assert dom.count('<tr class="failed-run">') == 3
    assert dom.count('<tr class="comparison-row">') == 2
    sizes = re.findall(r'data-size="(\d+)x(\d+)"', dom)
    assert len(sizes) == 5
    for width, height in sizes:
        assert int(width) > 300 and int(height) > 100, sizes

    png = tmp_path / "report.png"
    chromium([f"--screenshot={png}", report.as_uri()], tmp_path / "profile-shot")
    with Image.open(png) as image:
        assert image.size == (1280, 2000)
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # text, tables and plots, not blank
        # Well more than a sliver of the page is ink (white background everywhere else).
        histogram = rgb.convert("L").histogram()
        assert sum(histogram[:235]) > 0.05 * sum(histogram)
