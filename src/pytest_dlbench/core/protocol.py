"""What the processes of a run tell each other: ``DLBENCH_*`` variables and run statuses.

The controller (the pytest process a user started), its xdist workers, the child process that
runs one benchmark and the torchrun ranks of an njobs job talk through the environment and the
run stream. Every variable is named here; every status a run can end with is a :class:`Status`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_dlbench.core.errors import shorten

__all__ = ["BASELINE_MISSING", "USAGE_ERROR", "Env", "Outcome", "Status"]

#: Exit status of bad input (an option, a file, a system file that does not fit this machine),
#: pytest's ``USAGE_ERROR``. Here, below results/ and run/, so that the gate (which owns the
#: exit statuses and re-exports it) and the node launcher share one definition.
USAGE_ERROR = 4
#: Exit status of a baseline that was required (``--compare``/``--bench-compare``) but whose
#: file does not exist. Here for the same reason: the baseline's loader (results/model/) says
#: it, the gate (results/gate.py) owns it among the exit statuses and re-exports it.
BASELINE_MISSING = 7


class Env:
    """Names of the environment variables pytest-dlbench sets or reads."""

    #: Results directory when ``--bench-base`` is not given (user-set).
    BASE = "DLBENCH_BASE"
    #: The machine id of a results history (user-set; results/history/records.py), e.g. a CI
    #: runner's.
    MACHINE = "DLBENCH_MACHINE"
    #: The device slots of the run (JSON list), so a child numbers items as its parent did.
    SLOTS = "DLBENCH_SLOTS"
    #: This process's slot index (set on an xdist worker and its children).
    SLOT = "DLBENCH_SLOT"
    #: The cores of this process's slot (comma list), when its slot has a subset of them.
    CPUS = "DLBENCH_CPUS"
    #: The start barrier of per_gpu replicas: ``host:port``, the wave's key, how many join.
    BARRIER = "DLBENCH_BARRIER"
    BARRIER_KEY = "DLBENCH_BARRIER_KEY"
    BARRIER_PARTIES = "DLBENCH_BARRIER_PARTIES"
    #: ``main`` on the node whose local rank 0 writes an njobs job's stream.
    NODE_ROLE = "DLBENCH_NODE_ROLE"
    #: ``<run id>/<node rank>`` on every process one node launcher of an njobs job started
    #: (its torchrun, ranks, their workers): what that launcher kills at the run's deadline.
    NODE_LAUNCH = "DLBENCH_NODE_LAUNCH"
    #: Seconds torch.distributed waits for a peer before failing (user-set).
    PG_TIMEOUT_S = "DLBENCH_PG_TIMEOUT_S"
    #: The UNIX time after which a benchmark's process ends itself (its parent kills it at
    #: ``max_duration``, a little earlier): it writes an ``end`` timeout record and kills its
    #: process group, so no process of a run outlives its deadline, even without its parent.
    DEADLINE = "DLBENCH_DEADLINE"
    #: The run directory, in the environment of every process a run starts (children, their
    #: ranks and workers): it marks the processes of a run, so that they can be found and killed.
    RUN_DIR = "DLBENCH_RUN_DIR"
    #: The xdist worker (``gw0``...) that launched a child, or ``controller``.
    WORKER = "DLBENCH_WORKER"
    #: The stream of the benchmark run a process belongs to (set on a child; its workers and
    #: ranks inherit it): what to kill when that run must end and its parent is gone.
    STREAM = "DLBENCH_STREAM"
    #: The pid of the pytest process at the root of a session whose several device slots run
    #: at once (xdist workers on this machine), and the cores of those slots (comma list): set on
    #: the children of its workers. Their monitor counts the CPU of that process and all its
    #: descendants (every slot's benchmarks) as the session's own, not as a neighbour's.
    SESSION = "DLBENCH_SESSION"
    SESSION_CPUS = "DLBENCH_SESSION_CPUS"
    #: The UNIX time at which the parent launched a benchmark's child, and how: ``warm`` (forked
    #: from the fork server) or ``fresh`` (a new interpreter). Recorded in the ``config`` record.
    LAUNCHED = "DLBENCH_LAUNCHED"
    LAUNCHER = "DLBENCH_LAUNCHER"
    #: ``WARMUP,STEPS`` of a ``bench`` fixture test run in a child ``pytest NODEID`` (a round
    #: of ``--bench-against``, a confirmation, a bisect step): the parent's choice, so that both
    #: sides of a pair run the same steps whatever each tree's marker says.
    FIXTURE_STEPS = "DLBENCH_FIXTURE_STEPS"


class Status(str, enum.Enum):
    """How a run of a benchmark ended (the ``status`` of its ``end`` record)."""

    OK = "ok"
    FAIL = "fail"
    TIMEOUT = "timeout"
    OOM = "oom"
    CRASH = "crash"
    NAN = "nan"
    SKIPPED = "skipped"

    def __str__(self) -> str:  # f-strings and reports print the value, not "Status.OK"
        return self.value

    @classmethod
    def parse(cls, value: object) -> Status:
        """A status read back from a stream; anything unknown is a failure."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.FAIL


@dataclass(frozen=True)
class Outcome:
    """How one run ended, as the parent or the harness saw it."""

    status: Status
    reason: str = ""
    returncode: int | None = None

    def __post_init__(self) -> None:
        # One cap for every reason, however it was made (errors.MAX_REASON).
        object.__setattr__(self, "reason", shorten(self.reason))

    @property
    def ok(self) -> bool:
        return self.status is Status.OK
