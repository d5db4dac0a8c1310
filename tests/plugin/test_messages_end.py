"""Messages at a run's end that misled (issue 41 item 4): a failed run's failure section shows
the benchmark's own error lines, not an inner pytest report; the lines after pytest's dots start
on a line of their own; W&B says where it logged."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

DEFS = textwrap.dedent(
    """
    def broken(bench):
        for step in bench.iterate(range(1000), batch_size=4):
            if step == 5:
                raise RuntimeError("boom at step 5")
    """
)


@pytest.mark.slow
def test_the_failure_section_has_the_error_not_an_inner_pytest_summary(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=DEFS)
    pytester.makefile(".yaml", s="broken: {definition: defs.py:broken, voir: {options: "
                                  "{skip: 2, stop: 6}}}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    section = out.split("last lines of the benchmark's output:", 1)[1].split("full output:")[0]
    assert 'raise RuntimeError("boom at step 5")' in section  # the benchmark's own lines
    assert "E               RuntimeError: boom at step 5" in section
    assert "short test summary info" not in section and "1 failed in" not in section
    assert "FAILED " not in section
    assert "= FAILURES =" not in section and "___ broken" not in section  # the child's banners


def test_the_tail_leaves_the_childs_pytest_banners_out(tmp_path: Path) -> None:
    from pytest_dlbench.plugin.items import _tail

    log = tmp_path / "b.log"
    log.write_text("=" * 30 + " FAILURES " + "=" * 30 + "\n" + "_" * 20 + " broken[D0] "
                   + "_" * 20 + "\n\nbench = <Bench>\n>   raise RuntimeError('boom')\n"
                   "E   RuntimeError: boom\n" + "=" * 70 + "\n" + "-" * 5 + " Captured "
                   "stderr call " + "-" * 5 + "\nwarm-up done\n")
    assert _tail(log).splitlines() == [
        "", "bench = <Bench>", ">   raise RuntimeError('boom')", "E   RuntimeError: boom",
        "----- Captured stderr call -----", "warm-up done"]


# -- W&B says where it logged, in one line as MLflow does ---------------------------------------

class _FakeRun:
    """What WandbSink uses of a ``wandb.Run``."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        self.dir = str(folder)
        self.resumed = False
        self.starting_step = 0
        self.summary: dict[str, Any] = {}

    def define_metric(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    def finish(self, exit_code: int = 0) -> None:
        pass


class _FakeWandb:
    """What WandbSink uses of the ``wandb`` module (not installed here)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def Settings(self, **kwargs: Any) -> dict[str, Any]:  # noqa: N802 - wandb's name
        return kwargs

    def Table(self, columns: Any, data: Any) -> tuple[Any, Any]:  # noqa: N802 - wandb's name
        return columns, data

    def init(self, **kwargs: Any) -> _FakeRun:
        return _FakeRun(self.folder / "files" / kwargs["id"])


def test_wandb_says_where_it_logged(tmp_path: Path) -> None:
    from _logger_runs import RUN_NAME, write_run_dir

    from pytest_dlbench.layout import stream_paths
    from pytest_dlbench.loggers.sink import GuardedSink
    from pytest_dlbench.loggers.source import session_facts
    from pytest_dlbench.loggers.wandb_logger import WandbSink
    from pytest_dlbench.results.evaluation import evaluate

    run_dir = write_run_dir(tmp_path)
    sink = WandbSink("proj", mode="offline", bench_base=tmp_path)
    sink.wandb, sink.facts, sink.dir = _FakeWandb(tmp_path), session_facts(run_dir), tmp_path
    guarded = GuardedSink(sink)
    for path in stream_paths(run_dir):
        guarded.log_bench_run(path)
    guarded.finish_session(evaluate(run_dir), [])
    assert guarded.done_line() == (
        f"dlbench: wandb: logged {RUN_NAME} (5 benchmark runs) offline to {tmp_path}/wandb, "
        f"project proj; upload them with: wandb sync {tmp_path}/wandb/offline-run-*")
    sink.mode_arg, sink.entity = "online", "team"
    assert sink.where() == (f"dlbench: wandb: logged {RUN_NAME} (5 benchmark runs) to "
                            f"project team/proj, group {RUN_NAME}")


# -- under xdist, pytest's [100%] is ended before the session's end writes ----------------------

class _Writer:
    def __init__(self, column: int) -> None:
        self.width_of_current_line = column
        self.out = ""

    def line(self, text: str = "") -> None:
        self.out += text + "\n"
        self.width_of_current_line = 0


class _Plugins:
    def __init__(self, **plugins: Any) -> None:
        self.plugins = plugins

    def get_plugin(self, name: str) -> Any:
        return self.plugins.get(name)


def test_the_lines_after_pytests_dots_start_on_their_own() -> None:
    """Issue 41 item 4: under ``-n 2`` the MLflow line was glued to pytest's ``[100%]`` (xdist
    writes no file name, so ``write_line`` does not end the line of dots)."""
    from types import SimpleNamespace

    from pytest_dlbench.plugin.reporter import end_pytest_line

    finished = []
    progress = SimpleNamespace(finish=lambda: finished.append(True))
    terminal = SimpleNamespace(_tw=_Writer(column=62), currentfspath=None)
    config = SimpleNamespace(pluginmanager=_Plugins(terminalreporter=terminal,
                                                    **{"dlbench-progress": progress}))
    end_pytest_line(config)  # type: ignore[arg-type]
    assert terminal._tw.out == "\n" and finished == [True]  # the progress line went first
    end_pytest_line(config)  # type: ignore[arg-type]
    assert terminal._tw.out == "\n"  # a line already ended: no blank line added
