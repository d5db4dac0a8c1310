"""Names and text (issue 24, items 10 and 14): a run name that looks like an option, long run
names, failure reasons of any size, spreadsheet formulas in CSV cells, terminals that cannot
show Unicode, YAML limits named, a dead fork server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _git import git, worktree_paths
from _procs import child_env

TOY = "pytest_dlbench.workloads.toy:main"


def _pytest(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=child_env())


@pytest.mark.slow
def test_a_run_name_that_starts_with_a_dash_reaches_the_child(tmp_path: Path) -> None:
    # The child's command line passes every value as --opt=value: '-x' is no option of its own.
    (tmp_path / "s.yaml").write_text(
        f"a: {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 3}}}}}}\n")
    result = _pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out",
                     "--bench-run-name=-x")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    assert run_dir.name.startswith("-x.")
    records = [json.loads(line) for line in (run_dir / "a.D0.data").read_text().splitlines()]
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"


# -- item 13: what reaches a remote shell ---------------------------------------------------


def test_the_ssh_command_quotes_everything_it_sends_to_the_remote_shell(tmp_path: Path) -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    folder = tmp_path / "a dir; touch pwned"
    folder.mkdir()
    value = "it's $(touch pwned) `touch pwned` ;touch pwned"
    argv = [sys.executable, "-c", "import os, sys; print(os.environ['NOTE'], sys.argv[1])",
            "$(touch pwned)"]
    remote = ssh_command(Node("n", "10.0.0.2"), argv, cwd=folder, env={"NOTE": value})[-1]
    # The remote side runs it with a shell: here, sh in the test's folder.
    out = subprocess.run(["sh", "-c", remote], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert out == f"{value} $(touch pwned)\n"
    assert not list(tmp_path.rglob("pwned"))


@pytest.mark.parametrize("env", [{"X;touch${IFS}pwned;Y": "1"}, {"1X": "1"}, {"": "1"}])
def test_the_ssh_command_refuses_a_name_that_is_no_variable(env: dict[str, str]) -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    with pytest.raises(ValueError, match="is not a variable name"):
        ssh_command(Node("n", "10.0.0.2"), ["true"], env=env)


def test_the_ssh_command_refuses_a_target_ssh_would_read_as_an_option() -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    with pytest.raises(ValueError, match="would be read by ssh as an option"):
        ssh_command(Node("n", "-oProxyCommand=touch pwned"), ["true"])


# -- item 14: one cap for failure reasons ---------------------------------------------------


def test_every_reason_has_the_one_cap() -> None:
    from pytest_dlbench.core.errors import MAX_REASON, one_line
    from pytest_dlbench.core.protocol import Outcome, Status
    from pytest_dlbench.run.exit_reason import exit_reason
    from pytest_dlbench.run.external import reason_line

    python = one_line(RuntimeError("x" * 20_000_000))
    assert python == "RuntimeError: " + "x" * (MAX_REASON - 17) + "..."
    external = reason_line(["step 1", "RuntimeError: " + "y" * 1000, ""])
    assert external == "RuntimeError: " + "y" * (MAX_REASON - 17) + "..."
    exited = exit_reason(SystemExit(2), ["prog: error: " + "z" * 1000])
    assert exited.endswith("z" * 10 + "...") and len(exited) <= MAX_REASON + 60
    # However a reason was put together, a run's outcome holds at most MAX_REASON characters.
    assert Outcome(Status.FAIL, "w" * 10**6).reason == "w" * (MAX_REASON - 3) + "..."
    assert Outcome(Status.FAIL, "short").reason == "short"


def test_a_suite_error_quotes_a_value_in_80_characters_and_caps_its_message() -> None:
    from pytest_dlbench.core.errors import MAX_MESSAGE, MAX_QUOTED, SuiteError, quoted

    assert quoted("x" * 100_000) == "'" + "x" * (MAX_QUOTED - 4) + "..."
    assert quoted("short") == "'short'" and quoted(7) == "7"
    # Whatever a message carries, its file and benchmark stay whole and the line is bounded.
    error = SuiteError("m" * 10**6, file="/s/suite.yaml", bench="toy")
    assert str(error) == "/s/suite.yaml: toy: " + "m" * (MAX_MESSAGE - 3) + "..."


HUGE_VALUE = "x" * 100_000


@pytest.mark.parametrize("parse", [
    "parse_tolerance", "parse_alpha", "parse_rounds", "parse_confirm", "parse_price",
    "parse_fixture_steps", "parse_paired_test", "parse_paired_rate",
])
def test_an_option_of_100000_characters_is_quoted_in_80(parse: str) -> None:
    from pytest_dlbench import options

    with pytest.raises(options.OptionValueError) as refused:
        getattr(options, parse)(HUGE_VALUE)
    assert "x" * 76 + "..." in str(refused.value) and len(str(refused.value)) < 250


def test_a_revision_of_100000_characters_is_named_in_80(tmp_path: Path) -> None:
    from pytest_dlbench.results.history.records import HistoryError, since
    from pytest_dlbench.run.against import AgainstError, resolve_rev
    from pytest_dlbench.run.bisect import BisectError, check_options

    git(tmp_path, "init", "-q")
    dash = "-" + HUGE_VALUE  # refused before git runs: git would read it as an option
    cases = [(lambda: resolve_rev(tmp_path, HUGE_VALUE), AgainstError),
             (lambda: resolve_rev(tmp_path, dash), AgainstError),
             (lambda: since([], HUGE_VALUE, cwd=tmp_path), HistoryError),
             (lambda: since([], dash, cwd=tmp_path), HistoryError),
             (lambda: check_options(dash, "HEAD", 2, 20), BisectError)]
    for refuse, error in cases:
        with pytest.raises(error) as refused:
            refuse()
        message = str(refused.value)
        assert "x" * 75 + "..." in message and len(message) < 250, message[:300]


@pytest.mark.slow
def test_a_huge_exception_message_is_in_the_log_not_in_the_results(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text(
        "def main(bench):\n    raise RuntimeError('x' * 20_000_000)\n")
    (tmp_path / "s.yaml").write_text("big: {definition: big.py:main}\n")
    result = _pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out",
                     "--bench-save=out/s.json", "--bench-html=out/r.html")
    assert result.returncode == 1
    assert len(result.stdout) + len(result.stderr) < 20_000, result.stdout[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "big.D0.data").read_text().splitlines()]
    end = records[-1]
    assert end["event"] == "end" and end["status"] == "fail"
    assert end["reason"].startswith("RuntimeError: xxx") and len(end["reason"]) == 300
    assert "x" * 20_000_000 in (run_dir / "big.D0.log").read_text()
    for output in ("s.json", "r.html"):
        assert (tmp_path / "out" / output).stat().st_size < 100_000
    assert "fail: RuntimeError: xxx" in result.stdout


# -- item 14: spreadsheet formulas in `dlbench table --csv` --------------------------------------


def test_table_csv_quotes_what_a_spreadsheet_would_run(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io

    from _ttt_runs import write_ttt_run

    from pytest_dlbench.cli import main as dlbench

    run_dir = tmp_path / "run"
    write_ttt_run(run_dir, "=1+2", [10.0, 2.0, 2.0, 2.0],
                  matrix={"@cmd": "+SUM(A1)", "lr": -0.5, "shift": "-3", "note": "-x|calc"})
    write_ttt_run(run_dir, "plain", [10.0, 2.0, 2.0], matrix={"@cmd": "=A1", "lr": 1.5,
                                                               "shift": "4", "note": "ok"})
    assert dlbench(["table", str(run_dir), "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    header, formula, plain = rows[0], *sorted(rows[1:], key=lambda r: r[0] != "'=1+2")
    assert header[:5] == ["bench", "'@cmd", "lr", "shift", "note"]
    assert formula[:5] == ["'=1+2", "'+SUM(A1)", "-0.5", "-3", "'-x|calc"]  # numbers stay
    assert plain[:5] == ["plain", "'=A1", "1.5", "4", "ok"]
    assert all(not cell.startswith(("=", "+", "@")) for row in rows for cell in row)


# -- item 14: a terminal that cannot show a name ---------------------------------------------


def _ascii_env() -> dict[str, str]:
    return {**child_env(), "PYTHONIOENCODING": "ascii"}


def test_dlbench_report_on_an_ascii_terminal_escapes_a_unicode_name(tmp_path: Path) -> None:
    from _runs import write_run

    run_dir = tmp_path / "run"
    write_run(run_dir, "bé€nch")
    write_run(run_dir, "ok")
    (run_dir / "not-a-run").write_text("é")
    result = subprocess.run([sys.executable, "-m", "pytest_dlbench.cli", "report", str(run_dir)],
                            capture_output=True, timeout=120, env=_ascii_env())
    assert result.returncode == 0, result.stderr.decode("ascii", "replace")[-2000:]
    out = result.stdout.decode("ascii")  # only ASCII came out
    assert "b\\xe9\\u20acnch" in out and "score:" in out


def test_tolerant_output_escapes_what_the_encoding_cannot_hold() -> None:
    code = ("import sys; from pytest_dlbench.report.console import tolerant_output; "
            "tolerant_output(); print('bé€nch'); print('é', file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                            env=_ascii_env())
    assert result.returncode == 0
    assert (result.stdout, result.stderr) == (b"b\\xe9\\u20acnch\n", b"\\xe9\n")


@pytest.mark.slow
def test_pytest_on_an_ascii_terminal_reports_a_unicode_benchmark(tmp_path: Path) -> None:
    (tmp_path / "u.py").write_text(
        "def main(bench):\n    print('sortie é€')\n    raise RuntimeError('échec €')\n")
    (tmp_path / "s.yaml").write_text('"bé€nch": {definition: u.py:main}\n')
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--bench-suite=s.yaml",
         "--bench-base=out", "--bench-save=out/s.json"],
        cwd=tmp_path, capture_output=True, timeout=300, env=_ascii_env())
    out = result.stdout.decode("ascii") + result.stderr.decode("ascii")
    assert result.returncode == 1, out[-3000:]  # the benchmark failed; nothing else did
    assert "RuntimeError: \\xe9chec \\u20ac" in out and "summary saved" in out
    saved = json.loads((tmp_path / "out" / "s.json").read_text())
    assert list(saved["benchmarks"]) == ["bé€nch"]


# -- item 14: a benchmark that kills the fork server --------------------------------------------


@pytest.mark.slow  # real processes: a fork server and its child
def test_a_dead_fork_server_is_said_not_taken_for_out_of_memory(tmp_path: Path) -> None:
    from pytest_dlbench.measure.stream import read_stream
    from pytest_dlbench.run.child import run_child
    from pytest_dlbench.run.forkserver import ForkServer

    where = tmp_path / "probe"
    where.mkdir()
    (where / "test_kill.py").write_text(
        "import os, signal, time\n\ndef test_kill():\n"
        "    print('FORKED', os.getppid(), flush=True)\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n    time.sleep(60)\n")
    server = ForkServer(cwd=tmp_path, env=child_env(), preload=["pytest"])
    server.start()
    try:
        stream = tmp_path / "b.data"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "test_kill.py"]
        outcome = run_child(cmd, stream=stream, log=tmp_path / "b.log", timeout=60, cwd=where,
                            env=child_env(), server=server)
        assert server.ready is not None
        assert f"FORKED {server.ready['pid']}" in (tmp_path / "b.log").read_text()
    finally:
        server.close()
    assert outcome.status == "crash"
    assert outcome.reason == ("crash: the warm launcher (its fork server) was killed by SIGKILL, "
                              "and the benchmark with it")
    assert "memory" not in outcome.reason
    (end,) = [r for r in read_stream(stream) if r["event"] == "end"]
    assert end["reason"] == outcome.reason


# -- item 14: the worktree a SIGKILLed --bench-against left ---------------------------------------


def test_a_killed_sessions_worktree_is_removed_at_the_next_start(tmp_path: Path) -> None:
    from pytest_dlbench.run.against import BaseSide

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "s.yaml").write_text(f"a: {{definition: {TOY}}}\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    # A session SIGKILLed while its worktree is there: nothing removed it.
    code = ("import os, sys; from pathlib import Path; "
            "from pytest_dlbench.run.against import BaseSide; "
            "side = BaseSide.create('main', Path(sys.argv[1])); "
            "print(side.path, flush=True); os.kill(os.getpid(), 9)")
    killed = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                            text=True, timeout=60, env=child_env())
    assert killed.returncode == -9, killed.stderr
    left = Path(killed.stdout.strip())
    assert left.is_dir() and worktree_paths(repo) == [left]
    git(repo, "worktree", "prune")  # what the docs said: it does not clear it
    assert left.is_dir() and worktree_paths(repo) == [left]
    # A live session's worktree (this process's) is left alone.
    live = BaseSide.create("main", repo)
    try:
        assert live.notes == [f"removed {left}, a worktree an earlier --bench-against left "
                              "(its session was killed)"]
        assert not left.exists() and worktree_paths(repo) == [live.path]
        other = BaseSide.create("main", repo)
        assert other.notes == [] and set(worktree_paths(repo)) == {live.path, other.path}
        other.remove()
    finally:
        live.remove()
    assert worktree_paths(repo) == [] and not live.path.exists()
