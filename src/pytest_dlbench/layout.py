"""The run directory and every name in it: written and parsed here, nowhere else.

```
<base>/runs/<run-name>.<YYYYmmdd-HHMMSS>/
    manifest.json               the benchmarks this run set out to measure (the score's
                                "incomplete" rule needs the ones that never wrote a stream),
                                and the suites' weighted ones (a subset's score says so)
    specs/<bench>.json          the resolved spec a child process (or torchrun rank) runs
    <bench>.D<k>[.R<r>].data    one JSON-lines stream per run of a benchmark (a bench
                                fixture test's id escaped: test_x%5B8%5D.D0.data)
    <bench>.D<k>[.R<r>].log     that run's child output
    against.json                a --bench-against run: the base revision (rev, sha, worktree),
                                the rounds, their order and the paired test
    base/                       its base side, laid out as a run directory of its own
        manifest.json           (what the base revision's suite selected)
        specs/<bench>.json      (resolved from the base revision's suite)
        <bench>.D<k>.R<r>.data  round r of the base side: pairs with ../<bench>.D<k>.R<r>.data
    confirm/<k>/                --bench-confirm's k-th confirmation runs (k from 1), laid out
                                as a run directory of their own
    confirm/confirmed.json      written once every confirmation ran (its limit)
```

Item ids follow the same names: ``<bench>[D<k>]``, or ``<bench>[D<k>-R<r>]`` with repeats (and
the rounds of a paired run).

A paired run keeps the candidate (the working tree) where every run is, so everything that reads
a run directory (``dlbench report``, the loggers, the HTML report) sees the candidate as a plain
run, and ``base/`` is a run directory too (``dlbench report RUN_DIR/base`` reports the base side
alone). Both sides' streams have the same names: a pair is two files of the same name.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.core.numbers import is_integer, printable
from pytest_dlbench.core.output_files import write_atomic
from pytest_dlbench.core.protocol import Env
from pytest_dlbench.suite import BenchSpec
from pytest_dlbench.suite.spec import MAX_NAME_BYTES, name_problem

__all__ = [
    "Against",
    "Manifest",
    "ManifestEntry",
    "BISECT",
    "BISECT_STEP_LOG",
    "AGAINST",
    "BASE",
    "CANDIDATE",
    "RUNS",
    "MANIFEST",
    "SUITE_WEIGHTED",
    "SUITE_WEIGHTS",
    "SIDES",
    "StreamName",
    "base_dir",
    "CONFIRM_DIR",
    "CONFIRM_DONE",
    "confirm_dir",
    "confirm_done",
    "confirm_round_dir",
    "confirm_round_dirs",
    "confirm_streams",
    "run_base",
    "NotARunDir",
    "UnsafeName",
    "check_run_dir",
    "latest_run_dir",
    "check_run_name",
    "DATA",
    "DEFAULT_BASE",
    "results_base",
    "item_name",
    "is_test_id",
    "json_safe",
    "log_path",
    "make_run_dir",
    "parse_item_id",
    "parse_stream_name",
    "profile_dir",
    "read_against",
    "prepare_base",
    "read_manifest",
    "read_spec",
    "spec_path",
    "stream_path",
    "side_dir",
    "stream_paths",
    "fit_test_id",
    "write_against",
    "work_dir",
    "write_manifest",
    "write_spec",
]

MANIFEST = "manifest.json"
#: The manifest's list of the weighted, enabled benchmarks of the run's suites, selected or not.
SUITE_WEIGHTED = "suite_weighted"
#: The manifest's weight of each of those: milabench's score counts one not selected as 0.
SUITE_WEIGHTS = "suite_weights"


def json_safe(value: Any) -> Any:
    """``value`` as strict JSON holds it, for any tool (jq, a tracking server) to read: non-finite
    floats as null (JSON has no NaN), mappings' keys as text, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value

