"""The comparison of an extrapolated run with the same run simulated period by period (test_periodic*.py)."""

from __future__ import annotations

import pytest

from simcore.simulate import Outcome

REL = 1e-12


def assert_same(extrapolated: Outcome, full: Outcome) -> None:
    """Every figure within REL of the full run's (sums of per-event durations carry the full run's rounding, so
    they are compared to REL of the iteration per stage), bytes and events exactly."""
    a, b = extrapolated.metrics, full.metrics
    scale = REL * b.iteration_time_s * len(b.stages)
    assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=REL, abs=0)
    assert a.tokens_per_s == pytest.approx(b.tokens_per_s, rel=REL, abs=0)
    assert a.bubble_fraction == pytest.approx(b.bubble_fraction, rel=REL, abs=scale)
    assert a.time_breakdown_s.keys() == b.time_breakdown_s.keys()
    for key, value in b.time_breakdown_s.items():
        assert a.time_breakdown_s[key] == pytest.approx(value, rel=REL, abs=scale), key
    for key, value in b.communication_s.items():
        assert a.communication_s[key] == pytest.approx(value, rel=REL, abs=scale), key
    for key, value in b.communication_bytes.items():
        assert a.communication_bytes[key] == pytest.approx(value, rel=REL, abs=0), key
    for sa, sb in zip(a.stages, b.stages, strict=True):
        assert sa.bubble_s == pytest.approx(sb.bubble_s, rel=REL, abs=scale)
        assert sa.busy_fraction == pytest.approx(sb.busy_fraction, rel=REL, abs=REL)
    assert extrapolated.events == full.events
