"""LoRA fine-tuning (simcore/domain/lora.py, simcore/cost/compute/lora.py) in closed forms: the weight-gradient FLOPs
drop by the frozen share, the data-parallel gradient bytes are the adapters' bytes, and memory drops by the base's
gradients and optimizer states."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore import MODEL_PRESETS, Layout, Recompute, Scenario, model_from_fields, simulate
from simcore.cost.compute.kernel_time import ops_time, weight_gradient_time
from simcore.cost.compute.kernels import PROJECTIONS, OpKind
from simcore.cost.compute.lora import frozen_ops
from simcore.cost.compute.moe_kernels import backward_ops, transformer_layer_ops
from simcore.cost.memory import OPTIMIZER_BYTES, WEIGHT_BYTES, stage_memory
from simcore.cost.parameters import FITTED
from simcore.cost.workload import build_workload, layer_kernels
from simcore.domain.lora import Lora, LoraTarget
from simcore.errors import SpecError
from topology import NODE_PRESETS, sized
from topology.hardware import GPUS, GpuKind

LLAMA2_70B = model_from_fields({**MODEL_PRESETS["llama2-70b"], "seq_length": 8192})
MLPERF = Lora(16, (LoraTarget.QKV, LoraTarget.PROJ), 0.1)  # llama2_70b_lora: r 16 on qkv and o_proj
H100 = GPUS[GpuKind.H100_80GB]


def _lora(model: object, lora: Lora = MLPERF) -> object:
    return replace(model, lora=lora)  # type: ignore[type-var]


def _flops(ops: tuple) -> float:  # type: ignore[type-arg]
    return sum(op.flops for op in ops)


@pytest.mark.parametrize("targets", [(LoraTarget.QKV, LoraTarget.PROJ), tuple(LoraTarget)])
def test_weight_gradient_flops_drop_by_the_frozen_share(targets: tuple[LoraTarget, ...]) -> None:
    """Backward FLOPs of a LoRA layer = full training's - the frozen GEMMs' weight gradients (each its forward's
    FLOPs) + the adapters' forward and backward (3x their forward's)."""
    t, layer = 4, LLAMA2_70B.main_layer()
    lora = Lora(16, targets)
    full = transformer_layer_ops(LLAMA2_70B, 1, t, True, layer)
    tuned = transformer_layer_ops(_lora(LLAMA2_70B, lora), 1, t, True, layer)  # type: ignore[arg-type]
    adapters = tuple(op for op in tuned if op.name.startswith(("lora_a_", "lora_b_")))
    frozen = sum(op.flops for op in full if op.name in PROJECTIONS)
    assert len(adapters) == 2 * len(targets)
    assert _flops(tuple(op.backward() for op in tuned)) == pytest.approx(
        _flops(tuple(op.backward() for op in full)) - frozen + 2 * _flops(adapters), rel=1e-12)
    # the adapters' FLOPs per rank: 2 tokens r (in + out) / t per target
    tokens = 8192
    assert _flops(adapters) == pytest.approx(
        sum(2 * tokens * 16 * sum(lora.dims(LLAMA2_70B, target)) / t for target in targets), rel=1e-12)
    # no weight-gradient time on a frozen GEMM, and the zero-bubble W share is the adapters' alone
    for op in tuned:
        if op.kind is OpKind.GEMM and op.name in PROJECTIONS:
            assert op.frozen and weight_gradient_time(op.backward(), H100, FITTED) == 0.0


def test_a_frozen_layers_backward_costs_about_half_a_trained_ones() -> None:
    """Without recomputation a frozen layer's backward is its input gradients plus the attention core (which has no
    weights) and the memory-bound kernels: 0.4-0.6 of a trained layer's (the issue's acceptance). MLPerf's
    adapters (r 16 on qkv and proj, dropout 0.1) bring it to about 0.6."""
    layout = Layout(dp=1, tp=4, pp=1, microbatch_size=1, global_batch_size=1, sequence_parallel=True)
    layer = LLAMA2_70B.main_layer()
    ops = transformer_layer_ops(LLAMA2_70B, 1, 4, True, layer)
    frozen = ops_time(backward_ops(frozen_ops(ops)), H100, FITTED) / ops_time(backward_ops(ops), H100, FITTED)
    assert 0.4 <= frozen <= 0.6 and frozen == pytest.approx(0.58, abs=0.01)
    full = layer_kernels(LLAMA2_70B, layer, layout, H100, FITTED)
    tuned = layer_kernels(_lora(LLAMA2_70B), layer, layout, H100, FITTED)  # type: ignore[arg-type]
    assert frozen < tuned.backward / full.backward == pytest.approx(0.60, abs=0.01)
    assert tuned.backward_weight < 0.02 * full.backward_weight  # W: the adapters' weight gradients only


def _workload_and_memory(model: object, dp: int, zero: int) -> tuple[object, object]:
    layout = Layout(dp=dp, tp=4, pp=2, microbatch_size=1, global_batch_size=8 * dp, sequence_parallel=True,
                    zero_stage=zero, recompute=Recompute.FULL)
    workload = build_workload(model, layout, H100, None, None, free_communication=True)  # type: ignore[arg-type]
    return workload, stage_memory(model, layout, workload)  # type: ignore[arg-type]


def test_the_data_parallel_gradient_bytes_are_the_adapters_bytes() -> None:
    tuned = _lora(LLAMA2_70B)
    workload, _ = _workload_and_memory(tuned, 2, 1)
    per_layer = MLPERF.parameters_per_layer(LLAMA2_70B) // 4  # per tensor rank
    for rank, grad_bytes in enumerate(workload.grad_bytes):  # type: ignore[attr-defined]
        layers = sum(c.layers for c in workload.chunks if c.rank == rank)  # type: ignore[attr-defined]
        # the adapters' gradients alone, reduced as full training's are (fp32 for bf16 training: GRAD_REDUCE_BYTES)
        assert grad_bytes == layers * per_layer * Layout(2, 4, 2, 1, 8).grad_reduce_bytes == layers * per_layer * 4
    assert workload.embedding_sync_bytes == 0.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_memory_drops_by_the_bases_gradients_and_optimizer_states(zero: int) -> None:
    dp = 2
    (_, full), (tuned_workload, tuned) = (_workload_and_memory(m, dp, zero) for m in (LLAMA2_70B,
                                                                                     _lora(LLAMA2_70B)))
    for rank, (a, b) in enumerate(zip(full, tuned)):  # type: ignore[call-overload]
        chunks = [c for c in tuned_workload.chunks if c.rank == rank]  # type: ignore[attr-defined]
        base = sum(c.frozen_parameters for c in chunks)
        adapters = sum(c.parameters for c in chunks) - base
        assert adapters == sum(c.layers for c in chunks) * (MLPERF.parameters_per_layer(LLAMA2_70B) // 4)
        assert b.weights == pytest.approx(a.weights + WEIGHT_BYTES * adapters)  # base in 16-bit, adapters beside
        # the adapters' gradients in Megatron-Core's gradient buffer: fp32 for bf16 training
        assert b.gradients == pytest.approx(4 * adapters / (dp if zero >= 2 else 1))
        assert b.optimizer_states == pytest.approx(OPTIMIZER_BYTES * adapters / (dp if zero >= 1 else 1))
        assert a.optimizer_states - b.optimizer_states == pytest.approx(
            OPTIMIZER_BYTES * (base - adapters) / (dp if zero >= 1 else 1))
        assert b.optimizer_states < 0.0007 * a.optimizer_states  # the issue asks under 1% for Llama 2 70B
        assert b.activations == a.activations  # (activations are counted as full training's: an upper bound)


def test_lora_is_faster_than_full_training_with_the_same_layout() -> None:
    layout = Layout(dp=2, tp=4, pp=2, microbatch_size=1, global_batch_size=16, sequence_parallel=True,
                    zero_stage=1, recompute=Recompute.FULL)
    cluster = sized(NODE_PRESETS["dgx-h100"], 16)
    full = simulate(Scenario(LLAMA2_70B, cluster, layout)).metrics
    tuned = simulate(Scenario(_lora(LLAMA2_70B), cluster, layout)).metrics  # type: ignore[arg-type]
    assert tuned.iteration_time_s < 0.9 * full.iteration_time_s
    assert tuned.communication_bytes["dp"] < 1e-3 * full.communication_bytes["dp"]


@pytest.mark.parametrize(("lora", "field"), [
    ({"rank": 8193}, "model.lora.rank"),
    ({"rank": 0}, "model.lora.rank"),
    ({"rank": 16, "targets": ["q"]}, "model.lora.targets"),
    ({"rank": 16, "dropout": 1.0}, "model.lora.dropout"),
])
def test_bad_lora_is_refused_with_the_field(lora: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as err:
        model_from_fields({**MODEL_PRESETS["llama2-70b"], "lora": lora})
    assert err.value.field == field


def test_lora_with_zero3_or_on_a_moe_model_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        model_from_fields({**MODEL_PRESETS["mixtral-8x7b"], "lora": {"rank": 16}})
    assert err.value.field == "model.lora"
    layout = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, zero_stage=3)
    with pytest.raises(SpecError) as err:
        simulate(Scenario(_lora(LLAMA2_70B), sized(NODE_PRESETS["dgx-h100"], 8), layout))  # type: ignore[arg-type]
    assert err.value.field == "layout.zero_stage"