#: The results base when neither ``--bench-base`` nor ``$DLBENCH_BASE`` names one.
DEFAULT_BASE = ".dlbench"
#: The folder of a results base where data sets are made once and reused.
DATA = "data"
RUNS = "runs"
STREAM_SUFFIX = ".data"
LOG_SUFFIX = ".log"
PROFILE_SUFFIX = ".profile"
WORK_SUFFIX = ".work"
SPECS = "specs"
AGAINST = "against.json"
BASE = "base"
CANDIDATE = "candidate"
#: The two sides of a paired run: the base revision, and the candidate (the working tree).
SIDES = (BASE, CANDIDATE)
#: The folder of the confirmation runs, and the file written once every one of them ran.
CONFIRM_DIR = "confirm"
CONFIRM_DONE = "confirmed.json"
#: The folder of a results base that keeps each ``dlbench bisect``'s runs, and a step's pytest
#: output in its folder.
BISECT = "bisect"
BISECT_STEP_LOG = "pytest.log"
_STREAM_NAME = re.compile(r"^(?P<bench>.+)\.D(?P<device>\d+)(?:\.R(?P<repeat>\d+))?\.data$")
_ITEM_ID = re.compile(r"(?:^|::)(?P<bench>[^:\[]+)\[D(?P<device>\d+)(?:-R(?P<repeat>\d+))?\]$")


@dataclass(frozen=True)
class StreamName:
    """Which run of which benchmark a stream file (or an item) is."""

    bench: str
    device: int
    repeat: int | None = None


class UnsafeName(DlbenchError, ValueError):
    """A name that would leave its folder (or be no file name at all) if used as a file name."""


def _component(name: str, what: str) -> str:
    """``name`` when it is one plain file-name component; the last guard before the file system
    (benchmark names are checked when the suite is resolved: suite.spec.name_problem)."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
    ):
        raise UnsafeName(f"{what} {quoted(name)} is not a safe file name")
    return name


def _bench_component(bench: str) -> str:
    problem = name_problem(bench)
    if problem is not None:
        raise UnsafeName(f"benchmark name {quoted(bench)} {problem}")
    return bench


def check_run_name(name: str) -> str:
    """A run name (``--bench-run-name``) that can name the run directory, or UnsafeName: the
    rules of a benchmark's name (suite.spec.name_problem), so that ``<name>.<time>`` fits too."""
    problem = name_problem(name)
    if problem is not None:
        raise UnsafeName(f"run name {quoted(name)} {problem}: a name is used as a file name "
                         "(use letters, digits, '-', '_' and '.')")
    return name


# -- the run directory ---------------------------------------------------------------------------


def results_base(option: str | PathLike[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> Path:
    """The results base: ``--bench-base`` (``option``), else ``$DLBENCH_BASE``, else
    ``.dlbench``. As given: a relative path stays relative (its caller knows to what)."""
    env = os.environ if environ is None else environ
    # An empty option or variable counts as unset, as it always has.
    return Path(option or env.get(Env.BASE) or DEFAULT_BASE)


def prepare_base(base: str | PathLike[str]) -> Path:
    """Make ``<base>/runs`` and check that a run directory can be made in it, before anything
    runs: a results directory that is a file, under ``/proc`` or read-only is one line."""
    base = Path(base)
    runs = base / RUNS
    for part in (base, *base.parents):
        if part.exists():
            if not part.is_dir():
                raise DlbenchError(f"results directory {base}: {part} is not a directory")
            break
    try:
        runs.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".dlbench-probe-", dir=runs))
    except OSError as exc:
        where = exc.filename or runs
        raise DlbenchError(
            f"results directory {base}: cannot make {where}: {exc.strerror or exc}"
        ) from None
    return runs


def make_run_dir(base: Path, run_name: str, now: _dt.datetime | None = None) -> Path:
    """``<base>/runs/<run-name>.<YYYYmmdd-HHMMSS>``, made unique if that second is taken."""
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    runs = Path(base) / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    candidate = runs / _component(f"{run_name}.{stamp}", "run directory name")
    suffix = 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = runs / _component(f"{run_name}.{stamp}-{suffix}", "run directory name")


def run_base(run_dir: str | PathLike[str]) -> Path:
    """The results base a run directory lives in: ``<base>/runs/<run>`` -> ``<base>`` (a run
    directory outside a ``runs`` folder: the folder it is in)."""
    run_dir = Path(run_dir).resolve()
    return run_dir.parent.parent if run_dir.parent.name == RUNS else run_dir.parent


