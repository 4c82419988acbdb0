"""The closed-form estimate that orders candidates: the cost model's own compute, optimizer and ring terms put
together as Narayanan et al.'s pipeline formula."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore import FITTED, GPUS, MODEL_PRESETS, NODE_PRESETS, Layout, Recompute, model_from_fields, sized
from simcore.cost.comm.collectives import Collective, CollectiveAlgorithm
from simcore.cost.comm.grad_buckets import gradient_buckets
from simcore.cost.comm.groups import tensor_parallel_groups
from simcore.cost.comm.tp_time import tp_collectives_s
from simcore.cost.compute.kernels import BYTES
from simcore.cost.compute.optimizer import optimizer_step_s
from simcore.cost.parameters import LINK_EFFICIENCY
from simcore.cost.partition import stage_costs
from simcore.domain.placement import place
from simcore.network import build_network
from simcore.planning.estimate import Estimator

GPT_1_3B = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])  # 24 layers, hidden 2048, seq 2048
CLUSTER = sized(NODE_PRESETS["dgx-a100"], 16)
A100 = GPUS[CLUSTER.gpu]


def test_one_gpu_per_replica_is_microbatches_times_the_cost_models_compute_plus_the_optimizer() -> None:
    layout = Layout(dp=1, tp=1, pp=1, microbatch_size=2, global_batch_size=8, recompute=Recompute.SELECTIVE)
    costs = stage_costs(GPT_1_3B, 2, 1, False, "selective", A100, FITTED)
    (layer, count), = GPT_1_3B.layer_stacks()
    stage = count * costs.layer[layer] + costs.embedding + costs.logits
    expected = 4 * stage + optimizer_step_s(GPT_1_3B.total_parameters(), A100, FITTED, False)
    assert Estimator(GPT_1_3B, CLUSTER).iteration_s(layout) == pytest.approx(expected, rel=1e-12)


def test_tensor_parallel_all_reduces_and_gradients_are_the_engines_collectives() -> None:
    """TP 8 inside a node: four all-reduces of the activation per layer (two a direction), each the engine's (the
    collective model on both replicas' groups: NCCL's choice for the size, over NVLink, a little slower than a
    ring at NVLink's bus rate). DP 2 across nodes: one all-reduce of the whole gradient (one bucket without
    overlap_grad_reduce), priced as the engine prices it, all exposed; with overlap, a tenth of it."""
    estimator = Estimator(GPT_1_3B, CLUSTER)
    layout = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=2, overlap_grad_reduce=False)
    costs = estimator.stage_costs(layout)
    (layer, count), = GPT_1_3B.layer_stacks()
    compute = count * costs.layer[layer] + costs.embedding + costs.logits
    message = BYTES * GPT_1_3B.seq_length * GPT_1_3B.hidden_size
    network = build_network(CLUSTER, CollectiveAlgorithm.AUTO)
    one = tp_collectives_s(network.collectives, tensor_parallel_groups(place(2, 8, 1, layout.placement, 16), 0,
                                                                       range(2)), message, False)
    ring = (2 * 7 / 8) * message / (CLUSTER.nvlink_bandwidth_bytes_per_s * LINK_EFFICIENCY["nvlink"])
    assert ring < one < 2 * ring
    tp = count * 4 * one
    params = GPT_1_3B.total_parameters() / 8
    dp = estimator.dp_collective_s(layout, Collective.ALL_REDUCE, int(params) * layout.grad_reduce_bytes)
    expected = compute + tp + dp + optimizer_step_s(params, A100, FITTED, False)
    assert estimator.iteration_s(layout) == pytest.approx(expected, rel=1e-12)
    hidden = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=2, overlap_grad_reduce=True)
    buckets = gradient_buckets(int(params), count, 2, 0, True, 0)
    assert len(buckets) > 1  # Megatron's 40M-element buckets
    dp_hidden = sum(estimator.dp_collective_s(hidden, Collective.ALL_REDUCE, n * hidden.grad_reduce_bytes)
                    for n in buckets)
    assert estimator.iteration_s(hidden) == pytest.approx(expected - dp + 0.1 * dp_hidden, rel=1e-12)


def test_a_data_parallel_collective_is_the_engines_phases() -> None:
    """The estimate's data-parallel collective is the engine's phases for the same placement and size, alone on
    the links; across 2 nodes a large all-reduce moves at about the node's NICs (2(d-1)/d of the bytes, shared by
    the node's 8 tensor ranks' groups)."""
    estimator = Estimator(GPT_1_3B, CLUSTER)
    layout = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=2)
    size = 4e9
    network = build_network(CLUSTER, CollectiveAlgorithm.AUTO)
    phases = network.collectives.data_parallel_phases(Collective.ALL_REDUCE, place(2, 8, 1, layout.placement, 16),
                                                      0, size)
    engine = sum(p.latency_s + size / p.isolated_rate(network.collectives.capacity) for p in phases)
    assert estimator.dp_collective_s(layout, Collective.ALL_REDUCE, size) == pytest.approx(engine, rel=1e-12)
    nics = CLUSTER.nics_per_node * CLUSTER.nic_bandwidth_bytes_per_s * LINK_EFFICIENCY["ib"] / 8
    assert engine == pytest.approx(size / nics, rel=0.2)


def test_zero_2_microbatches_take_their_reduce_scatters_when_those_are_longer_than_the_passes() -> None:
    """ZeRO 2 reduce-scatters every microbatch's gradient buckets on its own stream: with short sequences that
    traffic takes longer than the passes, so each microbatch takes the traffic's time; the bubble (one stage
    time with 2 stages) stays the passes', shorter than a microbatch's traffic."""
    model = replace(GPT_1_3B, seq_length=128)
    estimator = Estimator(model, CLUSTER)
    layout = Layout(dp=8, tp=1, pp=2, microbatch_size=1, global_batch_size=64, zero_stage=2,
                    overlap_grad_reduce=True, placement="pp,dp,tp")  # each DP group over both nodes
    per_rank = estimator._layers_per_rank(layout)
    params = model.total_parameters() / 2
    stream = sum(estimator.dp_collective_s(layout, Collective.REDUCE_SCATTER, n * layout.grad_reduce_bytes)
                 for n in gradient_buckets(int(params), max(per_rank), 8, 2, True, 0))
    optimizer = optimizer_step_s(params / 8, A100, FITTED, False)
    m = layout.num_microbatches
    assert m * stream + optimizer < estimator.iteration_s(layout) < (m + 1) * stream + optimizer
    assert estimator.iteration_s(layout) > estimator.iteration_s(replace(layout, zero_stage=1))


def test_a_tensor_parallel_group_across_nodes_is_slower() -> None:
    estimator = Estimator(GPT_1_3B, CLUSTER)
    inside = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=32, placement="tp,dp,pp")
    across = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=32, placement="dp,tp,pp")
    assert estimator.tokens_per_s(across) < estimator.tokens_per_s(inside)


def test_more_microbatches_shrink_the_bubble() -> None:
    """(m + p - 1) stage times: per sample, 8 stages with 64 microbatches cost less than with 8."""
    estimator = Estimator(GPT_1_3B, CLUSTER)
    few = Layout(dp=2, tp=1, pp=8, microbatch_size=1, global_batch_size=16)
    many = Layout(dp=2, tp=1, pp=8, microbatch_size=1, global_batch_size=128)
    assert estimator.tokens_per_s(many) > 1.5 * estimator.tokens_per_s(few)


def test_zero_3_gathers_run_beside_the_gradients_stream_so_only_their_transfers_add_up() -> None:
    """ZeRO 3 gathers each layer on a stream of its own beside the gradients' reduce-scatters (the engine's two
    streams): a microbatch takes the longer of the two, or both streams' transfers together where the links are
    the limit, not their sum with every latency."""
    model = replace(GPT_1_3B, seq_length=128)
    estimator = Estimator(model, CLUSTER)
    layout = Layout(dp=8, tp=1, pp=2, microbatch_size=1, global_batch_size=64, zero_stage=3,
                    overlap_grad_reduce=True, placement="pp,dp,tp")
    layers = max(estimator._layers_per_rank(layout))
    params = model.total_parameters() / 2
    reduce = [estimator._collective_parts(layout, Collective.REDUCE_SCATTER, n * layout.grad_reduce_bytes)
              for n in gradient_buckets(int(params), layers, 8, 3, True, 0)]
    latency, moving = estimator._collective_parts(layout, Collective.ALL_GATHER, params / layers * BYTES)
    gathers = 2 * layers * (latency + moving)
    stream = max(sum(map(sum, reduce)), gathers, sum(m for _, m in reduce) + 2 * layers * moving)
    assert stream < sum(map(sum, reduce)) + gathers  # the latencies overlap
    optimizer = optimizer_step_s(params / 8, A100, FITTED, False)
    m = layout.num_microbatches
    assert m * stream + optimizer < estimator.iteration_s(layout) < (m + 1) * stream + optimizer
