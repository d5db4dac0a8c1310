"""What the help and the docs say of exit statuses and tables is what the product does (issue
41 item 5): every ``exit status N`` that ``pytest --help`` or a page claims is one of
results/gate.py's, the gate's options name the statuses they lead to (9 included), and the
paired table the pages show has the default table's columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _paths import REPO_ROOT

from pytest_dlbench.results import gate

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
#: gate.py's exit statuses. gate.py holds them as named constants with comments, not as one
#: table (name -> status, meaning) that could be imported: their names are listed here.
STATUS_NAMES = ("OK", "BENCH_FAILED", "LOGGER_FAILED", "INTERRUPTED", "USAGE_ERROR",
                "EXIT_REGRESSED", "BASELINE_MISSING", "OUTPUT_FAILED", "EXIT_INCONCLUSIVE")
STATUSES = {getattr(gate, name) for name in STATUS_NAMES}
#: "exit status 6", "exit status 6 when ..., 9 when ...", "exits 7", "(exit 4)".
CLAIM = re.compile(r"\bexit(?:s| status(?:es)?)?\s+(\d+)((?:\s*(?:,|or|and)\s*\d+\b)*)")


#: Within the clause of an "exit status N": "..., 9 when ...", "... instead of 4 (...)".
MORE = re.compile(r"(?:\b(\d+) when\b|\binstead of (\d+)\b)")


def _claims(text: str) -> list[int]:
    found = []
    text = " ".join(text.split())
    for match in CLAIM.finditer(text):
        found += [int(n) for n in re.findall(r"\d+", match.group(1) + match.group(2))]
        clause = re.split(r"[;.]\s", text[match.end():], maxsplit=1)[0]
        found += [int(a or b) for a, b in MORE.findall(clause)]
    return found


@pytest.fixture(scope="module")
def help_text() -> str:
    from pytest_dlbench.loggers.registry import logger_options
    from pytest_dlbench.options import REPORT_OPTIONS, RUN_OPTIONS, SUITE_OPTIONS

    # The help of every --bench-* option, as pytest --help shows it (plugin/__init__.py).
    helps = [kw.get("help", "") for _, kw in (*SUITE_OPTIONS, *RUN_OPTIONS)]
    helps += [o.kwargs.get("help", "") for o in REPORT_OPTIONS]
    helps += [o.kwargs.get("help", "") for o in logger_options()]
    return "\n".join(h.replace("%%", "%") for h in helps)


def _help_of(flag: str) -> str:
    from pytest_dlbench.options import REPORT_OPTIONS, RUN_OPTIONS

    for name, kw in RUN_OPTIONS:
        if name == flag:
            return " ".join(str(kw["help"]).split())
    (option,) = [o for o in REPORT_OPTIONS if o.pytest_flag == flag]
    return " ".join(str(option.kwargs["help"]).split())


def test_every_status_the_help_claims_is_the_gates(help_text: str) -> None:
    claims = _claims(help_text)
    assert claims, "the help names no exit status"
    assert set(claims) <= STATUSES, sorted(set(claims) - STATUSES)


def test_the_gates_options_name_what_they_lead_to() -> None:
    for flag in ("--bench-compare", "--bench-against"):
        text = _help_of(flag)
        assert {gate.EXIT_REGRESSED, gate.EXIT_INCONCLUSIVE} <= set(_claims(text)), (flag, text)
    required = _help_of("--bench-require-baseline")
    assert {gate.BASELINE_MISSING, gate.USAGE_ERROR} <= set(_claims(required)), required
    assert "warning" not in required  # a missing file is exit 4 without it, not a warning


def test_pytest_help_shows_them(pytester: pytest.Pytester) -> None:
    out = " ".join(pytester.runpytest("--help").stdout.str().split())
    assert f"{gate.EXIT_INCONCLUSIVE} when the rounds are too noisy to tell" in out
    assert f"exit status {gate.BASELINE_MISSING} (no baseline to compare with)" in out


def test_the_pages_table_of_statuses_is_the_gates() -> None:
    text = (DOCS / "reports.md").read_text()
    section = text.split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)}
    assert rows == STATUSES


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")) + ["README.md"])
def test_every_status_a_page_claims_is_the_gates(page: str) -> None:
    path = ROOT / page if page == "README.md" else DOCS / page
    claims = set(_claims(path.read_text()))
    # 3 is pytest's internal error, 5 its "no tests collected": pytest's own, never ours; 141
    # the shell's for a closed pipe (128 + SIGPIPE).
    assert claims <= STATUSES | {3, 5, 141}, (page, sorted(claims - STATUSES))


def test_the_paired_table_on_the_pages_has_the_default_columns(tmp_path: Path) -> None:
    """docs/ci.md showed p and pairs columns that only -v adds."""
    from _paired import judge, paired_run

    from pytest_dlbench.report.terminal import render_paired

    _, base, comparison = judge(paired_run(tmp_path, {"sleepy": (20.0, 18.0)}))
    header = render_paired(comparison, base, width=200).splitlines()[1]
    columns = header.replace(comparison.ratio_name, "RATIO").split()
    for page in ("ci.md", "reports.md"):
        shown = [line for line in (DOCS / page).read_text().splitlines()
                 if line.startswith("bench   base  candidate")]
        assert shown, page
        for line in shown:
            assert line.replace("p75 ratio", "RATIO").split() == columns, (page, line)
