"""simcore/calibration/readings.py: a group's rows under other readings of their source's unstated settings."""

from __future__ import annotations

import pytest

from simcore.calibration import readings
from simcore.calibration.validate import run_validation
from simcore.simulate import simulate

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")


@pytest.fixture(scope="module")
def t5_rows() -> list[dict]:
    return readings.group_rows(readings.T5_GROUP)


def test_the_group_is_the_six_t5_rows_by_gpu_count(t5_rows: list[dict]) -> None:
    assert [r["cluster"]["num_gpus"] for r in t5_rows] == [8, 16, 32, 40, 80, 160]


def test_validates_own_reading_gives_validates_errors(t5_rows: list[dict]) -> None:
    report = {c["id"]: c["error_pct"] for c in run_validation()["cases"]}
    ours = readings.errors(t5_rows, readings.T5_READINGS[0])
    assert [i for i, _ in ours] == [r["id"] for r in t5_rows]
    for case_id, error in ours:
        assert error == pytest.approx(report[case_id], abs=1e-9)


def test_the_fused_adam_readings_differ_only_in_when_the_all_reduce_runs(t5_rows: list[dict]) -> None:
    """At 160 GPUs the all-reduce after backward is exposed whole, overlapped it hides under the backward; both
    run the unsharded optimizer (every rank steps every parameter), longer than the sharded one."""
    row = t5_rows[-1]
    out = {}
    for reading in readings.T5_READINGS:
        out[reading.name] = simulate(readings.scenario(row, reading)).metrics.time_breakdown_s
    written, after, overlapped = (out[r.name] for r in readings.T5_READINGS)
    assert after["dp_comm"] > 0.1 > 0.01 > overlapped["dp_comm"]
    assert after["optimizer"] == pytest.approx(overlapped["optimizer"]) and after["optimizer"] > written["optimizer"]
    assert after["compute"] == pytest.approx(written["compute"])


def test_drift_is_the_span_of_the_errors() -> None:
    assert readings.drift([("a", 4.0), ("b", -6.0), ("c", 1.0)]) == pytest.approx(10.0)
