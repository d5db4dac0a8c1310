"""Resolving suites: include, entries, inherits, `*`, matrix, overrides, selection, system file."""

from __future__ import annotations

import os
import pickle
import textwrap
from pathlib import Path

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.suite import (
    BenchSpec,
    SuiteError,
    SuiteWarning,
    available_suites,
    find_suite,
    load_system,
    local_system,
    parse_override,
    resolve_suite,
    select_specs,
)
from pytest_dlbench.suite.merge import DELETE

SUITES = TESTS_DIR / "suites"
TOY = "pytest_dlbench.workloads.toy:main"


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# --- files and include ---------------------------------------------------------------------------


def test_include_is_depth_first_in_order_before_the_file() -> None:
    spec = resolve_suite(SUITES / "include" / "main.yaml")["trace"]
    assert spec.args == ("b", "a", "c", "main")
    assert spec.env == {
        "WHO": "a",  # the including file overrides its include
        "FIRST": "b",
        "MAIN": "main",  # main.yaml overrides everything it includes
        "LATER": "c",  # a later include overrides an earlier one
    }


def test_include_paths_are_relative_to_the_including_file() -> None:
    spec = resolve_suite(SUITES / "include" / "main.yaml")["from-c"]
    expected = (SUITES / "include" / "sub" / "bench" / "c.py").resolve()
    assert spec.definition == f"{expected}:main"


def test_include_cycle_names_the_files() -> None:
    with pytest.raises(SuiteError) as info:
        resolve_suite(SUITES / "cycle" / "x.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert "include cycle: x.yaml -> y.yaml -> z.yaml -> x.yaml" in message
    assert message.startswith(str((SUITES / "cycle" / "z.yaml").resolve()))


def test_a_file_including_itself(tmp_path: Path) -> None:
    path = write(tmp_path, "include: suite.yaml\n")
    with pytest.raises(SuiteError, match="include cycle: suite.yaml -> suite.yaml"):
        resolve_suite(path)


def test_diamond_include_is_not_a_cycle(tmp_path: Path) -> None:
    write(tmp_path, f"a:\n  definition: {TOY}\n", "d.yaml")
    write(tmp_path, "include: d.yaml\n", "b.yaml")
    write(tmp_path, "include: d.yaml\n", "c.yaml")
    path = write(tmp_path, "include: [b.yaml, c.yaml]\n")
    assert [s.name for s in resolve_suite(path).specs] == ["a"]


def test_missing_include_names_the_including_file(tmp_path: Path) -> None:
    path = write(tmp_path, "include: [nowhere.yaml]\n")
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    assert str(info.value).startswith(f"{path}: included file not found: ")
    assert "nowhere.yaml" in str(info.value)


def test_empty_file_is_an_empty_suite(tmp_path: Path) -> None:
    assert resolve_suite(write(tmp_path, "# nothing\n")).specs == []


# --- entries -------------------------------------------------------------------------------------


def test_templates_are_not_benchmarks_and_defaults_apply(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _private:
          definition: {TOY}
        public:
          inherits: _private
        """,
    )
    suite = resolve_suite(path)
    assert [s.name for s in suite.specs] == ["public"]
    spec = suite["public"]
    assert spec.enabled is True  # default true
    assert spec.weight == 0  # default 0
    assert spec.plan == {"method": "per_gpu"}
    assert spec.tags == ()
    assert spec.args == ()


def test_common_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        b:
          definition: {TOY}
          enabled: false
          weight: 2.5
          tags: [z, a]
          group: g
          plan: {{method: njobs, n: 4}}
          env: {{A: 1, B: x}}
          max_duration: 45
          voir: {{options: {{stop: 12, skip: 3}}}}
          validation: {{usage: {{gpu_load_threshold: 0.5, gpu_mem_threshold: 0.25}}}}
          something_else: {{kept: true}}
        """,
    )
    spec = resolve_suite(path)["b"]
    assert (spec.enabled, spec.weight, spec.tags, spec.group) == (False, 2.5, ("a", "z"), "g")
    assert spec.plan == {"method": "njobs", "n": 4}
    assert spec.env == {"A": "1", "B": "x"}
    assert (spec.max_duration, spec.stop, spec.skip) == (45, 12, 3)
    assert spec.validation == {"usage": {"gpu_load_threshold": 0.5, "gpu_mem_threshold": 0.25}}
    assert spec.to_dict()["something_else"] == {"kept": True}


def test_specs_are_frozen_and_picklable() -> None:
    spec = resolve_suite(SUITES / "everything" / "suite.yaml")["resnet50"]
    assert isinstance(spec, BenchSpec)
    with pytest.raises(AttributeError):
        spec.name = "x"  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(spec))
    assert again.definition == spec.definition and again.args == spec.args


