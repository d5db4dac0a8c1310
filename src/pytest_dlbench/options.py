"""Option definitions shared by the pytest plugin and the ``dlbench`` command, and the
parsers of their values."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.results import gate
from pytest_dlbench.results.figures import MILARUN, SCORES
from pytest_dlbench.results.judge import (
    ALPHA,
    CONFIRM,
    PAIRED_RATE,
    PAIRED_RATES,
    PAIRED_TEST,
    ROUNDS,
    TOLERANCE,
)

if TYPE_CHECKING:
    from pytest_dlbench.results.evaluation import EvaluateOptions
    from pytest_dlbench.results.model import BaselineLoad

__all__ = [
    "OptionValueError",
    "REPORT_OPTIONS",
    "RUN_OPTIONS",
    "SUITE_OPTIONS",
    "OUTPUT_OPTIONS",
    "ReportOption",
    "check_outputs",
    "evaluate_options",
    "fixture_steps_problem",
    "parse_alpha",
    "parse_confirm",
    "parse_paired_rate",
    "parse_paired_test",
    "parse_price",
    "parse_rounds",
    "parse_tolerance",
    "parse_fixture_steps",
    "results_base",
]

# -- option values (argparse ``type=`` callables, for pytest's parser and the CLI's) -------------


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """An option value that cannot be used; argparse (and pytest) print it as a usage error."""


def parse_tolerance(text: str | float) -> float:
    """``"5%"`` or ``"0.05"`` (or a float) -> 0.05. A bare number must be a fraction below 1:
    ``"5"`` is refused rather than guessed."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise OptionValueError(
            f"tolerance {quoted(text)} is not a number (write 5% or 0.05)"
        ) from None
    if not 0 <= value < 1 or math.isnan(value):
        raise OptionValueError(
            f"tolerance {quoted(text)} is not in [0%, 100%) (write 5% or 0.05)"
        )
    return value


def parse_alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise OptionValueError(f"alpha must be a number in (0, 1), got {quoted(text)}")
    return value


def _one_of(text: str, choices: tuple[str, ...], what: str) -> str:
    value = str(text).strip().lower()
    if value not in choices:
        raise OptionValueError(f"{what} must be one of {', '.join(choices)}, got {quoted(text)}")
    return value


def parse_paired_test(text: str) -> str:
    # Here, not at the top: the table of the tests is not needed to start pytest.
    from pytest_dlbench.results.judge import PAIRED_TESTS

    return _one_of(text, PAIRED_TESTS, "paired test")


def parse_paired_rate(text: str) -> str:
    return _one_of(text, PAIRED_RATES, "paired rate")


