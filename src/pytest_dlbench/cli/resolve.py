"""``dlbench resolve SUITE``: what a suite resolves to, every benchmark and its arguments
(docs/suites.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_dlbench.cli.common import short_flag
from pytest_dlbench.core.numbers import printable_lines
from pytest_dlbench.layout import DATA, results_base
from pytest_dlbench.options import SUITE_OPTIONS

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    resolve = commands.add_parser(
        "resolve", help="print what a suite resolves to (every benchmark, its args)"
    )
    resolve.add_argument("suite", metavar="SUITE", help="a suite name or a path to a YAML file")
    resolve.add_argument("--json", action="store_true", help="machine-readable, keyed by name")
    resolve.add_argument(
        "--launch", action="store_true", help="also show args with launch-time placeholders filled"
    )
    resolve.add_argument(
        "--bench-base", metavar="DIR", dest="bench_base",
        help="the base folder a run would use (its data/ is {data} at launch), as pytest's",
    )
    _add_suite_options(resolve)
    resolve.set_defaults(handler=run)
    return resolve


def _add_suite_options(parser: argparse.ArgumentParser) -> None:
    for flag, kwargs in SUITE_OPTIONS:
        parser.add_argument(flag, short_flag(flag), dest=flag[2:].replace("-", "_"), **kwargs)


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.run.devices import placeholder_context
    from pytest_dlbench.suite import fill_all, find_suite, load_system, resolve_suite, select_specs

    suite = resolve_suite(find_suite(args.suite), args.bench_override)
    for note in suite.warnings:
        print(f"warning: {note}", file=sys.stderr)
    specs = select_specs(suite.specs, args.bench_select, args.bench_exclude)
    system = load_system(args.bench_system) if args.bench_system else None  # checked either way
    # The data folder of a run started here ({data}, {milabench_data}, MILABENCH_DIR_DATA):
    # --bench-base, else $DLBENCH_BASE, else .dlbench, as pytest's.
    data_dir = results_base(args.bench_base).resolve() / DATA

    def launch_args(spec: Any) -> list[str]:
        context = placeholder_context(system=system, bench_name=spec.name, data_dir=data_dir)
        return fill_all(spec.args, context)

    if args.json:
        # default=str: unknown keys are shown as written, YAML dates included.
        shown = {s.name: s.to_dict() for s in specs}
        if args.launch:
            for spec in specs:
                shown[spec.name]["launch_args"] = launch_args(spec)
                shown[spec.name]["launch_data"] = str(data_dir)
        print(json.dumps(shown, indent=2, default=str))
        return 0

    def show(text: str = "") -> None:  # names and args from a YAML file: shown, not obeyed
        print(printable_lines(text))

    plural = "" if len(specs) == 1 else "s"
    show(f"suite {suite.name} ({suite.path}): {len(specs)} benchmark{plural}")
    for spec in specs:
        state = "" if spec.enabled else "  [disabled]"
        if spec.enabled and spec.definition is None:
            state = "  [no definition: deselected]"
        show(f"\n{spec.name}{state}")
        show(f"  definition  {spec.definition}")
        show(f"  tags        {', '.join(spec.tags) or '-'}")
        show(f"  weight      {spec.weight:g}    plan {spec.plan}")
        show(f"  skip/stop   {spec.skip}/{spec.stop}    max_duration {spec.max_duration:g} s")
        if spec.metric:
            show(f"  metric      {spec.metric}")
        if spec.command:
            parser = spec.command["parser"]
            show(f"  parser      {parser if isinstance(parser, str) else parser.get('regex')}")
            if spec.command.get("prepare"):
                show(f"  prepare     {spec.command['prepare']}")
            # Where the command runs (a voir folder: the folder) and, at launch, its data folder.
            show(f"  cwd         {spec.command.get('cwd') or '{workdir} (the run work folder)'}")
            if args.launch:
                show(f"  data        {data_dir}")
        if spec.env:
            show(f"  env         {spec.env}")
        needs = spec.config.get("requires_capabilities")
        if needs or spec.config.get("num_machines"):
            show(f"  requires    {needs or '-'}    num_machines "
                  f"{spec.config.get('num_machines') or '-'}")
        show(f"  args        {' '.join(spec.args)}")
        if args.launch:
            show(f"  at launch   {' '.join(launch_args(spec))}")
    return 0