def test_specs_do_not_share_mutable_state() -> None:
    suite = resolve_suite(SUITES / "everything" / "suite.yaml")
    a, b = suite["resnet50"], suite["resnet-big"]
    a.config["argv"]["--lr"] = 99
    assert b.config["argv"]["--lr"] == 0.1


# --- inherits and tags ---------------------------------------------------------------------------


def test_inherits_chain_and_tag_union(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _a:
          definition: {TOY}
          tags: [zeta, common]
          argv: {{--a: 1, --b: 1}}
        _b:
          inherits: _a
          tags: [beta, common]
          argv: {{--b: 2}}
        c:
          inherits: _b
          tags: [alpha]
          argv: {{--c: 3}}
        d:
          inherits: c
          argv: {{--a: 4}}
        """,
    )
    suite = resolve_suite(path)
    assert suite["c"].tags == ("alpha", "beta", "common", "zeta")
    assert suite["c"].args == ("--a", "1", "--b", "2", "--c", "3")
    assert suite["d"].tags == ("alpha", "beta", "common", "zeta")  # from a public benchmark
    assert suite["d"].args == ("--a", "4", "--b", "2", "--c", "3")


def test_child_append_extends_the_inherited_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _base:
          definition: {TOY}
          argv: [--a, "1"]
          tags: [x]
        child:
          inherits: _base
          argv:
            append: [--b, "2"]
          tags:
            append: [y]
        alone:
          definition: {TOY}
          argv:
            append: [--c]
        """,
    )
    suite = resolve_suite(path)
    assert suite["child"].args == ("--a", "1", "--b", "2")
    assert suite["child"].tags == ("x", "y")
    assert suite["alone"].argv == ["--c"]  # nothing to append to: the list itself


def test_child_list_replaces_the_inherited_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _base: {{definition: {TOY}, argv: [--a, "1"]}}
        child: {{inherits: _base, argv: [--b]}}
        """,
    )
    assert resolve_suite(path)["child"].args == ("--b",)


def test_inherit_clash_names_file_benchmark_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _base: {{definition: {TOY}, argv: {{--a: 1}}}}
        child: {{inherits: _base, argv: [--b]}}
        """,
    )
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    assert str(info.value) == f"{path}: child: key 'argv': cannot merge a list over a mapping"


def test_missing_parent_names_file_and_entry(tmp_path: Path) -> None:
    path = write(tmp_path, f"a:\n  definition: {TOY}\n  inherits: _nope\n")
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    assert str(info.value) == f"{path}: a: inherits '_nope', which is not defined"


