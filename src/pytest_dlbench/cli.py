"""The ``dlbench`` command: look at suites (and, later, reports) without running pytest."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import DlbenchError
from .options import SUITE_OPTIONS

__all__ = ["main"]


def _add_suite_options(parser: argparse.ArgumentParser) -> None:
    for flag, kwargs in SUITE_OPTIONS:
        parser.add_argument(flag, **kwargs)


def _cmd_resolve(args: argparse.Namespace) -> int:
    from .devices import placeholder_context
    from .suite import fill_all, find_suite, load_system, resolve_suite, select_specs

    suite = resolve_suite(find_suite(args.suite), args.bench_override)
    for note in suite.warnings:
        print(f"warning: {note}", file=sys.stderr)
    specs = select_specs(suite.specs, args.bench_select, args.bench_exclude)
    system = load_system(args.bench_system) if args.bench_system else None  # checked either way
    if args.json:
        # default=str: unknown keys are shown as written, YAML dates included.
        print(json.dumps({s.name: s.to_dict() for s in specs}, indent=2, default=str))
        return 0
    plural = "" if len(specs) == 1 else "s"
    print(f"suite {suite.name} ({suite.path}): {len(specs)} benchmark{plural}")
    for spec in specs:
        state = "" if spec.enabled else "  [disabled]"
        print(f"\n{spec.name}{state}")
        print(f"  definition  {spec.definition}")
        print(f"  tags        {', '.join(spec.tags) or '-'}")
        print(f"  weight      {spec.weight:g}    plan {spec.plan}")
        print(f"  skip/stop   {spec.skip}/{spec.stop}    max_duration {spec.max_duration:g} s")
        if spec.env:
            print(f"  env         {spec.env}")
        print(f"  args        {' '.join(spec.args)}")
        if args.launch:
            context = placeholder_context(system=system, bench_name=spec.name)
            print(f"  at launch   {' '.join(fill_all(spec.args, context))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    resolve = commands.add_parser(
        "resolve", help="print what a suite resolves to (every benchmark, its args)"
    )
    resolve.add_argument("suite", metavar="SUITE", help="a suite name or a path to a YAML file")
    resolve.add_argument("--json", action="store_true", help="machine-readable, keyed by name")
    resolve.add_argument(
        "--launch", action="store_true", help="also show args with launch-time placeholders filled"
    )
    _add_suite_options(resolve)
    resolve.set_defaults(handler=_cmd_resolve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except DlbenchError as exc:
        print(f"dlbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
