"""``--bench-autosave``'s history folder is checked before anything runs, as the other outputs
are (issue 40 item 12): a folder that cannot hold the entry is exit status 4 and one line naming
the path, not a whole suite run and then exit status 8."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dlbench.report.outputs import history_problem

SUITE = "a: {definition: pytest_dlbench.workloads.toy:main}"


def _refused(result: pytest.RunResult, path: Path) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.errlines
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors
    assert str(path) in errors[0]
    return errors[0]


def test_a_machine_folder_that_is_a_file_is_named(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "box")  # this machine's id (results/history/records.py)
    pytester.makefile(".yaml", s=SUITE)
    history = pytester.path / "h"
    history.mkdir()
    (history / "box").write_text("")
    result = pytester.runpytest("--bench-suite=s.yaml", f"--bench-autosave={history}",
                                "--bench-base=out")
    line = _refused(result, history / "box")
    assert line == (f"ERROR: --bench-autosave: {history / 'box'} is not a directory (this "
                    "machine's folder of the history)")
    assert not list(pytester.path.glob("**/*.data"))  # nothing ran


def test_the_default_folder_under_the_base_is_checked(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", s=SUITE)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "history").write_text("")  # <bench-base>/history, a file
    result = pytester.runpytest("--bench-suite=s.yaml", "--bench-autosave", "--bench-base=out")
    line = _refused(result, Path("out") / "history")
    assert line == "ERROR: --bench-autosave: out/history is not a directory"
    assert not list(pytester.path.glob("**/*.data"))


def test_a_good_folder_is_made_and_left_clean(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLBENCH_MACHINE", "box")
    assert history_problem(tmp_path / "a" / "h") is None
    assert (tmp_path / "a" / "h").is_dir() and not list((tmp_path / "a" / "h").iterdir())
    (tmp_path / "a" / "h" / "box").mkdir()
    assert history_problem(tmp_path / "a" / "h") is None  # the machine's folder, writable
    assert not list((tmp_path / "a" / "h" / "box").iterdir())  # the probe is removed


def test_dlbench_report_checks_the_run_bases_history_for_the_flag_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dlbench report RUN --autosave``: the history is ``<base>/history`` of the run's base,
    checked before the run is scored (exit status 4, one line), as pytest checks its own."""
    from _runs import write_run

    from pytest_dlbench.cli import main

    run = tmp_path / "out" / "runs" / "r.20261127-000000"
    run.mkdir(parents=True)
    write_run(run, "a")
    (tmp_path / "out" / "history").write_text("")  # a file where the folder goes
    assert main(["report", str(run), "--autosave"]) == 4
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"dlbench: error: --autosave: {tmp_path / 'out' / 'history'} is not a "
                   "directory"]
