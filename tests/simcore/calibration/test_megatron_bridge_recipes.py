"""Megatron-Bridge 25.11 rows run their recipe preset's micro batch and virtual pipeline stages
(simcore/calibration/moe_rows.py's RECIPE_BATCHING): where the page prints another row's (the H100 GPT-OSS and
Qwen3 rows), the request takes the preset's; where it prints the preset's, nothing changes."""

from __future__ import annotations

import pytest

from simcore.calibration import modern
from simcore.calibration.moe_rows import RECIPE_BATCHING, recipe_batching
from simcore.calibration.validate import load_reference
from simcore.domain.layout import Schedule


def rows() -> dict[str, dict]:
    return {str(c["id"]): c for c in load_reference(None, modern.REFERENCE)}


def test_every_25_11_row_has_its_recipe_preset() -> None:
    mb2511 = [c for c in rows().values() if modern.source_of(c) == "mb2511"]
    assert len(mb2511) == 7
    for case in mb2511:
        assert recipe_batching("mb2511", case) is not None, case["id"]
    assert len(RECIPE_BATCHING) == len(mb2511)


def test_rows_that_print_their_preset_keep_their_layout() -> None:
    for case_id, case in rows().items():
        if not case_id.startswith("mb2511-llama3-8b-"):
            continue
        layout = modern.scenario_for(case).layout
        assert layout.microbatch_size == case["layout"]["microbatch_size"], case_id
        assert layout.virtual_stages == 1 and layout.schedule is Schedule.ONE_F_ONE_B


def test_the_gpt_oss_h100_row_runs_its_presets_micro_batch() -> None:
    """The page prints MBS 4 and GA 2 (the B200 row's pair; 512 / (4 x 16) is 8 for its own DP 16): the preset's
    micro batch of 1 runs 32 microbatches a step."""
    case = rows()["mb2511-gpt-oss-120b-h100-64gpu-bf16"]
    assert case["layout"]["microbatch_size"] == 4
    layout = modern.scenario_for(case).layout
    assert (layout.microbatch_size, layout.pp, layout.dp, layout.ep) == (1, 4, 16, 8)
    assert layout.global_batch_size // (layout.microbatch_size * layout.dp) == 32


def test_the_qwen3_h100_row_runs_its_presets_micro_batch_and_virtual_stages() -> None:
    case = rows()["mb2511-qwen3-30b-a3b-h100-16gpu-fp8cs"]
    assert (case["layout"]["microbatch_size"], case["layout"]["virtual_stages"]) == (2, 24)
    layout = modern.scenario_for(case).layout
    assert (layout.microbatch_size, layout.virtual_stages, layout.pp) == (1, 12, 2)
    assert layout.schedule is Schedule.INTERLEAVED_1F1B


@pytest.mark.parametrize("source", ["mb2509", "dgxc2505"])
def test_other_sources_have_no_preset(source: str) -> None:
    for case in rows().values():
        if modern.source_of(case) == source:
            assert recipe_batching(source, case) is None
