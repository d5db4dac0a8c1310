"""One number-format module (pytest_dlbench.core.numbers) for the reports and the profile: the same
value reads the same in the terminal table and in a profile report."""

from __future__ import annotations

import math

import pytest

from pytest_dlbench.core import numbers
from pytest_dlbench.profile.artifacts import TraceReport

MIB = 2**20


@pytest.mark.parametrize(("value", "text"), [
    (2.0 * 2**30, "2.0 GiB"),  # the report's own formats are unchanged
    (1014.1 * MIB, "1014.1 MiB"),
    (46.8 * MIB, "46.8 MiB"),
    (375 * 2**10, "375 KiB"),
    (0, "0 B"),
    (512, "512 B"),
    (-8.75 * MIB, "-8.8 MiB"),  # a release of memory (a profiled operator): signed, same unit
    (-375 * 2**10, "-375 KiB"),
    (-100, "-100 B"),
    (-0.2, "0 B"),  # never "-0 B"
    (None, "-"),
    (math.nan, "-"),
])
def test_byte_size(value: float | None, text: str) -> None:
    assert numbers.byte_size(value) == text


def test_the_report_and_the_profile_write_bytes_the_same_way() -> None:
    trace = TraceReport(file="trace.json", bytes=int(5.92 * MIB), steps=5, rank=0)
    # The profile used its own format ("5.92 MiB"), the terminal table another ("5.9 MiB").
    assert f"({numbers.byte_size(5.92 * MIB)}, 5 profiled steps)" in trace.render()
    assert "(5.9 MiB, 5 profiled steps)" in trace.render()


def test_the_profile_formats_are_the_report_package_formats() -> None:
    assert numbers.duration(0.0832) == "83.2 ms" and numbers.duration(4.2e-4) == "420 µs"
    assert numbers.si(75.1e6) == "75.1 M" and numbers.count(1720) == "1,720"
    assert numbers.rough_percent(0.035) == "3.5%" and numbers.rough_percent(0.42) == "42%"
