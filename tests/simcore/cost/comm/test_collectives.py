"""Collectives over the cluster graph: the ring closed form, and what NCCL really achieves
(../shared/reference/collectives.json)."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel, bus_bandwidth, effective_capacity
from simcore.cost.parameters import COLLECTIVE_LAUNCH_S, COLLECTIVE_STEP_OVERHEAD_S, LINK_EFFICIENCY
from simcore.domain.layout import CollectiveAlgorithm
from topology import NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec

GIB = 2**30
GB = 1e9
DGX_A100 = NODE_PRESETS["dgx-a100"]


def model_for(spec: ClusterSpec, algorithm: CollectiveAlgorithm = CollectiveAlgorithm.RING) -> CollectiveModel:
    cluster = build_cluster(spec)
    return CollectiveModel(cluster, Router(cluster), algorithm)


def all_reduce_s(spec: ClusterSpec, size_bytes: float, gpus: list[int] | None = None) -> float:
    group = gpus if gpus is not None else list(range(spec.num_gpus))
    return model_for(spec).isolated_time(Collective.ALL_REDUCE, [group], size_bytes)


def test_effective_capacity_derates_each_link_kind() -> None:
    cluster = build_cluster(sized(DGX_A100, 16))
    capacity = effective_capacity(cluster)
    for link, kind in enumerate(cluster.link_kind):
        assert capacity[link] == pytest.approx(cluster.link_bandwidth_bytes_per_s[link] * LINK_EFFICIENCY[kind])


@pytest.mark.parametrize("size_bytes", [256 * 2**20, GIB, 8 * GIB])
def test_ring_all_reduce_in_one_node_matches_the_closed_form(size_bytes: float) -> None:
    n = 8
    spec = sized(DGX_A100, n)
    b_eff = 300 * GB * LINK_EFFICIENCY["nvlink"]
    hop_latency = 2 * spec.intra_node_latency_s  # GPU -> NVSwitch -> GPU
    latency = COLLECTIVE_LAUNCH_S + 2 * (n - 1) * (hop_latency + COLLECTIVE_STEP_OVERHEAD_S)
    expected = 2 * (n - 1) / n * size_bytes / b_eff + latency
    assert all_reduce_s(spec, size_bytes) == pytest.approx(expected, rel=0.01)


def test_ring_all_reduce_scales_with_group_size_as_2_n_minus_1_over_n() -> None:
    spec = sized(DGX_A100, 8)
    size = 4 * GIB
    b_eff = 300 * GB * LINK_EFFICIENCY["nvlink"]
    for n in (2, 4, 8):
        assert all_reduce_s(spec, size, list(range(n))) == pytest.approx(2 * (n - 1) / n * size / b_eff, rel=0.01)


def test_bus_bandwidth_in_one_dgx_a100_is_what_nccl_measures() -> None:
    # nccl-a100-8gpu-allreduce-expected: 230 GB/s bus bandwidth.
    t = all_reduce_s(sized(DGX_A100, 8), GIB)
    assert bus_bandwidth(Collective.ALL_REDUCE, 8, GIB, t) / GB == pytest.approx(230, rel=0.15)


def test_bus_bandwidth_across_two_dgx_a100_is_what_nccl_measures() -> None:
    # nccl-dgxa100-multinode-allreduce: 192 GB/s with 8 x 200 Gbit/s NICs per node.
    t = all_reduce_s(sized(DGX_A100, 16), GIB)
    assert bus_bandwidth(Collective.ALL_REDUCE, 16, GIB, t) / GB == pytest.approx(192, rel=0.15)


@pytest.mark.parametrize("num_gpus", [8, 16])
def test_reduce_scatter_and_all_gather_take_half_an_all_reduce(num_gpus: int) -> None:
    model = model_for(sized(DGX_A100, num_gpus))
    group = [list(range(num_gpus))]
    all_reduce = model.isolated_time(Collective.ALL_REDUCE, group, GIB)
    reduce_scatter = model.isolated_time(Collective.REDUCE_SCATTER, group, GIB)
    all_gather = model.isolated_time(Collective.ALL_GATHER, group, GIB)
    assert reduce_scatter / all_reduce == pytest.approx(0.5, rel=0.02)
    assert all_gather == pytest.approx(reduce_scatter, rel=1e-9)


def test_one_nic_per_node_makes_a_two_node_all_reduce_at_least_3x_slower() -> None:
    eight = all_reduce_s(sized(DGX_A100, 16), GIB)
    one = all_reduce_s(dataclasses.replace(sized(DGX_A100, 16), nics_per_node=1), GIB)
    assert one >= 3 * eight


def test_small_message_all_reduce_has_the_nccl_latency_floor() -> None:
    # NCCL's 8-GPU all-reduce of a few bytes takes ~13-20 us (nccl-h100-8gpu-intranode-allreduce-curve).
    t = all_reduce_s(sized(DGX_A100, 8), 8)
    assert 10e-6 <= t <= 25e-6


def test_all_reduce_time_grows_with_size_and_is_zero_for_nothing() -> None:
    spec = sized(DGX_A100, 16)
    sizes = [0, 8, 2**20, 2**24, 2**28, 2**30]
    times = [all_reduce_s(spec, s) for s in sizes]
    assert times[0] == 0.0
    assert all(a < b for a, b in zip(times, times[1:]))


def test_a_single_gpu_group_has_no_collective() -> None:
    model = model_for(sized(DGX_A100, 8))
    assert model.phases(Collective.ALL_REDUCE, [[3]]) == ()
    assert model.isolated_time(Collective.ALL_REDUCE, [[3]], GIB) == 0.0


@pytest.mark.parametrize("algorithm", list(CollectiveAlgorithm))
def test_every_algorithm_loads_only_real_links_within_capacity(algorithm: CollectiveAlgorithm) -> None:
    model = model_for(sized(DGX_A100, 32), algorithm)
    phases = model.phases(Collective.ALL_REDUCE, [list(range(32))], GIB)
    assert phases
    for phase in phases:
        assert len(phase.links) == len(phase.loads) == len(set(phase.links))
        assert all(0 <= link < len(model.capacity) for link in phase.links)
        assert all(load > 0 for load in phase.loads)
        assert phase.latency_s > 0
    t = model.isolated_time(Collective.ALL_REDUCE, [list(range(32))], GIB)
    assert bus_bandwidth(Collective.ALL_REDUCE, 32, GIB, t) / GB == pytest.approx(192, rel=0.5)


def test_concurrent_groups_share_links() -> None:
    # Two 8-GPU data-parallel groups that cross the same nodes through the same NICs take longer together
    # than one alone (their traffic shares the NIC and leaf links).
    spec = dataclasses.replace(sized(DGX_A100, 16), nics_per_node=1)
    model = model_for(spec)
    a = [0, 1, 2, 3, 8, 9, 10, 11]
    b = [4, 5, 6, 7, 12, 13, 14, 15]
    alone = model.isolated_time(Collective.ALL_REDUCE, [a], GIB)
    together = model.isolated_time(Collective.ALL_REDUCE, [a, b], GIB)
    assert together > 1.5 * alone


def test_hierarchical_with_unequal_nodes_moves_a_full_buffer_between_nodes() -> None:
    """12 GPUs over 8 + 4: an all-reduce must move at least the whole buffer between the nodes, so it cannot be
    faster than the 16-GPU one (the hierarchical split assumes equal nodes and falls back to rings)."""
    cluster = build_cluster(sized(NODE_PRESETS["dgx-a100"], 16))
    model = CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.HIERARCHICAL)
    size = 2**30
    t12 = model.isolated_time(Collective.ALL_REDUCE, [list(range(12))], size)
    t16 = model.isolated_time(Collective.ALL_REDUCE, [list(range(16))], size)
    assert t12 >= 0.9 * t16


@pytest.mark.parametrize("algorithm", [CollectiveAlgorithm.RING, CollectiveAlgorithm.AUTO])
def test_a_ring_across_multi_node_nvlink_domains_leaves_through_every_node_s_nics(
        algorithm: CollectiveAlgorithm) -> None:
    # Two domains of four 4-GPU trays (each GPU with its own NIC, as a GB200 NVL72 tray): NCCL fuses a multi-node
    # NVLink clique's topologies into one node (NVIDIA/nccl src/graph/topo.cc, MNNVL clique support), so its rings
    # may leave a domain through any of the domain's 16 NICs, as through the NICs of one 16-GPU node.
    trays = dataclasses.replace(NODE_PRESETS["gb200-nvl72"], num_gpus=32, gpus_per_node=4, nics_per_node=4,
                                nvlink_domain_gpus=16).validate()
    nodes = dataclasses.replace(NODE_PRESETS["gb200-nvl72"], num_gpus=32, gpus_per_node=16, nics_per_node=16)
    assert trays.domain_nics == 16 and nodes.domain_nics == 16
    group = [list(range(32))]
    size = GIB
    for kind in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
        t_trays = model_for(trays, algorithm).isolated_time(kind, group, size)
        t_nodes = model_for(nodes, algorithm).isolated_time(kind, group, size)
        assert t_trays == pytest.approx(t_nodes, rel=1e-6)
    # with only a tray's 4 NICs the 16 members' rings would be InfiniBand-bound: 31/32 S over 4 NICs
    ib = NODE_PRESETS["gb200-nvl72"].nic_bandwidth_bytes_per_s * LINK_EFFICIENCY["ib"]
    nvlink = NODE_PRESETS["gb200-nvl72"].nvlink_bandwidth_bytes_per_s * LINK_EFFICIENCY["nvlink"]
    ring = model_for(trays)
    per_gib = ring.isolated_time(Collective.REDUCE_SCATTER, group, 2 * size) \
        - ring.isolated_time(Collective.REDUCE_SCATTER, group, size)  # (the latency cancels)
    assert per_gib == pytest.approx(31 / 32 * size / min(nvlink, 16 * ib), rel=1e-6)
    assert per_gib < 31 / 32 * size / (4 * ib) / 2
