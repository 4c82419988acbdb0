"""The Chrome trace: microsecond times rounded to the nanosecond, adjacent spans never overlapping."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.recorder import Span
from simcore.trace import chrome_trace


def _events(spans: list[Span]) -> list[dict[str, Any]]:
    return [e for e in chrome_trace(spans)["traceEvents"] if e["ph"] == "X"]


def test_adjacent_spans_do_not_overlap_when_both_ends_round_up() -> None:
    # 0.6 ns .. 1.4 ns, then 1.4 ns .. 3 ns: the first starts at 0.001 us; rounding its 0.8 ns duration on its own
    # gives 0.001 us more, so it would end at 0.002 us, 1 ns after the second starts (at 0.001 us).
    first, second = _events([Span("stage 0", "a", "compute", 0.6e-9, 1.4e-9),
                             Span("stage 0", "b", "compute", 1.4e-9, 3.0e-9)])
    assert (first["ts"], first["dur"]) == (0.001, 0.0)
    assert (second["ts"], second["dur"]) == (0.001, 0.002)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), min_size=2, max_size=12, unique=True))
def test_each_span_ends_where_the_next_one_starts(times: list[float]) -> None:
    times.sort()
    spans = [Span("stage 0", f"s{i}", "compute", a, b) for i, (a, b) in enumerate(zip(times, times[1:]))]
    events = _events(spans)
    for current, following in zip(events, events[1:]):
        end = current["ts"] + current["dur"]
        assert abs(end - following["ts"]) <= 1e-9 * max(1.0, end)  # the same instant, to float precision
        assert current["dur"] >= 0