def test_inheritance_cycle_names_the_cycle(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        a: {{inherits: b, definition: {TOY}}}
        b: {{inherits: c}}
        c: {{inherits: a}}
        """,
    )
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "inheritance cycle: a -> b -> c -> a" in message


def test_self_inheritance_is_a_cycle(tmp_path: Path) -> None:
    path = write(tmp_path, f"a: {{inherits: a, definition: {TOY}}}\n")
    with pytest.raises(SuiteError, match="inheritance cycle: a -> a"):
        resolve_suite(path)


def test_inherits_takes_one_name(tmp_path: Path) -> None:
    path = write(tmp_path, f"_x: {{}}\na: {{inherits: [_x], definition: {TOY}}}\n")
    with pytest.raises(SuiteError, match="a: 'inherits' takes one benchmark name"):
        resolve_suite(path)


# --- definition ----------------------------------------------------------------------------------


def test_definition_is_resolved_against_the_file_it_was_written_in(tmp_path: Path) -> None:
    write(tmp_path, "_t:\n  definition: ../code/bench.py:train\n", "sub/templates.yaml")
    path = write(
        tmp_path,
        """
        include: sub/templates.yaml
        _t:
          tags: [t]               # this file mentions _t last; the definition stays sub/'s
        a:
          inherits: _t
        b:
          definition: local.py    # a path without a function
        c:
          definition: pkg.module:fn
        """,
    )
    suite = resolve_suite(path)
    assert suite["a"].definition == f"{(tmp_path / 'code' / 'bench.py').resolve()}:train"
    assert suite["b"].definition == str((tmp_path / "local.py").resolve())
    assert suite["c"].definition == "pkg.module:fn"


def test_definition_in_a_matrix_job_of_an_included_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        m:
          matrix: {n: [1, 2]}
          job:
            name: 'm{n}'
            definition: bench.py:main
        """,
        "sub/m.yaml",
    )
    path = write(tmp_path, "include: sub/m.yaml\n")
    suite = resolve_suite(path)
    expected = f"{(tmp_path / 'sub' / 'bench.py').resolve()}:main"
    assert [s.definition for s in suite.specs] == [expected, expected]


def test_an_entry_without_definition_is_kept_and_noted(tmp_path: Path) -> None:
    # milabench keeps it and never selects it: the plugin deselects it, the resolver notes it.
    path = write(tmp_path, "a: {weight: 1}\nb: {enabled: false}\n")
    suite = resolve_suite(path)
    assert [(s.name, s.definition, s.enabled) for s in suite.specs] == [
        ("a", None, True), ("b", None, False),
    ]  # fmt: skip
    assert [w.split(": ", 2)[1:] for w in suite.warnings] == [
        ["a", "no 'definition', nothing to run: deselected (milabench never selects such an "
              "entry either)"],
    ]  # a disabled one is not run anyway: no note


# --- '*' -----------------------------------------------------------------------------------------


def test_star_is_merged_after_inheritance_and_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _base:
          definition: {TOY}
          max_duration: 100
        a:
          inherits: _base
          max_duration: 50
          voir: {{options: {{stop: 7}}}}
          argv: [--a]
        '*':
          max_duration: 20
          voir: {{options: {{skip: 1}}}}
          argv:
            append: [--star]
        """,
    )
    spec = resolve_suite(path)["a"]
    assert spec.max_duration == 20  # overrides the explicit 50
    assert (spec.stop, spec.skip) == (7, 1)  # mappings merge
    assert spec.args == ("--a", "--star")
    assert "*" not in [s.name for s in resolve_suite(path).specs]


# --- matrix --------------------------------------------------------------------------------------


def test_matrix_expansion(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _r:
          definition: {TOY}
          argv: {{--lr: 0.1}}
        before: {{definition: {TOY}}}
        m:
          matrix:
            bs: [1, 2, 3]
            prec: [fp32, bf16]
            opt: adamw
            seed: 7
          job:
            name: 'r-{{bs}}-{{prec}}-{{opt}}-{{seed}}'
            inherits: _r
            tags: [m]
            argv:
              --bs: '{{bs}}'
              --tag: '{{prec}}/{{cpu_count}}'
              --n: 5
              --dflt: '{{seed}}'
          weight: 1
          tags: [ignored]
        after: {{definition: {TOY}}}
        """,
    )
    suite = resolve_suite(path)
    names = [s.name for s in suite.specs]
    jobs = [f"r-{bs}-{p}-adamw-7" for p in ("fp32", "bf16") for bs in (1, 2, 3)]
    assert names == ["before", *jobs, "after"]
    spec = suite["r-2-bf16-adamw-7"]
    assert spec.argv == {
        "--lr": 0.1,
        "--bs": "2",
        "--tag": "bf16/{cpu_count}",
        "--n": 5,
        "--dflt": "7",
    }
    assert spec.args == ("--lr", "0.1", "--bs", "2", "--tag", "bf16/{cpu_count}", "--n", "5",
                         "--dflt", "7")  # fmt: skip
    assert spec.weight == 0 and spec.tags == ("m",)
    assert spec.to_dict()["matrix"] == {"bs": 2, "prec": "bf16", "opt": "adamw", "seed": 7}
    assert suite.warnings == [
        f"{path}: m: keys of a matrix entry other than matrix and job are ignored: tags, weight"
    ]