def parse_rounds(text: str) -> int:
    """Rounds of a paired run: two at least (one pair has no variance to test against)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise OptionValueError(f"rounds must be a whole number, 2 or more, got {quoted(text)}")
    return value


def parse_confirm(text: str | int) -> int:
    """``--bench-confirm``: confirmation runs at most, 0 (no confirmation) or more."""
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OptionValueError(
            f"--bench-confirm must be a whole number, 0 or more (0: no confirmation), "
            f"got {quoted(text)}")
    return value


def parse_price(text: str) -> float:
    """Dollars: ``2000``, ``$2,000.50``."""
    try:
        value = float(str(text).lstrip("$").replace(",", ""))
    except ValueError:
        value = -1.0
    if not value > 0 or math.isinf(value):
        raise OptionValueError(f"price must be a positive number of dollars: {quoted(text)}")
    return value


#: A ``bench`` fixture test's warm-up and steady steps when neither its ``bench_steps`` marker
#: nor ``--bench-fixture-steps`` says: a suite benchmark's defaults (suite/spec.py's skip and
#: stop), not imported from there, since a plain test run loads no suite code.
FIXTURE_STEPS = (5, 60)


def fixture_steps_problem(warmup: object, steps: object) -> str | None:
    """What is wrong with a ``bench`` fixture test's ``(warmup, steps)``, in a few words, or
    None: both are whole numbers, the warm-up 0 or more, the steady steps 1 or more."""
    for name, value, least in (("warmup", warmup, 0), ("steps", steps, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"{name} must be a whole number, {least} or more, got {quoted(value)}"
    return None


def parse_fixture_steps(text: str) -> tuple[int, int]:
    """``--bench-fixture-steps=WARMUP,STEPS`` (``5,60``) -> ``(5, 60)``; argparse (and pytest)
    print a bad value as a usage error naming the option, exit status 4."""
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) != 2:
        raise OptionValueError(f"WARMUP,STEPS expected (e.g. {FIXTURE_STEPS[0]},"
                               f"{FIXTURE_STEPS[1]}), got {quoted(text)}")
    values: list[object] = []
    for part in parts:
        try:
            values.append(int(part))
        except ValueError:
            values.append(part)
    problem = fixture_steps_problem(*values)
    if problem is not None:
        raise OptionValueError(problem)
    return int(str(values[0])), int(str(values[1]))


def results_base(config: Any) -> Path:
    """``--bench-base``, else ``$DLBENCH_BASE``, else ``.dlbench``; relative to where pytest was
    started (a pytest ``Config``)."""
    # Here, not at the top: layout stands on suite/, which a plain test run (the bench
    # fixture, or no benchmark at all) never loads.
    from pytest_dlbench import layout

    base = layout.results_base(config.getoption("bench_base"))
    return base if base.is_absolute() else Path(config.invocation_params.dir) / base


# (flag, argparse keyword arguments). pytest's parser.addoption takes the same keywords.
SUITE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "--bench-system",
        dict(
            metavar="FILE",
            default=None,
            help="system config (YAML with a top-level 'system:') describing the nodes; its keys "
            "are available as {placeholders}",
        ),
    ),
    (
        "--bench-override",
        dict(
            action="append",
            default=[],
            metavar="BENCH.KEY=VALUE",
            help="override a resolved value, applied as the last layer; repeatable. "
            "Examples: resnet50.argv.--batch-size=32, '*.voir.options.stop=10'",
        ),
    ),
    (
        "--bench-select",
        dict(
            action="append",
            default=[],
            metavar="NAMES",
            help="run only benchmarks whose name, group or tag is in this comma-separated list",
        ),
    ),
    (
        "--bench-exclude",
        dict(
            action="append",
            default=[],
            metavar="NAMES",
            help="skip benchmarks whose name, group or tag is in this comma-separated list",
        ),
    ),
]

RUN_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "--bench-profile",
        dict(
            nargs="?",
            const="",
            default=None,
            metavar="REPORTS",
            help="profile each benchmark after its scored steps: every report, or a comma list "
            "of speed,time,memory,system,summary,snapshot,trace (docs/profiling.md)",
        ),
    ),
    (
        "--bench-base",
        dict(
            metavar="DIR",
            default=None,
            help="results directory (default: $DLBENCH_BASE or .dlbench); run streams go to "
            "DIR/runs/<run-name>.<time>/",
        ),
    ),
    (
        "--bench-run-name",
        dict(metavar="NAME", default=None, help="name of this run (default: the suite name)"),
    ),
    (
        "--bench-fixture-steps",
        dict(
            type=parse_fixture_steps,
            default=None,
            metavar="WARMUP,STEPS",
            help="the warm-up and steady steps of each test that uses the bench fixture "
            f"(default {FIXTURE_STEPS[0]},{FIXTURE_STEPS[1]}); a test's "
            "@pytest.mark.bench_steps(warmup=W, steps=S) wins (docs/writing-benchmarks.md)",
        ),
    ),
    (
        "--bench-repeat",
        dict(type=int, default=1, metavar="N", help="run each benchmark N times"),
    ),
    (
        "--bench-against",
        dict(
            metavar="REV",
            default=None,
            help="paired regression gate: check the git revision REV out in a temporary "
            "worktree and run every selected benchmark on it and on this working tree, "
            f"alternating over the rounds; exit status {gate.EXIT_REGRESSED} when this tree is "
            f"slower, {gate.EXIT_INCONCLUSIVE} when the rounds are too noisy to tell "
            "(docs/reports.md, Exit statuses)",
        ),
    ),
    (
        "--bench-rounds",
        dict(
            type=parse_rounds,
            default=None,
            metavar="K",
            help=f"with --bench-against: rounds of (base, candidate) runs per benchmark "
            f"(default {ROUNDS}); a benchmark stops early once its verdict is clear",
        ),
    ),
    (
        "--bench-fixed-rounds",
        dict(
            action="store_true",
            default=False,
            help="with --bench-against: run every round of every benchmark (the fixed "
            "design), never stopping early (docs/reports.md)",
        ),
    ),
    (
        "--bench-confirm",
        dict(
            type=parse_confirm,
            default=CONFIRM,
            metavar="N",
            help="with --bench-compare: run a benchmark the first pass finds regressed (or "
            "improved, or slower beyond the tolerance but inconclusive) again, up to N times, "
            "and keep a change only if it holds; 0: no "
            f"confirmation (default {CONFIRM}; docs/reports.md, Confirmation)",
        ),
    ),
    (
        "--bench-cpus-per-slot",
        dict(
            type=int,
            default=None,
            metavar="K",
            help="without GPUs, give each device slot K cores (with -n auto: one worker per K "
            "cores); with GPUs, the cores each GPU's slot gets",
        ),
    ),
    (
        "--bench-require-ready",
        dict(
            action="store_true",
            default=False,
            help="a machine that is not ready to benchmark (CPU governor, turbo, ASLR, load, "
            "GPU clocks, persistence, power limit, other GPU processes: dlbench machine) is a "
            "usage error instead of a warning (for CI)",
        ),
    ),
    (
        "--bench-isolation",
        dict(
            choices=("process", "inline"),
            default="process",
            help="'process' (default) runs each benchmark in a child process so a crash, hang or "
            "out-of-memory fails that benchmark only; 'inline' runs it in the pytest process "
            "(for --pdb and debugging)",
        ),
    ),
    (
        "--bench-launcher",
        dict(
            choices=("warm", "fresh"),
            default="warm",
            help="how --bench-isolation=process starts a child: 'warm' (default) forks it from "
            "a server that imported torch and the workload libraries once (a fraction of a "
            "second); 'fresh' starts a new Python interpreter per benchmark (3-4 s)",
        ),
    ),
]

@dataclass(frozen=True)
class ReportOption:
    """An option of the pytest run and of a ``dlbench`` command: ``--bench-NAME`` in pytest,
    ``--NAME`` in ``dlbench report`` (the report and the gate) or ``dlbench log`` (the loggers),
    where ``cli`` is true; the same parsing and the same help."""

    name: str
    kwargs: dict[str, Any]
    cli: bool = True

    @property
    def pytest_flag(self) -> str:
        return f"--bench-{self.name}"

    @property
    def cli_flag(self) -> str:
        return f"--{self.name}"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


def _columns(text: str) -> tuple[str, ...]:
    from pytest_dlbench.report.columns import parse_columns

    return parse_columns(text)


def _sort(text: str) -> str:
    from pytest_dlbench.report.columns import parse_sort

    return parse_sort(text)


REPORT_OPTIONS: list[ReportOption] = [
    ReportOption("save", dict(metavar="PATH", default=None,
                              help="write the run's JSON summary (a baseline)")),
    ReportOption("autosave", dict(
        nargs="?", const="", default=None, metavar="DIR",
        help="keep the run's JSON summary in a results history: DIR (default "
        "<bench-base>/history), under <machine-id>/<time>_<commit>.json; dlbench history "
        "reads it (docs/history.md)")),
    ReportOption("compare", dict(
        metavar="PATH", default=None,
        help=f"compare with a saved summary; exit status {gate.EXIT_REGRESSED} when performance "
        f"regressed, {gate.EXIT_INCONCLUSIVE} when the noise is too large to tell a change beyond "
        "the tolerance (docs/reports.md, Exit statuses)")),
    ReportOption("tolerance", dict(
        metavar="PCT", type=parse_tolerance, default=TOLERANCE,
        help="smallest change that counts as a regression or an improvement, as 5%% or 0.05 "
        f"(default {100 * TOLERANCE:g}%%)")),
    ReportOption("alpha", dict(
        metavar="P", type=parse_alpha, default=ALPHA,
        help=f"significance level of the one-sided test (default {ALPHA:g})")),
    ReportOption("paired-test", dict(
        metavar="TEST", type=parse_paired_test, default=None,
        help="the test of a --bench-against run's pairs: t (paired t-test on log ratios), "
        "wilcoxon (signed-rank) or quantile (upper quartiles of the steps, permutation test) "
        f"(default {PAIRED_TEST})")),
    ReportOption("paired-rate", dict(
        metavar="RATE", type=parse_paired_rate, default=None,
        help="what each run of a --bench-against pair contributes: window (its rate over the "
        "steady window, the scored figure) or median (the median of its steps' rates, robust "
        f"to a burst of load within the run) (default {PAIRED_RATE})")),
    ReportOption("require-baseline", dict(
        action="store_true", default=False,
        help=f"a missing --bench-compare file is exit status {gate.BASELINE_MISSING} (no "
        f"baseline to compare with) instead of {gate.USAGE_ERROR} (bad input), for a CI script "
        "that tells the two apart"),
        cli=False),  # dlbench report always requires the file it is given
    ReportOption("html", dict(metavar="PATH", default=None,
                              help="write a self-contained HTML report")),
    ReportOption("export", dict(
        metavar="PATH", default=None,
        help="write github-action-benchmark's customBiggerIsBetter JSON")),
    ReportOption("price", dict(
        type=parse_price, default=None, metavar="DOLLARS",
        help="price of the machine: adds price/score to the report")),
    ReportOption("score", dict(
        choices=SCORES, default=MILARUN,
        help="the scores reported: milarun (default: the seed's, the weighted geometric mean "
        "of milarun's perf_adj) or milabench (milabench's score too, as its report computes "
        "it: docs/figures.md, milabench's score)")),
    ReportOption("reference", dict(
        action="store_true", default=False,
        help="each benchmark of the milabench suite against milabench's published per-GPU "
        "figure for this GPU model, batch and configuration: its ratio, and 'slow' below "
        "0.95 of it (docs/milabench.md, milabench's published figures)")),
    ReportOption("columns", dict(
        metavar="LIST", type=_columns, default=None,
        help="the table's columns, comma-separated (pytest-benchmark's --benchmark-columns): "
        "perf, units, std%%, perf_adj, weight, n, fail, total, ratio, verdict, 'adj ratio', p, "
        "TFLOP/s, MFU, precision, compile, graphs, breaks, speedup, total_time_secs, peak, "
        "energy (default: a compact table, and a second one for what some benchmarks have)")),
    ReportOption("sort", dict(
        metavar="COL", type=_sort, default=None,
        help="the rows' order: suite (default), name, perf, perf_adj, std%%, weight, fail, "
        "ratio; figures largest first, ratio smallest first (pytest-benchmark's "
        "--benchmark-sort)")),
]

#: The report options that name a file written at the end of a run.
OUTPUT_OPTIONS = ("save", "html", "export")

#: ``pytest --help`` shows the ``--bench-*`` options by task: (group, title, options). An
#: option in no group here is shown under "run" (plugin/__init__.py registers them).
OPTION_GROUPS: list[tuple[str, str, tuple[str, ...]]] = [
    ("select", "dlbench: what to run",
     ("--bench-suite", "--bench-system", "--bench-override", "--bench-select",
      "--bench-exclude")),
    ("run", "dlbench: how it runs",
     ("--bench-repeat", "--bench-isolation", "--bench-launcher", "--bench-require-ready",
      "--bench-run-name", "--bench-base", "--bench-fixture-steps")),
    ("devices", "dlbench: devices", ("--bench-cpus-per-slot",)),
    ("gate", "dlbench: compare and gate",
     ("--bench-compare", "--bench-require-baseline", "--bench-confirm", "--bench-tolerance",
      "--bench-alpha", "--bench-reference")),
    ("paired", "dlbench: the paired gate (--bench-against)",
     ("--bench-against", "--bench-rounds", "--bench-fixed-rounds", "--bench-paired-test",
      "--bench-paired-rate")),
    ("outputs", "dlbench: the table and the files written",
     ("--bench-columns", "--bench-sort", "--bench-save", "--bench-autosave", "--bench-html",
      "--bench-export", "--bench-price", "--bench-score")),
    ("profile", "dlbench: profiling", ("--bench-profile",)),
    # Every logger's options, from its registry entry (loggers/registry.py): none named here.
    ("logging", "dlbench: logging", ()),
]


def option_group(flag: str) -> tuple[str, str]:
    """The (group, title) ``flag`` is shown under in ``pytest --help`` (:data:`OPTION_GROUPS`)."""
    for name, title, flags in OPTION_GROUPS:
        if flag in flags:
            return f"dlbench-{name}", title
    return "dlbench-run", "dlbench: how it runs"


def check_outputs(value: Callable[[str], Any], *, cli: bool,
                  history_base: str | PathLike[str] | None = None) -> None:
    """Check the output files asked for (``value(dest)`` as in :func:`evaluate_options`) before
    anything runs, naming each by its flag (``--bench-save`` in pytest, ``--save`` in ``dlbench
    report`` when ``cli``): a DlbenchError, one line (core/output_files.check_outputs). The
    ``--bench-autosave`` folder too (report/outputs.history_problem): ``DIR``, or for the flag alone
    ``<history_base>/history`` (pytest: ``<bench-base>/history`` when not given)."""
    from pytest_dlbench.core.output_files import check_outputs as check

    check({(option.cli_flag if cli else option.pytest_flag): value(option.dest)
           for option in REPORT_OPTIONS if option.name in OUTPUT_OPTIONS})
    autosave = value("autosave")
    if autosave is None:
        return
    from pytest_dlbench.results.history import HISTORY

    if autosave:
        folder = Path(autosave)
    elif history_base is not None:
        folder = Path(history_base) / HISTORY
    elif not cli:  # pytest's results base, as layout.prepare_base makes it
        from pytest_dlbench import layout

        folder = layout.results_base(value("base")) / HISTORY
    else:  # dlbench report without a base: the run directory's, found later
        return
    from pytest_dlbench.report.outputs import history_problem

    problem = history_problem(folder)
    if problem:
        flag = "--autosave" if cli else "--bench-autosave"
        raise DlbenchError(f"{flag}: {problem}")


def evaluate_options(
    value: Callable[[str], Any],
    *,
    baseline: BaselineLoad | None,
    require_baseline: bool,
    paired: bool = True,
    suite: str | None = None,
) -> EvaluateOptions:
    """The end of a run as the report options ask it: ``value(dest)`` is the value of the
    :data:`REPORT_OPTIONS` entry ``dest`` (pytest's ``bench_<dest>``, ``dlbench report``'s
    ``<dest>``); ``baseline`` is the ``compare`` file, already read."""
    from pytest_dlbench.results.evaluation import EvaluateOptions, Outputs

    return EvaluateOptions(
        tolerance=value("tolerance"),
        alpha=value("alpha"),
        paired_test=value("paired_test"),
        paired_rate=value("paired_rate"),
        baseline=baseline,
        baseline_path=value("compare"),
        require_baseline=require_baseline,
        paired=paired,
        price=value("price"),
        score=value("score"),
        reference=value("reference"),
        suite=suite,
        outputs=Outputs(save=value("save"), html=value("html"), export=value("export"),
                        autosave=value("autosave")),
    )
