"""pytest hooks of pytest-dlbench: options in, a session object registered when a suite is asked.

Without ``--bench-suite`` this module only declares options: an ordinary test run pays nothing
(no suite parsing, no torch import).
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.loggers.registry import logger_options, logging_title
from pytest_dlbench.options import (
    OPTION_GROUPS,
    REPORT_OPTIONS,
    RUN_OPTIONS,
    SUITE_OPTIONS,
    option_group,
)
from pytest_dlbench.plugin.fixtures import (
    CALL_FAILED,
    bench,
    bench_data_dir,
    image_text_pairs,
    jpeg_images,
    process_group,
    synthetic_images,
    token_sequences,
)

if TYPE_CHECKING:
    from pytest_dlbench.plugin.session import BenchSession

pytest_plugins = ["pytest_dlbench.plugin.milabench"]  # a milabench checkout's own conftests

__all__ = [
    "bench",
    "bench_data_dir",
    "image_text_pairs",
    "jpeg_images",
    "process_group",
    "synthetic_images",
    "token_sequences",
]


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    # The options by task (options.OPTION_GROUPS): select, run, devices, compare and gate,
    # outputs, profile, logging; one flat list of 30 was hard to read.
    loggers = logger_options()
    for name, title, _ in OPTION_GROUPS:  # made first: the help lists them in this order
        parser.getgroup(f"dlbench-{name}", logging_title(title) if name == "logging" else title)

    def add(flag: str, **kwargs: Any) -> None:
        parser.getgroup(*option_group(flag)).addoption(flag, **kwargs)

    add(
        "--bench-suite",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="collect the benchmarks of a suite: a name (bench_suites/NAME.yaml, or a suite "
        "shipped with pytest-dlbench) or a path to a YAML file; repeatable",
    )
    for flag, kwargs in SUITE_OPTIONS:
        add(flag, dest=_dest(flag), **kwargs)
    logging = parser.getgroup("dlbench-logging")  # every logger's (loggers/registry.py)
    for option in loggers:  # dlbench log has them too
        logging.addoption(option.pytest_flag, dest=_dest(option.pytest_flag), **option.kwargs)
    for flag, kwargs in RUN_OPTIONS:
        add(flag, dest=_dest(flag), **kwargs)
    for option in REPORT_OPTIONS:
        add(option.pytest_flag, dest=_dest(option.pytest_flag), **option.kwargs)
    group = parser.getgroup(*option_group("--bench-child-stream"))
    # Set by the parent on the child process that runs one benchmark (see .child).
    group.addoption("--bench-child-stream", default=None, help=argparse.SUPPRESS)
    group.addoption("--bench-child-spec", default=None, help=argparse.SUPPRESS)
    group.addoption("--bench-child-run-dir", default=None, help=argparse.SUPPRESS)
    parser.addini("bench_autosave", "--bench-autosave for every run: true (<bench-base>/history) "
                  "or a history folder, relative to the ini file (docs/history.md)", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_dlbench.report.console import tolerant_output

    tolerant_output()  # our lines on a terminal that cannot show a name: escaped, no traceback
    from pytest_dlbench.plugin.fixture_steps import MARKER_HELP

    config.addinivalue_line("markers", MARKER_HELP)  # known to --strict-markers, suite run or not
    if config.getoption("bench_child_stream"):
        _child_report(config)
    if not config.getoption("bench_suite"):
        # Your own tests' benchmarks (the bench fixture): their table, score and outputs.
        from pytest_dlbench.plugin.fixture_runs import FixtureRuns

        try:
            FixtureRuns.register(config)
        except pytest.UsageError as exc:  # the user's text, shown as a suite run shows it
            raise usage_error(*exc.args) from None
        return
    _autosave_from_ini(config)
    from pytest_dlbench.core.errors import DlbenchError

    try:
        session = _session_class(config).from_config(config)
    except DlbenchError as exc:
        raise usage_error(str(exc)) from None
    except pytest.UsageError as exc:  # raised by the session's parts, with the user's text
        raise usage_error(*exc.args) from None
    config.pluginmanager.register(session, session.PLUGIN_NAME)


def usage_error(*messages: object) -> pytest.UsageError:
    """A usage error as ``dlbench`` prints one (cli/, ``numbers.printable``): each message on
    one line, a revision's newline or a suite name's escape sequence shown escaped, never
    obeyed by the terminal (pytest writes ``ERROR: <message>`` as it is given)."""
    from pytest_dlbench.core.numbers import printable

    return pytest.UsageError(*(printable(m) for m in messages))


def _child_report(config: pytest.Config) -> None:
    """The child that runs one benchmark writes its error and traceback to its log, but not
    pytest's summary of its one item (``short test summary info``, ``1 failed in 0.09s``): the
    parent shows the log's last lines under the benchmark's failure, where those lines would
    read as a second, inner test report. Set before the terminal reporter reads them."""
    config.option.reportchars = "N"  # no short test summary
    config.option.verbose = min(config.option.verbose, -2)  # -qq: no "1 failed in 0.09s"


def _autosave_from_ini(config: pytest.Config) -> None:
    """``bench_autosave`` of the ini file, unless ``--bench-autosave`` was given: ``true`` (or
    yes, on, 1) for ``<bench-base>/history``, false (no, off, 0) for none, else a folder."""
    value = str(config.getini("bench_autosave") or "").strip()
    if config.getoption("bench_autosave") is not None or not value:
        return
    if value.lower() in ("false", "no", "off", "0"):
        return
    if value.lower() in ("true", "yes", "on", "1"):
        config.option.bench_autosave = ""
        return
    from pathlib import Path

    folder = Path(value).expanduser()
    if not folder.is_absolute() and config.inipath is not None:
        folder = config.inipath.parent / folder
    config.option.bench_autosave = str(folder)


def _session_class(config: pytest.Config) -> type[BenchSession]:
    """Which process of a suite run this is (see :mod:`.session`)."""
    if config.getoption("bench_child_stream"):
        from pytest_dlbench.plugin.child import ChildSession

        return ChildSession
    if hasattr(config, "workerinput"):
        from pytest_dlbench.plugin.worker import WorkerSession

        return WorkerSession
    from pytest_dlbench.plugin.controller import ControllerSession

    return ControllerSession


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with a suite: one worker per device slot (GPU, or group of cores)."""
    if not config.getoption("bench_suite"):
        return None
    from pytest_dlbench.run.devices import SlotError, plan_slots

    try:
        return len(plan_slots(cpus_per_slot=config.getoption("bench_cpus_per_slot")))
    except SlotError as exc:
        raise usage_error(str(exc)) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The ``bench`` fixture of an ordinary test writes the run's end record at teardown and
    # needs to know whether the test body failed.
    report = yield
    if report.when == "call" and report.failed and "bench" in getattr(item, "fixturenames", ()):
        reason = call.excinfo.exconly().splitlines()[0] if call.excinfo else "failed"
        item.stash[CALL_FAILED] = reason
    return report