def test_matrix_warning_can_be_emitted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"m:\n  matrix: {{k: [1]}}\n  job: {{name: 'j{{k}}', definition: {TOY}}}\n  x: 1\n",
    )
    with pytest.warns(SuiteWarning, match="ignored: x"):
        resolve_suite(path, emit_warnings=True)


def test_matrix_list_argv_and_append(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        _base: {{definition: {TOY}, argv: [--base]}}
        m:
          matrix: {{k: [a, b]}}
          job:
            name: 'j-{{k}}'
            inherits: _base
            argv:
              append: ['--k={{k}}']
        l:
          matrix: {{k: [1]}}
          job:
            name: 'l-{{k}}'
            definition: {TOY}
            argv: ['--k', '{{k}}', 3]
        n:
          matrix: {{k: [2]}}
          job:
            name: 'n-{{k}}'
            definition: {TOY}
            argv: {{--sizes: ['{{k}}', 4, 'x{{k}}']}}
        """,
    )
    suite = resolve_suite(path)
    assert suite["j-b"].args == ("--base", "--k=b")
    assert suite["l-1"].argv == ["--k", "1", 3]
    assert suite["n-2"].args == ("--sizes", "2,4,x2")  # strings inside a list value too


def test_matrix_is_expanded_after_all_layers(tmp_path: Path) -> None:
    write(
        tmp_path,
        f"m:\n  matrix: {{k: [1, 2]}}\n  job: {{name: 'j{{k}}', definition: {TOY}}}\n",
        "base.yaml",
    )
    path = write(tmp_path, "include: base.yaml\nm:\n  matrix: {k: [3]}\n")
    assert [s.name for s in resolve_suite(path).specs] == ["j3"]


def test_matrix_job_name_clashes_with_an_entry(tmp_path: Path) -> None:
    write(tmp_path, f"resnet50-bs64:\n  definition: {TOY}\n", "base.yaml")
    path = write(
        tmp_path,
        f"""
        include: base.yaml
        m:
          matrix: {{bs: [32, 64]}}
          job: {{name: 'resnet50-bs{{bs}}', definition: {TOY}}}
        """,
    )
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("resnet50-bs64: duplicate benchmark name")
    assert str(tmp_path / "base.yaml") in message
    assert f"{path} (matrix 'm')" in message


def test_two_matrix_jobs_with_one_name(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"m:\n  matrix: {{k: [1, 2]}}\n  job: {{name: same, definition: {TOY}}}\n",
    )
    with pytest.raises(SuiteError, match="same: duplicate benchmark name"):
        resolve_suite(path)


@pytest.mark.parametrize(
    "entry",
    [
        "m: {matrix: [1, 2], job: {name: x}}",
        "m: {matrix: {}, job: {name: x}}",
        "m: {matrix: {k: [1]}}",
        "m: {matrix: {k: [1]}, job: {definition: x}}",
    ],
)
def test_malformed_matrix(tmp_path: Path, entry: str) -> None:
    path = write(tmp_path, entry + "\n")
    with pytest.raises(SuiteError) as info:
        resolve_suite(path)
    assert str(info.value).startswith(f"{path}: m: ")


# --- misspelled keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "closest"),
    [
        ("weigth", "weight"),
        ("enable", "enabled"),
        ("defintion", "definition"),
        ("tag", "tags"),
        ("max_duraton", "max_duration"),
        ("inherit", "inherits"),
    ],
)
def test_misspelled_key_warns_with_the_closest(tmp_path: Path, key: str, closest: str) -> None:
    path = write(tmp_path, f"b:\n  definition: {TOY}\n  {key}: 1\n")
    suite = resolve_suite(path)
    assert suite.warnings == [f"{path}: b: unknown key '{key}', did you mean '{closest}'?"]
    assert suite["b"].to_dict()[key] == 1  # kept and shown


def test_misspelled_nested_key_warns(tmp_path: Path) -> None:
    path = write(tmp_path, f"b:\n  definition: {TOY}\n  voir: {{options: {{stpo: 3}}}}\n")
    (warning,) = resolve_suite(path).warnings
    assert "'voir.options.stpo'" in warning and "'stop'" in warning


def test_unknown_keys_far_from_any_known_key_are_quiet(tmp_path: Path) -> None:
    path = write(tmp_path, f"b:\n  definition: {TOY}\n  my_own_setting: 1\n")
    assert resolve_suite(path).warnings == []


# --- --bench-override --------------------------------------------------------------------------


OVERRIDE_SUITE = f"""
_template:
  definition: {TOY}
  argv:
    --batch-size: 8
    --lr: 0.1
resnet50:
  inherits: _template
  argv:
    --model: resnet50
vit:
  inherits: _template
  voir: {{options: {{stop: 40}}}}
"""


def test_override_a_benchmark(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    suite = resolve_suite(path, overrides=["resnet50.argv.--batch-size=32"])
    assert suite["resnet50"].argv["--batch-size"] == 32  # a YAML value: a number
    assert suite["resnet50"].args == ("--batch-size", "32", "--lr", "0.1", "--model", "resnet50")
    assert suite["vit"].argv["--batch-size"] == 8


def test_override_every_benchmark(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    suite = resolve_suite(path, overrides=["*.voir.options.stop=10"])
    assert [s.stop for s in suite.specs] == [10, 10]


def test_override_a_template_before_inheritance(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    suite = resolve_suite(path, overrides=["_template.argv.--lr=0.5"])
    assert [s.argv["--lr"] for s in suite.specs] == [0.5, 0.5]


def test_override_is_the_last_layer(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE + "'*': {voir: {options: {stop: 99}}}\n")
    suite = resolve_suite(path, overrides=["vit.voir.options.stop=3"])
    assert (suite["resnet50"].stop, suite["vit"].stop) == (99, 3)


def test_override_null_and_delete(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    suite = resolve_suite(
        path, overrides=["resnet50.argv.--lr=null", "vit.argv.--lr=!delete", "vit.argv.--x="]
    )
    assert suite["resnet50"].argv["--lr"] is None
    assert suite["resnet50"].args == ("--batch-size", "8", "--model", "resnet50")
    assert "--lr" not in suite["vit"].argv
    assert suite["vit"].argv["--x"] is None


def test_override_values_are_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    suite = resolve_suite(
        path,
        overrides=[
            "vit.tags=[a, b]",
            "vit.argv.--name=x=y",
            "vit.env.A='007'",
            "vit.plan={method: njobs, n: 2}",
        ],
    )
    spec = suite["vit"]
    assert spec.tags == ("a", "b")
    assert spec.argv["--name"] == "x=y"
    assert spec.env == {"A": "007"}
    assert spec.plan == {"method": "njobs", "n": 2}


def test_parse_override() -> None:
    assert parse_override("resnet50.argv.--batch-size=32") == (
        ["resnet50", "argv", "--batch-size"],
        32,
    )
    assert parse_override("*.x=!delete") == (["*", "x"], DELETE)


@pytest.mark.parametrize("text", ["resnet50", "resnet50=3", ".a=1", "a..b=1", "=1"])
def test_malformed_override(text: str) -> None:
    with pytest.raises(SuiteError) as info:
        parse_override(text)
    assert "\n" not in str(info.value) and "--bench-override" in str(info.value)


def test_override_of_an_unknown_benchmark_or_template(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    with pytest.raises(SuiteError) as info:
        resolve_suite(path, overrides=["resnet5.argv.--lr=1"])
    assert str(info.value) == (
        f"{path}: --bench-override 'resnet5.argv.--lr=1': no benchmark named 'resnet5'"
    )
    with pytest.raises(SuiteError, match="no template named '_nope'"):
        resolve_suite(path, overrides=["_nope.argv.--lr=1"])


def test_override_clash_names_the_option(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE_SUITE)
    with pytest.raises(SuiteError) as info:
        resolve_suite(path, overrides=["vit.argv=[a]"])  # a list over the argv mapping
    assert str(info.value) == (
        f"{path}: vit: --bench-override 'vit.argv=[a]': key 'argv': "
        "cannot merge a list over a mapping"
    )


# --- selection -----------------------------------------------------------------------------------


SELECT_SUITE = f"""
a: {{definition: {TOY}, group: vision, tags: [resnet, convnet]}}
b: {{definition: {TOY}, group: vision, tags: [vit]}}
c: {{definition: {TOY}, group: nlp, tags: [transformer]}}
d: {{definition: {TOY}, tags: [transformer, vit]}}
"""


@pytest.mark.parametrize(
    ("select", "exclude", "expected"),
    [
        ([], [], ["a", "b", "c", "d"]),
        (["a"], [], ["a"]),  # by name
        (["vision"], [], ["a", "b"]),  # by group
        (["vit"], [], ["b", "d"]),  # by tag
        (["a,c"], [], ["a", "c"]),  # comma-separated
        (["a", "c"], [], ["a", "c"]),  # repeated
        ([" a , nlp "], [], ["a", "c"]),
        ([], ["vision"], ["c", "d"]),  # exclude
        (["transformer"], ["nlp"], ["d"]),
        (["vit"], ["b,d"], []),
        (["nothing"], [], []),
    ],
)
def test_select_specs(tmp_path: Path, select: list, exclude: list, expected: list) -> None:
    specs = resolve_suite(write(tmp_path, SELECT_SUITE)).specs
    assert [s.name for s in select_specs(specs, select, exclude)] == expected


# --- system file ---------------------------------------------------------------------------------


def test_load_system(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        system:
          arch: cuda
          sshkey: ~/.ssh/id_ed25519
          nodes:
            - name: manager
              ip: 192.168.11.11
              port: 5000
              main: true
              user: manager
            - name: worker
              ip: 192.168.11.12
              user: worker
        """,
        "system.yaml",
    )
    system = load_system(path)
    assert system.arch == "cuda"
    assert [n.name for n in system.nodes] == ["manager", "worker"]
    assert system.main_node.name == "manager"
    assert (system.nodes[0].port, system.nodes[0].user) == (5000, "manager")
    assert system.nodes[1].port is None and system.nodes[1].main is False
    placeholders = system.placeholders()
    assert placeholders["sshkey"] == "~/.ssh/id_ed25519"
    assert placeholders["arch"] == "cuda"
    assert "nodes" in placeholders


