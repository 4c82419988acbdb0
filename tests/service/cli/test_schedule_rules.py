"""Pipeline-schedule rules on the command line: each violation exits 2 with one line naming
layout.schedule or layout.stage_layers and the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli


def request(model: dict[str, Any] | None = None, gpus: int = 8, **layout: Any) -> dict[str, Any]:
    # GPT-3 1.3B (24 layers) on one DGX A100 node, pp 8, 16 microbatches.
    base = {"dp": 1, "tp": 1, "pp": 8, "microbatch_size": 1, "global_batch_size": 16}
    return {"model": model or {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_gpus": gpus},
            "layout": {**base, **layout}}


CASES = [
    ("zb-few-microbatches", {"schedule": "zb_h1", "global_batch_size": 4}, "layout.schedule",
     "needs at least pp (8) microbatches"),
    ("stage-layers-sum", {"stage_layers": [3, 3, 3, 3, 3, 3, 3, 4]}, "layout.stage_layers",
     "must add up to the model's layers (24)"),
    ("stage-layers-empty-chunk", {"stage_layers": [0, 4, 4, 4, 3, 3, 3, 3]}, "layout.stage_layers",
     "at least one layer"),
    ("stage-layers-count", {"stage_layers": [12, 12]}, "layout.stage_layers", "one layer count per model chunk"),
    ("dualpipe-odd-pp", {"gpus": 7, "pp": 7, "global_batch_size": 14, "schedule": "dualpipe"}, "layout.schedule",
     "dualpipe needs an even pp"),
    ("dualpipe-few-microbatches", {"schedule": "dualpipe", "global_batch_size": 12}, "layout.schedule",
     "at least 2 x pp = 16"),
    ("dualpipe-odd-microbatches", {"schedule": "dualpipe", "global_batch_size": 17}, "layout.schedule",
     "an even number of microbatches"),
    ("zb-v-encoder-decoder", {"model": {"preset": "t5-3b"}, "schedule": "zb_v"}, "layout.schedule",
     "encoder_decoder models take zb_h1 or zb_h2"),
    ("zb-v-chunk-without-layer", {"model": {"preset": "gpt3-1.3b", "num_layers": 12}, "schedule": "zb_v"},
     "layout.schedule", "every model chunk needs at least one layer"),
    ("zb-v-stage-layers", {"schedule": "zb_v", "stage_layers": [3] * 8}, "layout.stage_layers",
     "one layer count per model chunk (16"),
    # Not modelled together: context parallelism's ring passes and per-sub-module sharding run whole backward
    # passes only.
    ("zb-with-context-parallelism", {"model": {"preset": "gpt3-1.3b", "attention": "flash"}, "gpus": 16, "cp": 2,
                                     "schedule": "zb_h1"}, "layout.cp", "zb_h1 splits or overlaps backward passes"),
    ("dualpipe-with-fsdp", {"gpus": 16, "dp": 2, "global_batch_size": 32, "schedule": "dualpipe", "zero_stage": 3,
                            "zero_implementation": "fsdp"}, "layout.zero_implementation", "use megatron"),
]


@pytest.mark.parametrize(("edits", "field", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_violation_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 edits: dict[str, Any], field: str, rule: str) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request(**edits)), encoding="utf-8")
    code, out, err = run_cli(capsys, "simulate", str(path))
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and field in err and rule in err, err


def test_a_valid_zero_bubble_request_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request(schedule="zb_h1", stage_layers=[2, 4, 3, 3, 3, 3, 4, 2])),
                    encoding="utf-8")
    code, out, _err = run_cli(capsys, "simulate", str(path))
    assert code == 0
    result = yaml.safe_load(out)
    assert [s["layers"]["transformer"] for s in result["stages"]] == [2, 4, 3, 3, 3, 3, 4, 2]
    assert all(s["backward_input_s"] + s["backward_weight_s"] == pytest.approx(s["backward_s"])
               for s in result["stages"])
