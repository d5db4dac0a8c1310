"""Your own tests' benchmarks (issue 25, item 3): ``pytest test_dl.py`` with the ``bench`` fixture
prints the suite run's table and score, honours the report options, and says in one line which
``--bench-*`` options nothing used."""

from __future__ import annotations

import json
import textwrap

import pytest
from _git import git

from pytest_dlbench.plugin.fixture_runs import given_options, unused_options_line

TESTS = textwrap.dedent(
    """
    import time

    def test_fast(bench):
        for _ in bench.iterate(range(24), batch_size=4):
            time.sleep(0.002)

    def test_plain():
        assert True
    """
)
PLAIN = "def test_plain():\n    assert True\n"


@pytest.fixture
def tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "100")
    pytester.makepyfile(test_dl=TESTS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--bench-base=out", *args)


def test_a_bench_test_prints_the_table_and_score(tests: pytest.Pytester) -> None:
    result = run(tests)
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= dlbench =*", "bench *perf*perf_adj*weight*",
                                 "test_fast *items/s*1", "", "score: *",
                                 "results: *out/runs/tests.*"])
    assert "not used" not in result.stdout.str()
    (run_dir,) = (tests.path / "out" / "runs").iterdir()
    assert [p.name for p in run_dir.glob("*.data")] == ["test_fast.D0.data"]


def test_quiet_is_the_score_line(tests: pytest.Pytester) -> None:
    result = run(tests, "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["score: *"])
    assert "= dlbench =" not in result.stdout.str()


def test_save_html_export_and_compare(tests: pytest.Pytester) -> None:
    result = run(tests, "--bench-save=r/base.json", "--bench-html=r/report.html",
                 "--bench-export=r/bench.json")
    assert result.ret == 0
    saved = json.loads((tests.path / "r" / "base.json").read_text())
    assert list(saved["benchmarks"]) == ["test_fast"]
    assert "test_fast" in (tests.path / "r" / "report.html").read_text()
    assert "test_fast" in (tests.path / "r" / "bench.json").read_text()
    again = run(tests, "--bench-compare=r/base.json", "--bench-tolerance=90%")
    assert again.ret == 0
    again.stdout.fnmatch_lines(["bench *ratio*", "test_fast *", "", "score: * (rate ratio *"])


def test_a_missing_baseline_stops_before_the_tests(tests: pytest.Pytester) -> None:
    result = run(tests, "--bench-compare=nope.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-compare: baseline not found: nope.json"])
    assert not (tests.path / "out").exists()


def test_against_outside_a_git_repository(tests: pytest.Pytester) -> None:
    result = run(tests, "--bench-against=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (tests.path / "out").exists()


def test_a_failing_bench_test_fails_the_score(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="def test_bad(bench):\n    raise ValueError('no')\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*failed test_bad*ValueError: no*"])


# -- the options nothing used ------------------------------------------------------------------

def test_html_without_a_suite_or_a_bench_test_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=PLAIN)
    result = run(pytester, "--bench-html=r.html", "--bench-select=toy")
    assert result.ret == 0
    lines = [line for line in result.outlines if "not used" in line]
    assert lines == ["dlbench: warning: --bench-select, --bench-html not used: no --bench-suite "
                     "given and no test used the bench fixture"]
    assert not (pytester.path / "r.html").exists()
    assert not (pytester.path / "out" / "runs").exists()  # nothing ran, nothing made


def test_a_plain_run_with_the_base_only_says_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=PLAIN)
    result = run(pytester)  # --bench-base: the data fixtures use it too
    assert result.ret == 0
    assert "not used" not in result.stdout.str() and "= dlbench =" not in result.stdout.str()


def test_a_suite_option_beside_a_bench_test(tests: pytest.Pytester) -> None:
    result = run(tests, "--bench-select=toy", "--bench-repeat=2", "--bench-html=r.html")
    assert result.ret == 0
    lines = [line for line in result.outlines if "not used" in line]
    assert lines == ["dlbench: warning: --bench-select, --bench-repeat not used: only a "
                     "--bench-suite run has them (the bench fixture's benchmarks ran)"]
    assert (tests.path / "r.html").is_file()


