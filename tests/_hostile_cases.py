"""The rows of docs/running.md's "Bad input" table that tests outside
tests/core/test_hostile_input.py check: (what the docs call the input, what happens, the one
line). Each block names the test module that checks its cases; that module imports its block
from here, and test_hostile_input.TABLE joins the blocks, in the docs' order, to its own cases
(its docs test checks the table row by row). A helper, so that no test module imports another.
"""

from __future__ import annotations

EXIT_4 = "refused, exit status 4"

# -- tests/core/test_readers.py: files read bounded, pairs refused, profile notes ---------------
CORRUPT = "the run fails (corrupt stream), its other records are kept"
INCOMPARABLE_NOTE = "not compared (incomparable), with a warning"
PROFILE_NOTE = "the profile is one note, the rest of the report stands"

# FILE stands for the file read.
READER_CASES: list[tuple[str, str, str]] = [
    ("a baseline nested 100,000 levels deep", EXIT_4,
     "FILE: not read: nested deeper than 128 levels"),
    ("a baseline larger than 64 MiB", EXIT_4,
     "FILE: cannot read: larger than 64 MiB (67108865 bytes)"),
    ("`--bench-compare=/dev/zero`", EXIT_4,
     "/dev/zero: cannot read: not a regular file (a character device)"),
    ("a FIFO given as the baseline", EXIT_4,
     "FILE: cannot read: not a regular file (a FIFO)"),
    ("a FIFO named `manifest.json`", "`dlbench report` exits 4",
     "FILE: unreadable manifest: not a regular file (a FIFO)"),
    ("a `manifest.json` nested 100,000 levels deep", "`dlbench report` exits 4",
     "FILE: unreadable manifest: nested deeper than 128 levels"),
    ("a stream line nested 100,000 levels deep", CORRUPT,
     "FILE:7: corrupt record: nested deeper than 128 levels"),
    ("a stream line longer than 1 MiB", CORRUPT,
     "FILE:7: corrupt record: longer than 1048576 bytes"),
    ("a baseline with rates of `1e308`", INCOMPARABLE_NOTE,
     "a: not compared: the baseline has a rate of 1e+308, beyond what the statistics can take "
     "(at most 1e+100 in magnitude)"),
    ("a baseline in TFLOP/s for a benchmark in items/s", INCOMPARABLE_NOTE,
     "a: not compared: measured in items/s here and in TFLOP/s in the baseline"),
    ("an empty profile `index.json` (a full disk)", PROFILE_NOTE,
     "FILE: unreadable profile index: Expecting value: line 1 column 1 (char 0)"),
    ("a profile `index.json` that is a list", PROFILE_NOTE,
     "FILE: invalid profile index: (top level): must be a mapping, got []"),
    ('a profile `index.json` with `"reports": {"time": {"report": 3}}`', PROFILE_NOTE,
     "FILE: invalid profile index: reports.time.report: must be a string, got 3"),
]

# -- tests/results/test_history.py: dlbench history (DIR the folder, FILE the file) -------------
HISTORY_CASES: list[tuple[str, str, str]] = [
    ("`dlbench history --history=DIR`, no such folder", "`dlbench history` exits 4",
     "history DIR: no such folder (write one with --bench-autosave)"),
    ("`dlbench history -k '(a'`", "`dlbench history` exits 4",
     "-k '(a': the expression ends too early"),
    ("a history file that is not JSON", "left out, with a warning; the others are read",
     "left out: FILE: not valid JSON: Expecting property name enclosed in double quotes: "
     "line 1 column 2 (char 1)"),
    ("a history file whose perf is `1e999` (or `Infinity`, `NaN`, 0, negative)",
     "that figure left out, with a warning; the file's others are read",
     "left out: FILE: b (perf inf): not finite positive rates (the file's other figures are "
     "read)"),
    ("`dlbench history -k` with `not` or parentheses nested 10,000 deep",
     "`dlbench history` exits 4",
     "-k '" + "(" * 57 + "...': 'not' and parentheses nested more than 50 deep"),
]

# -- tests/report/test_escapes.py: --bench-columns, --bench-sort, escapes -----------------------
TABLE_COLUMNS = (
    "perf, units, std%, perf_adj, weight, n, fail, total, ratio, verdict, adj ratio, p, "
    "TFLOP/s, MFU, precision, compile, graphs, breaks, speedup, total_time_secs, "
    "nvml peak, peak rss, torch alloc, torch reserved, energy"
)
TERMINAL_CASES: list[tuple[str, str, str]] = [
    ("`--bench-columns=perf,bogus`, a column the table does not have", EXIT_4,
     f"argument --bench-columns: unknown column 'bogus'; the columns: {TABLE_COLUMNS}"),
    ("`--bench-sort=min`, a column rows cannot be sorted by", EXIT_4,
     "argument --bench-sort: cannot sort by 'min'; sort by one of: suite, name, perf, "
     "perf_adj, std%, weight, fail, ratio"),
    ("a name, unit, failure reason or profile note holding an escape sequence (ESC [2J)",
     "shown escaped in every terminal output, never obeyed", "\\x1b[2J"),
]

