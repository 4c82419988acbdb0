"""The closed-form estimate that orders candidates: the cost model's own compute, optimizer and ring terms put
together as Narayanan et al.'s pipeline formula."""

from __future__ import annotations

import pytest

from simcore import FITTED, GPUS, MODEL_PRESETS, NODE_PRESETS, Layout, Recompute, model_from_fields, sized
from simcore.cost.kernels import BYTES, optimizer_step_s
from simcore.cost.parameters import LINK_EFFICIENCY
from simcore.cost.partition import stage_costs
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


def test_tensor_parallel_all_reduces_ride_nvlink_and_gradients_the_shared_nics() -> None:
    """TP 8 inside a node: four ring all-reduces of the activation per layer (two a direction), 2(t-1)/t of it
    over NVLink at NCCL's efficiency. DP 2 across nodes: one all-reduce of the gradients, 2(d-1)/d of them over
    the node's NICs shared by its 8 GPUs, all exposed without overlap_grad_reduce."""
    estimator = Estimator(GPT_1_3B, CLUSTER)
    layout = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=2, overlap_grad_reduce=False)
    costs = estimator.stage_costs(layout)
    (layer, count), = GPT_1_3B.layer_stacks()
    compute = count * costs.layer[layer] + costs.embedding + costs.logits
    message = BYTES * GPT_1_3B.seq_length * GPT_1_3B.hidden_size
    nvlink = CLUSTER.nvlink_bandwidth_bytes_per_s * LINK_EFFICIENCY["nvlink"]
    nics = CLUSTER.nics_per_node * CLUSTER.nic_bandwidth_bytes_per_s * LINK_EFFICIENCY["ib"] / 8
    tp = count * 4 * (2 * 7 / 8) * message / nvlink
    params = GPT_1_3B.total_parameters() / 8
    dp = (2 * 1 / 2) * params * layout.grad_reduce_bytes / nics
    expected = compute + tp + dp + optimizer_step_s(params, A100, FITTED, False)
    assert estimator.iteration_s(layout) == pytest.approx(expected, rel=1e-12)
    hidden = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=2, overlap_grad_reduce=True)
    assert estimator.iteration_s(hidden) == pytest.approx(expected - 0.9 * dp, rel=1e-12)


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
