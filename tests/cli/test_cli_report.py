"""``dlbench report`` and ``dlbench compare``: output, files written, exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench.cli import main
from pytest_dlbench.results import gate

QUIET = (0.001, -0.001, 0.0005, -0.0005, 0.0)


def make_run(path: Path, rate: float = 100.0, *, crash: bool = False) -> Path:
    for repeat, j in enumerate(QUIET):
        write_run(path, "resnet", steady_at(rate * (1 + j)), repeat=repeat, weight=1.0)
        write_run(path, "bert", steady_at(500 * (1 + j)), repeat=repeat, weight=1.0)
    if crash:
        write_run(path, "resnet", repeat=9, status="crash", reason="crash: killed by SIGSEGV")
    return path


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def test_report_prints_table_and_score(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(make_run(tmp_path / "run"))]) == gate.OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["bench", "perf", "units"]
    assert "resnet" in out and "score: " in out and "failure rate: 0.0%" in out


def test_report_quiet_and_price(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = make_run(tmp_path / "run")
    assert main(["report", str(run), "-q", "--price", "$1,000"]) == gate.OK
    out = capsys.readouterr().out.strip()
    assert out.startswith("score: ") and "price/score: " in out and "\n" not in out


def test_report_verbose_shows_devices(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(make_run(tmp_path / "run")), "-v"]) == gate.OK
    out = capsys.readouterr().out
    assert "per device" in out and "devices vs the median device" in out


def test_failed_benchmark_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = make_run(tmp_path / "run", crash=True)
    assert main(["report", str(run)]) == gate.BENCH_FAILED
    assert "failed resnet[D0-R9]: crash: killed by SIGSEGV" in capsys.readouterr().out


def test_weighted_benchmark_not_run_exits_1(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    write_manifest(run, {"resnet": {}, "bert": {}, "vit": {"weight": 2.0}})
    assert main(["report", str(run)]) == gate.BENCH_FAILED


def test_save_then_compare(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = tmp_path / "base.json"
    assert main(["report", str(make_run(tmp_path / "a")), "--save", str(base)]) == 0
    assert json.loads(base.read_text())["schema"] == "pytest-dlbench/summary"

    # Same speed against one session: the drift between sessions is not known (the default
    # 5 % a session), so a regression beyond 3 % is not excluded: inconclusive, exit 9; at a
    # 30 % tolerance it is: unchanged.
    assert main(["report", str(make_run(tmp_path / "b")), "--compare", str(base)]) == 9
    out = capsys.readouterr().out
    assert "rate ratio 1.000" in out and "inconclusive; adj score ratio 1.000" in out
    assert main(["report", str(make_run(tmp_path / "b2")), "--compare", str(base),
                 "--tolerance", "30%"]) == 0
    out = capsys.readouterr().out
    assert "rate ratio 1.000" in out and "unchanged; adj score ratio 1.000" in out

    # 10 % slower with 0.1 % noise against one session: the drift between sessions is not
    # known (the default 5 % a session), so the gate cannot tell: inconclusive, exit 9.
    slow = make_run(tmp_path / "c", rate=90.0)
    assert main(["report", str(slow), "--compare", str(base)]) == gate.EXIT_INCONCLUSIVE
    assert "dlbench baseline" in capsys.readouterr().out  # what to do, said
    # A baseline saved in three sessions that agree: their drift measured small, 10 % is a
    # regression, exit 6.
    sessions = [base]
    for k in (2, 3):
        sessions.append(tmp_path / f"base{k}.json")
        assert main(["report", str(make_run(tmp_path / f"a{k}")), "-q",
                     "--save", str(sessions[-1])]) == 0
    merged = tmp_path / "merged.json"
    assert main(["baseline", str(merged), *map(str, sessions)]) == 0
    assert "3 sessions merged" in capsys.readouterr().out
    assert main(["report", str(slow), "--compare", str(merged)]) == gate.EXIT_REGRESSED
    assert "regressed" in capsys.readouterr().out
    assert len(json.loads(merged.read_text())["benchmarks"]["resnet"]["sessions"]) == 3

    # A wide tolerance absorbs it (and accepts "15%").
    assert main(["report", str(slow), "--compare", str(merged), "--tolerance", "15%"]) == 0
    assert main(["report", str(slow), "--compare", str(merged), "--tolerance", "0.15"]) == 0


def test_failure_wins_over_regression(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    main(["report", str(make_run(tmp_path / "a")), "--save", str(base)])
    slow_and_broken = make_run(tmp_path / "c", rate=90.0, crash=True)
    assert main(["report", str(slow_and_broken), "--compare", str(base)]) == 1


def test_missing_baseline_exits_7(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = make_run(tmp_path / "run")
    status = main(["report", str(run), "--compare", str(tmp_path / "none.json")])
    assert status == gate.BASELINE_MISSING
    captured = capsys.readouterr()
    assert "score: " in captured.out  # the report is still printed
    assert "none.json" in captured.err and len(captured.err.strip().splitlines()) == 1


@pytest.mark.parametrize("content", ["{oops", '{"benchmarks": {}}'])
def test_corrupt_or_foreign_baseline_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    status = main(["report", str(make_run(tmp_path / "run")), "--compare", str(bad)])
    assert status == gate.USAGE_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith("dlbench: error: ") and str(bad) in err and "\n" not in err


@pytest.mark.parametrize(
    "argv",
    [["--tolerance", "5"], ["--tolerance", "x%"], ["--alpha", "2"], ["--price", "-3"],
     ["--no-such-option"]],
)
def test_bad_options_exit_4(tmp_path: Path, argv: list[str]) -> None:
    assert main(["report", str(make_run(tmp_path / "run")), *argv]) == gate.USAGE_ERROR


def test_not_a_run_directory_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(tmp_path / "nope")]) == gate.USAGE_ERROR
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == gate.USAGE_ERROR
    assert "no run streams" in capsys.readouterr().err


def test_html_and_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_dlbench.report.html as html

    calls = []

    def fake_write_html(summary, path, comparison=None, **kw):
        calls.append((summary, Path(path), comparison, kw))
        return Path(path)

    monkeypatch.setattr(html, "write_html", fake_write_html)
    base = tmp_path / "base.json"
    run = make_run(tmp_path / "run")
    main(["report", str(run), "--save", str(base)])
    out, export = tmp_path / "r.html", tmp_path / "bench.json"
    status = main(["report", str(run), "--html", str(out), "--compare", str(base),
                   "--export", str(export), "--price", "100", "--tolerance", "30%"])
    assert status == 0
    (summary, path, comparison, kw), = calls
    assert path == out and summary.get("resnet") is not None
    assert comparison is not None and comparison.baseline_path == str(base)
    # The banner states the exit status; no --autosave: the history folder is the default.
    assert kw == {"price": 100.0, "status": 0, "history": None, "confirmation": None}
    assert [e["name"] for e in json.loads(export.read_text())] == ["bert", "resnet", "score"]


# -- dlbench compare --------------------------------------------------------------------------
@pytest.fixture
def summaries(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    sessions = tuple((f"session{k}", 100.0, False) for k in range(4))
    for name, rate, crash in (*sessions, ("same", 100.0, False),
                              ("slow", 90.0, False), ("broken", 100.0, True)):
        paths[name] = tmp_path / f"{name}.json"
        main(["report", str(make_run(tmp_path / name, rate, crash=crash)), "-q",
              "--save", str(paths[name])])
    # The baseline: five sessions that agreed (the drift between them at its floor, with the
    # 4 degrees of freedom that let its interval exclude a regression beyond 3 %).
    paths["base"] = tmp_path / "base.json"
    main(["baseline", str(paths["base"]), *(str(paths[f"session{k}"]) for k in range(4)),
          str(paths["same"])])
    return paths


def test_compare_command(summaries: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert main(["compare", str(summaries["base"]), str(summaries["same"])]) == 0
    out = capsys.readouterr().out
    assert "unchanged" in out and "score: " in out
    assert main(["compare", str(summaries["base"]), str(summaries["slow"])]) == 6
    assert main(["compare", str(summaries["base"]), str(summaries["slow"]),
                 "--tolerance", "20%"]) == 0
    assert main(["compare", str(summaries["base"]), str(summaries["broken"])]) == 1
    capsys.readouterr()
    assert main(["compare", str(summaries["base"]), str(summaries["slow"]), "-q"]) == 6
    out = capsys.readouterr().out.strip()
    assert out.startswith("score: ") and "regressed" in out and "\n" not in out


def test_compare_command_errors(summaries: dict[str, Path], tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.json")
    assert main(["compare", missing, str(summaries["same"])]) == gate.BASELINE_MISSING
    assert main(["compare", str(summaries["base"]), missing]) == gate.USAGE_ERROR
    foreign = tmp_path / "foreign.json"
    foreign.write_text("[]")
    assert main(["compare", str(foreign), str(summaries["same"])]) == gate.USAGE_ERROR
    assert main(["compare", str(summaries["base"])]) == gate.USAGE_ERROR  # one file only


def test_resolve_keeps_its_own_statuses() -> None:
    with pytest.raises(SystemExit) as info:
        main(["resolve"])  # argparse's usage error, untouched for resolve
    assert info.value.code == 2