# -- tests/run/test_hostile_arguments.py (and test_suite_milabench.py): auto(), sizer,
# requires_capabilities ------------------------------------------------------------------------
ARGUMENT_CASES: list[tuple[str, str, str]] = [
    ("an argument `auto_batch(D)` or `auto(X, D)` whose number has more than 18 digits, or "
     "whose sized batch is not finite or above 2³¹",
     "that benchmark fails with the line in its stream's `end` record; the suite goes on",
     "SuiteError: auto_batch(99999999999999999999999999999...: a number of more than 18 digits"),
    ("a system file's `sizer` or `cpu` number that is infinite or NaN (`mult: .inf`)",
     "refused, exit status 4",
     "FILE: 'system.options.sizer.mult' must be a finite number, got inf"),
    ("a `requires_capabilities` condition nested more than 50 deep, or with a number of more "
     "than 18 digits",
     "that benchmark is skipped with the reason, which quotes the condition's first 60 "
     "characters",
     "requires_capabilities '((((…' cannot be checked here: nested more than 50 deep"),
]

# -- tests/run/test_against_submodule.py: --bench-against into a git submodule ------------------
SUBMODULE_SUITE_LINE = (
    "ERROR: --bench-against=HEAD: benchmarks/dl/{file} is in the git submodule "
    "benchmarks/dl, which a worktree does not check out: run pytest inside the submodule, "
    "against a revision of its own history"
)
SUBMODULE_COMMAND_LINE = (
    "--bench-against=HEAD: cmd's command names benchmarks/dl/defs.py, in the git "
    "submodule benchmarks/dl, which a worktree does not check out: every base run "
    "would fail and the gate compare nothing; run pytest inside the submodule, "
    "against a revision of its own history"
)
AGAINST_CASES: list[tuple[str, str, str]] = [
    ("`--bench-against=HEAD` with the suite in a git submodule `benchmarks/dl`",
     EXIT_4, SUBMODULE_SUITE_LINE.format(file="s.yaml").removeprefix("ERROR: ")),
    ("`--bench-against=HEAD` with a `command:` path in a git submodule `benchmarks/dl`",
     EXIT_4, SUBMODULE_COMMAND_LINE),
]

# -- tests/run/test_bisect_progress.py: dlbench bisect's arguments ------------------------------
BISECT_CASES: list[tuple[str, str, str]] = [
    ("`dlbench bisect -- --upload-pack=x BAD`, a revision that starts with `-`",
     "`dlbench bisect` exits 4",
     "GOOD '--upload-pack=x' is not a revision (a revision may not start with '-')"),
    ("`dlbench bisect GOOD BAD --rounds 8 --max-rounds 2`", "`dlbench bisect` exits 4",
     "--rounds 8 is more than --max-rounds 2: a step's first paired run cannot take more "
     "rounds than any may"),
]

# -- tests/results/test_hostile_figures.py: figures too large for the statistics ----------------
RUN_FAILS = "the run fails, the rest is reported"
TOO_LARGE = "is beyond what the statistics take (at most 1e+100 in magnitude)"
FIGURE_CASES: list[tuple[str, str, str]] = [
    ("`bench.log_rate(1e308)`: a finite rate beyond 1e100", RUN_FAILS,
     f"step 2's rate 1e+308 items/s {TOO_LARGE}"),
    ("a step timed at 1e-306 s (its rate 6.4e307)", RUN_FAILS,
     f"step 2's rate 6.4e+307 items/s {TOO_LARGE}"),
    ("a 401-digit integer for a perf in a `--bench-compare` baseline (as `1e999`)",
     "the benchmark is not compared, with a warning",
     "a: not compared: the baseline has a rate of inf, beyond what the statistics can take "
     "(at most 1e+100 in magnitude)"),
    ("a 401-digit integer for a perf in a history file (as `1e999`)",
     "the figure is left out, with a warning",
     "left out: FILE: b (perf inf, 1 run rate): not finite positive rates (the file's other "
     "figures are read)"),
    ("a 401-digit integer for a stream's `flops` count (as `1e999`)",
     "the count is left out, with its reason",
     "the flops record's count (inf flops over 4 items) is not a finite positive number up to "
     "1e+100"),
    ("`bench.watch(model, x, items_per_example=inf)` (or NaN, 0, 1e-300, 1e13, `True`, "
     "`\"8\"`)",
     "that benchmark fails with the line in its stream's `end` record; the suite goes on",
     "ValueError: items_per_example must be a finite number from 1e-06 to 1e+12 (the rate "
     "items one example holds), not inf"),
]

# -- tests/run/test_slurm_launch.py: a Slurm host list the launcher cannot read (no scontrol) ---
SLURM_CASES: list[tuple[str, str, str]] = [
    ("`launcher: slurm` with `SLURM_JOB_NODELIST=node[1-2` (no scontrol)",
     "that benchmark fails at once with the line, its launcher exits 4",
     "launcher: slurm: SLURM_JOB_NODELIST cannot be read: bad Slurm host list 'node[1-2': a '[' "
     "is not closed"),
    ("`launcher: slurm` with `SLURM_JOB_NODELIST=node[1-100000000]`",
     "that benchmark fails at once with the line, its launcher exits 4",
     "launcher: slurm: SLURM_JOB_NODELIST cannot be read: Slurm host list 'node[1-100000000]' "
     "names 100,000,000 hosts, more than 100,000"),
]

#: The blocks in the order of docs/running.md's table, after test_hostile_input's own cases.
OTHER_MODULES_CASES: list[tuple[str, str, str]] = (
    READER_CASES + HISTORY_CASES + TERMINAL_CASES + ARGUMENT_CASES + AGAINST_CASES
    + BISECT_CASES + FIGURE_CASES + SLURM_CASES
)
