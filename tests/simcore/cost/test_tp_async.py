"""Megatron's asynchronous input-gradient collectives (simcore/cost/tp_async.py): each column-parallel projection's
all-reduce (reduce-scatter with sequence parallelism) hides under its own weight-gradient GEMM in backward; the
forward and the row-parallel side are untouched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.cost.chunk import ChunkCost
from simcore.cost.comm.collectives import Collective
from simcore.cost.compute.moe_kernels import transformer_layer_ops
from simcore.cost.parameters import FITTED
from simcore.cost.tp_async import column_weight_gradients, hidden_backward_s
from simcore.cost.workload import build_workload
from simcore.domain.layout import CollectiveAlgorithm, Layout
from simcore.domain.model import ModelShape, model_from_fields
from simcore.domain.placement import place
from simcore.network import build_network
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

A100 = NODE_PRESETS["dgx-a100"]
GPT = {"architecture": "decoder_only", "num_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
       "vocab_size": 32000, "seq_length": 1024}
T5 = {"architecture": "encoder_decoder", "encoder_layers": 2, "decoder_layers": 2, "hidden_size": 2048,
      "num_attention_heads": 32, "head_dim": 64, "ffn_hidden_size": 5120, "gated_mlp": True, "vocab_size": 29184,
      "seq_length": 512, "decoder_seq_length": 128, "tied_embeddings": True}


def chunk(fields: dict[str, object], gpus: int, node: object = A100, **layout: object) -> tuple[ChunkCost, Scenario]:
    lay = Layout(**{"dp": 1, "pp": 1, "global_batch_size": 8, "microbatch_size": 8, **layout})  # type: ignore[arg-type]
    scenario = Scenario(model_from_fields(fields), sized(node, gpus), lay)  # type: ignore[arg-type]
    network = build_network(scenario.cluster, scenario.algorithm)
    placement = place(lay.dp, lay.tp, lay.pp, lay.placement, gpus, lay.cp)
    workload = build_workload(scenario.model, lay, scenario.cluster.hardware, placement, network.collectives)
    return workload.chunks[0], scenario


def both(fields: dict[str, object], gpus: int, node: object = A100, **layout: object) -> tuple[ChunkCost, ChunkCost]:
    off, _ = chunk(fields, gpus, node, **layout)
    on, _ = chunk(fields, gpus, node, async_tensor_model_parallel_allreduce=True, **layout)
    return off, on


def test_a_collective_hides_up_to_its_own_projections_weight_gradient() -> None:
    wgrads = (("qkv", 3.0), ("cross_q", 0.5), ("mlp_up", 4.0), ("cross_kv", 1.0))
    assert hidden_backward_s(wgrads, 2.0, 1.5) == pytest.approx(2.0 + 0.5 + 2.0 + 1.0)
    assert hidden_backward_s((), 2.0, 1.5) == 0.0


def hidden_per_layer(fields: dict[str, object], gpus: int, tp: int, tokens: int, sp: bool = False,
                     cross: int = 0) -> float:
    """What the model should hide in one layer: each column projection's collective up to its weight gradient."""
    model: ModelShape = model_from_fields(fields)
    layer = model.decoder_layer() if cross else model.main_layer()
    wgrads = column_weight_gradients(transformer_layer_ops(model, 8, tp, sp, layer), A100.hardware, FITTED)
    collectives = build_network(sized(A100, gpus), CollectiveAlgorithm.AUTO).collectives
    groups = [tuple(range(tp))]
    kind = Collective.REDUCE_SCATTER if sp else Collective.ALL_REDUCE
    block = collectives.isolated_time(kind, groups, tokens * model.hidden_size * 2)
    encoder = collectives.isolated_time(kind, groups, 8 * cross * model.hidden_size * 2) if cross else 0.0
    assert {name for name, _ in wgrads} == ({"qkv", "cross_q", "mlp_up", "cross_kv"} if cross else {"qkv", "mlp_up"})
    return sum(min(encoder if name == "cross_kv" else block, seconds) for name, seconds in wgrads)


