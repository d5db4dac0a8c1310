"""`dlbench resolve`: the everything suite, checked field by field against suite-format.md.

The expected values below were written by hand from the reference page, not copied from the
program's output; each comment says which rule of the page gives the value.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.cli import main
from pytest_dlbench.suite import fill_all, resolve_suite

SUITES = TESTS_DIR / "suites"
EVERYTHING = (SUITES / "everything").resolve()
SUITE = EVERYTHING / "suite.yaml"

# definition: a relative path is resolved against the file in which it was written
# (models/vision.yaml for _torchvision, suite.yaml for _script).
TV_DEF = f"{EVERYTHING / 'benchmarks' / 'torchvision.py'}:main"
SCRIPT_DEF = f"{EVERYTHING / 'scripts' / 'run.py'}:main"
TOY = "pytest_dlbench.workloads.toy:main"

# _defaults' env: common.yaml gives ORIGIN=common, base.yaml (which includes common.yaml)
# overrides it with base and sets LAYER=base, then the later include models/vision.yaml sets
# LAYER=vision; '*' adds SUITE after inheritance.
DEFAULTS_ENV = {"ORIGIN": "base", "LAYER": "vision", "SUITE": "everything"}

# _torchvision's argv from base.yaml, with --lr overridden by suite.yaml; keys keep base's order.
TV_ARGV: dict[str, Any] = {
    "--precision": "tf32-fp16",
    "--lr": 0.1,
    "--no-stdout": True,
    "--epochs": 50,
    "--num-workers": 8,
}

RESNET50_ARGV: dict[str, Any] = {
    # the parent's keys first, in the parent's order; the child's values win...
    "--precision": "tf32-fp16",
    "--lr": 0.1,
    "--no-stdout": None,  # null overrides (and cancels the flag when rendered)
    "--epochs": 50,
    "--num-workers": "{cpu_per_gpu}",
    # ...then the child's new keys in the child's order.
    "--batch-size": 64,
    "train": True,
    "--layers": [1, 2, 3],
    "--": ["--extra", "x y"],
}

# Rendering: positionals first, then options in merged key order (null renders nothing, a list
# is comma-joined), then the `--` list as is. Placeholders are not filled yet.
RESNET50_ARGS = [
    "train",
    "--precision", "tf32-fp16",
    "--lr", "0.1",
    "--epochs", "50",
    "--num-workers", "{cpu_per_gpu}",
    "--batch-size", "64",
    "--layers", "1,2,3",
    "--extra", "x y",
]  # fmt: skip


def _matrix_job(bs: int, precision: str) -> dict[str, Any]:
    return {
        "name": f"resnet50-bs{bs}-{precision}-adamw",
        "definition": TV_DEF,
        "group": "torchvision",
        "tags": ["classification", "matrix", "vision"],  # the job's tags + _torchvision's
        "weight": 0,  # the matrix entry's `weight: 5` is ignored
        "enabled": True,
        "plan": {"method": "per_gpu"},
        "argv": {
            "--precision": precision,  # formatted: a string
            "--lr": 0.1,
            "--no-stdout": True,
            "--epochs": 3,  # not a string: left as the number it is
            "--num-workers": 8,
            "--batch-size": str(bs),  # formatted: a string
            "--optimizer": "adamw",
            "--data": "{data}/imagenet",  # not a matrix key: left for launch time
        },
        "env": DEFAULTS_ENV,
        "max_duration": 300,
        "stop": 30,
        "skip": 2,
        "args": [
            "--precision",
            precision,
            "--lr",
            "0.1",
            "--no-stdout",
            "--epochs",
            "3",
            "--num-workers",
            "8",
            "--batch-size",
            str(bs),
            "--optimizer",
            "adamw",
            "--data",
            "{data}/imagenet",
        ],  # fmt: skip
        "matrix": {"batch-size": bs, "precision": precision, "optim": "adamw"},
    }


EXPECTED: dict[str, dict[str, Any]] = {
    "resnet50": {
        "definition": TV_DEF,
        "group": "torchvision",
        # the sorted union along the chain resnet50 -> _torchvision -> _defaults
        "tags": ["classification", "convnet", "resnet", "vision"],
        "weight": 2,
        "enabled": True,
        "plan": {"method": "per_gpu"},
        "argv": RESNET50_ARGV,
        "env": DEFAULTS_ENV,  # OLD (base.yaml) is removed by `OLD: !delete` (suite.yaml)
        "max_duration": 300,  # common.yaml, through _defaults
        "stop": 30,  # suite.yaml's _defaults overrides common.yaml's 60
        "skip": 2,  # '*' (5 from _defaults)
        "args": RESNET50_ARGS,
        "install_group": "torch",  # other keys are kept and shown
        "inherits": "_torchvision",
        "validation": {"usage": {"gpu_load_threshold": 0.5, "gpu_mem_threshold": 0.5}},
        "voir": {"options": {"stop": 30, "skip": 2, "interval": "1s"}},
        "origin": str(SUITE),
    },
    "listy": {
        "definition": TOY,
        "group": None,
        "tags": [],
        "weight": 0,  # default
        "enabled": True,  # default
        "plan": {"method": "per_gpu"},
        "argv": ["--a", "1", "--b", 2],  # base.yaml's list + suite.yaml's {append: ...}
        "env": {"SUITE": "everything"},
        "max_duration": 600,
        "stop": 60,
        "skip": 2,
        "args": ["--a", "1", "--b", "2"],  # a list argv is used verbatim
    },
    "resnet-big": {
        "definition": TV_DEF,
        "group": "torchvision",
        "tags": ["big", "classification", "convnet", "resnet", "vision"],
        "weight": 2,  # from resnet50: `weigth` is not `weight`
        "weigth": 3,
        "custom": "hello",
        "enabled": True,
        "plan": {"method": "per_gpu"},
        "argv": {**RESNET50_ARGV, "--batch-size": 256, "--config": '{"k": 1}'},
        "env": DEFAULTS_ENV,
        "max_duration": 300,
        "stop": 30,
        "skip": 2,
        "args": [
            "train",
            "--precision",
            "tf32-fp16",
            "--lr",
            "0.1",
            "--epochs",
            "50",
            "--num-workers",
            "{cpu_per_gpu}",
            "--batch-size",
            "256",
            "--layers",
            "1,2,3",
            "--config",
            '{"k": 1}',
            "--extra",
            "x y",
        ],  # fmt: skip
        "inherits": "resnet50",
    },
    "scripted": {
        "definition": SCRIPT_DEF,
        "tags": [],
        "weight": 0,
        "enabled": True,
        "plan": {"method": "per_gpu"},
        "argv": ["--steps", 10, "--verbose"],  # the parent's list + the child's append
        "env": {"SUITE": "everything"},
        "max_duration": 600,
        "stop": 60,
        "skip": 2,
        "args": ["--steps", "10", "--verbose"],
    },
    "broken": {
        "definition": TOY,
        "enabled": False,  # disabled, still listed by the resolver
        "weight": 0,
        "tags": [],
        "argv": None,
        "args": [],
        "env": DEFAULTS_ENV,
        "max_duration": 300,
        "stop": 30,
        "skip": 2,
    },
    "lm-ddp": {
        "definition": "pytest_dlbench.workloads.lm:train",
        "group": "lm",
        "tags": ["nlp"],
        "weight": 0,
        "enabled": True,
        "plan": {"method": "njobs", "n": 2},
        "argv": {"--seq-len": 128},
        "args": ["--seq-len", "128"],
        "env": DEFAULTS_ENV,
        "max_duration": 90,
        "stop": 30,
        "skip": 2,  # '*' overrides the explicit 9
    },
    # The matrix entry's place, first key (batch-size) fastest.
    **{
        job["name"]: job
        for job in (
            _matrix_job(32, "fp32"),
            _matrix_job(64, "fp32"),
            _matrix_job(32, "bf16"),
            _matrix_job(64, "bf16"),
        )
    },
}


@pytest.fixture(scope="module")
def resolved_json() -> tuple[dict[str, Any], str]:
    # Module-scoped (capsys is function-scoped): resolve once for all the field checks.
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["resolve", str(SUITE), "--json"])
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue()), err.getvalue()


def test_everything_names_in_merged_key_order(resolved_json: tuple[dict, str]) -> None:
    data, _ = resolved_json
    # Templates (_defaults, _torchvision, _script) and '*' never appear, `obsolete` was deleted,
    # entries keep the order in which the layers first gave them, jobs replace their matrix.
    assert list(data) == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_everything_fields(resolved_json: tuple[dict, str], name: str) -> None:
    data, _ = resolved_json
    got = data[name]
    assert got["name"] == name
    for key, expected in EXPECTED[name].items():
        assert got[key] == expected, f"{name}.{key}"
        if key == "argv" and isinstance(expected, dict):
            assert list(got[key]) == list(expected), f"{name}.argv key order"
    if "matrix" not in EXPECTED[name]:
        assert "matrix" not in got


def test_everything_matrix_values_are_strings(resolved_json: tuple[dict, str]) -> None:
    data, _ = resolved_json
    job = data["resnet50-bs64-bf16-adamw"]
    assert isinstance(job["argv"]["--batch-size"], str)
    assert isinstance(job["argv"]["--epochs"], int)
    assert "weight" not in job["matrix"]


def test_everything_warnings(resolved_json: tuple[dict, str]) -> None:
    _, err = resolved_json
    lines = err.strip().splitlines()
    assert len(lines) == 3, err
    assert any(
        str(SUITE) in line and "resnet-big" in line and "'weigth'" in line and "'weight'" in line
        for line in lines
    )
    assert any("resnet-matrix" in line and "ignored: weight" in line for line in lines)
    # milabench's install_group (base.yaml's _torchvision): one line for the suite, not one per
    # benchmark that inherits it.
    assert any("'install_group' (in 6 benchmarks) has no effect here" in line for line in lines)


def test_everything_python_api_matches_json(resolved_json: tuple[dict, str]) -> None:
    data, _ = resolved_json
    suite = resolve_suite(SUITE)
    assert [s.name for s in suite.specs] == list(data)
    assert [s.name for s in suite.disabled] == ["broken"]
    assert suite["resnet50"].args == tuple(RESNET50_ARGS)
    assert len(suite.warnings) == 3


def test_everything_args_at_launch() -> None:
    suite = resolve_suite(SUITE)
    context = {"cpu_per_gpu": 4, "data": "/data", "n_worker": 4}
    assert fill_all(suite["resnet50"].args, context)[8] == "4"
    big = fill_all(suite["resnet-big"].args, context)
    assert big[big.index("--config") + 1] == '{"k": 1}'  # JSON text is left unchanged
    job = fill_all(suite["resnet50-bs32-fp32-adamw"].args, context)
    assert job[-1] == "/data/imagenet"


def test_resolve_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", str(SUITE)]) == 0
    out = capsys.readouterr().out
    assert "10 benchmarks" in out
    assert "broken  [disabled]" in out
    assert "args        train --precision tf32-fp16" in out


def test_resolve_launch_fills_placeholders(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", str(SUITE), "--launch", "--bench-select", "resnet50"]) == 0
    out = capsys.readouterr().out
    launch = [line for line in out.splitlines() if "at launch" in line]
    assert len(launch) == 1
    assert "{cpu_per_gpu}" not in launch[0]


def test_resolve_with_options(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "resolve", str(SUITE), "--json",
        "--bench-select", "vision,nlp", "--bench-exclude", "matrix",
        "--bench-override", "resnet50.argv.--batch-size=32",
        "--bench-override", "*.voir.options.stop=10",
    ]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["resnet50", "resnet-big", "lm-ddp"]
    assert data["resnet50"]["argv"]["--batch-size"] == 32
    assert data["resnet-big"]["argv"]["--batch-size"] == 256  # the override is the last layer
    assert {d["stop"] for d in data.values()} == {10}


def test_resolve_named_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "smoke", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "toy" in data


@pytest.mark.parametrize(
    ("suite", "needle"),
    [
        ("no-such-suite", "available suites:"),
        ("missing/file.yaml", "missing/file.yaml: suite file not found"),
    ],
)
def test_resolve_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], suite: str, needle: str
) -> None:
    assert main(["resolve", suite]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("dlbench: error: ")
    assert needle in err


def test_resolve_suite_error_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a:\n  definition: x:y\n  argv:\n    --flag: false\n")
    assert main(["resolve", str(bad), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"dlbench: error: {bad}: a: argv '--flag' is false: "
        "use null to cancel an option, not false\n"
    )


def test_resolve_json_shows_odd_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Unknown keys are kept and shown, whatever YAML made of them (here a date).
    suite = tmp_path / "dates.yaml"
    suite.write_text(f"a:\n  definition: {TOY}\n  released: 2024-05-01\n")
    assert main(["resolve", str(suite), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["a"]["released"] == "2024-05-01"


def test_false_in_the_everything_suite(capsys: pytest.CaptureFixture[str]) -> None:
    # The one row of the argv table that cannot be in a suite that resolves.
    argv = ["resolve", str(SUITE), "--bench-override", "resnet50.argv.--fast=false"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"dlbench: error: {SUITE}: resnet50: argv '--fast' is false: "
        "use null to cancel an option, not false\n"
    )
