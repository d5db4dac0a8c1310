"""Collection nodes: a suite file and its benchmark items (pytest layer, kept thin)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_dlbench.core.errors import DlbenchError, shorten
from pytest_dlbench.core.numbers import printable_lines
from pytest_dlbench.core.protocol import Outcome, Status
from pytest_dlbench.layout import item_name
from pytest_dlbench.measure.monitor import Monitor, parse_interval
from pytest_dlbench.measure.stream import Event, NullStream
from pytest_dlbench.run.definition import load_definition
from pytest_dlbench.run.harness import execute
from pytest_dlbench.suite import BenchSpec, ResolvedSuite
from pytest_dlbench.suite.spec import porting_error

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_dlbench.plugin.session import BenchSession

    # What _BenchNode is mixed into, for the type checker; at run time it is a plain mixin.
    _ItemBase = pytest.Item
else:
    _ItemBase = object

__all__ = ["SuiteFile", "BenchItem", "BenchFunction", "BenchFailure", "suite_nodeid"]


# pytest.skip() inside a benchmark (e.g. "needs a GPU") skips it rather than failing it.
_SKIP_TYPES: tuple[type[BaseException], ...] = (pytest.skip.Exception,)


class BenchFailure(Exception):
    """A benchmark run that did not end with status ``ok``: reported in one line."""

    def __init__(self, outcome: Outcome, *, log: Path | None = None, tail: str = "") -> None:
        self.outcome = outcome
        self.log = log
        self.tail = tail
        super().__init__(outcome.reason)


def suite_nodeid(path: Path, rootpath: Path) -> str | None:
    """The node id of a suite file: pytest's (its path from the root directory), but for a
    suite outside it (one shipped with pytest-dlbench) its file name, ``smoke.yaml``: pytest
    would give ``""`` (ids ``::toy[D0]`` that cannot be pasted back, a dot line starting with
    ``.``). The session points such an argument back at the suite (session._suite_arg)."""
    try:
        path.resolve().relative_to(rootpath.resolve())
    except ValueError:
        return path.name
    return None  # pytest's own


class SuiteFile(pytest.File):
    """A suite YAML file; its children are one item per (benchmark, device slot, repeat)."""

    def __init__(self, *, suite: ResolvedSuite, session_plugin: BenchSession, **kwargs: Any):
        super().__init__(**kwargs)
        self.suite = suite
        self.session_plugin = session_plugin

    def collect(self):
        session = self.session_plugin
        options = session.options
        inline = session.runs_inline
        # A child process runs one benchmark: only that one's definition is imported, so a
        # broken or heavy definition elsewhere in the suite cannot affect it.
        only = session.only_bench
        repeats: list[int | None] = (
            [None] if options.repeat == 1 else list(range(options.repeat))
        )
        for spec in self.suite.specs:
            runs_here = inline and spec.enabled and spec.definition and only in (None, spec.name)
            for device in session.device_slots(spec):
                for repeat in repeats:
                    name = item_name(spec.name, device, repeat)
                    # A milabench benchmark folder fails here, with how to port it, no child.
                    error = porting_error(spec)
                    if error is None and runs_here:
                        try:
                            yield BenchFunction.create(self, name, spec, device, repeat)
                            continue
                        except DlbenchError as exc:  # e.g. a definition that cannot be imported
                            error = str(exc)
                    if error is not None:
                        yield BrokenBench.from_parent(
                            self, name=name, spec=spec, device=device, repeat=repeat,
                            error=error,
                        )
                    else:
                        yield BenchItem.from_parent(
                            self, name=name, spec=spec, device=device, repeat=repeat
                        )


def _split_params_from_name(node: pytest.Item) -> None:
    """pytest >= 9.2 keeps node ids structured (path, names, params). A node built from a name
    like ``resnet50[D0]`` gets no params, while ids read back from the cache (``--lf``) or the
    command line are parsed into ``resnet50`` + ``D0``, so they would never match; re-parse."""
    ident = getattr(node, "_id", None)
    if ident is not None and getattr(ident, "params", "") is None and hasattr(ident, "parse"):
        node._id = type(ident).parse(str(ident))


class _BenchNode(_ItemBase):
    """What both item kinds share: identity, markers, location."""

    spec: BenchSpec
    device: int
    repeat: int | None

    def _init_bench(self, spec: BenchSpec, device: int, repeat: int | None) -> None:
        _split_params_from_name(self)
        self.spec = spec
        self.device = device
        self.repeat = repeat
        self._run: Any = None  # the RunContext setup starts; None when start_run failed
        for tag in spec.tags:
            self.add_marker(tag)
        reason = self.plugin.skip_reason(spec)  # requires_capabilities, num_machines
        if reason:
            self.add_marker(pytest.mark.skip(reason=reason))
        if spec.group:
            self.extra_keyword_matches.add(spec.group)

    @property
    def plugin(self) -> BenchSession:
        parent = self.parent
        assert isinstance(parent, SuiteFile)  # a suite file's children, all of them
        return parent.session_plugin

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"{self.spec.name} ({self.spec.definition})"

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, BenchFailure):
            failure = excinfo.value
            lines = [failure.outcome.reason or failure.outcome.status]
            if failure.tail:
                lines += ["", "last lines of the benchmark's output:", failure.tail]
            if failure.log is not None:
                lines += ["", f"full output: {failure.log}"]
            return printable_lines("\n".join(lines))  # the child's text: shown, not obeyed
        if isinstance(excinfo.value, DlbenchError):
            return printable_lines(f"{self.spec.name}: {excinfo.value}")
        if style is None:  # pytest.Function's takes no style
            return super().repr_failure(excinfo)
        return super().repr_failure(excinfo, style)


class BenchItem(_BenchNode, pytest.Item):
    """Runs its benchmark in a child pytest process (``--bench-isolation=process``)."""

    def __init__(self, *, spec: BenchSpec, device: int, repeat: int | None, **kwargs: Any):
        super().__init__(**kwargs)
        self._init_bench(spec, device, repeat)

    def runtest(self) -> None:
        launcher = self.plugin.launcher
        assert launcher is not None  # set by the controller and the workers, who run items
        stopped = launcher.early_stop(self.spec, self.repeat)
        if stopped is not None:  # a paired run's benchmark whose verdict is already clear
            raise pytest.skip.Exception(stopped, _use_item_location=True)
        launched = launcher.run(self.spec, self.device, self.repeat)
        outcome = launched.outcome
        if outcome.ok:
            outcome = _scored(launched.stream) or outcome
        self.user_properties.append(("dlbench_stream", str(launched.stream)))
        self.user_properties.append(("dlbench_status", str(outcome.status)))
        if outcome.status is Status.SKIPPED:
            # Reported at the item's location, not at this line.
            raise pytest.skip.Exception(
                outcome.reason or "skipped by the benchmark", _use_item_location=True
            )
        if not outcome.ok:
            raise BenchFailure(outcome, log=launched.log, tail=_tail(launched.log))


def _scored(stream: Path) -> Outcome | None:
    """The report's verdict on a run whose child ended ok, when it is another one: the stream
    as the table scores it (results/figures/scoring.load_run). A stream its own benchmark corrupted
    fails in the table, so its item fails too, with the same reason: one verdict."""
    # Here, not at the top: a benchmark's child imports this module, and scores nothing.
    from pytest_dlbench.results.figures import load_run

    run = load_run(stream)
    if run.ok or run.status is Status.SKIPPED:
        return None
    return Outcome(run.status, run.reason)


class BrokenBench(_BenchNode, pytest.Item):
    """A benchmark whose definition cannot be loaded: it fails alone, with a recorded end."""

    def __init__(self, *, spec: BenchSpec, device: int, repeat: int | None, error: str,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self._init_bench(spec, device, repeat)
        self.error = error

    def runtest(self) -> None:
        run = self.plugin.start_run(self.spec, self.device, self.repeat)
        try:
            run.stream.write(Event.END, status=Status.FAIL, reason=self.error)
        finally:
            run.close()
        raise BenchFailure(Outcome(Status.FAIL, self.error))


def _scored_rate(records: Any) -> float | None:
    """The profile's speed report's throughput: the run's score, as the results compute it."""
    from pytest_dlbench.results.figures import run_from_records  # a profiled run's child only

    return run_from_records(records).rate


