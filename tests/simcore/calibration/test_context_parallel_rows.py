"""The reference's context-parallel rows (training-runs-modern.json, tagged `cp`): every one can be written as a
request and simulates, and those with a step time are predicted within 10% on average (nothing is fitted on
them)."""

from __future__ import annotations

from typing import Any

import pytest

from simcore.calibration import modern
from simcore.calibration.validate import load_reference, measured_time
from simcore.simulate import simulate


def cp_rows() -> list[dict[str, Any]]:
    return [c for c in load_reference(None, modern.REFERENCE)
            if c.get("kind") == "training" and "cp" in c.get("feature", [])]


@pytest.mark.slow
def test_every_cp_row_simulates_and_the_timed_ones_are_within_10_percent() -> None:
    rows = cp_rows()
    assert len(rows) == 13
    errors = []
    for case in rows:
        scenario = modern.scenario_for(case)
        assert scenario.layout.cp == int(case["layout"]["cp"]) == 2
        outcome = simulate(scenario)
        assert "cp" in outcome.metrics.communication_bytes
        measured = measured_time(case)
        if measured is not None:
            errors.append(abs(outcome.metrics.iteration_time_s / measured - 1))
            assert not modern.is_calibration(case)
    assert len(errors) == 11  # the NeMo long-sequence rows publish TFLOP/s only
    assert sum(errors) / len(errors) <= 0.10
