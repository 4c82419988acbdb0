"""FP8 parameters (`layout.fp8_param_gather`) and the gradient buffer's dtype in memory: closed forms.

- the data-parallel parameter all-gathers move the FP8 GEMM weights in 1 byte instead of 2 (tensorwise,
  blockwise), so a chunk's gathers move 2P - F bytes for P parameters of which F are FP8 GEMM weights, and exactly
  half where every parameter is one; MXFP8's stay 16-bit (Megatron-Core gathers its bf16 staging buffer);
- the model keeps no 16-bit copy of its FP8 GEMM weights: weights shrink by exactly 2F bytes (2F/dp with ZeRO 3);
- Megatron-Core's gradient buffer is in the reduction's dtype: fp32 by default for bf16 and FP8 training (4 bytes a
  parameter), so `grad_reduce_dtype: bf16` saves exactly 2P bytes with ZeRO 0 and 1, 2P/dp with ZeRO 2 and 3.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.cost.compute.fp8 import fp8_gemm_weights, parameter_gather_bytes
from simcore.cost.memory import stage_memory
from simcore.cost.workload import build_workload
from simcore.domain.grad_reduce import GradReduce
from simcore.domain.layout import Fp8Recipe, Layout, Precision, ZeroImplementation, validate_precision
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import Scenario, simulate
from topology.cluster_spec import NODE_PRESETS, sized
from topology.errors import SpecError
from topology.hardware import GPUS, GpuKind

MODEL = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
GPU = GPUS[GpuKind.H100_80GB]
FP8 = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, zero_stage=1, precision=Precision.FP8)


def memory(layout: Layout):  # type: ignore[no-untyped-def]
    workload = build_workload(MODEL, layout, GPU, None, None, free_communication=True)
    return stage_memory(MODEL, layout, workload)[0], workload


def fp8_weights(layout: Layout) -> float:
    """F: the FP8 GEMM weights of the one pipeline rank, per tensor rank."""
    return fp8_gemm_weights(MODEL, [("transformer", MODEL.num_layers)], layout.tp)


def test_gather_bytes_halve_when_every_parameter_is_an_fp8_weight() -> None:
    on = replace(FP8, fp8_param_gather=True)
    assert parameter_gather_bytes(FP8, 1e9, 1e9) == 2.0
    assert parameter_gather_bytes(on, 1e9, 1e9) == 1.0
    assert parameter_gather_bytes(on, 1e9, 0.25e9) == pytest.approx(1.75)
    blockwise = replace(on, fp8_recipe=Fp8Recipe.BLOCKWISE)
    assert parameter_gather_bytes(blockwise, 1e9, 1e9) == 1.0
    assert parameter_gather_bytes(replace(on, fp8_recipe=Fp8Recipe.MXFP8), 1e9, 1e9) == 2.0


def zero_bytes(layout: Layout) -> float:
    return simulate(Scenario(MODEL, sized(NODE_PRESETS["dgx-h100"], 8), layout)).metrics.communication_bytes["zero"]


@pytest.mark.parametrize("zero", [1, 3])
def test_simulated_gathers_move_2p_minus_f_bytes(zero: int) -> None:
    layout = replace(FP8, zero_stage=zero)
    (chunk,) = build_workload(MODEL, layout, GPU, None, None, free_communication=True).chunks
    p, f = chunk.parameters, fp8_weights(layout)
    assert chunk.fp8_parameters == pytest.approx(f)
    assert 0.5 * p < f < p  # the embedding and the norms stay 16-bit
    before, after = zero_bytes(layout), zero_bytes(replace(layout, fp8_param_gather=True))
    assert after == pytest.approx(before * (2 * p - f) / (2 * p), rel=1e-12)
    if zero == 1:  # one gather of the whole chunk after the step; a ring rank sends (dp - 1)/dp of it
        assert before == pytest.approx(2 * p * 7 / 8, rel=1e-12)
        assert after == pytest.approx((2 * p - f) * 7 / 8, rel=1e-12)


def test_mxfp8_gathers_stay_16_bit() -> None:
    layout = replace(FP8, fp8_recipe=Fp8Recipe.MXFP8)
    gpu = "dgx-b200"
    outs = [simulate(Scenario(MODEL, sized(NODE_PRESETS[gpu], 8), replace(layout, fp8_param_gather=on)))
            for on in (False, True)]
    assert outs[1].metrics.communication_bytes["zero"] == outs[0].metrics.communication_bytes["zero"]


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_fp8_parameters_drop_the_16_bit_copy(zero: int) -> None:
    layout = replace(FP8, zero_stage=zero)
    (before, _), (after, _) = memory(layout), memory(replace(layout, fp8_param_gather=True))
    f = fp8_weights(layout)
    assert before.weights - after.weights == pytest.approx(2 * f / (8 if zero == 3 else 1), rel=1e-12)
    assert (before.gradients, before.optimizer_states) == (after.gradients, after.optimizer_states)
    if zero == 3:  # the gathered layer and the prefetched one hold their FP8 weights in 1 byte
        assert after.buffers < before.buffers
    else:
        assert after.buffers == before.buffers


def test_fsdp_float8_all_gather_keeps_the_sharded_weights() -> None:
    layout = replace(FP8, zero_stage=3, zero_implementation=ZeroImplementation.FSDP)
    (before, _), (after, _) = memory(layout), memory(replace(layout, fp8_param_gather=True))
    assert after.weights == before.weights  # torchao casts the fp32 shard to FP8 for the gather only
    assert after.buffers < before.buffers


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_the_gradient_buffer_is_in_the_reduction_dtype(zero: int) -> None:
    bf16 = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, zero_stage=zero)
    (fp32_buffer, workload), (bf16_buffer, _) = memory(bf16), memory(replace(bf16, grad_reduce_dtype=GradReduce.BF16))
    p = workload.chunks[0].parameters
    shards = 8 if zero >= 2 else 1
    assert fp32_buffer.gradients == pytest.approx(4 * p / shards, rel=1e-12)
    assert fp32_buffer.total - bf16_buffer.total == pytest.approx(2 * p / shards, rel=1e-12)
    fp16 = replace(bf16, precision=Precision.FP16)
    assert memory(fp16)[0].gradients == pytest.approx(2 * p / shards, rel=1e-12)  # fp16 reduces in fp16


def test_fsdp_and_deepspeed_keep_16_bytes_a_parameter() -> None:
    for implementation in (ZeroImplementation.FSDP, ZeroImplementation.DEEPSPEED):
        layout = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, zero_stage=3,
                        zero_implementation=implementation)
        state, workload = memory(layout)
        p = workload.chunks[0].parameters
        assert state.weights + state.gradients + state.optimizer_states == pytest.approx(16 * p / 8, rel=1e-12)


@pytest.mark.parametrize(("change", "says"), [
    ({"precision": Precision.BF16}, "needs precision fp8"),
    ({"zero_stage": 0}, "needs zero_stage 1, 2 or 3"),
    ({"zero_stage": 3, "zero_implementation": ZeroImplementation.DEEPSPEED}, "megatron or fsdp"),
    ({"fp8_recipe": Fp8Recipe.ROWWISE}, "rowwise"),
    ({"zero_stage": 3, "zero_implementation": ZeroImplementation.FSDP, "fp8_recipe": Fp8Recipe.BLOCKWISE},
     "tensorwise"),
])
def test_refused_where_it_cannot_apply(change: dict[str, object], says: str) -> None:
    layout = replace(FP8, fp8_param_gather=True, **change)  # type: ignore[arg-type]
    with pytest.raises(SpecError) as err:
        validate_precision(layout, GPU)
    assert err.value.field == "layout.fp8_param_gather"
    assert says in str(err.value)
