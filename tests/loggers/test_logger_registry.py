"""The registry of loggers (loggers/registry.py): a logger is one module and one entry. A fake
third logger, registered here only, is reached by the pytest options, the sinks and ``dlbench
log`` without a line of any other module naming it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import pytest
from _logger_runs import RUN_NAME, write_run_dir

from pytest_dlbench.cli.log import add_parser as add_log_command
from pytest_dlbench.loggers.base import Echo
from pytest_dlbench.loggers.registry import (
    LOGGERS,
    LoggerEntry,
    Value,
    asked_loggers,
    logger_options,
    register,
    unregister,
)
from pytest_dlbench.loggers.sink import LoggerSink, log_run_dir, open_sinks
from pytest_dlbench.loggers.source import SessionFacts
from pytest_dlbench.options import ReportOption
from pytest_dlbench.results.evaluation import Evaluation


class NotebookSink:
    """A logger that writes down what it is sent."""

    name = "notebook"

    def __init__(self, where: str | None, page: str | None, bench_base: object,
                 replace: bool) -> None:
        self.where, self.page, self.bench_base, self.replace = where, page, bench_base, replace
        self.calls: list[tuple[str, Any]] = []

    def start_session(self, run_dir: Path, facts: SessionFacts) -> None:
        self.calls.append(("start_session", facts.run_name))

    def log_bench_run(self, stream_path: Path) -> None:
        self.calls.append(("log_bench_run", stream_path.name))

    def finish_session(self, evaluation: Evaluation, artifacts: Sequence[Path]) -> None:
        self.calls.append(("finish_session", evaluation.summary.score))

    def close(self) -> None:
        self.calls.append(("close", None))

    def logged_where(self) -> str | None:
        runs = sum(call == "log_bench_run" for call, _ in self.calls)
        return f"{runs} runs on page {self.page} of {self.where or 'the default notebook'}"


OPENED: list[NotebookSink] = []


def _open_notebook(value: Value, *, bench_base: str | PathLike[str] | None, replace: bool,
                   echo: Echo) -> LoggerSink:
    sink = NotebookSink(value("notebook"), value("page"), bench_base, replace)
    OPENED.append(sink)
    return sink


NOTEBOOK = LoggerEntry("notebook", "a notebook", (
    ReportOption("notebook", dict(nargs="?", const="", default=None, metavar="BOOK",
                                  help="log to a notebook: BOOK")),
    ReportOption("page", dict(metavar="PAGE", default="1", help="the notebook's page")),
), _open_notebook, module="json")  # its "package": one that is always there


@pytest.fixture
def notebook() -> Iterator[LoggerEntry]:
    OPENED.clear()
    register(NOTEBOOK)
    try:
        yield NOTEBOOK
    finally:
        unregister(NOTEBOOK.name)


def dlbench_log(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="dlbench")
    add_log_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["log", *argv])
    return args.handler(args)


def test_the_two_loggers_and_their_options() -> None:
    assert list(LOGGERS) == ["mlflow", "wandb"]
    # The switches first, then their settings: the order --help has always shown.
    assert [o.pytest_flag for o in logger_options()] == [
        "--bench-mlflow", "--bench-wandb", "--bench-experiment"]
    assert [e.name for e in asked_loggers({"wandb": ""}.get)] == ["wandb"]
    assert asked_loggers({"experiment": "x"}.get) == []  # a setting is no switch
    with pytest.raises(ValueError, match="already registered"):
        register(LOGGERS["mlflow"])


def test_a_third_logger_is_reached_by_the_sinks(tmp_path: Path, notebook: LoggerEntry) -> None:
    assert [o.pytest_flag for o in logger_options()] == [
        "--bench-mlflow", "--bench-wandb", "--bench-notebook", "--bench-experiment",
        "--bench-page"]
    (sink,) = open_sinks(notebook="lab", page="7", bench_base=tmp_path)
    assert sink.name == "notebook" and OPENED[0].page == "7"
    log_run_dir(write_run_dir(tmp_path), sink)
    assert [c for c, _ in OPENED[0].calls] == (
        ["start_session"] + ["log_bench_run"] * 5 + ["finish_session"])
    assert sink.logged_where() == "5 runs on page 7 of lab"
    assert open_sinks(page="7") == []  # not asked: its switch is not given


def test_a_third_logger_is_reached_by_dlbench_log(
    tmp_path: Path, notebook: LoggerEntry, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = write_run_dir(tmp_path)
    assert dlbench_log(str(run_dir), "--notebook", "--page=3", "--replace") == 0
    assert capsys.readouterr().out == (
        f"dlbench: notebook: logged {RUN_NAME}: 5 runs on page 3 of the default notebook\n")
    (sink,) = OPENED
    assert sink.replace and sink.where == ""  # asked without a value
    assert sink.bench_base is None  # --base not given: the sink finds the run's own
    # Its flag is in the message of a command that asks for no logger.
    assert dlbench_log(str(run_dir)) == 4
    assert capsys.readouterr().err.endswith(
        "give --mlflow [URI] and/or --wandb [PROJECT] and/or --notebook [BOOK]\n")


def test_dlbench_help_names_every_registered_logger(notebook: LoggerEntry) -> None:
    from pytest_dlbench.cli import build_parser

    usage = build_parser().format_help()
    assert "log       send a finished run to MLflow or Weights & Biases or a notebook" in usage


def test_a_third_logger_that_is_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = LoggerEntry("nowhere", "nowhere", (ReportOption("nowhere", dict(
        nargs="?", const="", default=None, metavar="URI", help="log nowhere")),),
        _open_notebook, module="pytest_dlbench_no_such_package", extra="nowhere")
    register(absent)
    try:
        assert dlbench_log(str(write_run_dir(tmp_path)), "--nowhere") == 4
    finally:
        unregister(absent.name)
    assert capsys.readouterr().err == (
        "dlbench: error: nowhere is not installed: pip install nowhere\n")


def test_a_third_logger_is_a_pytest_option(pytester: pytest.Pytester,
                                           notebook: LoggerEntry) -> None:
    from pytest_dlbench.plugin.tracking import check_loggers, loggers_asked

    config = pytester.parseconfig("--bench-notebook=lab", "--bench-page=2")
    assert loggers_asked(config) == [notebook]
    assert (config.getoption("bench_notebook"), config.getoption("bench_page")) == ("lab", "2")
    check_loggers(config)  # installed: no usage error
    assert "--bench-notebook" in pytester.runpytest("--help").stdout.str()
