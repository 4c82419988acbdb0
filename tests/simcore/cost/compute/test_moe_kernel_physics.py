"""A fine-grained MoE layer (128 experts, top-8, expert FFN 768, hidden 2048: Qwen3-30B-A3B) as Megatron-Core runs
it, one grouped GEMM for the local experts: on H100 and B200 it is not launch-bound. FP8 is faster than BF16,
B200 faster per GPU than H100, microbatch 4 at most 1.5x faster per token than microbatch 1, and backward between
1.6x and 2.4x its forward (issue 31's acceptance)."""

from __future__ import annotations

import pytest

from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.moe_kernels import backward_ops, sequence_time, transformer_layer_ops
from simcore.cost.parameters import FITTED
from simcore.domain.layout import Fp8Recipe
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from topology.hardware import GPUS, GpuKind

MODEL = model_from_fields(MODEL_PRESETS["qwen3-30b-a3b"])
LAYER = MODEL.layer_stacks()[-1][0]
EP = 8  # 16 local experts a rank, as the published 8-GPU runs lay them out
KINDS = (GpuKind.H100_80GB, GpuKind.B200_180GB)
PRECISIONS = (None, Fp8Recipe.TENSORWISE)


def test_the_layer_is_the_fine_grained_one() -> None:
    moe = MODEL.moe
    assert moe is not None and LAYER.moe
    assert (moe.num_experts, moe.top_k, moe.ffn_hidden_size, MODEL.hidden_size) == (128, 8, 768, 2048)


def _pass_s(kind: GpuKind, b: int, fp8: Fp8Recipe | None) -> tuple[float, float]:
    """(forward, backward) seconds of one layer on one rank, microbatch b of 4096-token samples."""
    ops = transformer_layer_ops(MODEL, b, 1, False, LAYER, fp8, ep=EP)
    gpu = GPUS[kind]
    return sequence_time(ops, gpu, FITTED), ops_time(backward_ops(ops), gpu, FITTED)


def _step_s(kind: GpuKind, b: int, fp8: Fp8Recipe | None) -> float:
    return sum(_pass_s(kind, b, fp8))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("b", [1, 4])
def test_fp8_is_faster_than_bf16(kind: GpuKind, b: int) -> None:
    assert _step_s(kind, b, Fp8Recipe.TENSORWISE) < _step_s(kind, b, None)


@pytest.mark.parametrize("fp8", PRECISIONS)
@pytest.mark.parametrize("b", [1, 4])
def test_b200_is_faster_per_gpu_than_h100(fp8: Fp8Recipe | None, b: int) -> None:
    assert _step_s(GpuKind.B200_180GB, b, fp8) < _step_s(GpuKind.H100_80GB, b, fp8)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fp8", PRECISIONS)
def test_microbatch_4_is_at_most_1_5x_faster_per_token(kind: GpuKind, fp8: Fp8Recipe | None) -> None:
    per_token_1 = _step_s(kind, 1, fp8)
    per_token_4 = _step_s(kind, 4, fp8) / 4
    assert per_token_4 <= per_token_1  # more tokens a kernel never costs more per token
    assert per_token_1 <= 1.5 * per_token_4


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fp8", PRECISIONS)
@pytest.mark.parametrize("b", [1, 4])
def test_backward_is_1_6_to_2_4_times_forward(kind: GpuKind, fp8: Fp8Recipe | None, b: int) -> None:
    forward, backward = _pass_s(kind, b, fp8)
    assert 1.6 <= backward / forward <= 2.4


def test_the_experts_are_one_grouped_gemm_each_way() -> None:
    """16 local experts: one fc1 and one fc2 kernel, each with one FP8 quantization that issues no launch of its own."""
    ops = transformer_layer_ops(MODEL, 1, 1, False, LAYER, Fp8Recipe.TENSORWISE, ep=EP)
    experts = [op for op in ops if op.name in ("expert_fc1", "expert_fc2")]
    assert [op.group for op in experts] == [16, 16]
    casts = [op for op in ops if op.name.startswith("fp8_quantize_expert")]
    assert len(casts) == 2 and all(op.fused_host for op in casts)
