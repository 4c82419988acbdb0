"""DeepSpeed's ZeRO++ (simcore/domain/zeropp.py, simcore/cost/zeropp.py): int8 gathers (qwZ), the backward's
gathers inside the secondary group (hpZ) and int4 all-to-all gradient averaging (qgZ), as events on their own
streams, and the rules that refuse what DeepSpeed cannot run."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.memory import stage_memory
from simcore.cost.moe import all_to_all_pattern
from simcore.cost.sharding import chunk_units
from simcore.cost.workload import build_workload
from simcore.cost.zeropp import QWZ_GROUP_ELEMENTS, ZeroppCosts
from simcore.domain.layout import (
    CollectiveAlgorithm,
    Fidelity,
    Layout,
    Recompute,
    ZeroImplementation,
    validate_layout,
)
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.network import shared_network
from simcore.simulate import Outcome, Scenario, check, simulate
from topology import NODE_PRESETS, sized
from topology.errors import SpecError

TWO_LAYERS = model_from_fields({**MODEL_PRESETS["gpt3-175b"], "num_layers": 2})
DP = 32  # four DGX A100 nodes of eight
LAYOUT = Layout(dp=DP, tp=1, pp=1, microbatch_size=1, global_batch_size=2 * DP, zero_stage=3,
                recompute=Recompute.FULL, overlap_grad_reduce=True, zero_implementation=ZeroImplementation.DEEPSPEED)
MICROBATCHES = 2


# one 200 Gbit/s NIC a node: the gathers and reductions cost more than the compute hides (what ZeRO++ is for)
CLUSTER = dataclasses.replace(sized(NODE_PRESETS["dgx-a100"], DP), nics_per_node=1)


def scenario(fidelity: Fidelity = Fidelity.REPRESENTATIVE, **changes: object) -> Scenario:
    return Scenario(TWO_LAYERS, CLUSTER, dataclasses.replace(LAYOUT, **changes), keep_spans=True, fidelity=fidelity)


def outcome(**changes: object) -> Outcome:
    return simulate(scenario(**changes))


def spans(out: Outcome, track: str) -> Counter[str]:
    return Counter(s.name.split(" (")[0] for s in out.spans if s.track == track)


def test_qwz_gathers_a_byte_an_element_and_its_scales() -> None:
    base, quantized = outcome(), outcome(zero_quantized_weights=True)
    # each fetch: the int8 weights' all-gather, then the scales' (DeepSpeed v0.10.0's quant_handle)
    gathers = [spans(out, "stage 0 gather")["all-gather param"] for out in (base, quantized)]
    assert gathers[1] == 2 * gathers[0]
    ratio = quantized.metrics.communication_bytes["zero"] / base.metrics.communication_bytes["zero"]
    assert 0.5 < ratio < 0.5 * (1 + 2 * 4 / QWZ_GROUP_ELEMENTS)  # int8 and one fp32 scale per 8,000 elements
    assert quantized.metrics.iteration_time_s < base.metrics.iteration_time_s


def test_hpz_gathers_the_backward_s_regathers_inside_the_node() -> None:
    base, hpz = outcome(), outcome(zero_hpz_partition_size=8)
    # GPT-3's layers are too wide to keep QKV, the attention output and fc1 from their recomputation to their
    # backward (reuse distance 1e9 elements): those three a layer are gathered again by backward hooks, now
    # from the secondary shards of the node's eight GPUs; the forward and recomputation gathers stay global.
    regathers = MICROBATCHES * 2 * 3
    assert spans(hpz, "stage 0 hpz")["all-gather param"] == regathers
    assert spans(base, "stage 0 gather")["all-gather param"] - spans(hpz, "stage 0 gather")["all-gather param"] \
        == regathers
    assert hpz.metrics.iteration_time_s < base.metrics.iteration_time_s


def test_hpz_keeps_a_16_bit_secondary_shard_of_every_parameter() -> None:
    gpu = NODE_PRESETS["dgx-a100"].hardware
    weights = []
    for layout in (LAYOUT, dataclasses.replace(LAYOUT, zero_hpz_partition_size=8)):
        workload = build_workload(TWO_LAYERS, layout, gpu, None, None, free_communication=True)
        weights.append(stage_memory(TWO_LAYERS, layout, workload)[0].weights)
    assert weights[1] - weights[0] == pytest.approx(2 * TWO_LAYERS.total_parameters() / 8, rel=1e-6)


def test_qgz_averages_matrices_by_two_all_to_alls_and_vectors_by_reduce_scatters() -> None:
    base, qgz = outcome(), outcome(zero_quantized_gradients=True)
    units = chunk_units(TWO_LAYERS, (("transformer", 2),), TWO_LAYERS.total_parameters(), 1, True)
    matrices = sum(sum(u.matrices()) for u in units)
    vectors = sum(len(u.parameters) - sum(u.matrices()) for u in units)
    assert (matrices, vectors) == (2 * 4 + 1, 2 * 8)  # four projections a layer and the embedding; biases, norms
    assert spans(qgz, "stage 0 qgz")["reduce-scatter grad"] == MICROBATCHES * matrices
    assert spans(qgz, "stage 0 gather")["reduce-scatter grad"] == MICROBATCHES * vectors
    # int4 instead of 16 bits, and only 1/8 of it leaves the node
    assert qgz.metrics.communication_bytes["dp"] < 0.3 * base.metrics.communication_bytes["dp"]


def test_full_fidelity_meets_in_the_groups_as_representative_runs_them() -> None:
    options = {"zero_quantized_weights": True, "zero_hpz_partition_size": 8, "zero_quantized_gradients": True}
    one = simulate(scenario(**options)).metrics.iteration_time_s
    every = simulate(scenario(Fidelity.FULL, **options)).metrics.iteration_time_s
    assert every == pytest.approx(one, rel=0.02)


def test_the_kernels_are_memory_bound_at_the_hbm_rate() -> None:
    costs = ZeroppCosts(True, 8, True, dp=32, local=8, bandwidth=1e12)
    e = 1e9
    assert costs.gather_bytes(e, 2.0) == pytest.approx((e, 4 * e / QWZ_GROUP_ELEMENTS))
    # the shard's quantization (3 bytes an element of e/32) and the dequantization (3 bytes an element of e)
    assert costs.after_gather_s(e, 32) == pytest.approx(3 * e / 32 / 1e12 + 3 * e / 1e12)
    intra, inter = costs.qgz_bytes(e)
    assert intra == pytest.approx(e / 2, rel=1e-6) and inter == pytest.approx(intra / 8, rel=1e-6)
    assert ZeroppCosts(False, 1, False, 32, 8, 1e12).after_gather_s(e, 32) == 0.0


@pytest.mark.parametrize(("changes", "field"), [
    ({"zero_quantized_weights": True, "zero_implementation": ZeroImplementation.MEGATRON},
     "layout.zero_quantized_weights"),
    ({"zero_quantized_gradients": True, "zero_implementation": ZeroImplementation.DEEPSPEED_2021},
     "layout.zero_quantized_gradients"),
    ({"zero_hpz_partition_size": 3}, "layout.zero_hpz_partition_size"),
    ({"zero_hpz_partition_size": 0}, "layout.zero_hpz_partition_size"),
    ({"zero_hpz_partition_size": 8, "tp": 2, "dp": 16}, "layout.zero_hpz_partition_size"),
    ({"zero_quantized_gradients": True, "tp": 2, "dp": 16}, "layout.zero_quantized_gradients"),
])
def test_what_deepspeed_cannot_run_is_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    layout = dataclasses.replace(LAYOUT, **changes)  # type: ignore[arg-type]
    with pytest.raises(SpecError) as err:
        validate_layout(layout, TWO_LAYERS, DP)
    assert err.value.field == field


def test_qgz_needs_whole_nodes() -> None:
    layout = dataclasses.replace(LAYOUT, dp=4, global_batch_size=8, zero_quantized_gradients=True)
    validate_layout(layout, TWO_LAYERS, 4)  # the layout alone is fine
    with pytest.raises(SpecError) as err:  # but four ranks do not fill an eight-GPU node
        check(Scenario(TWO_LAYERS, sized(NODE_PRESETS["dgx-a100"], 4), layout))
    assert err.value.field == "layout.zero_quantized_gradients"


def test_qgz_s_exchange_across_nodes_routes_the_simulated_node_s_flows_only_at_the_same_bottleneck() -> None:
    # one NIC a node: the eight GPUs of a node share it, as the eight exchanges across nodes do
    model = shared_network(CLUSTER, CollectiveAlgorithm.AUTO).collectives
    gpus, local = tuple(range(DP)), 8
    inter = [tuple(gpus[i * local + j] for i in range(DP // local)) for j in range(local)]
    full, own = all_to_all_pattern(model, inter), all_to_all_pattern(model, inter, own_flows=True)

    def bottleneck(p: FlowPattern) -> float:
        return max(load / model.capacity[link] for link, load in zip(p.links, p.loads, strict=True))

    assert bottleneck(own) == pytest.approx(bottleneck(full)) and own.latency_s == full.latency_s
