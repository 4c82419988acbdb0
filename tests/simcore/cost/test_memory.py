"""The memory model: Korthikanti et al.'s activation formulas, ZeRO's sharding, microbatches in flight."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.memory import in_flight, layer_activation_bytes, walk_in_flight
from simcore.domain.layout import Layout, Precision, Recompute, Schedule
from simcore.domain.model import AttentionKind, model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.domain.schedules import BACKWARD, POLICIES
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

GPT3 = model_from_fields(MODEL_PRESETS["gpt3-175b"])
S, H, A = GPT3.seq_length, GPT3.hidden_size, GPT3.num_attention_heads


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("b", [1, 4])
def test_selective_with_sequence_parallel_is_34_sbh_over_t(t: int, b: int) -> None:
    got = layer_activation_bytes(GPT3, b, t, True, Recompute.SELECTIVE)
    assert got == pytest.approx(34 * S * b * H / t, rel=0.05)


def test_no_recompute_keeps_several_times_more() -> None:
    selective = layer_activation_bytes(GPT3, 1, 8, True, Recompute.SELECTIVE)
    none = layer_activation_bytes(GPT3, 1, 8, True, Recompute.NONE)
    assert none == pytest.approx(S * H / 8 * (34 + 5 * A * S / H), rel=0.05)
    assert none > 3 * selective


def test_tensor_parallel_only_and_full_recompute_formulas() -> None:
    t = 8
    assert layer_activation_bytes(GPT3, 1, t, False, Recompute.NONE) == pytest.approx(
        S * H * (10 + 24 / t + 5 * A * S / (H * t)), rel=0.05)
    assert layer_activation_bytes(GPT3, 1, t, False, Recompute.FULL) == pytest.approx(2 * S * H)
    assert layer_activation_bytes(GPT3, 1, t, True, Recompute.FULL) == pytest.approx(2 * S * H / t)


def test_flash_attention_keeps_no_score_matrix() -> None:
    flash = dataclasses.replace(GPT3, attention=AttentionKind.FLASH)
    assert layer_activation_bytes(flash, 1, 8, True, Recompute.NONE) == pytest.approx(34 * S * H / 8, rel=0.05)


def test_microbatches_in_flight_follow_the_schedule() -> None:
    layers = {0: 3}
    one_f_one_b = Layout(dp=1, tp=1, pp=4, microbatch_size=1, global_batch_size=16)
    assert [in_flight(one_f_one_b, r, layers) for r in range(4)] == [12, 9, 6, 3]  # (p - r) microbatches
    gpipe = dataclasses.replace(one_f_one_b, schedule=Schedule.GPIPE)
    assert in_flight(gpipe, 0, layers) == 16 * 3
    interleaved = dataclasses.replace(one_f_one_b, schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=2)
    assert in_flight(interleaved, 0, {0: 3, 1: 3}) > in_flight(one_f_one_b, 0, {0: 3}) // 2


@pytest.mark.parametrize("schedule", [Schedule.ONE_F_ONE_B, Schedule.GPIPE])
@pytest.mark.parametrize(("pp", "m"), [(1, 1), (1, 5), (4, 2), (4, 4), (4, 16), (8, 3)])
def test_one_chunk_closed_form_equals_walking_the_schedule(schedule: Schedule, pp: int, m: int) -> None:
    layout = Layout(dp=1, tp=1, pp=pp, microbatch_size=1, global_batch_size=m, schedule=schedule)
    for rank in range(pp):
        assert in_flight(layout, rank, {0: 2.5}) == walk_in_flight(layout, rank, {0: 2.5})


def gpt_1t_first_stage() -> tuple[float, float]:
    model = model_from_fields(MODEL_PRESETS["gpt-1t"])
    layout = Layout(dp=6, tp=8, pp=64, microbatch_size=1, global_batch_size=3072, recompute=Recompute.FULL)
    stage = simulate(Scenario(model, sized(NODE_PRESETS["dgx-a100"], 3072), layout)).metrics.stages[0]
    states = stage.memory.weights + stage.memory.gradients + stage.memory.optimizer_states
    return states, stage.memory.activations


def test_1t_first_stage_reports_states_and_activations_separately() -> None:
    states, activations = gpt_1t_first_stage()
    model = model_from_fields(MODEL_PRESETS["gpt-1t"])
    params = (2 * model.parameters_per_layer() + model.embedding_parameters()) / 8  # two layers and the embedding
    # bf16 weights (2), Megatron-Core's fp32 gradient buffer (4: bf16 reduces in fp32), fp32 master weights and
    # moments (12): 18 bytes a parameter
    assert states == pytest.approx(18 * params, rel=0.01)
    # 64 microbatches in flight (1F1B, first stage) x 2 layers x the layer input 2sbh, plus one layer recomputed
    assert activations == pytest.approx(64 * 2 * 2 * 2048 * 25600 + 2048 * 25600 * (10 + 24 / 8 + 5 * 160 * 2048
                                                                                     / (25600 * 8)), rel=0.05)


def zero_bytes(stage: int, m: int) -> float:
    model = model_from_fields({"num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16, "vocab_size": 32000,
                               "seq_length": 1024})
    layout = Layout(dp=16, tp=1, pp=1, microbatch_size=1, global_batch_size=16 * m, zero_stage=stage,
                    overlap_grad_reduce=True, precision=Precision.FP16)
    metrics = simulate(Scenario(model, sized(NODE_PRESETS["dgx-a100"], 16), layout)).metrics
    return metrics.communication_bytes["dp"] + metrics.communication_bytes["zero"]


def test_zero3_moves_one_and_a_half_times_zero1_with_one_microbatch() -> None:
    """With gradients and parameters of the same width (fp16) ZeRO 1 moves 2x the parameters, ZeRO 3 3x."""
    assert zero_bytes(3, 1) == pytest.approx(1.5 * zero_bytes(1, 1), rel=0.05)
    assert zero_bytes(2, 1) == pytest.approx(zero_bytes(1, 1), rel=0.05)


def test_zero2_and_3_traffic_grows_with_microbatches_zero1_does_not() -> None:
    assert zero_bytes(1, 4) == pytest.approx(zero_bytes(1, 1))
    assert zero_bytes(2, 4) > 2 * zero_bytes(2, 1)
    assert zero_bytes(3, 4) > 2 * zero_bytes(3, 1)


def test_memory_divides_by_zero_stage() -> None:
    model = model_from_fields({"num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16, "vocab_size": 32000,
                               "seq_length": 1024})
    memories = []
    for stage in range(4):
        layout = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8, zero_stage=stage)
        memories.append(simulate(Scenario(model, sized(NODE_PRESETS["dgx-a100"], 8), layout)).metrics.stages[0].memory)
    assert memories[1].optimizer_states == pytest.approx(memories[0].optimizer_states / 8)
    assert memories[2].gradients == pytest.approx(memories[0].gradients / 8)
    assert memories[3].weights == pytest.approx(memories[0].weights / 8)
    assert memories[0].total > memories[1].total > memories[2].total > memories[3].total - memories[3].buffers


@pytest.mark.parametrize("schedule, v", [(Schedule.GPIPE, 1), (Schedule.ONE_F_ONE_B, 1),
                                         (Schedule.INTERLEAVED_1F1B, 2), (Schedule.INTERLEAVED_1F1B, 3)])
def test_memoised_walk_gives_the_walks_peak(schedule: Schedule, v: int) -> None:
    pp, m = 4, 8
    layout = Layout(dp=1, tp=1, pp=pp, microbatch_size=1, global_batch_size=m, schedule=schedule, virtual_stages=v)
    for rank in range(pp):
        for sizes in ({c: 3.0 + 2 * c for c in range(v)}, {c: 7.0 - c for c in range(v)}):
            held = peak = 0.0
            for ps in POLICIES[schedule].passes(rank, pp, m, v):
                held += sizes[ps.chunk] * (-1 if ps.direction == BACKWARD else 1)
                peak = max(peak, held)
            assert walk_in_flight(layout, rank, sizes) == peak
