"""NCCL's choice of algorithm and protocol (simcore/cost/comm/nccl_tuning.py) and the `auto` collectives built on it:
NCCL's own latency formulas, the small-message floor at scale, and the large-message bus bandwidth of
collectives.json inside a node and across nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel, bus_bandwidth
from simcore.cost.comm.nccl_tuning import (
    Communicator,
    NcclAlgorithm,
    Protocol,
    algorithms,
    bandwidth_factor,
    choose,
    latency_us,
)
from simcore.domain.layout import CollectiveAlgorithm, Layout
from simcore.domain.model import model_from_fields
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec

GIB = 2**30
GB = 1e9
DGX_A100 = NODE_PRESETS["dgx-a100"]
REFERENCE = Path(__file__).parents[4] / "simcore" / "calibration" / "reference" / "collectives.json"


def measured(row_id: str) -> dict[str, Any]:
    rows = {row["id"]: row for row in json.loads(REFERENCE.read_text())}
    measured: dict[str, Any] = rows[row_id]["measured"]
    return measured


def auto(spec: ClusterSpec) -> CollectiveModel:
    cluster = build_cluster(spec)
    return CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO)


# -- NCCL's formulas, by hand ------------------------------------------------------------------------------------
A100_1024 = Communicator(ranks=1024, nodes=128, generation="ampere", channels=16, amd_host=True)


def test_tree_latency_is_nccls_formula() -> None:
    # tuning.cc: baseLat + 2 ((ppn - 1) intraLat + log2(nodes) interLat); LL: 6.8 + 2 (7 x 0.6 + 7 x 5.0).
    assert latency_us(Collective.ALL_REDUCE, NcclAlgorithm.TREE, Protocol.LL, A100_1024, 8) == pytest.approx(85.2)


def test_ring_latency_is_nccls_formula() -> None:
    # 2(n-1) = 2046 steps, 2 x 127 = 254 of them through the network (2.7 us for LL), the rest at the proxy's
    # overhead (2 us on an AMD host, above NVLink's 0.6); base 6.6.
    expected = 6.6 + (2046 - 254) * 2.0 + 254 * 2.7
    assert latency_us(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.LL, A100_1024, 8) == pytest.approx(expected)
    # Simple on a large buffer: 3x the proxy overhead per step, 14 us per network step, and the ring's plateau (x1.4)
    simple = (8.4 + (2046 - 254) * 6.0 + 254 * 14.0) * 1.4
    assert latency_us(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.SIMPLE, A100_1024, GIB) == \
        pytest.approx(simple)


def test_protocol_bandwidth_factors_are_nccls() -> None:
    one_node = Communicator(ranks=8, nodes=1, generation="ampere", channels=16)
    # LL: half the bandwidth, capped at llMaxBw (87.7 GB/s on one Ampere node); LL128: 120/128 rounded to 0.92.
    assert bandwidth_factor(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.LL, one_node, 100 * GB, GIB) == 0.5
    assert bandwidth_factor(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.LL, one_node, 230 * GB, GIB) == \
        pytest.approx(87.7 / 230)
    assert bandwidth_factor(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.LL128, one_node, 230 * GB,
                            GIB) == pytest.approx(0.92)
    assert bandwidth_factor(Collective.ALL_REDUCE, NcclAlgorithm.RING, Protocol.SIMPLE, one_node, 230 * GB,
                            GIB) == 1.0
    # Tree all-reduce of 1 MiB: 0.92 of the graph's bandwidth, times treeCorrectionFactor[Simple][log2(2^14)] = 0.5
    assert bandwidth_factor(Collective.ALL_REDUCE, NcclAlgorithm.TREE, Protocol.SIMPLE, one_node, 100 * GB,
                            2**20) == pytest.approx(0.92 * 0.5)


def test_nvls_only_where_the_switch_reduces() -> None:
    hopper = Communicator(ranks=8, nodes=1, generation="hopper", channels=16, nvls=True)
    ampere = Communicator(ranks=8, nodes=1, generation="ampere", channels=16)
    assert NcclAlgorithm.NVLS in algorithms(Collective.ALL_REDUCE, hopper)
    assert NcclAlgorithm.NVLS not in algorithms(Collective.ALL_REDUCE, ampere)
    across = Communicator(ranks=16, nodes=2, generation="hopper", channels=16, nvls=True)
    assert algorithms(Collective.ALL_REDUCE, across) == (NcclAlgorithm.RING, NcclAlgorithm.TREE,
                                                         NcclAlgorithm.NVLS_TREE)
    assert algorithms(Collective.REDUCE_SCATTER, across) == (NcclAlgorithm.RING,)


def test_choice_minimises_latency_plus_size_over_bandwidth() -> None:
    bus = {NcclAlgorithm.RING: 190 * GB, NcclAlgorithm.TREE: 190 * GB}
    small = choose(Collective.ALL_REDUCE, 8, A100_1024, bus)
    assert (small.algorithm, small.protocol) == (NcclAlgorithm.TREE, Protocol.LL)
    assert small.time_s == pytest.approx(85.2e-6, rel=1e-3)
    for size in (8, 2**16, 2**24, GIB):
        best = choose(Collective.ALL_REDUCE, size, A100_1024, bus)
        for algorithm in (NcclAlgorithm.RING, NcclAlgorithm.TREE):
            alone = choose(Collective.ALL_REDUCE, size, A100_1024, {algorithm: bus[algorithm]})
            assert best.time_s <= alone.time_s


# -- acceptance: the simulated collectives ------------------------------------------------------------------------
def test_an_8_byte_all_reduce_across_1024_a100s_takes_under_1_ms() -> None:
    spec = sized(DGX_A100, 1024)
    group = [list(range(1024))]
    model = auto(spec)
    choice = model.choice(Collective.ALL_REDUCE, group, 8)
    assert choice is not None and choice.label == "tree/LL"
    assert model.isolated_time(Collective.ALL_REDUCE, group, 8) < 1e-3
    ring = CollectiveModel(model.cluster, model.router, CollectiveAlgorithm.RING)
    assert ring.isolated_time(Collective.ALL_REDUCE, group, 8) > 10e-3  # what every step of a ring costs


def test_1_gib_all_reduce_in_a_dgx_a100_reaches_nccl_tests_bus_bandwidth() -> None:
    model = auto(DGX_A100)
    group = [list(range(8))]
    choice = model.choice(Collective.ALL_REDUCE, group, GIB)
    assert choice is not None and choice.label == "ring/Simple"
    busbw = bus_bandwidth(Collective.ALL_REDUCE, 8, GIB, model.isolated_time(Collective.ALL_REDUCE, group, GIB))
    assert busbw / GB == pytest.approx(measured("nccl-a100-8gpu-allreduce-expected")["busbw_GBps"], rel=0.05)


def test_1_gib_all_reduce_across_dgx_a100_nodes_reaches_the_measured_bus_bandwidth() -> None:
    model = auto(sized(DGX_A100, 16))
    group = [list(range(16))]
    choice = model.choice(Collective.ALL_REDUCE, group, GIB)
    assert choice is not None and choice.label == "ring/Simple"
    busbw = bus_bandwidth(Collective.ALL_REDUCE, 16, GIB, model.isolated_time(Collective.ALL_REDUCE, group, GIB))
    assert busbw / GB == pytest.approx(measured("nccl-dgxa100-multinode-allreduce")["busbw_GBps"], rel=0.05)


def test_protocol_overhead_loads_the_links() -> None:
    # LL moves 8-byte lines with 4 bytes of flags: its pattern loads each link twice as much per byte as Simple's.
    model = auto(DGX_A100)
    group = [list(range(8))]
    small = model.phases(Collective.ALL_REDUCE, group, 2**16)[0]
    large = model.phases(Collective.ALL_REDUCE, group, GIB)[0]
    choice = model.choice(Collective.ALL_REDUCE, group, 2**16)
    assert choice is not None and choice.protocol is Protocol.LL
    assert small.links == large.links
    assert max(small.loads) / max(large.loads) == pytest.approx(1 / choice.bandwidth_factor)
    assert small.latency_s == pytest.approx(choice.latency_s)


def test_the_trace_names_nccls_choice() -> None:
    model = model_from_fields({"architecture": "decoder_only", "num_layers": 4, "hidden_size": 1024,
                               "num_attention_heads": 16, "vocab_size": 1024, "seq_length": 512})
    layout = Layout(dp=16, tp=1, pp=1, microbatch_size=1, global_batch_size=16)
    outcome = simulate(Scenario(model, sized(DGX_A100, 16), layout, algorithm=CollectiveAlgorithm.AUTO,
                                keep_spans=True))
    names = {span.name for span in outcome.spans if span.category == "dp_comm"} - {"wait dp"}
    labels = {f"{a.value}/{p.value}" for a in NcclAlgorithm for p in Protocol}
    assert names and all(name.startswith("all-reduce grad (") and name[17:-1] in labels for name in names), names