def test_system_without_nodes_is_one_local_node(tmp_path: Path) -> None:
    system = load_system(write(tmp_path, "system:\n  arch: cpu\n", "system.yaml"))
    assert len(system.nodes) == 1 and system.main_node.main
    assert local_system().nodes[0].main


def test_main_node_defaults_to_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path, "system:\n  nodes: [{name: a, ip: 1.1.1.1}, {name: b, ip: 1.1.1.2}]\n", "s.yaml"
    )
    assert load_system(path).main_node.name == "a"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nodes: []\n", "top-level 'system:'"),
        ("system: 3\n", "top-level 'system:'"),
        ("system:\n  nodes: {a: 1}\n", "must be a list"),
        ("system:\n  nodes: [{name: a}]\n", "node #1 needs at least 'ip'"),
        ("system:\n  nodes: [{name: a, ip: x, port: http}]\n", "'port' must be an integer"),
        ("system:\n  nodes: [{ip: x, main: true}, {ip: y, main: true}]\n", "more than one"),
        ("system:\n  nodes: [\n", "YAML syntax error"),
    ],
)
def test_system_errors_name_the_file(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text, "system.yaml")
    with pytest.raises(SuiteError) as info:
        load_system(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)) and needle in message


def test_missing_system_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="system file not found"):
        load_system(tmp_path / "nope.yaml")


