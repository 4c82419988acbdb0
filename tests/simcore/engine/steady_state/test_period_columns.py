"""The period finder's columns and runs (simcore/engine/steady_state/periods.py) against their definitions written out
pass by pass, and the interned passes they rely on (simcore/domain/passes.py)."""

from __future__ import annotations

import copy
import pickle
import re
from dataclasses import replace

import pytest

import simcore.engine.steady_state.periods as periods
from simcore.domain.layout import Schedule
from simcore.domain.passes import BACKWARD, FORWARD, OVERLAPPED, Pass
from simcore.domain.schedules import POLICIES

WIDE = 1 << 32
CASES = [(Schedule.ONE_F_ONE_B, 4, 16, 1), (Schedule.ONE_F_ONE_B, 16, 128, 1), (Schedule.INTERLEAVED_1F1B, 4, 32, 2),
         (Schedule.ZB_H1, 8, 64, 1), (Schedule.GPIPE, 4, 16, 1), (Schedule.DUALPIPE, 4, 16, 2)]


def _columns(order: list[Pass]) -> tuple[list[tuple[str, int, int]], list[int], list[int], list[int], list[int]]:
    kinds = [(p.direction, p.chunk, p.backward_chunk) for p in order]
    labels = [p.microbatch * WIDE + max(p.backward_microbatch, 0) for p in order]
    units = [WIDE + 1 if p.backward_microbatch >= 0 else WIDE for p in order]
    return kinds, [p.microbatch for p in order], [p.backward_microbatch for p in order], labels, units


def _stretch(order: list[Pass], q: int, length: int) -> tuple[int, int]:
    kinds, _, _, labels, units = _columns(order)
    ok = bytes(k == k2 and y - x == q * u
               for k, k2, x, y, u in zip(kinds, kinds[length:], labels, labels[length:], units))
    runs = [(r.start(), r.end()) for r in re.finditer(b"\x01+", ok)]
    a, b = max(runs, key=lambda r: r[1] - r[0], default=(0, 0))
    whole = (b + length - a) // length * length if b > a else 0
    return a, a + whole


@pytest.mark.parametrize(("schedule", "pp", "m", "v"), CASES)
def test_columns_and_stretches_follow_their_definitions(schedule: Schedule, pp: int, m: int, v: int) -> None:
    for rank in range(pp):
        order = POLICIES[schedule].passes(rank, pp, m, v)
        cols = periods.Columns(order)
        assert (cols.kinds, cols.microbatches, cols.backward, cols.labels, cols.units) == _columns(order)
        for q in (1, 2):
            for length in (1, 2, 3, 4):
                assert periods.stretch(cols, q, length) == _stretch(order, q, length)


def test_columns_when_the_row_table_is_renewed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(periods, "_MOST_ROWS", 8)  # every list is over it: a new table each time
    orders = [POLICIES[Schedule.ONE_F_ONE_B].passes(rank, 4, 16, 1) for rank in range(4)]
    for order in orders + orders:
        cols = periods.Columns(order)
        assert (cols.kinds, cols.microbatches, cols.backward, cols.labels, cols.units) == _columns(order)


def test_passes_are_interned_and_behave_as_values() -> None:
    a, b = Pass(FORWARD, 3, 1), Pass(FORWARD, 3, 1)
    assert a is b and a == b and hash(a) == hash(b) and a != Pass(BACKWARD, 3, 1)
    assert pickle.loads(pickle.dumps(a)) is a and copy.deepcopy(a) is a
    assert replace(a, microbatch=4) == Pass(FORWARD, 4, 1)
    pair = Pass(OVERLAPPED, 5, 0, backward_microbatch=2, backward_chunk=1)
    assert (pair.backward_microbatch, pair.backward_chunk) == (2, 1) and pair is Pass(OVERLAPPED, 5, 0, 2, 1)
    with pytest.raises(AttributeError):
        setattr(a, "microbatch", 7)  # noqa: B010 (frozen)
    assert repr(a) == "Pass(direction='F', microbatch=3, chunk=1, backward_microbatch=-1, backward_chunk=-1)"
