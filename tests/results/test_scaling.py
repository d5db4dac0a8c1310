from types import SimpleNamespace

import pytest

from pytest_dlbench.results.figures import scaling_rows


def bench(name, perf):
    return SimpleNamespace(name=name, perf=perf)


def test_efficiency_against_one_slot():
    rows = scaling_rows(
        [bench("ddp.scaling.2", 180.0), bench("ddp.scaling.1", 100.0), bench("other", 5.0),
         bench("ddp.scaling.4", 320.0), bench("ddp.scaling.8", None)]
    )
    assert [(r.slots, r.perf) for r in rows] == [(1, 100.0), (2, 180.0), (4, 320.0), (8, None)]
    assert [r.speedup for r in rows[:3]] == pytest.approx([1.0, 1.8, 3.2])
    assert [r.efficiency for r in rows[:3]] == pytest.approx([1.0, 0.9, 0.8])
    assert rows[3].efficiency is None  # the 8-slot step did not run


def test_no_efficiency_without_the_one_slot_step():
    (row,) = scaling_rows([bench("lm.scaling.2", 50.0)])
    assert row.efficiency is None and row.perf == 50.0