# --- finding suites ------------------------------------------------------------------------------


def test_find_suite_by_name_in_the_working_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, f"a: {{definition: {TOY}}}\n", "bench_suites/mine.yaml")
    monkeypatch.chdir(tmp_path)
    assert find_suite("mine") == (tmp_path / "bench_suites" / "mine.yaml").resolve()
    assert "mine" in available_suites([tmp_path / "bench_suites"])


def test_find_suite_shipped_with_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_suite("smoke").name == "smoke.yaml"


def test_find_suite_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, f"a: {{definition: {TOY}}}\n", "dir/x.yaml")
    monkeypatch.chdir(tmp_path)
    assert find_suite("dir/x.yaml") == path.resolve()
    assert find_suite(str(path)) == path.resolve()


def test_unknown_suite_lists_the_available_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "{}\n", "bench_suites/mine.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SuiteError) as info:
        find_suite("standrad")
    message = str(info.value)
    assert "\n" not in message
    # The close name first (issue 41 item 4: "tni" with no "did you mean 'tiny'").
    assert message.startswith("unknown suite 'standrad' (did you mean 'standard'?); "
                              "available suites: ")
    listed = message.split("available suites: ", 1)[1].split(", ")
    assert "mine" in listed and "smoke" in listed
    with pytest.raises(SuiteError, match=r"^unknown suite 'zzqx'; available suites: "):
        find_suite("zzqx")  # nothing close: no guess


