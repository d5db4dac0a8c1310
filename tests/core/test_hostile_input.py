"""Hostile and broken inputs: each costs one line naming what is wrong, never a traceback, a
hang or a file written outside the run directory (issue 16).

``TABLE`` (the suite, option, baseline, stream and manifest cases) is the table of
docs/running.md ("Bad input"): the docs test checks that the two are the same, row by row.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _history_files import BASELINE
from _hostile_cases import EXIT_4, OTHER_MODULES_CASES
from _paths import REPO_ROOT
from _runs import write_run

from pytest_dlbench import layout
from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.core.errors import DlbenchError, quoted
from pytest_dlbench.results.figures import load_run
from pytest_dlbench.results.gate import USAGE_ERROR
from pytest_dlbench.results.model import BaselineError, load_summary
from pytest_dlbench.suite import SuiteError, resolve_suite

TOY = "pytest_dlbench.workloads.toy:main"
DOCS = REPO_ROOT / "docs" / "running.md"

# (what the docs call the input, suite text, overrides, the one-line message with FILE for the
# suite's path). Run through resolve_suite, and so through pytest --bench-suite (exit 4).
SUITE_CASES: list[tuple[str, str, tuple[str, ...], str]] = [
    (
        "a benchmark named `../../../escape`",
        f'"../../../escape": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '../../../escape' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a benchmark named `sub/dir`",
        f'"sub/dir": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name 'sub/dir' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a benchmark named `.hidden`",
        f'".hidden": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '.hidden' starts with '.': a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        'a benchmark named `"a\\nb"` (a control character)',
        f'"a\\nb": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name 'a\\nb' contains a control character: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        'a benchmark named `""`',
        f'"": {{definition: {TOY}}}',
        (),
        "FILE: benchmark name '' is empty: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "a matrix job named `j{x}` with `x: ../up`",
        f"m: {{matrix: {{x: [../up]}}, job: {{name: 'j{{x}}', definition: {TOY}}}}}",
        (),
        "FILE: matrix job name 'j../up' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
]


LAUGHS = "[lol, lol, lol, lol, lol, lol, lol, lol, lol]"
# A billion laughs: nine aliases of nine aliases ... of nine strings.
BOMB = "".join(
    f"  - &l{i} " + (LAUGHS if i == 0 else "[" + ", ".join([f"*l{i - 1}"] * 9) + "]") + "\n"
    for i in range(9)
)
BOMB_SUITE = f"_lols:\n  argv:\n{BOMB}t: {{definition: {TOY}, argv: {{--a: *l8}}}}"
FLOW_BOMB = "[" + ", ".join(
    f"&l{i} " + (LAUGHS if i == 0 else "[" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    for i in range(9)
) + "]"

SUITE_CASES += [
    (
        "an alias bomb (billion laughs)",
        BOMB_SUITE,
        (),
        "FILE:8:15: the document expands to more than 100000 values through its aliases "
        "(an alias bomb?)",
    ),
    (
        "a suite of 120,000 plain values (no aliases)",
        "".join(f"k{i}: {i}\n" for i in range(120_000)),
        (),
        "FILE:50000:9: the document has more than 100000 values (a suite has a few thousand)",
    ),
    (
        "a suite file of 17 MB (300,000 plain entries)",
        "".join(f"b{i}: {{definition: {TOY}}}\n" for i in range(300_000)),
        (),
        re.compile(r"FILE: cannot read: larger than 16 MiB \(\d+ bytes\)"),
    ),
    (
        "a self-referencing alias `t: &t {argv: [*t]}`",
        f"t: &t {{definition: {TOY}, argv: [*t]}}",
        (),
        "FILE:1:62: the alias *t refers to a value that contains it (a self-referencing alias)",
    ),
    (
        "a value nested 100,000 levels deep",
        f"t: {{definition: {TOY}, x: {'[' * 100_000}{']' * 100_000}}}",
        (),
        # Our bound (MAX_DEPTH), or libyaml's own (1000 levels, in the scanner's look-ahead of a
        # flow collection) where PyYAML's wheel bundles a libyaml that has it (PyYAML 6.0.4).
        re.compile(r"FILE:1:(117: nested deeper than 64 levels"
                   r"|\d+: YAML syntax error: exceeded maximum nesting depth)"),
    ),
    (
        "`--bench-override 't.argv=&a [*a]'`",
        f"t: {{definition: {TOY}}}",
        ("t.argv=&a [*a]",),
        "--bench-override 't.argv=&a [*a]': value is not valid YAML (the alias *a refers to a "
        "value that contains it (a self-referencing alias))",
    ),
    (
        "`--bench-override` with an alias bomb as its value",
        f"t: {{definition: {TOY}}}",
        (f"t.argv={FLOW_BOMB}",),
        "--bench-override 't.argv=[&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol], &l1 [*l0, "
        "*l0, *l0...': value is not valid YAML (the document expands to more than 100000 "
        "values through its aliases (an alias bomb?))",
    ),
    (
        "a matrix of 6 keys with 10 values each",
        "m:\n  matrix: {"
        + ", ".join(f"k{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(6))
        + f"}}\n  job: {{name: 'j{{k0}}', definition: {TOY}}}",
        (),
        "FILE: m: 'matrix' makes 1000000 combinations, more than 10000",
    ),
]


SUITE_CASES += [
    (
        f"`max_duration: {raw}`",
        f"t: {{definition: {TOY}, max_duration: {raw}}}",
        (),
        f"FILE: t: 'max_duration' must be positive and finite (seconds), got {shown}",
    )
    for raw, shown in ((".nan", "nan"), (".inf", "inf"), ("0", "0.0"), ("-5", "-5.0"))
] + [
    (
        "`--bench-override 't.max_duration=.nan'`",
        f"t: {{definition: {TOY}}}",
        ("t.max_duration=.nan",),
        "FILE: t: 'max_duration' must be positive and finite (seconds), got nan",
    ),
    (
        "`weight: .inf`",
        f"t: {{definition: {TOY}, weight: .inf}}",
        (),
        "FILE: t: 'weight' must be a finite number >= 0, got inf",
    ),
    (
        "`weight: -1`",
        f"t: {{definition: {TOY}, weight: -1}}",
        (),
        "FILE: t: 'weight' must be a finite number >= 0, got -1.0",
    ),
] + [
    (
        f"`plan: {{{plan}}}`",
        f"t: {{definition: {TOY}, plan: {{{plan}}}}}",
        (),
        f"FILE: t: 'plan.{key}' must be a positive integer, got {shown}",
    )
    for plan, key, shown in (("method: njobs, n: 0", "n", "0"),
                             ("method: njobs, n: -3", "n", "-3"),
                             ("method: njobs, slots: 0", "slots", "0"))
] + [
    (
        "an `env` key `X;touch${IFS}pwned;Y` (a remote shell would run it)",
        f"t: {{definition: {TOY}, env: {{'X;touch${{IFS}}pwned;Y': 1}}}}",
        (),
        "FILE: t: 'env' key 'X;touch${IFS}pwned;Y' is not a variable name (letters, digits "
        "and '_', not starting with a digit)",
    ),
    (
        "`--bench-override 't.env.1X=2'`",
        f"t: {{definition: {TOY}}}",
        ("t.env.1X=2",),
        "FILE: t: 'env' key '1X' is not a variable name (letters, digits and '_', not "
        "starting with a digit)",
    ),
]

# A value or key of 100,000 characters: quoted in 80 (core/errors.quoted), not whole (a 100 KB
# error line before).
SUITE_CASES += [
    (
        "`max_duration:` a string of 100,000 characters",
        f"t: {{definition: {TOY}, max_duration: {'x' * 100_000}}}",
        (),
        "FILE: t: 'max_duration' must be a number, got '" + "x" * 76 + "...",
    ),
    (
        "an `env` key of 1,000 characters (YAML's longest plain key)",
        f"t: {{definition: {TOY}, env: {{{'a' * 999}-: x}}}}",
        (),
        "FILE: t: 'env' key '" + "a" * 76 + "... is not a variable name (letters, digits and "
        "'_', not starting with a digit)",
    ),
]

# A voir definition (issue 23, docs/suites.md "milabench's folders through voir").
SUITE_CASES += [
    (
        "`definition: {voir: ., script: ../main.py}` (a script outside the voir folder)",
        "t: {definition: {voir: ., script: ../main.py}}",
        (),
        "FILE: t: definition: 'script' must be a file name in the folder, got '../main.py'",
    ),
    (
        "`definition: {voir: [a, b]}`",
        "t: {definition: {voir: [a, b]}}",
        (),
        "FILE: t: definition: 'voir' must be a folder (a path, relative to this file)",
    ),
    (
        "`definition: {voir: ., parser: x}`",
        "t: {definition: {voir: ., parser: x}}",
        (),
        "FILE: t: definition: unknown keys ['parser'] (a voir definition has voir, script)",
    ),
]


def _suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text) + "\n")
    return path


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [case[1:] for case in SUITE_CASES],
    ids=[case[0] for case in SUITE_CASES],
)
def test_bad_suite_input_is_one_line(tmp_path: Path, text: str, overrides: tuple[str, ...],
                                     message: str | re.Pattern[str]) -> None:
    path = _suite(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        resolve_suite(path, overrides)
    got = str(info.value)
    assert "\n" not in got
    if isinstance(message, re.Pattern):
        assert message.fullmatch(got.replace(str(path), "FILE")), got
    else:
        assert got.replace(str(path), "FILE") == message
    assert str(path) in got or got.startswith("--bench-override")


# (what the docs call the input, pytest arguments, the one-line error with FILE for a file in the
# test's folder): pytest exits with status 4 before anything runs.
OPTION_CASES: list[tuple[str, tuple[str, ...], str]] = [
    (
        "`--bench-base=/proc/dlbench`",
        ("--bench-base=/proc/dlbench",),
        "results directory /proc/dlbench: cannot make /proc/dlbench: No such file or directory",
    ),
    (
        "`--bench-base=FILE`, a file",
        ("--bench-base=FILE",),
        "results directory FILE: FILE is not a directory",
    ),
    (
        "`--bench-run-name=../up`",
        ("--bench-run-name=../up",),
        "--bench-run-name: run name '../up' contains a path separator: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    (
        "`--bench-run-name=LONG`, 250 characters",
        ("--bench-run-name=LONG",),
        "--bench-run-name: run name 'LONG... is longer than 200 bytes: a name is used as a "
        "file name (use letters, digits, '-', '_' and '.')",
    ),
    # The outputs, checked before the run (issue 24): DIR is a directory of the test's folder.
    (
        "`--bench-save=DIR`, a directory",
        ("--bench-save=DIR",),
        "--bench-save: DIR is a directory",
    ),
    (
        "`--bench-html=FILE/r.html`, under a file",
        ("--bench-html=FILE/r.html",),
        "--bench-html: FILE/r.html: FILE is not a directory",
    ),
    (
        "`--bench-export=/proc/dlbench.json`, a place where no file can be made",
        ("--bench-export=/proc/dlbench.json",),
        "--bench-export: /proc/dlbench.json: cannot write in /proc: No such file or directory",
    ),
    (
        "`--bench-export=/dev/null`, not a regular file",
        ("--bench-export=/dev/null",),
        "--bench-export: /dev/null is not a regular file",
    ),
    (
        "`--bench-save=FILE --bench-html=FILE`, one file for two outputs",
        ("--bench-save=FILE", "--bench-html=FILE"),
        "--bench-save and --bench-html are the same file FILE: each output needs its own",
    ),
    # issue 40 item 12: the history folder of --bench-autosave, checked as the files are.
    (
        "`--bench-autosave=/dev/null/h`, under a file",
        ("--bench-autosave=/dev/null/h",),
        "--bench-autosave: /dev/null/h: /dev/null is not a directory",
    ),
    (
        "`--bench-autosave=FILE`, a file",
        ("--bench-autosave=FILE",),
        "--bench-autosave: FILE is not a directory",
    ),
    (
        "`--bench-autosave=/proc/dlbench-history`, a place where no folder can be made",
        ("--bench-autosave=/proc/dlbench-history",),
        "--bench-autosave: /proc/dlbench-history: cannot make /proc/dlbench-history: No such "
        "file or directory",
    ),
    # issue 25 item 4: a mistyped name or path says so before the run.
    (
        "`--bench-compare=DIR/nope.json`, a file that does not exist",
        ("--bench-compare=DIR/nope.json",),
        "--bench-compare: baseline not found: DIR/nope.json",
    ),
    (
        "`--bench-select=aa`, a name no benchmark, group or tag has",
        ("--bench-select=aa",),
        "--bench-select: no benchmark, group or tag is named 'aa' (did you mean a?); "
        "`dlbench resolve s` lists them",
    ),
]


@pytest.mark.parametrize(
    ("args", "message"),
    [case[1:] for case in OPTION_CASES],
    ids=[case[0] for case in OPTION_CASES],
)
def test_bad_options_are_one_line_before_anything_runs(pytester: pytest.Pytester,
                                                       args: tuple[str, ...],
                                                       message: str) -> None:
    pytester.makefile(".yaml", s=f"a: {{definition: {TOY}}}")
    afile = pytester.path / "afile"
    afile.write_text("")
    adir = pytester.path / "adir"
    adir.mkdir()

    def fill(text: str) -> str:
        # 'LONG... is the long name as a message quotes it: its first 80 characters.
        return (text.replace("FILE", str(afile)).replace("DIR", str(adir))
                .replace("'LONG...", quoted("n" * 250)).replace("LONG", "n" * 250))

    result = pytester.runpytest("--bench-suite=s.yaml", *map(fill, args))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [f"ERROR: {fill(message)}"]
    assert afile.read_text() == "" and not list(adir.iterdir())
    assert not list(pytester.path.glob("**/*.data"))


# -- saved summaries (baselines): typed at load --------------------------------------------------

# (what the docs call the input, what changes in benchmark 'a' of a good baseline, the one line
# with FILE for the baseline's path): refused at load, pytest --bench-compare exits 4 before
# running anything, and so do dlbench report --compare and dlbench compare.
BASELINE_CASES: list[tuple[str, dict, str]] = [
    ('a baseline with `"perf_adj": "fast"`', {"perf_adj": "fast"},
     "FILE: invalid summary: benchmarks.a.perf_adj: must be a number, got 'fast'"),
    ('a baseline with `"rates": "abc"`', {"rates": "abc"},
     "FILE: invalid summary: benchmarks.a.rates: must be a list, got 'abc'"),
    ('a baseline with `"n": 1.5`', {"n": 1.5},
     "FILE: invalid summary: benchmarks.a.n: must be an integer, got 1.5"),
    ('a baseline with `"runs": [{"block_rates": ["x"]}]`', {"runs": [{"block_rates": ["x"]}]},
     "FILE: invalid summary: benchmarks.a.runs.0.block_rates.0: must be a number, got 'x'"),
]


def _baseline(path: Path, change: dict) -> Path:
    data = json.loads(json.dumps(BASELINE))
    data["benchmarks"]["a"].update(change)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [case[1:] for case in BASELINE_CASES],
    ids=[case[0] for case in BASELINE_CASES],
)
def test_a_baseline_of_the_wrong_type_is_refused_at_load(tmp_path: Path, change: dict,
                                                         message: str, capsys) -> None:
    path = _baseline(tmp_path / "base.json", change)
    with pytest.raises(BaselineError) as info:
        load_summary(path)
    assert str(info.value) == message.replace("FILE", str(path))
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    write_run(run_dir, "a")
    for argv in (["report", str(run_dir), "--compare", str(path)],
                 ["compare", str(path), str(_baseline(tmp_path / "ok.json", {}))]):
        assert dlbench(argv) == USAGE_ERROR
        err = capsys.readouterr().err
        assert err == f"dlbench: error: {message.replace('FILE', str(path))}\n"


def test_a_baseline_of_the_wrong_type_stops_pytest_before_it_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", s=f"a: {{definition: {TOY}}}")
    path = _baseline(pytester.path / "base.json", {"perf_adj": "fast"})
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-base=out",
                                f"--bench-compare={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [
        f"ERROR: {path}: invalid summary: benchmarks.a.perf_adj: must be a number, got 'fast'"
    ]
    assert not (pytester.path / "out").exists()


# -- streams and manifests read by the reports ---------------------------------------------------

# The lines of write_run's stream: 1 config, 2 meta, 3-4 warm-up rates, 5-14 steady rates, 15 end.
# (what the docs call the input, line number, what replaces that record (or a function of it),
# what happens, the note the report prints, FILE for the stream's path)
STREAM_CASES: list[tuple[str, int, object, str, str]] = [
    ("a rate record with `time: null`", 5, lambda r: {**r, "time": None},
     "left out, with a note",
     "FILE:5: rate record left out: time: must be a number, got None"),
    ("a rate record without `value`", 6, lambda r: {k: v for k, v in r.items() if k != "value"},
     "left out, with a note",
     "FILE:6: rate record left out: value: missing"),
    ('a config record with `spec: "oops"`', 1, lambda r: {**r, "spec": "oops"},
     "left out, with a note",
     "FILE:1: config record left out: spec: must be a mapping, got 'oops'"),
    ('a config record with `device: "x"`', 1, lambda r: {**r, "device": "x"},
     "left out, with a note",
     "FILE:1: config record left out: device: must be an integer, got 'x'"),
    ("a corrupt line in the middle of a stream", 7, "{not json",
     "the run fails (corrupt stream), its other records are kept",
     "FILE:7: corrupt record: Expecting property name enclosed in double quotes: line 1 column 2 "
     "(char 1)"),
]


@pytest.mark.parametrize(
    ("line", "change", "message"),
    [(c[1], c[2], c[4]) for c in STREAM_CASES],
    ids=[c[0] for c in STREAM_CASES],
)
def test_a_bad_stream_record_costs_that_line(tmp_path: Path, line: int, change: object,
                                              message: str, capsys) -> None:
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    path = write_run(run_dir, "a", device=1)
    lines = path.read_text().splitlines()
    lines[line - 1] = change if isinstance(change, str) else json.dumps(
        change(json.loads(lines[line - 1]))  # type: ignore[operator]
    )
    path.write_text("\n".join(lines) + "\n")
    note = message.replace("FILE", str(path))
    run = load_run(path)
    assert run.notes == (note,)
    assert run.rate == pytest.approx(10.0)  # the other observations are all kept
    assert (run.bench, run.device) == ("a", 1)
    corrupt = "corrupt record" in message
    assert run.ok is not corrupt
    if corrupt:
        assert run.reason == f"corrupt stream: {note}"
    status = dlbench(["report", str(run_dir), "-v"])
    out, err = capsys.readouterr()
    assert status == (1 if corrupt else 0), out + err
    assert f"note: {note}" in out.splitlines()[-10:] or f"  note: {note}" in out
    assert "Traceback" not in out + err


MANIFEST_CASES: list[tuple[str, str, str]] = [
    ("a corrupt `manifest.json`", "{not json",
     "FILE: unreadable manifest: Expecting property name enclosed in double quotes: line 1 "
     "column 2 (char 1)"),
    ('a `manifest.json` with `"weight": "heavy"`',
     json.dumps({"version": 1, "suite": "s", "benchmarks": {"a": {"weight": "heavy"}}}),
     "FILE: invalid manifest: benchmarks.a.weight: must be a number, got 'heavy'"),
]


@pytest.mark.parametrize(
    ("content", "message"),
    [case[1:] for case in MANIFEST_CASES],
    ids=[case[0] for case in MANIFEST_CASES],
)
def test_a_bad_manifest_is_bad_input(tmp_path: Path, content: str, message: str,
                                     capsys) -> None:
    write_run(tmp_path, "a")
    (tmp_path / "manifest.json").write_text(content)
    assert dlbench(["report", str(tmp_path)]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err == f"dlbench: error: {message.replace('FILE', str(tmp_path / 'manifest.json'))}\n"


#: A paired run's against.json someone else wrote (issue 40 items 9 and 16): one line and exit
#: status 4, never a traceback, a MemoryError or an unpaired run (exit 0: the gate skipped).
AGAINST_JSON_CASES: list[tuple[str, str, str]] = [
    ("an `against.json` that is a JSON list", '["x"]',
     "FILE: not a JSON object (a paired run's against.json is one)"),
    ('an `against.json` with `"design": ["sequential"]`', '{"design": ["sequential"]}',
     "FILE: 'design' must be text, got ['sequential']"),
    ('an `against.json` with `"test": "evil"`', '{"test": "evil"}',
     "FILE: unknown paired test 'evil': one of t, wilcoxon, quantile"),
    ('an `against.json` with `"rounds": 10**12` (or `"ten"`)', '{"rounds": 1000000000000}',
     "FILE: 'rounds' must be a whole number from 1 to 100,000, got 1000000000000"),
]


@pytest.mark.parametrize(
    ("content", "message"),
    [case[1:] for case in AGAINST_JSON_CASES],
    ids=[case[0] for case in AGAINST_JSON_CASES],
)
def test_a_bad_against_json_is_bad_input(tmp_path: Path, content: str, message: str,
                                         capsys) -> None:
    write_run(tmp_path, "a")
    (tmp_path / "against.json").write_text(content)
    assert dlbench(["report", str(tmp_path)]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err == f"dlbench: error: {message.replace('FILE', str(tmp_path / 'against.json'))}\n"


# -- the table of docs/running.md ----------------------------------------------------------------

TABLE = (
    [(c[0], EXIT_4, c[-1]) for c in SUITE_CASES]
    + [(c[0], EXIT_4, c[-1]) for c in OPTION_CASES]
    + [(c[0], EXIT_4, c[-1]) for c in BASELINE_CASES]
    + [(c[0], c[3], c[4]) for c in STREAM_CASES]
    + [(c[0], "`dlbench report` exits 4", c[-1]) for c in MANIFEST_CASES]
    + [(c[0], "`dlbench report` exits 4", c[-1]) for c in AGAINST_JSON_CASES]
    # the rows other test modules check (tests/_hostile_cases.py names each block's module)
    + OTHER_MODULES_CASES
)


def _docs_rows() -> list[tuple[str, str, str]]:
    """``| input | what happens | message |`` rows of the "Bad input" table of docs/running.md."""
    text = DOCS.read_text()
    section = text.split("## Bad input", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) == 3 and not set(cells[0]) <= {"-", " "} and cells[0] != "input":
            rows.append((cells[0], cells[1], cells[2].strip("`").replace("\\|", "|")))
    return rows


def test_docs_table_is_these_cases() -> None:
    rows = _docs_rows()
    # A message that differs by the YAML library (a pattern) is documented as one of its forms.
    expected = [(what, happens, message.fullmatch(row[2]) and row[2]
                 if isinstance(message, re.Pattern) else message)
                for (what, happens, message), row in zip(TABLE, rows, strict=False)]
    assert rows == expected
    assert len(rows) == len(TABLE)


# -- names reaching the file system ----------------------------------------------------------


def test_milabench_names_stay_valid(tmp_path: Path) -> None:
    names = ["resnet50", "ddp.scaling.2", "lm-gpt_small", "vit_b_16", "a.b-c_d"]
    path = _suite(tmp_path, "\n".join(f"{n}: {{definition: {TOY}}}" for n in names))
    assert [s.name for s in resolve_suite(path).specs] == names


def test_layout_refuses_unsafe_names(tmp_path: Path) -> None:
    for bad in ("../x", "a/b", "", ".", "..", "a\0b"):
        with pytest.raises(layout.UnsafeName):
            layout.stream_path(tmp_path, bad, 0)
        with pytest.raises(layout.UnsafeName):
            layout.spec_path(tmp_path, bad)
    with pytest.raises(layout.UnsafeName):
        layout.make_run_dir(tmp_path, "../out")
    assert isinstance(layout.UnsafeName("x"), DlbenchError)
    assert layout.stream_path(tmp_path, "ddp.scaling.2", 1, 0).name == "ddp.scaling.2.D1.R0.data"


def test_a_traversing_name_stops_pytest_before_anything_is_written(
    pytester: pytest.Pytester,
) -> None:
    pytester.mkdir("work")
    (pytester.path / "work" / "s.yaml").write_text(
        f'"../../escape": {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 2}}}}}}\n'
    )
    before = sorted(p.name for p in pytester.path.iterdir())
    result = pytester.runpytest("--bench-suite=work/s.yaml", "--bench-base=work/out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */s.yaml: benchmark name '../../escape' contains a path*"])
    assert sorted(p.name for p in pytester.path.iterdir()) == before
    assert not (pytester.path / "work" / "out").exists()


# -- hostile YAML through pytest: exit 4, one line, no hang -------------------------------------


def _limited() -> None:
    """The pytest run under test may not take more than 4 GiB (old code grew without bound)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def child_env() -> dict[str, str]:
    """This environment, with the pytest_dlbench under test first on the path of a subprocess."""
    import pytest_dlbench

    source = str(Path(pytest_dlbench.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def run_pytest(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=_limited,
        env=child_env(),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suite", "overrides", "needle"),
    [
        (BOMB_SUITE, (), "an alias bomb?"),
        (f"t: {{definition: {TOY}}}", ("t.argv=&a [*a]",), "a self-referencing alias"),
        (f"t: {{definition: {TOY}}}", (f"t.argv={FLOW_BOMB}",), "an alias bomb?"),
    ],
    ids=["bomb", "override-self-reference", "override-bomb"],
)
def test_hostile_yaml_is_a_usage_error(tmp_path: Path, suite: str, overrides: tuple[str, ...],
                                       needle: str) -> None:
    _suite(tmp_path, suite)
    result = run_pytest(tmp_path, "--bench-suite=suite.yaml", "--bench-base=out",
                        *(f"--bench-override={o}" for o in overrides))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: "), errors[:5]
    assert needle in errors[0]
    assert not (tmp_path / "out").exists()