#: The child's own pytest banners (``=== FAILURES ===``, ``___ name[D0] ___``): under the
#: parent's failure section they read as a second, inner test report.
_BANNER = re.compile(r"^(?:=+|_+)(?: .* (?:=+|_+))?$")


def _tail(path: Path, lines: int = 15, *, width: int = 1000, size: int = 64 << 10) -> str:
    """The last ``lines`` lines of a child's log, without pytest's banners, each cut to
    ``width`` characters (a 20 MB exception message is in the log, not on the terminal), from
    its last ``size`` bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.rstrip().splitlines() if not _BANNER.match(line.strip())]
    return "\n".join(shorten(line, width) for line in kept[-lines:])


class BenchFunction(_BenchNode, pytest.Function):
    """Calls the benchmark function in this process with its fixtures, like a test function.

    Used in the child process of ``BenchItem`` and with ``--bench-isolation=inline``. The run's
    stream is opened before fixtures are set up, so a failing fixture is recorded too.
    """

    @classmethod
    def create(
        cls, parent: SuiteFile, name: str, spec: BenchSpec, device: int, repeat: int | None
    ) -> BenchFunction:
        func = load_definition(spec.definition or "", bench=spec.name)
        item = cls.from_parent(parent, name=name, callobj=func)
        item._init_bench(spec, device, repeat)
        return item

    @property
    def run(self) -> Any:
        """The benchmark's RunContext, once setup has started it."""
        assert self._run is not None, "the run is started by setup"
        return self._run

    def setup(self) -> None:
        self._run = self.plugin.start_run(self.spec, self.device, self.repeat)
        self.user_properties.append(("dlbench_stream", str(self.run.path)))
        outcome, exc = execute(
            super().setup, self.run.stream, final=False, skip_types=_SKIP_TYPES
        )
        if exc is not None:
            self._fail(outcome, exc)

    def runtest(self) -> None:
        run = self.run

        def call() -> None:
            # Telemetry is sampled on its own thread while the benchmark runs; the usage
            # thresholds are checked after, so a run that idled its GPU fails (milabench).
            # Only the rank that writes the stream samples (the others write to a NullStream).
            monitor = (
                contextlib.nullcontext()
                if isinstance(run.stream, NullStream)
                else Monitor(run.stream, interval=parse_interval(run.spec.interval))
            )
            with monitor:
                super(BenchFunction, self).runtest()
                run.finish_bench()  # reads the last window: a NaN there fails this run
            # After the monitor stopped: the system report is whole.
            run.finish_profile(scored_rate=_scored_rate)
            from pytest_dlbench.results.figures import validate_usage

            validate_usage(run.stream, run.spec.validation)

        # After a failure the last window (read by bench.close) still goes before ``end``.
        outcome, exc = execute(call, run.stream, skip_types=_SKIP_TYPES,
                               before_end=run.flush_bench)
        self.run.outcome = outcome
        if exc is not None:
            self._fail(outcome, exc)

    def _fail(self, outcome: Outcome, exc: BaseException) -> None:
        self.user_properties.append(("dlbench_status", str(outcome.status)))
        if outcome.status is Status.SKIPPED:
            raise exc
        if outcome.status is Status.FAIL and not isinstance(exc, DlbenchError):
            raise exc  # a plain error: pytest's own traceback is the most useful report
        raise BenchFailure(outcome) from exc

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if self._run is not None:
                self._run.close()
