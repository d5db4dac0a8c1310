"""Live progress: the stream tail, the line, drawing in place on a terminal, lines in CI logs."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_dlbench.plugin import progress
from pytest_dlbench.plugin.progress import LiveRun, ProgressReporter, progress_line


def write(path: Path, *records: dict, torn: str = "") -> None:
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records) + torn)


def config(skip: int = 2, stop: int = 8) -> dict:
    return {"event": "config", "spec": {"name": "toy", "skip": skip, "stop": stop}, "device": 0}


def rate(items: float = 8, seconds: float = 0.5) -> dict:
    return {"event": "rate", "value": items / seconds, "items": items, "seconds": seconds}


def test_a_live_run_reads_only_complete_lines_and_counts_observations(tmp_path: Path):
    stream = tmp_path / "toy.D0.data"
    write(stream, config(), rate(), torn='{"event": "ra')
    run = LiveRun(stream, "toy[D0]", seen_at=0.0)
    run.read()
    assert (run.planned, run.observations) == (10, 1)
    write(stream, {}, torn="")  # completes nothing useful: the torn line becomes a bad line
    stream.write_text(stream.read_text().replace('{"event": "ra{}', json.dumps(rate())))
    run.read()
    assert run.observations == 2
    assert run.rate() == pytest.approx(16.0)
    assert run.remaining_s() == pytest.approx(8 * 0.5)
    write(stream, {"event": "end", "status": "ok"})
    run.read()
    assert run.ended


def test_the_line_says_done_rate_elapsed_and_left(tmp_path: Path):
    run = LiveRun(tmp_path / "x", "toy[D1]", seen_at=100.0)
    run.planned, run.observations, run.seconds = 17, 14, 7.0
    run.recent = [(8, 0.5)] * 3
    line = progress_line([run], now=103.0)
    assert line == "dlbench: toy[D1] 14/17 16 items/s 3s ~2s left"
    assert len(progress_line([run] * 20, now=103.0, width=60)) == 60


class FakeWriter:
    def __init__(self) -> None:
        self.out = ""
        self._current_line = "s.yaml ."
        self.fullwidth = 100

    @property
    def width_of_current_line(self) -> int:
        return len(self._current_line)

    def write(self, text: str, flush: bool = False) -> None:
        self.out += text
        self._current_line = text.rsplit("\n", 1)[-1]


class FakeTerminal:
    def __init__(self) -> None:
        self._tw = FakeWriter()
        self.lines: list[str] = []
        self.currentfspath: object = None

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def running_stream(tmp_path: Path) -> Path:
    stream = tmp_path / "toy.D0.data"
    write(stream, config(), rate(), rate())
    return stream


def test_on_a_terminal_the_line_is_drawn_below_pytests_and_taken_away(tmp_path: Path,
                                                                      monkeypatch):
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    running_stream(tmp_path)
    terminal = FakeTerminal()
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=True, clock=lambda: 5.0)
    reporter.tick()
    reporter.tick()
    tw = terminal._tw
    assert tw.out.count("\n") == 1  # one line of its own, rewritten in place
    assert tw.out.endswith("\rdlbench: toy[D0] 2/10 16 items/s 0s ~4s left\x1b[K")
    reporter.erase()
    # Cleared, cursor back up to pytest's line at pytest's column, pytest's state restored.
    assert tw.out.endswith("\r\x1b[K\x1b[A\x1b[9G")
    assert tw._current_line == "s.yaml ."
    reporter.erase()  # nothing drawn: nothing written
    assert tw.out.endswith("\x1b[9G")


def test_in_a_ci_log_each_long_benchmark_has_a_line_every_period(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    running_stream(tmp_path)
    write(tmp_path / "other.D1.data", config(), rate())
    now = [0.0]
    terminal = FakeTerminal()
    terminal.currentfspath = tmp_path / "s.yaml"  # pytest has written its file's name
    terminal.verbosity = 1  # type: ignore[attr-defined]  # -v: a line per item, ours between
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=False, clock=lambda: now[0])
    for now[0] in (0.0, 31.0, 32.0, 45.0, 62.0):
        reporter.tick()
    lines = terminal._tw.out.split("\n")
    # pytest's dot line ended first, then one line per benchmark at 31 s and at 62 s: each
    # run on its own clock (the old reporter printed the first one only).
    assert lines[0] == "" and "\r" not in terminal._tw.out and "\x1b" not in terminal._tw.out
    assert sorted(line.split()[1] for line in lines[1:]) == ["other[D1]", "other[D1]",
                                                             "toy[D0]", "toy[D0]"]
    # pytest starts its next result on a new line, with the file's name: no dots cut.
    assert terminal.currentfspath == progress._OUR_LINE
    # Within an item whose file's name pytest has written: a line of our own, and pytest's
    # next letter below it with no file's name again (the name was written 13 times a run).
    terminal = FakeTerminal()
    terminal.currentfspath = tmp_path / "s.yaml"
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=False, clock=lambda: now[0])
    for now[0] in (0.0, 31.0):
        reporter.tick()
    out = terminal._tw.out
    assert out.startswith("\ndlbench: ") and out.endswith("left\n") and "s.yaml" not in out
    assert terminal.currentfspath == tmp_path / "s.yaml"
    # Under xdist pytest writes its dots with no file's name: our line ends itself.
    terminal = FakeTerminal()
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=False, clock=lambda: now[0])
    for now[0] in (0.0, 31.0):
        reporter.tick()
    assert terminal._tw.out.startswith("\ndlbench: ") and terminal._tw.out.endswith("left\n")
    assert terminal.currentfspath is None


def test_on_a_terminal_the_count_and_the_time_left_move_every_second(tmp_path: Path,
                                                                     monkeypatch):
    # Observations come once per window: between two, the count is estimated from the step
    # time so far (marked ~), and the time left counts down with the clock.
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    stream = tmp_path / "toy.D0.data"
    write(stream, config(skip=0, stop=20), *[rate(8, 0.5)] * 4)  # a window of 4 steps
    now = [10.0]
    terminal = FakeTerminal()
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=True, clock=lambda: now[0])
    shown = []
    for now[0] in (10.0, 11.0, 12.0, 13.0):
        reporter.tick()
        shown.append(terminal._tw.out.rsplit("\r", 1)[1].removesuffix("\x1b[K"))
    assert shown[0] == "dlbench: toy[D0] 4/20 16 items/s 0s ~8s left"
    assert shown[1] == "dlbench: toy[D0] ~6/20 16 items/s 1s ~7s left"
    assert shown[2] == "dlbench: toy[D0] ~8/20 16 items/s 2s ~6s left"
    write(stream, *[rate(8, 0.5)] * 4)  # the next window: counted, the estimate starts again
    now[0] = 14.0
    reporter.tick()
    assert terminal._tw.out.endswith("\rdlbench: toy[D0] 8/20 16 items/s 4s ~6s left\x1b[K")
    now[0] = 100.0
    reporter.tick()  # never past the plan, never below zero
    assert terminal._tw.out.endswith("~20/20 16 items/s 1m30s ~0s left\x1b[K")


def test_in_a_ci_log_a_benchmark_that_ends_has_its_line(tmp_path: Path):
    stream = tmp_path / "toy.D0.data"
    write(stream, config(skip=0, stop=2), rate(), rate(), {"event": "end", "status": "ok"})
    terminal = FakeTerminal()
    terminal.currentfspath = tmp_path / "s.yaml"
    terminal.config = SimpleNamespace(rootpath=tmp_path)  # type: ignore[attr-defined]
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=False, clock=lambda: 1.0)
    reporter._started = True
    report = pytest.TestReport("s.yaml::toy[D0]", ("s.yaml", 0, "toy"), {}, "passed", None,
                               "call", duration=12.3)
    reporter.pytest_runtest_logreport(report)
    reporter.pytest_runtest_logfinish("s.yaml::toy[D0]", ("s.yaml", 0, "toy"))
    # After pytest's letter, on its line (``s.yaml . dlbench: ...``), left open for pytest's
    # progress column; pytest is not made to write the file's name again.
    assert terminal._tw.out == " dlbench: toy[D0] passed: 16.0 items/s in 12s"
    assert terminal.currentfspath == tmp_path / "s.yaml"
    # The next item of the same file: the line ends, pytest's next letter starts the next one.
    reporter.pytest_runtest_logstart("s.yaml::toy[D1]", ("s.yaml", 0, "toy"))
    assert terminal._tw.out.endswith("in 12s\n")
    reporter.pytest_runtest_logstart("s.yaml::toy[D2]", ("s.yaml", 0, "toy"))
    assert terminal._tw.out.endswith("in 12s\n")  # once
    # An ordinary test beside the suite: no line; another file: pytest ends the line itself.
    other = pytest.TestReport("t.py::test_x", ("t.py", 0, "x"), {}, "passed", None, "call")
    reporter.pytest_runtest_logreport(other)
    reporter.pytest_runtest_logfinish("t.py::test_x", ("t.py", 0, "x"))
    assert terminal._tw.out.count("dlbench:") == 1
    terminal._tw.write(".")
    reporter.pytest_runtest_logreport(report)
    reporter.pytest_runtest_logfinish("s.yaml::toy[D0]", ("s.yaml", 0, "toy"))
    reporter.pytest_runtest_logstart("t.py::test_x", ("t.py", 0, "x"))
    assert terminal._tw.out.endswith(". dlbench: toy[D0] passed: 16.0 items/s in 12s")


def test_a_failed_run_shows_its_reason_not_a_rate(tmp_path: Path) -> None:
    """Issue 41 item 4: ``broken[D0] failed: 652,742 items/s`` read as a result; the steps a
    failed run took before failing are none."""
    stream = tmp_path / "broken.D0.data"
    write(stream, config(skip=0, stop=8), rate(), rate(),
          {"event": "end", "status": "fail", "reason": "RuntimeError: boom at step 5"})
    line = progress.end_line("broken[D0]", "failed", stream, 4.2)
    assert line == "dlbench: broken[D0] failed: fail: RuntimeError: boom at step 5 in 4s"
    write(tmp_path / "crash.D0.data", config(), rate(),
          {"event": "end", "status": "crash", "reason": "crash: killed by SIGSEGV"})
    line = progress.end_line("crash[D0]", "failed", tmp_path / "crash.D0.data", None)
    assert line == "dlbench: crash[D0] failed: crash: killed by SIGSEGV"


def test_names_and_units_from_a_stream_are_escaped(tmp_path: Path) -> None:
    run = LiveRun(tmp_path / "x", "t\x1b]0;x\x07[D0]", seen_at=0.0)
    run.units = "it\x1b[2J/s"
    run.recent = [(8, 0.5)]
    line = progress_line([run], now=1.0)
    assert "\x1b" not in line and "\\x1b]0;x\\x07" in line and "it\\x1b[2J/s" in line


DEFS = textwrap.dedent(
    """
    import time

    def slow(bench):
        for _ in bench.iterate(range(10_000), batch_size=4):
            time.sleep(0.05)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_a_real_run_prints_progress_in_a_ci_log_and_nothing_with_q(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, quiet: bool
):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(progress, "CI_PERIOD_S", 0.5)
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.2)
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s="quick: {definition: defs.py:slow, voir: {options: "
                                  "{skip: 0, stop: 2}}}\n"
                                  "slow: {definition: defs.py:slow, voir: {options: "
                                  "{skip: 2, stop: 40}}}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                *(["-q"] if quiet else []))
    assert result.ret == 0
    lines = [li for li in result.outlines if "dlbench: slow[D0]" in li]
    if quiet:
        assert lines == []
    else:
        assert lines, result.stdout.str()
        periodic = [li for li in lines if "passed" not in li]
        assert all(re.match(r"dlbench: slow\[D0\] ~?\d+/42 ", li) for li in periodic)
        assert any("items/s" in li and "left" in li for li in periodic)
        # Each benchmark's end on the line of pytest's letter for it, the file's name once.
        assert re.fullmatch(r"\. dlbench: slow\[D0\] passed: [\d.,]+ items/s in \d+s +\[100%\]",
                            lines[-1]), lines[-1]
        named = [li for li in result.outlines if li.startswith("s.yaml")]
        assert len(named) == 1 and re.fullmatch(r"s\.yaml \. dlbench: quick\[D0\] passed: .*",
                                                named[0]), result.stdout.str()
        assert result.outlines[result.outlines.index(lines[-1]) - 1] == periodic[-1]
