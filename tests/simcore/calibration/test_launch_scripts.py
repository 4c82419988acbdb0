"""Narayanan'21 Table 1's rows run as their authors' launch scripts set them (simcore/calibration/launch_scripts.py,
Megatron-LM examples/sc21/run_table_1.sh), a row's own fields first, matched by the run's shape and not its id."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simcore.calibration import launch_scripts
from simcore.calibration.validate import load_reference, scenario_for
from simcore.domain.layout import Schedule


def rows(prefix: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(c) for c in load_reference() if str(c["id"]).startswith(prefix)]


def row(row_id: str) -> dict[str, Any]:
    return next(c for c in rows(row_id) if c["id"] == row_id)


def test_every_table_1_row_has_its_script_and_no_other_row_does() -> None:
    table_1 = rows("narayanan21-t1-")
    assert len(table_1) == 10
    for case in table_1:
        assert launch_scripts.settings_for("narayanan21", case["model"], case["layout"]) is not None, case["id"]
    for case in rows("narayanan21-t2-") + rows("megatron20-") + rows("nemo-"):
        source = str(case["id"]).split("-", 1)[0]
        assert launch_scripts.settings_for(source, case["model"], case["layout"]) is None, case["id"]


@pytest.mark.parametrize(("row_id", "microbatch", "overlap", "schedule", "chunks"), [
    ("narayanan21-t1-1.7b", 16, True, Schedule.ONE_F_ONE_B, 1),  # --DDP-impl torch: reduction under backward
    ("narayanan21-t1-18b", 8, True, Schedule.ONE_F_ONE_B, 1),
    ("narayanan21-t1-39b", 4, False, Schedule.ONE_F_ONE_B, 1),  # --DDP-impl local: after backward
    ("narayanan21-t1-76b", 2, False, Schedule.INTERLEAVED_1F1B, 3),  # 60 layers / PP 4 / 5 a virtual stage
    ("narayanan21-t1-145b", 2, False, Schedule.INTERLEAVED_1F1B, 2),  # 80 / 8 / 5
    ("narayanan21-t1-310b", 1, False, Schedule.INTERLEAVED_1F1B, 2),  # 96 / 16 / 3
    ("narayanan21-t1-530b", 1, False, Schedule.INTERLEAVED_1F1B, 3),  # 105 / 35 / 1
    ("narayanan21-t1-1t", 1, False, Schedule.ONE_F_ONE_B, 1),
])
def test_a_row_runs_as_its_script_set_it(row_id: str, microbatch: int, overlap: bool, schedule: Schedule,
                                         chunks: int) -> None:
    layout = scenario_for(row(row_id)).layout
    assert (layout.microbatch_size, layout.overlap_grad_reduce, layout.schedule, layout.virtual_stages) == (
        microbatch, overlap, schedule, chunks)
    assert layout.num_microbatches * layout.microbatch_size * layout.dp == layout.global_batch_size


def test_the_rows_own_fields_come_before_its_script() -> None:
    case = row("narayanan21-t1-18b")
    case["layout"]["microbatch_size"] = 2
    case["layout"]["overlap_grad_reduce"] = False
    layout = scenario_for(case).layout
    assert (layout.microbatch_size, layout.overlap_grad_reduce) == (2, False)


def test_a_row_is_matched_by_its_shape_not_its_id() -> None:
    case = row("narayanan21-t1-76b")
    case["id"] = "narayanan21-t1-renamed"
    assert scenario_for(case).layout.schedule is Schedule.INTERLEAVED_1F1B
    case["model"]["hidden"] = 10240 + 80  # not a run the script describes: the source's defaults
    layout = scenario_for(case).layout
    assert (layout.microbatch_size, layout.overlap_grad_reduce, layout.schedule) == (1, False, Schedule.ONE_F_ONE_B)