def test_resolved_suite_name_and_path() -> None:
    path = SUITES / "include" / "main.yaml"
    suite = resolve_suite(os.path.relpath(path))
    assert suite.name == "main" and suite.path == path.resolve()
    with pytest.raises(KeyError):
        suite["nope"]


def test_override_of_a_benchmark_whose_name_has_dots(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "_base: {definition: 'm:f', argv: {--batch-size: 16}}\n"
        "ddp.scaling.1: {inherits: _base}\n"
        "ddp.scaling.2: {inherits: _base}\n"
    )
    resolved = resolve_suite(suite, ["ddp.scaling.2.argv.--batch-size=4"])
    assert resolved["ddp.scaling.2"].args == ("--batch-size", "4")
    assert resolved["ddp.scaling.1"].args == ("--batch-size", "16")


# --- layers --------------------------------------------------------------------------------------


def test_resolving_imports_nothing_above_the_suite(tmp_path: Path) -> None:
    """Resolving a suite (the controller, before anything runs) checks an external command's
    parser and the monitor's interval with the suite's own modules: it loads no measurement
    code (docs/architecture.md: suite/ stands on the contracts only)."""
    import subprocess
    import sys

    path = write(tmp_path, """
        ttt:
          voir: {options: {interval: 500ms}}
          definition:
            command: [python, train.py]
            parser: {regex: 'step (?P<seconds>\\d+\\.\\d+)s', items_per_step: 8}
        clip:
          definition: {command: [python, train.py], parser: open_clip}
        """)
    probe = textwrap.dedent(f"""
        import sys
        from pytest_dlbench.suite import resolve_suite
        resolve_suite({str(path)!r})
        loaded = sorted(m for m in sys.modules if m.startswith("pytest_dlbench.")
                        and not m.startswith(("pytest_dlbench.suite", "pytest_dlbench.core")))
        print(loaded)
        """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_a_bad_parser_or_interval_still_fails_the_suite(tmp_path: Path) -> None:
    """What the suite's modules check is what the runner and the monitor use."""
    bad_parser = write(tmp_path, """
        ttt:
          definition: {command: [python, train.py], parser: {regex: 'no groups'}}
        """, "parser.yaml")
    with pytest.raises(SuiteError, match="needs a named group"):
        resolve_suite(bad_parser)
    bad_interval = write(tmp_path, """
        toy:
          definition: pytest_dlbench.workloads.toy:main
          voir: {options: {interval: 1ms}}
        """, "interval.yaml")
    with pytest.raises(SuiteError, match="interval must be at least 10 ms"):
        resolve_suite(bad_interval)