def base_dir(run_dir: str | PathLike[str]) -> Path:
    """``<run_dir>/base``: the base side of a ``--bench-against`` run."""
    return Path(run_dir) / BASE


def side_dir(run_dir: str | PathLike[str], side: str) -> Path:
    """Where one side of a paired run keeps its streams, specs and manifest: the candidate in
    the run directory itself, the base in ``base/``."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    return base_dir(run_dir) if side == BASE else Path(run_dir)


def confirm_dir(run_dir: str | PathLike[str]) -> Path:
    """``<run_dir>/confirm``: the confirmation runs of ``--bench-confirm``."""
    return Path(run_dir) / CONFIRM_DIR


def confirm_round_dir(run_dir: str | PathLike[str], round_: int) -> Path:
    """``confirm/<k>/`` (k from 1): the k-th confirmation runs, streams named as in the first
    pass (a folder per round, because an item's name has no place for a confirmation)."""
    return confirm_dir(run_dir) / str(round_)


def confirm_done(run_dir: str | PathLike[str]) -> Path:
    """``confirm/confirmed.json``: written once every confirmation round ran."""
    return confirm_dir(run_dir) / CONFIRM_DONE


def confirm_streams(run_dir: str | PathLike[str]) -> list[Path]:
    """Every confirmation run's stream under ``confirm/<k>/``, in round order."""
    return [p for folder in confirm_round_dirs(run_dir) for p in stream_paths(folder)]


def confirm_round_dirs(run_dir: str | PathLike[str]) -> list[Path]:
    """The ``confirm/<k>/`` folders there are, in round order."""
    folder = confirm_dir(run_dir)
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()),
                  key=lambda p: int(p.name))


@dataclass(frozen=True)
class Against:
    """``against.json``: what the base side of a paired run is (``rev``, ``sha``) and how its
    rounds ran (``rounds``, ``order``, ``design``, the paired ``test`` and ``rate``, the base
    side's ``warnings``); ``stops``: where each benchmark's rounds ended, added by the paired
    comparison (results/judge/paired.py), never in the file.

    A key the file lacks is None (or ``()``), and its reader says what that means (a file
    written before the sequential design has no ``design``: every round ran). ``raw`` keeps
    every key of the file in its order, those no field names too (the worktree, the repository,
    each round's first side): :meth:`to_dict` writes them back as they were, with the fields
    that were changed since (``dataclasses.replace``) at their place."""

    rev: str | None = None
    sha: str | None = None
    rounds: int | None = None
    order: str | None = None
    design: str | None = None
    test: str | None = None
    rate: str | None = None
    warnings: tuple[str, ...] = ()
    stops: Mapping[str, Mapping[str, Any]] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Against:
        """The record of an ``against.json`` object (:func:`read_against` checked its types)."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        rounds, stops = data.get("rounds"), data.get("stops")
        return cls(rev=text("rev"), sha=text("sha"),
                   rounds=rounds if is_integer(rounds) else None,
                   order=text("order"), design=text("design"), test=text("test"),
                   rate=text("rate"),
                   warnings=tuple(str(w) for w in data.get("warnings") or ()),
                   stops=stops if isinstance(stops, Mapping) else None, raw=dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The object as the file (and a comparison's JSON) holds it: ``raw``'s keys in order,
        each field that differs from what ``raw`` says written at its key (a new one last)."""
        out = dict(self.raw)
        read = Against.from_dict(self.raw)
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name != "raw" and value != getattr(read, item.name):
                out[item.name] = json_safe(value)
        return out


def write_against(run_dir: str | PathLike[str], info: Against | Mapping[str, Any]) -> Path:
    """``against.json``: what the base side of a paired run is, and how the rounds ran."""
    path = Path(run_dir) / AGAINST
    data = info.to_dict() if isinstance(info, Against) else info
    path.write_text(json.dumps({"version": 1, **data}, indent=2, default=str) + "\n")
    return path


#: The most rounds a paired run's against.json may say: a file someone else wrote (10**12
#: rounds would be read as a plan); far more than any run makes.
MAX_AGAINST_ROUNDS = 100_000
_AGAINST_TEXT = ("rev", "sha", "order", "design", "test", "rate")


def _shown(value: Any) -> str:
    """A value someone else wrote, for a one-line message: short, escapes shown."""
    text = repr(value)
    return printable(text if len(text) <= 60 else text[:57] + "...")