def test_each_layer_hides_its_column_collectives_up_to_their_weight_gradients() -> None:
    """Megatron without SP reduces only column-parallel input gradients in backward (the f operator): each of a
    GPT layer's two all-reduces hides up to its projection's weight gradient; the forward is untouched."""
    off, on = both(GPT, 8, tp=8)
    assert off.backward_tp_s - on.backward_tp_s == pytest.approx(4 * hidden_per_layer(GPT, 8, 8, 8 * 1024),
                                                                 rel=1e-9)
    assert 0 < on.backward_tp_s < off.backward_tp_s
    assert on.tp_hidden_backward_s == pytest.approx(off.backward_tp_s - on.backward_tp_s, rel=1e-9)
    assert on.forward_tp_s == off.forward_tp_s and on.forward_s == off.forward_s
    assert on.backward_compute_s == off.backward_compute_s
    assert off.backward_s - on.backward_s == pytest.approx(off.backward_tp_s - on.backward_tp_s, rel=1e-9)
    assert on.tp_bytes_backward == off.tp_bytes_backward  # the bytes still move


def test_with_large_weight_gradients_the_layers_backward_tp_hides_whole() -> None:
    """At h = 8192 each weight gradient outlasts its all-reduce over NVLink: the layers' backward TP time hides
    whole (without SP there is no other backward collective in a layer)."""
    wide = {**GPT, "hidden_size": 8192, "num_attention_heads": 64}
    off, on = both(wide, 8, tp=8)
    assert off.backward_tp_s - on.backward_tp_s == pytest.approx(off.backward_tp_s, rel=1e-9)


def test_t5_decoder_also_hides_the_encoder_outputs_gradient() -> None:
    off, on = both(T5, 2, tp=2)
    encoder_layer = hidden_per_layer(T5, 2, 2, 8 * 512)
    decoder_layer = hidden_per_layer(T5, 2, 2, 8 * 128, cross=512)
    assert off.backward_tp_s - on.backward_tp_s == pytest.approx(2 * encoder_layer + 2 * decoder_layer, rel=1e-9)
    assert on.forward_tp_s == off.forward_tp_s


def test_with_sequence_parallelism_only_the_reduce_scatters_hide() -> None:
    """With SP each block's backward has the row-parallel side's all-gather (exposed) and the column-parallel
    input gradient's reduce-scatter (hidden up to the weight gradient)."""
    off, on = both(GPT, 8, tp=8, sequence_parallel=True)
    assert off.backward_tp_s - on.backward_tp_s == pytest.approx(
        4 * hidden_per_layer(GPT, 8, 8, 8 * 1024, sp=True), rel=1e-9)
    assert on.backward_tp_s > 0


def test_a_collective_longer_than_its_gemm_stays_exposed_beyond_it() -> None:
    """TP 16 over two nodes with one sample of 128 tokens: each all-reduce crosses InfiniBand and outlasts its
    projection's weight gradient, so only the GEMMs' time hides."""
    fields = {**GPT, "seq_length": 128}
    off, on = both(fields, 16, tp=16, global_batch_size=1, microbatch_size=1)
    model: ModelShape = model_from_fields(fields)
    ops = transformer_layer_ops(model, 1, 16, False, model.main_layer())
    wgrad = sum(seconds for _, seconds in column_weight_gradients(ops, A100.hardware, FITTED))
    assert off.backward_tp_s - on.backward_tp_s == pytest.approx(4 * wgrad, rel=1e-9)
    assert on.backward_tp_s > 0.5 * off.backward_tp_s


def test_tp_comm_overlap_already_hides_and_the_switch_changes_nothing() -> None:
    off, on = both(GPT, 8, tp=8, sequence_parallel=True, tp_comm_overlap=True)
    assert on == off


def test_a_t5_iteration_is_faster_by_the_hidden_time() -> None:
    _, scenario = chunk(T5, 8, tp=2, dp=4, global_batch_size=32, microbatch_size=8)
    off = simulate(scenario).metrics
    on = simulate(replace(scenario, layout=replace(scenario.layout, async_tensor_model_parallel_allreduce=True))
                  ).metrics
    assert on.time_breakdown_s["tp_comm"] < off.time_breakdown_s["tp_comm"]
    assert on.iteration_time_s == pytest.approx(
        off.iteration_time_s - (off.time_breakdown_s["tp_comm"] - on.time_breakdown_s["tp_comm"]), rel=1e-9)
    assert on.time_breakdown_s["compute"] == pytest.approx(off.time_breakdown_s["compute"], rel=1e-12)
