"""The MoE layer's kernels: dense layers unchanged, the local experts in one grouped GEMM,
the dropless dispatcher's host synchronisation, MLA's FLOPs, and the fitted host time against its rows."""

from __future__ import annotations

import dataclasses

import pytest

import simcore.cost.compute.moe_kernels as moe_kernels
from simcore.calibration import modern
from simcore.calibration.moe_rows import MOE_CALIBRATION_ROWS
from simcore.calibration.validate import load_reference
from simcore.cost.compute.flops import layer_forward_matmul_flops
from simcore.cost.compute.gemm_shape import GROUPED_GEMM_STREAMS, stream_ramps
from simcore.cost.compute.kernel_time import issue_s, op_time, ops_time
from simcore.cost.compute.kernels import Op, gemm_op, layer_forward_ops
from simcore.cost.compute.moe_kernels import sequence_time, transformer_layer_ops
from simcore.cost.parameters import FITTED, HOST_DISPATCH_S
from simcore.domain.model import model_from_fields
from simcore.domain.moe import MoeShape
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import simulate
from topology.hardware import GPUS, GpuKind

H100 = GPUS[GpuKind.H100_80GB]


def test_dense_layers_keep_their_kernels() -> None:
    model = model_from_fields(MODEL_PRESETS["llama3-8b"])
    layer = model.main_layer()
    assert transformer_layer_ops(model, 1, 2, True, layer) == layer_forward_ops(model, 1, 2, True, layer)


def test_local_experts_run_as_one_grouped_gemm() -> None:
    """The same routed tokens over more local experts: one grouped GEMM (TE GroupedLinear) for fc1 and one for fc2.
    Transformer Engine runs its products as one cuBLAS GEMM each over GROUPED_GEMM_STREAMS streams: they share the
    GPU (faster than the experts' GEMMs one after another) but each stream ramps up and drains once per product
    (slower than one kernel of the group's FLOPs)."""
    model = model_from_fields(MODEL_PRESETS["qwen3-30b-a3b"])
    layer = model.layer_stacks()[-1][0]

    def fc1(ep: int) -> Op:
        ops = [op for op in transformer_layer_ops(model, 1, 1, False, layer, ep=ep) if op.name == "expert_fc1"]
        assert len(ops) == 1
        return ops[0]

    # ep 1: 128 experts of 256 rows in one call; ep 128: one expert of 128 per rank (4096 x 8 copies each)
    grouped, single = fc1(1), fc1(128)
    assert grouped.group == 128 and single.group == 1
    one_kernel = dataclasses.replace(grouped, group=1)
    expert = gemm_op("expert", 256, single.shape.n, single.shape.k) if single.shape else single
    assert op_time(one_kernel, H100, FITTED) < op_time(grouped, H100, FITTED) < 128 * op_time(expert, H100, FITTED)
    assert stream_ramps(grouped.group) == 128 // GROUPED_GEMM_STREAMS and stream_ramps(single.group) == 1
    # its backward is two grouped GEMMs (input and weight gradients), each with the same ramps
    assert op_time(grouped.backward(), H100, FITTED) > 2 * op_time(one_kernel, H100, FITTED)


def test_a_grouped_gemm_issues_one_launch_an_expert() -> None:
    """Transformer Engine launches a grouped GEMM's products one by one (multi_stream_cublas_gemm): the host issues
    one call and 128 launches for 128 local experts, twice in backward. With one token a sample the 128 experts'
    GEMMs are shorter than their launches: the pass is host-bound."""
    model = model_from_fields(MODEL_PRESETS["qwen3-30b-a3b"])
    layer = model.layer_stacks()[-1][0]
    fc1 = next(op for op in transformer_layer_ops(model, 1, 1, False, layer, ep=1) if op.name == "expert_fc1")
    call = moe_kernels.MOE_HOST_KERNEL_S
    assert issue_s(fc1) == pytest.approx(call + 128 * HOST_DISPATCH_S)
    assert issue_s(fc1.backward()) == pytest.approx(2 * (call + 128 * HOST_DISPATCH_S))
    short = dataclasses.replace(model, seq_length=1)
    ops = tuple(op for op in transformer_layer_ops(short, 1, 1, False, short.layer_stacks()[-1][0], ep=1)
                if op.name.startswith("expert_fc"))
    assert ops_time(ops, H100, FITTED) == pytest.approx(sum(issue_s(op) for op in ops))
    assert ops_time(ops, H100, FITTED) > sum(op_time(op, H100, FITTED) for op in ops)


def test_dropless_layers_pay_the_host_synchronisation() -> None:
    model = model_from_fields(MODEL_PRESETS["qwen3-30b-a3b"])
    dropped = dataclasses.replace(model, moe=dataclasses.replace(model.moe or MoeShape(1, 1, 1), capacity_factor=1.0))
    layer = model.layer_stacks()[-1][0]
    dropless = sequence_time(transformer_layer_ops(model, 1, 1, False, layer, ep=8), H100, FITTED)
    padded = sequence_time(transformer_layer_ops(dropped, 1, 1, False, layer, ep=8), H100, FITTED)
    assert dropless > padded


def test_deepseek_v3_forward_flops_follow_its_active_parameters() -> None:
    """About 2 FLOPs per active weight per token (37B active of 671B, DeepSeek-V3 report), plus attention."""
    model = model_from_fields(MODEL_PRESETS["deepseek-v3"])
    flops = sum(n * layer_forward_matmul_flops(model, layer) for layer, n in model.layer_stacks())
    per_token = flops / model.seq_length
    moe = model.moe
    assert moe is not None
    moe_layers = model.num_layers - moe.first_dense_layers
    inactive = moe_layers * (moe.num_experts - moe.top_k) * model.expert_parameters() // moe.num_experts
    active_layers = model.total_parameters() - inactive - 2 * model.vocab_size * model.hidden_size
    attention = per_token - 2 * active_layers
    mla = model.mla
    assert mla is not None
    # scores over 128 + 64 dims and values over 128, for 128 heads over 4096 keys, in all 61 layers
    scores_and_values = 2 * 128 * (128 + 64 + 128) * model.seq_length * model.num_layers
    assert attention == pytest.approx(scores_and_values, rel=0.02)
    assert model.total_parameters() - inactive == pytest.approx(37.5e9, rel=0.03)


def test_fitted_host_time_is_the_bounded_fit_and_moves_neither_row() -> None:
    """MOE_HOST_KERNEL_S is what bench/fit_moe.py gives on its 5-25 us grid: with grouped GEMMs neither calibration
    row is host-bound, so both rows come out the same at either end of the range and the fit takes the low end."""
    rows = [c for c in load_reference(None, modern.REFERENCE) if c["id"] in MOE_CALIBRATION_ROWS]
    assert len(rows) == 2
    saved = moe_kernels.MOE_HOST_KERNEL_S
    try:
        times = {}
        for host_s in (5e-6, 25e-6):
            moe_kernels.MOE_HOST_KERNEL_S = host_s
            times[host_s] = [simulate(modern.scenario_for(c)).metrics.iteration_time_s for c in rows]
    finally:
        moe_kernels.MOE_HOST_KERNEL_S = saved
    for low, high in zip(times[5e-6], times[25e-6]):
        assert high == pytest.approx(low, rel=0.01)
        assert high >= low
    assert saved == 5e-6
