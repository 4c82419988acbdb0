"""Heterogeneous clusters (`cluster.node_groups`, simcore/cost/per_gpu.py): every rank computes with its own
GPU, the balanced split sees the hardware, replicas on different GPUs wait for the slowest, memory is checked
against each stage's GPUs, and bad groups are refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api_schemas import parse_request
from service.convert import to_response, to_scenario
from simcore import SpecError, check, estimate_cost, simulate
from simcore.cost.partition import StageCosts, partition
from simcore.domain.layout import Partition
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS

A100, H100 = "a100-80gb", "h100-80gb"
# GPT-3 2.7B (32 layers), TP 8 x PP 4 over two DGX A100 nodes then two H100 nodes (pipeline ranks 0, 1 on A100s).
PIPELINE = {"model": {"preset": "gpt3-2.7b"},
            "cluster": {"preset": "dgx-a100",
                        "node_groups": [{"num_nodes": 2, "gpu": A100}, {"num_nodes": 2, "gpu": H100}]},
            "layout": {"dp": 1, "tp": 8, "pp": 4, "microbatch_size": 1, "global_batch_size": 16}}


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return to_response(simulate(to_scenario(parse_request(json.dumps(doc)))))


def _with(doc: dict[str, Any], section: str, **fields: Any) -> dict[str, Any]:
    return {**doc, section: {**doc[section], **fields}}


def test_the_balanced_split_beats_the_even_split_and_the_busy_fractions_say_why() -> None:
    even = _run(_with(PIPELINE, "layout", pipeline_partition="even"))
    balanced = _run(_with(PIPELINE, "layout", pipeline_partition="balanced"))
    assert [s["gpu"] for s in even["stages"]] == [A100, A100, H100, H100]
    # Even: 8 layers a stage; the H100 stages finish theirs in about 60% of the time and then wait on the
    # A100 stages, which set the pace (busy nearly all the iteration).
    assert [s["layers"]["transformer"] for s in even["stages"]] == [8, 8, 8, 8]
    busy = [s["busy_fraction"] for s in even["stages"]]
    assert min(busy[:2]) > 0.9 > 0.65 > max(busy[2:])
    assert all(even["stages"][h]["forward_s"] < 0.7 * even["stages"][a]["forward_s"] for a in (0, 1) for h in (2, 3))
    # Balanced: the H100 stages hold more layers, every stage is about as busy, the iteration is shorter.
    layers = [s["layers"]["transformer"] for s in balanced["stages"]]
    assert sum(layers) == 32 and min(layers[2:]) > max(layers[:2])
    spread = [s["busy_fraction"] for s in balanced["stages"]]
    assert max(spread) - min(spread) < 0.5 * (max(busy) - min(busy))
    assert balanced["iteration_time_s"] < 0.9 * even["iteration_time_s"]
    assert balanced["mfu"] > even["mfu"]


def test_each_stage_is_costed_on_its_own_gpu_exactly_as_on_a_cluster_of_that_gpu() -> None:
    # The same split everywhere: the H100 stages' passes cost what they cost on an all-H100 cluster, the A100
    # stages' what they cost on an all-A100 one (kernel by kernel: the ratio is not one factor).
    split = _with(PIPELINE, "layout", stage_layers=[6, 6, 10, 10])
    mixed = _run(split)
    a100 = _run({**split, "cluster": {"preset": "dgx-a100", "num_nodes": 4}})
    h100 = _run({**split, "cluster": {"preset": "dgx-h100", "num_nodes": 4}})
    for s in range(4):
        alone = a100 if s < 2 else h100
        for key in ("forward_s", "backward_s", "backward_weight_s"):
            assert mixed["stages"][s][key] == pytest.approx(alone["stages"][s][key], rel=1e-12)
    ratios = [a100["stages"][s][k] / h100["stages"][s][k] for s in (1, 3) for k in ("forward_s", "backward_s")]
    assert max(ratios) - min(ratios) > 1e-3  # not one scalar slowdown
    # MFU over the cluster's mean peak: (2 x 312 + 2 x 989.4) / 4 TFLOP/s
    mean_peak = (2 * 312e12 + 2 * 989.4e12) / 4
    assert mixed["mfu"] == pytest.approx(mixed["model_tflops_per_gpu"] * 1e12 / mean_peak, rel=1e-12)


def test_groups_of_the_clusters_own_gpu_give_the_homogeneous_result() -> None:
    doc = _with(PIPELINE, "layout", pipeline_partition="balanced")
    plain = _run({**doc, "cluster": {"preset": "dgx-a100", "num_nodes": 4}})
    grouped = _run(_with(doc, "cluster", node_groups=[{"num_nodes": 1}, {"num_nodes": 3, "gpu": A100}]))
    for stage in grouped["stages"]:
        assert stage.pop("gpu") == A100 and stage["memory"].pop("capacity_gib") == 80.0
    for result in (plain, grouped):
        result["simulator"].pop("wall_time_s")
    assert grouped == plain


def test_replicas_on_different_gpus_wait_for_the_slower_one() -> None:
    # Pure data parallelism over an A100 node and an H100 node (replica d on node d), no overlap: the H100
    # replica waits for the A100 one at the gradient all-reduce, which then runs as on two A100 nodes; the A100
    # replica's optimizer step ends the iteration.
    doc = {"model": {"preset": "gpt3-1.3b"},
           "cluster": {"preset": "dgx-a100", "node_groups": [{"num_nodes": 1, "gpu": A100},
                                                             {"num_nodes": 1, "gpu": H100}]},
           "layout": {"dp": 2, "tp": 8, "pp": 1, "global_batch_size": 16, "overlap_grad_reduce": False}}
    mixed = _run(doc)
    a100 = _run({**doc, "cluster": {"preset": "dgx-a100", "num_nodes": 2}})
    h100 = _run({**doc, "cluster": {"preset": "dgx-h100", "num_nodes": 2, "nic_bandwidth_gbit_per_s": 200.0}})
    assert mixed["simulator"]["fidelity"] == "full" and mixed["simulator"]["simulated_ranks"] == 2
    assert any(w.startswith("heterogeneous replicas: 1 of 2 ranks") for w in mixed["warnings"])
    assert h100["iteration_time_s"] < a100["iteration_time_s"]
    assert mixed["iteration_time_s"] == pytest.approx(a100["iteration_time_s"], rel=1e-9)


def test_memory_is_checked_against_each_stages_gpu() -> None:
    # GPT-3 13B, TP 8 x PP 2, 4-sample microbatches: stage 0 holds two microbatches' activations (about 49 GiB),
    # stage 1 one (about 31 GiB). On an A100 40GB node then an H100 node stage 0 overflows its A100s; with the
    # nodes the other way round every stage fits its own GPUs.
    doc = {"model": {"preset": "gpt3-13b"},
           "cluster": {"preset": "dgx-a100", "node_groups": [{"num_nodes": 1, "gpu": "a100-40gb"},
                                                             {"num_nodes": 1, "gpu": H100}]},
           "layout": {"dp": 1, "tp": 8, "pp": 2, "microbatch_size": 4, "global_batch_size": 16,
                      "stage_layers": [20, 20]}}
    result = _run(doc)
    stages = result["stages"]
    assert [s["memory"]["capacity_gib"] for s in stages] == [40.0, 80.0]
    peaks = [s["memory"]["peak_gib_per_gpu"] for s in stages]
    assert peaks[0] > 40.0 > peaks[1]
    memory = result["memory"]
    assert memory["fits"] is False and memory["capacity_gib"] == 40.0 and memory["peak_gib_per_gpu"] == peaks[0]
    assert any(w.startswith("does not fit: stage 0") and "a100-40gb" in w for w in result["warnings"])
    swapped = _run(_with(doc, "cluster", node_groups=[{"num_nodes": 1, "gpu": H100},
                                                      {"num_nodes": 1, "gpu": "a100-40gb"}]))
    memory = swapped["memory"]
    # fits; the stage reported is the one with the least room left: stage 1's 31 GiB of 40, not stage 0's 49 of 80
    assert memory["fits"] is True and memory["capacity_gib"] == 40.0
    assert memory["peak_gib_per_gpu"] == swapped["stages"][1]["memory"]["peak_gib_per_gpu"] < 40.0
    assert not any(w.startswith("does not fit") for w in swapped["warnings"])


@pytest.mark.parametrize(("cluster", "layout", "field", "rule"), [
    ({"num_nodes": 3}, {}, "cluster.node_groups", "must add up to cluster.num_nodes (3)"),
    ({"num_gpus": 24}, {}, "cluster.node_groups", "must add up to cluster.num_gpus (24)"),
    ({"node_groups": [{"num_nodes": 2, "gpu": A100, "gpus_per_node": 4}, {"num_nodes": 2, "gpu": H100}]}, {},
     "cluster.node_groups[0].gpus_per_node", "the cluster's gpus_per_node (8)"),
    ({"node_groups": [{"num_nodes": 2, "gpu": A100}, {"num_nodes": 2, "gpu": H100, "gpu_spec": {}}]}, {},
     "cluster.node_groups[1].gpu_spec", "not both"),
    ({"node_groups": [{"num_nodes": 1, "gpu": A100}, {"num_nodes": 1, "gpu_spec": {"memory_gib": 80.0}}]}, {},
     "cluster.node_groups[1].gpu_spec.peak_tflops_bf16", "is required"),
    ({"node_groups": [{"num_nodes": 1, "gpu": A100}, {"num_nodes": 3, "gpu": H100}]}, {"tp": 16, "pp": 2},
     "layout.tp", "a tensor-parallel group must run on one GPU kind"),
    ({}, {"placement": "pp,tp,dp"}, "layout.tp", "a tensor-parallel group must run on one GPU kind"),
])
def test_bad_groups_are_refused_naming_the_field(cluster: dict[str, Any], layout: dict[str, Any], field: str,
                                                 rule: str) -> None:
    doc = _with(_with(PIPELINE, "cluster", **cluster), "layout", **layout)
    with pytest.raises(SpecError) as err:
        simulate(to_scenario(parse_request(json.dumps(doc))))
    assert err.value.field == field and rule in err.value.rule


def test_the_estimate_counts_every_replica_when_replicas_differ() -> None:
    base = {"model": {"preset": "gpt3-1.3b"},
            "layout": {"dp": 2, "tp": 8, "pp": 1, "global_batch_size": 16}}
    mixed = estimate_cost(to_scenario(parse_request(json.dumps({**base, "cluster": {
        "node_groups": [{"num_nodes": 1, "gpu": A100}, {"num_nodes": 1, "gpu": H100}]}}))))
    plain = estimate_cost(to_scenario(parse_request(json.dumps({**base, "cluster": {
        "preset": "dgx-a100", "num_nodes": 2}}))))
    assert mixed.events > plain.events and mixed.graph_elements == plain.graph_elements


def test_the_balanced_split_cuts_by_each_parts_speed() -> None:
    # 12 layers on four parts whose layers cost 2, 2, 1, 1 (no embedding or logits): 2, 2, 4, 4 layers, each
    # part then takes 4.
    model = model_from_fields(MODEL_PRESETS["gpt3-125m"])
    (layer, _count), = model.layer_stacks()
    costs = [StageCosts(layer={layer: w}, embedding=0.0, decoder_embedding=0.0, logits=0.0) for w in (2, 2, 1, 1)]
    chunks, _ = partition(model, 4, 1, Partition.BALANCED, costs)
    assert [runs[0][1] for runs in chunks] == [2, 2, 4, 4]
    chunks, _ = partition(model, 4, 1, Partition.EVEN, costs)
    assert [runs[0][1] for runs in chunks] == [3, 3, 3, 3]


@pytest.mark.parametrize(("model", "layout", "field", "rule"), [
    # a context-parallel ring over an A100 node and an H100 node
    ({"preset": "gpt3-2.7b", "attention": "flash"}, {"dp": 1, "tp": 8, "pp": 1, "cp": 2}, "layout.cp",
     "a ring must run on one GPU kind"),
    # expert parallelism across replicas on different GPUs (the all-to-alls cross them)
    ({"preset": "mixtral-8x7b", "seq_length": 2048},
     {"dp": 2, "tp": 8, "pp": 1, "ep": 2, "sequence_parallel": True}, "layout.ep",
     "every replica of a stage must run on one GPU kind"),
])
def test_rings_and_expert_groups_over_two_gpu_kinds_are_refused(model: dict[str, Any], layout: dict[str, Any],
                                                                field: str, rule: str) -> None:
    doc = {"model": model,
           "cluster": {"node_groups": [{"num_nodes": 1, "gpu": A100}, {"num_nodes": 1, "gpu": H100}]},
           "layout": {"global_batch_size": 8, **layout}}
    with pytest.raises(SpecError) as err:
        check(to_scenario(parse_request(json.dumps(doc))))
    assert err.value.field == field and rule in err.value.rule


def test_a_group_of_user_defined_gpus_copying_h100_costs_as_h100() -> None:
    spec = {"name": "my-h100", "peak_tflops_bf16": 989.4, "peak_tflops_fp8": 1978.9, "memory_gib": 80.0,
            "hbm_bandwidth_gb_per_s": 3350.0, "tdp_w": 700.0, "nvlink_bandwidth_gb_per_s": 450.0}
    custom = _run(_with(PIPELINE, "cluster", node_groups=[{"num_nodes": 2, "gpu": A100},
                                                          {"num_nodes": 2, "gpu_spec": spec}]))
    catalog = _run(PIPELINE)
    assert [s["gpu"] for s in custom["stages"]] == [A100, A100, "my-h100", "my-h100"]
    assert custom["iteration_time_s"] == pytest.approx(catalog["iteration_time_s"], rel=1e-12)
    assert any(w.startswith("my-h100 is a user-defined GPU") for w in custom["warnings"])


@settings(max_examples=6, deadline=None, derandomize=True)
@given(cuts=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=4).filter(lambda c: sum(c) <= 4),
       pp=st.sampled_from([1, 2, 4]), split=st.sampled_from(["even", "balanced"]))
def test_any_grouping_of_one_gpu_kind_gives_the_homogeneous_iteration(cuts: list[int], pp: int, split: str) -> None:
    groups = [{"num_nodes": n, "gpu": A100} for n in cuts] + ([{"num_nodes": 4 - sum(cuts)}] if sum(cuts) < 4 else [])
    layout = {"dp": 4 // pp, "tp": 8, "pp": pp, "microbatch_size": 1, "global_batch_size": 16,
              "pipeline_partition": split}
    plain = _run({**PIPELINE, "cluster": {"preset": "dgx-a100", "num_nodes": 4}, "layout": layout})
    grouped = _run({**PIPELINE, "cluster": {"preset": "dgx-a100", "node_groups": groups}, "layout": layout})
    assert grouped["iteration_time_s"] == plain["iteration_time_s"]
    assert grouped["memory"]["fits"] == plain["memory"]["fits"]