def read_against(run_dir: str | PathLike[str]) -> Against | None:
    """``<run_dir>/against.json``, or None: not a paired run. A file that is not what
    pytest-dlbench writes (not an object, a value of the wrong type, rounds past any run) is
    one line naming it, never read as an unpaired run or a plan."""
    path = Path(run_dir) / AGAINST
    try:
        data = untrusted.read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DlbenchError(f"{path}: unreadable: {untrusted.reason(exc)}") from None
    if not isinstance(data, dict):
        raise DlbenchError(f"{path}: not a JSON object (a paired run's against.json is one)")
    for key in _AGAINST_TEXT:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise DlbenchError(f"{path}: {key!r} must be text, got {_shown(data[key])}")
    rounds = data.get("rounds")
    if rounds is not None and not (is_integer(rounds) and 0 < rounds <= MAX_AGAINST_ROUNDS):
        raise DlbenchError(f"{path}: 'rounds' must be a whole number from 1 to "
                           f"{MAX_AGAINST_ROUNDS:,}, got {_shown(rounds)}")
    return Against.from_dict(data)


# -- streams -------------------------------------------------------------------------------------


def is_test_id(name: str) -> bool:
    """Whether ``name`` is a pytest test id (the ``bench`` fixture's benchmark of a
    parametrized test, ``test_x[8]``, or one qualified by its class or module,
    ``TestSmall::test_speed``): a benchmark's name holds neither ``[`` nor ``::``."""
    return "[" in name or "::" in name


def _escape(name: str) -> str:
    """``name`` with what a file name or a benchmark's name may not hold (suite.spec.name_problem:
    separators, ``[``, ``]``, ``:``, control characters, lone surrogates, a leading ``.``) and
    ``%`` itself written ``%XX`` (its UTF-8 bytes): ``test_x[8]`` is ``test_x%5B8%5D``."""
    def escaped(position: int, char: str) -> bool:
        code = ord(char)
        return (char in "%/\\[]:" or code < 32 or 127 <= code < 160 or 0xD800 <= code < 0xE000
                or (position == 0 and char == "."))

    return "".join("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
                   if escaped(i, char) else char for i, char in enumerate(name))


def _stream_stem(bench: str) -> str:
    """The file-name stem of ``bench``'s streams: a benchmark's name as it is (one that is
    unsafe is refused); a test id (and a name with ``%``) escaped (:func:`_escape`), read back
    by :func:`parse_stream_name`."""
    if not is_test_id(bench):
        _bench_component(bench)
        if "%" not in bench:
            return bench
    return _bench_component(_escape(bench))


def _unescaped(stem: str) -> str:
    """The name of a stream's stem: its ``%XX`` escapes read back (:func:`_stream_stem`)."""
    if "%" not in stem:
        return stem
    from urllib.parse import unquote

    return unquote(stem, errors="surrogatepass")


