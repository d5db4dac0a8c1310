"""``dlbench machine``: the machine's state that changes benchmark numbers, and whether it is
ready to benchmark (docs/machine.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pytest_dlbench.results import gate

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    machine = commands.add_parser(
        "machine", help="the machine's state that changes benchmark numbers, and what is off",
        epilog="exit status: 0, or 4 with --require-ready on a machine that is not ready",
    )
    machine.add_argument("--json", action="store_true", help="machine-readable")
    machine.add_argument("--bench-require-ready", "--require-ready", action="store_true",
                         dest="require_ready",
                         help="exit with status 4 when the machine is not ready (for CI)")
    machine.set_defaults(handler=run)
    return machine


def run(args: argparse.Namespace) -> int:
    from pytest_dlbench.measure.machine import machine_state
    from pytest_dlbench.results.figures import readiness_problems, render_state

    state = machine_state()
    if args.json:
        print(json.dumps({**state, "problems": readiness_problems(state)}, indent=2))
    else:
        print(render_state(state))
    if args.require_ready and readiness_problems(state):
        return gate.USAGE_ERROR
    return gate.OK
