"""Live progress: the stream tail, the line, drawing in place on a terminal, lines in CI logs."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

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


def test_in_a_ci_log_the_line_is_plain_and_periodic(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    running_stream(tmp_path)
    now = [0.0]
    terminal = FakeTerminal()
    reporter = ProgressReporter(lambda: tmp_path, terminal, in_place=False, clock=lambda: now[0])
    for now[0] in (31.0, 32.0, 45.0, 62.0):
        reporter.tick()
    assert len(terminal.lines) == 2 and all("\r" not in li and "\x1b" not in li
                                            for li in terminal.lines)
    assert terminal._tw.out == ""


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
    pytester.makefile(".yaml", s="slow: {definition: defs.py:slow, voir: {options: "
                                  "{skip: 2, stop: 40}}}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                *(["-q"] if quiet else []))
    assert result.ret == 0
    lines = [li for li in result.outlines if li.startswith("dlbench: slow[D0]")]
    if quiet:
        assert lines == []
    else:
        assert lines, result.stdout.str()
        assert all(re.match(r"dlbench: slow\[D0\] \d+/42 ", li) for li in lines)
        assert any("items/s" in li and "left" in li for li in lines)
