"""Waiting for something to happen: a predicate polled until a deadline, never a fixed sleep
before an assertion (a slow machine needs longer, a fast one should not wait)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Poll ``predicate`` every ``step`` seconds until it is true or ``timeout`` seconds have
    passed; whether it became true (it is asked once more at the deadline)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())
