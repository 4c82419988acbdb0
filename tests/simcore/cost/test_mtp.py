"""Multi-token prediction (`model.mtp_layers`, DeepSeek-V3 §2.2, Megatron-Core's MultiTokenPredictionBlock): each
depth is a transformer layer of the model's last layer's type, an embedding, a 2h -> h projection and its own
logits, all on the last pipeline stage; the other stages do not change. Its parameters and FLOPs are counted as
Megatron-LM counts them (num_floating_point_operations)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore import MODEL_PRESETS, Layout, Recompute, SpecError, model_from_fields
from simcore.cost.compute.flops import layer_forward_matmul_flops, logits_forward_flops, model_flops_per_iteration
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.memory import stage_memory
from simcore.cost.mtp import mtp_forward_ops
from simcore.cost.parameters import FITTED
from simcore.cost.workload import build_workload, layer_kernels
from topology.hardware import GPUS, GpuKind

GPU = GPUS[GpuKind.H100_80GB]
LAYOUT = Layout(dp=2, tp=1, pp=2, microbatch_size=1, global_batch_size=8)


def _models(preset: str, **fields: object) -> tuple:
    base = {**MODEL_PRESETS[preset], **fields}
    return model_from_fields(base), model_from_fields({**base, "mtp_layers": 1})


def test_one_depth_adds_a_layer_a_projection_and_norms() -> None:
    plain, mtp = _models("gpt3-1.3b")
    h = plain.hidden_size
    assert mtp.total_parameters() - plain.total_parameters() == plain.parameters_per_layer(plain.main_layer()) \
        + 2 * h * h + 3 * h


def test_a_moe_model_predicts_with_a_moe_layer() -> None:
    plain, mtp = _models("deepseek-v3")
    assert mtp.mtp_layer().moe
    assert mtp.total_parameters() - plain.total_parameters() == plain.parameters_per_layer(mtp.mtp_layer()) \
        + 2 * plain.hidden_size ** 2 + 3 * plain.hidden_size


def test_model_flops_count_the_depth_as_megatron_does() -> None:
    plain, mtp = _models("gpt3-1.3b")
    s, h = plain.seq_length, plain.hidden_size
    per_sample = layer_forward_matmul_flops(plain) + 2 * s * 2 * h * h + logits_forward_flops(plain)
    extra = model_flops_per_iteration(mtp, LAYOUT) - model_flops_per_iteration(plain, LAYOUT)
    assert extra == pytest.approx(3 * per_sample * LAYOUT.global_batch_size)


def test_only_the_last_stage_runs_the_depths() -> None:
    plain, mtp = _models("gpt3-1.3b")
    before = build_workload(plain, LAYOUT, GPU, None, None, free_communication=True)
    after = build_workload(mtp, LAYOUT, GPU, None, None, free_communication=True)
    assert after.chunks[0] == before.chunks[0]
    last, was = after.chunks[1], before.chunks[1]
    assert dict(last.layer_counts)["transformer"] == dict(was.layer_counts)["transformer"] + 1
    layer = layer_kernels(plain, plain.main_layer(), LAYOUT, GPU, FITTED).forward
    beside = ops_time(mtp_forward_ops(plain, 1, 1, False), GPU, FITTED)  # embedding, norms, projection, head
    assert last.forward_compute_s - was.forward_compute_s == pytest.approx(layer + beside, rel=1e-12)
    h = plain.hidden_size
    assert last.parameters - was.parameters == plain.parameters_per_layer(plain.main_layer()) + 2 * h * h + 3 * h
    assert after.grad_bytes[1] > before.grad_bytes[1] and after.grad_bytes[0] == before.grad_bytes[0]
    memory_before, memory_after = stage_memory(plain, LAYOUT, before), stage_memory(mtp, LAYOUT, after)
    assert memory_after[0] == memory_before[0] and memory_after[1].total > memory_before[1].total


def test_full_recomputation_recomputes_the_depth_layer_too() -> None:
    plain, mtp = _models("gpt3-1.3b")
    lay = replace(LAYOUT, recompute=Recompute.FULL)
    before = build_workload(plain, lay, GPU, None, None, free_communication=True)
    after = build_workload(mtp, lay, GPU, None, None, free_communication=True)
    assert after.chunks[1].recompute_s == pytest.approx(before.chunks[1].recompute_s / before.chunks[1].layers
                                                        * (before.chunks[1].layers + 1))


def test_only_decoder_only_models_predict_more_tokens() -> None:
    with pytest.raises(SpecError) as err:
        model_from_fields({**MODEL_PRESETS["t5-11b"], "mtp_layers": 1})
    assert err.value.field == "model.mtp_layers"