def test_given_options(pytestconfig: pytest.Config) -> None:
    values = {"bench_select": ["a"], "bench_repeat": 1, "bench_html": "r.html",
              "bench_tolerance": 0.03, "bench_override": []}

    def value(dest: str) -> object:
        default = pytestconfig.getoption(dest)  # this run's: the defaults (none given)
        return values.get(dest, default)

    assert given_options(pytestconfig.getoption) == []
    assert given_options(value) == ["--bench-select", "--bench-html"]


@pytest.mark.parametrize(("given", "ran", "line"), [
    ([], False, None),
    (["--bench-base"], False, None),
    (["--bench-html"], True, None),
    (["--bench-save", "--bench-compare", "--bench-run-name"], True, None),
    (["--bench-profile"], True, "dlbench: warning: --bench-profile not used: only a "
                                "--bench-suite run has it (the bench fixture's benchmarks ran)"),
    (["--bench-paired-test"], True, "dlbench: warning: --bench-paired-test not used: only a "
                                    "--bench-suite run has it (the bench fixture's benchmarks "
                                    "ran)"),
    (["--bench-base", "--bench-save"], False,
     "dlbench: warning: --bench-save not used: no --bench-suite given and no test used the "
     "bench fixture"),
])
def test_unused_options_line(given: list[str], ran: bool, line: str | None) -> None:
    assert unused_options_line(given, benchmarks_ran=ran) == line


@pytest.mark.slow
def test_xdist_workers_share_one_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=TESTS, test_dl2=TESTS.replace("test_fast", "test_other"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out",
                                           "-n", "2")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*= dlbench =*"])
    result.stdout.fnmatch_lines(["test_fast *"])
    result.stdout.fnmatch_lines(["test_other *"])
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    assert sorted(p.name for p in run_dir.glob("*.data")) == ["test_fast.D0.data",
                                                              "test_other.D0.data"]


@pytest.mark.slow
def test_xdist_without_a_bench_test_leaves_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=PLAIN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out",
                                           "-n", "2")
    assert result.ret == 0
    assert not (pytester.path / "out").exists()


# -- --bench-against: the base revision's test and this tree's, in rounds -----------------------

@pytest.mark.slow
def test_against_a_revision_pairs_the_rounds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=TESTS)
    # From the ini file: the rounds' children read it too, and must not pair again.
    pytester.makeini("[pytest]\naddopts = --bench-against=main --bench-rounds=2\n")
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "test_dl.py", "tox.ini")
    git(pytester.path, "commit", "-q", "-m", "base")
    (pytester.path / "test_dl.py").write_text(TESTS.replace("0.002", "0.004"))  # slower
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out")
    output = result.stdout.str()
    # 2 rounds: the permutation test's smallest p is 1/4, so the slowdown cannot be proven
    # (inconclusive, 9); a regression excluded (0) or claimed (6) only on other evidence.
    assert result.ret in (0, 6, 9), output
    result.stdout.fnmatch_lines(["*against main*2 rounds*", "*test_fast*"])
    assert "not used" not in output
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    assert sorted(p.name for p in run_dir.glob("*.data")) == [
        "test_fast.D0.R0.data", "test_fast.D0.R1.data"]
    assert sorted(p.name for p in (run_dir / "base").glob("*.data")) == [
        "test_fast.D0.R0.data", "test_fast.D0.R1.data"]
    assert json.loads((run_dir / "against.json").read_text())["rounds"] == 2
    assert not list(pytester.path.parent.glob("dlbench-against-*"))  # the worktree is gone


def test_against_with_xdist_is_a_usage_error(tests: pytest.Pytester) -> None:
    result = run(tests, "--bench-against=HEAD", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-against runs the bench fixture's rounds*"])