def fit_test_id(test_id: str) -> str:
    """``test_id`` when its streams' names fit (:data:`MAX_NAME_BYTES` once escaped), else a
    shorter name that does and stays unique, and a test id: its start and ``[~HASH]``, a hash
    of the whole id."""
    def fits(name: str) -> bool:
        return len(_escape(name).encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES

    if fits(test_id):
        return test_id
    import hashlib

    digest = hashlib.sha256(test_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    tag = f"[~{digest}]"
    keep = len(test_id)
    while keep > 0 and not fits(test_id[:keep] + tag):
        keep -= 1
    return test_id[:keep] + tag


def stream_path(run_dir: str | PathLike[str], bench: str, device: int,
                repeat: int | None = None) -> Path:
    """``<run_dir>/<bench>.D<device>[.R<repeat>].data``; a test id's name escaped
    (:func:`is_test_id`)."""
    stem = _stream_stem(bench)
    name = f"{stem}.D{int(device)}" + (f".R{int(repeat)}" if repeat is not None else "")
    return Path(run_dir) / _component(name + STREAM_SUFFIX, "stream name")


def log_path(stream: str | PathLike[str]) -> Path:
    """The child output kept beside a stream."""
    return Path(stream).with_suffix(LOG_SUFFIX)


def parse_stream_name(path: str | PathLike[str] | None) -> StreamName:
    """(bench, device, repeat) from a stream's file name; an unexpected name is the bench."""
    name = Path(path).name if path else ""
    match = _STREAM_NAME.match(name)
    if match is None:
        return StreamName(_unescaped(Path(name).stem) if name else "?", 0)
    repeat = match["repeat"]
    return StreamName(_unescaped(match["bench"]), int(match["device"]),
                      int(repeat) if repeat else None)


def stream_paths(run_dir: str | PathLike[str]) -> list[Path]:
    """Every stream of a run directory, sorted."""
    return sorted(p for p in Path(run_dir).glob("*" + STREAM_SUFFIX) if p.is_file())


class NotARunDir(DlbenchError):
    """A path given as a run directory that is none (``dlbench report/table/profile/log``)."""


def check_run_dir(path: str | PathLike[str]) -> Path:
    """``path`` when it is a run directory (streams or a manifest), else :class:`NotARunDir`
    with the one line to show."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise NotARunDir(f"{run_dir}: not a run directory")
    if not stream_paths(run_dir) and not (run_dir / MANIFEST).is_file():
        raise NotARunDir(f"{run_dir}: no run streams (*.data) and no manifest.json")
    return run_dir


_RUN_STAMP = re.compile(r"\.(\d{8}-\d{6})(?:-(\d+))?$")


def latest_run_dir(base: str | PathLike[str]) -> Path:
    """The newest run directory of ``<base>/runs`` (by the time in its name, ``-N`` after
    ``-N-1``; a name without one by its modification time), one with streams or a manifest;
    :class:`NotARunDir` when there is none (``dlbench report`` without RUN_DIR)."""
    runs = Path(base) / RUNS

    def when(path: Path) -> tuple[str, int]:
        match = _RUN_STAMP.search(path.name)
        if match is None:
            stamp = _dt.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y%m%d-%H%M%S")
            return stamp, 0
        return match[1], int(match[2] or 1)

    try:
        candidates = [p for p in runs.iterdir() if p.is_dir()]
    except OSError:
        candidates = []
    for path in sorted(candidates, key=when, reverse=True):
        if stream_paths(path) or (path / MANIFEST).is_file():
            return path
    raise NotARunDir(f"{runs}: no run directory (give RUN_DIR, or --bench-base DIR)")


def profile_dir(stream: str | PathLike[str], *, rank: int = 0) -> Path:
    """``<run_dir>/<stem>.profile`` beside the stream ``<stem>.data``: its profile reports
    (``rank<r>/`` inside it for rank ``r > 0`` of an njobs job)."""
    path = Path(stream)
    stem = path.name.removesuffix(STREAM_SUFFIX) if path.name.endswith(STREAM_SUFFIX) else path.stem
    out = path.parent / f"{stem}{PROFILE_SUFFIX}"
    return out / f"rank{rank}" if rank else out


def work_dir(stream: str | PathLike[str]) -> Path:
    """``<run_dir>/<stem>.work`` beside the stream ``<stem>.data``: the working folder of an
    external command (its cwd and ``{workdir}``: checkpoints, its own logs), one per run."""
    path = Path(stream)
    stem = path.name.removesuffix(STREAM_SUFFIX) if path.name.endswith(STREAM_SUFFIX) else path.stem
    return path.parent / f"{stem}{WORK_SUFFIX}"


# -- item ids ------------------------------------------------------------------------------------


def item_name(bench: str, device: int, repeat: int | None) -> str:
    params = f"D{device}" + (f"-R{repeat}" if repeat is not None else "")
    return f"{bench}[{params}]"


def parse_item_id(nodeid: str) -> StreamName | None:
    """The benchmark run a pytest node id (or item name) stands for; None for other tests."""
    match = _ITEM_ID.search(nodeid)
    if match is None:
        return None
    repeat = match["repeat"]
    return StreamName(match["bench"], int(match["device"]), int(repeat) if repeat else None)


# -- the manifest --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestEntry:
    """One benchmark of the manifest: what the score needs of it when it never ran (its
    weight, whether it is enabled, its units, plan and metric), where it was defined
    (``suite``), the machines an njobs job spans (``nodes``) and its matrix combination.

    A key the file lacks is None, and the score takes the benchmark's runs' own value
    (results/figures/scoring.summarize_bench); a ``weight`` or ``enabled`` the file says as null is
    0.0 or False, as it always was read."""

    weight: float | None = None
    enabled: bool | None = None
    units: str | None = None
    plan: Mapping[str, Any] | None = None
    suite: str | None = None
    metric: str | None = None
    nodes: int | None = None
    matrix: Mapping[str, Any] | None = None

    @property
    def method(self) -> str | None:
        """The plan's method (``per_gpu``, ``njobs``), None when the entry does not say."""
        method = (self.plan or {}).get("method")
        return str(method) if method else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ManifestEntry:
        data = data or {}
        plan, matrix = data.get("plan"), data.get("matrix")
        return cls(weight=(data["weight"] or 0.0) if "weight" in data else None,
                   enabled=bool(data["enabled"]) if "enabled" in data else None,
                   units=str(data["units"]) if data.get("units") else None,
                   plan=plan if isinstance(plan, Mapping) and plan else None,
                   suite=data.get("suite"), metric=str(data["metric"]) if data.get("metric")
                   else None, nodes=data.get("nodes"),
                   matrix=matrix if isinstance(matrix, Mapping) and matrix else None)

    def to_dict(self) -> dict[str, Any]:
        """The entry as :func:`write_manifest` writes it: the five keys always, the metric,
        nodes and matrix only when said."""
        entry: dict[str, Any] = {"weight": self.weight, "enabled": self.enabled,
                                 "units": self.units, "plan": self.plan, "suite": self.suite}
        if self.metric:
            entry["metric"] = self.metric
        if self.nodes is not None:
            entry["nodes"] = self.nodes
        if self.matrix:
            entry["matrix"] = {str(k): v for k, v in self.matrix.items()}
        return entry


@dataclass(frozen=True)
class Manifest:
    """``manifest.json``: the benchmarks the run set out to measure, in order (a weighted one
    that never wrote a stream makes the score incomplete), the suites' weighted benchmarks and
    their weights, selected or not (:data:`SUITE_WEIGHTED`, :data:`SUITE_WEIGHTS`: a subset's
    score says so; None when the file does not say), and ``facts`` about the run at the file's
    top level (``commit``, ``machine``, ``versions``; a key present as null is a fact too)."""

    suite: str | None = None
    benchmarks: Mapping[str, ManifestEntry] = field(default_factory=dict)
    suite_weighted: tuple[str, ...] | None = None
    suite_weights: Mapping[str, float] | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)

    #: The file's keys that are no fact.
    _OWN = ("version", "suite", SUITE_WEIGHTED, SUITE_WEIGHTS, "benchmarks")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Manifest:
        """The record of a manifest object (:func:`read_manifest` checked its types); also
        tolerant of one built by hand or partly missing."""
        data = data or {}
        weighted, weights = data.get(SUITE_WEIGHTED), data.get(SUITE_WEIGHTS)
        return cls(
            suite=data.get("suite"),
            benchmarks={str(name): ManifestEntry.from_dict(entry)
                        for name, entry in (data.get("benchmarks") or {}).items()},
            suite_weighted=tuple(str(n) for n in weighted) if weighted is not None else None,
            suite_weights=dict(weights) if weights is not None else None,
            facts={k: v for k, v in data.items() if k not in cls._OWN})

    @classmethod
    def of(cls, manifest: Manifest | Mapping[str, Any] | None) -> Manifest:
        """``manifest`` as a record (a mapping read as the file would be; None: empty)."""
        return manifest if isinstance(manifest, Manifest) else cls.from_dict(manifest)

    def to_dict(self) -> dict[str, Any]:
        """The object :func:`write_manifest` writes: the version, the suite, the facts, the
        suites' weighted benchmarks and their weights when known, the benchmarks last."""
        return {"version": 1, "suite": self.suite, **self.facts,
                **({SUITE_WEIGHTED: list(self.suite_weighted)}
                   if self.suite_weighted is not None else {}),
                **({SUITE_WEIGHTS: dict(self.suite_weights)}
                   if self.suite_weights is not None else {}),
                "benchmarks": {name: entry.to_dict() for name, entry in self.benchmarks.items()}}


def write_manifest(run_dir: str | PathLike[str], suite: str, specs: Iterable[BenchSpec],
                   facts: dict[str, Any] | None = None, *, nodes: int = 1,
                   suite_weighted: Iterable[str] | None = None,
                   suite_weights: Mapping[str, float] | None = None) -> Path:
    """``manifest.json`` (:class:`Manifest`): the benchmarks selected to run, with what the
    score needs of them, and ``facts`` about the run (commit, machine, versions) at its top
    level. ``nodes``: the machines an njobs job spans (the system file's nodes), said on each
    such benchmark. ``suite_weighted``: the weighted, enabled benchmarks the suites hold,
    selected or not (a ``-k``, ``-m`` or ``--bench-select`` subset leaves some out: its score
    is a subset's); ``suite_weights``: their weights (milabench's score counts one not selected
    as 0)."""
    manifest = Manifest(
        suite=suite, benchmarks={spec.name: _manifest_entry(spec, nodes) for spec in specs},
        suite_weighted=tuple(suite_weighted) if suite_weighted is not None else None,
        suite_weights=dict(suite_weights) if suite_weights is not None else None,
        facts=dict(facts or {}))
    path = Path(run_dir) / MANIFEST
    _write_text(path, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")
    return path


def _write_text(path: Path, text: str) -> None:
    """Write a file of the run directory; a full disk is one line naming the file."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise DlbenchError(f"cannot write {path}: {exc.strerror or exc}") from None


def _manifest_entry(spec: BenchSpec, nodes: int = 1) -> ManifestEntry:
    matrix = spec.config.get("matrix_values") if isinstance(spec.config, dict) else None
    return ManifestEntry(
        weight=spec.weight, enabled=spec.enabled, units=spec.units, plan=spec.plan,
        suite=str(spec.origin),
        # Only when said: a benchmark that never ran is still a time-to-train one in the
        # report, and keeps its matrix combination in the sweep table (docs/time-to-train.md).
        metric=getattr(spec, "metric", None) or None,
        # One job over several machines (docs/multinode.md).
        nodes=nodes if nodes > 1 and spec.is_njobs else None,
        matrix=matrix or None)


def read_manifest(run_dir: str | PathLike[str]) -> Manifest | None:
    """``<run_dir>/manifest.json`` written when the run started, or None without one."""
    path = Path(run_dir) / MANIFEST
    try:  # a regular file of bounded size and depth: a FIFO named manifest.json never hangs
        data = untrusted.read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DlbenchError(f"{path}: unreadable manifest: {untrusted.reason(exc)}") from None
    problem = _manifest_problem(data)
    if problem is not None:
        raise DlbenchError(f"{path}: invalid manifest: {problem}")
    return Manifest.from_dict(data)


def _manifest_problem(data: Any) -> str | None:
    """What the score reads of a manifest, typed (pydantic: imported by readers only)."""
    from pytest_dlbench.core.schema import Bool, Loose, Map, Num, Str, problem

    class EntrySchema(Loose):
        weight: Num | None = None
        enabled: Bool | None = None
        units: Str | None = None
        plan: Map | None = None

    class ManifestSchema(Loose):
        suite: Str | None = None
        benchmarks: dict[str, EntrySchema] | None = None
        suite_weighted: list[Str] | None = None
        suite_weights: dict[str, Num] | None = None

    return problem(ManifestSchema, data)


# -- resolved specs handed to children -----------------------------------------------------------


def spec_path(run_dir: str | PathLike[str], bench: str) -> Path:
    return Path(run_dir) / SPECS / _component(f"{_bench_component(bench)}.json", "spec name")


def write_spec(run_dir: str | PathLike[str], spec: BenchSpec) -> Path:
    """The resolved spec a child runs: it never re-reads the suite (edited mid-run or not)."""
    path = spec_path(run_dir, spec.name)
    _write_text(path, json.dumps(spec.to_json(), default=str) + "\n")
    return path


def read_spec(path: str | PathLike[str]) -> BenchSpec:
    try:
        data = untrusted.read_json(path)
        return BenchSpec.from_json(data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise DlbenchError(f"{path}: unreadable benchmark spec: {untrusted.reason(exc)}") from exc
