"""The Zero Bubble paper's rows of the modern reference (reference/training-runs-modern.json, ids `zb-*`: Qi et
al., ICLR 2024, Tables 4, 6 and 12 with 1F1B, Table 9's profiled pass times) as scenarios.

What the paper leaves unstated is filled the same way for every row, from the authors' experiment script
(sail-sg/zero-bubble-pipeline-parallelism, branch `arxiv`, examples/pretrain_zero_bubble.sh): Megatron-LM GPT with
GeLU, the input and output embeddings shared (no --untie-embeddings-and-output-weights), standard attention (no
--use-flash-attn), fp16, no sequence parallelism, recomputation or distributed optimizer, sequence 1024, and
--allow-padding-num-layers: the first and the last stage hold one layer fewer than the others (section 5.1), as
`stage_layers` when the layers so divide. Not published, assumed: the GPT-2 vocabulary (50,257
tokens) and DGX A100 nodes' 8 x 200 Gbit/s NICs (the paper's RoCE rate is not stated). Pure pipeline parallelism
(dp = tp = 1). The paper's zero-bubble rows are not in the file: bench/zero_bubble.py compares the simulated
speed-ups with their target ranges.
"""

from __future__ import annotations

from typing import Any

from simcore.domain.layout import Layout, Precision, Schedule
from simcore.domain.model import model_from_fields
from simcore.simulate import Scenario
from topology.cluster_spec import NODE_PRESETS, sized

PREFIX = "zb-"
GPT2_VOCAB = 50257


def handles(case: dict[str, Any]) -> bool:
    return str(case.get("id", "")).startswith(PREFIX)


def stage_layers(layers: int, pp: int) -> tuple[int, ...] | None:
    """One layer fewer on the first and the last stage (the paper's padding), when the layers so divide."""
    if pp < 3 or (layers + 2) % pp:
        return None
    per = (layers + 2) // pp
    return (per - 1,) + (per,) * (pp - 2) + (per - 1,)


def scenario_for(case: dict[str, Any], schedule: Schedule = Schedule.ONE_F_ONE_B,
                 post_validation: bool = False) -> Scenario:
    """The row's setup under `schedule` (the rows ran 1F1B)."""
    m, c, lay = case["model"], case["cluster"], case["layout"]
    if not str(c["gpu"]).startswith("a100-80gb"):
        raise ValueError(f"GPU {c['gpu']} has no rule")
    model = model_from_fields({
        "architecture": "decoder_only", "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "num_kv_heads": m.get("kv_heads") or m["heads"],
        "ffn_hidden_size": m["ffn"], "vocab_size": m.get("vocab") or GPT2_VOCAB, "seq_length": m["seq_len"],
        "attention": "standard", "activation": "gelu", "tied_embeddings": True})
    pp, b = int(lay["pp"]), int(lay["microbatch_size"])
    num_microbatches = int(lay["num_microbatches"])
    layout = Layout(dp=int(lay.get("dp") or 1), tp=int(lay.get("tp") or 1), pp=pp, microbatch_size=b,
                    global_batch_size=b * num_microbatches, schedule=schedule, precision=Precision.FP16,
                    stage_layers=stage_layers(int(m["layers"]), pp), optimizer_post_validation=post_validation)
    return Scenario(model, sized(NODE_PRESETS["dgx-a100"], int(c["num_gpus"])), layout)
