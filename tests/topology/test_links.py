"""The links by arithmetic (topology/links.py) are the links of the graph built edge by edge
(tests/topology/explicit_graph.py): every id, end, bandwidth, latency and kind, and every route's link ids, on
homogeneous and heterogeneous clusters, partial last nodes, multi-node NVLink domains, degraded links, one or
many NICs, fat trees (oversubscribed or not) and rail-optimized fabrics."""

from __future__ import annotations

import dataclasses

import pytest
from explicit_graph import explicit_tables

from tests.topology.arithmetic_router import ArithmeticRouter
from topology import NODE_PRESETS, Fabric, Router, build_cluster, sized
from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec
from topology.hardware import GB, GPUS, GpuKind
from topology.health import ClusterHealth, DegradedLink
from topology.node_groups import NodeGroup


def spec_of(num_gpus: int, preset: str = "dgx-a100", **changes: object) -> ClusterSpec:
    return dataclasses.replace(sized(NODE_PRESETS[preset], num_gpus), **changes)  # type: ignore[arg-type]


def _mixed(fabric: Fabric) -> ClusterSpec:
    a100, h100 = GPUS[GpuKind.A100_80GB], GPUS[GpuKind.H100_80GB]
    groups = (NodeGroup(3, GpuKind.A100_80GB, 8, a100.nvlink_bandwidth_bytes_per_s, 8, 25 * GB),
              NodeGroup(2, GpuKind.H100_80GB, 8, h100.nvlink_bandwidth_bytes_per_s, 8, 50 * GB))
    return spec_of(40, fabric=fabric, node_groups=groups)


SPECS = {
    "one-gpu": spec_of(1),
    "one-node": spec_of(8),
    "partial-node": spec_of(11),
    "two-nodes": spec_of(16),
    "rail-units-partial": spec_of(70 * 8 - 3),
    "fat-tree-partial": spec_of(70 * 8 - 3, fabric=Fabric.FAT_TREE),
    "rail-oversubscribed": spec_of(70 * 8, oversubscription=2.0),
    "fat-tree-oversubscribed": spec_of(70 * 8 - 5, fabric=Fabric.FAT_TREE, oversubscription=3.0),
    "dgx2-16-gpus-8-nics": spec_of(40 * 16, "dgx-2-v100"),
    "one-nic": spec_of(40 * 8, oversubscription=2.0, nics_per_node=1),
    "one-leaf": spec_of(3 * 8, fabric=Fabric.FAT_TREE),
    "nvl72-racks": spec_of(4 * 72, "gb200-nvl72"),
    "nvlink-domain-of-two-nodes": spec_of(6 * 8, nvlink_domain_gpus=16),
    "mixed-rail": _mixed(Fabric.RAIL_OPTIMIZED),
    "mixed-fat-tree": _mixed(Fabric.FAT_TREE),
    "degraded": spec_of(LEAF_DOWN_PORTS * 8 + 16, health=ClusterHealth(degraded_links=(
        DegradedLink(0.5, node=1, nic=3), DegradedLink(0.25, gpu=9), DegradedLink(0.75, node=33, nic=0)))),
}


@pytest.mark.parametrize("name", SPECS)
def test_links_by_arithmetic_are_the_explicit_tables(name: str) -> None:
    spec = SPECS[name]
    cluster = build_cluster(spec)
    ends, bws, lats, kinds = explicit_tables(spec)
    assert cluster.num_links == len(ends)
    assert list(cluster.link_ends) == ends
    assert list(cluster.link_bandwidth_bytes_per_s) == bws
    assert list(cluster.link_latency_s) == lats
    assert list(cluster.link_kind) == kinds
    for link, (u, v) in enumerate(ends):
        assert cluster.link(u, v) == link
        assert cluster.latency[link] == lats[link]
        assert cluster.index.kind_and_bandwidth(link) == (kinds[link], bws[link])
    with pytest.raises(IndexError):
        cluster.index.describe(len(ends))


@pytest.mark.parametrize("name", SPECS)
def test_routes_by_arithmetic_follow_the_edges_of_their_nodes(name: str) -> None:
    cluster = build_cluster(SPECS[name])
    router = Router(cluster)
    edge_link = {ends: link for link, ends in enumerate(explicit_tables(cluster.spec)[0])}
    n = cluster.num_gpus
    step = max(1, n // 40)
    gpus = sorted({*range(0, n, step), *range(min(n, 17)), n - 1})
    for src in gpus:
        for dst in gpus:
            nodes = router.nodes(src, dst)
            links = router.route(src, dst)
            assert links == tuple(edge_link[pair] for pair in zip(nodes, nodes[1:])), (src, dst)
            latency = 0.0
            for link in links:
                latency += cluster.link_latency_s[link]
            assert router.latency(src, dst) == latency


def test_a_link_that_does_not_exist_is_a_key_error() -> None:
    cluster = build_cluster(spec_of(16))
    for u, v in [(("gpu", 0), ("nvswitch", 1)), (("gpu", 0), ("nic", 1)), (("nic", 0), ("spine", 0)),
                 (("gpu", 16), ("nvswitch", 2)), (("leaf", 0), ("spine", 99))]:
        with pytest.raises(KeyError):
            cluster.link(u, v)


def test_the_link_arithmetic_is_constant_in_the_cluster_size() -> None:
    """A cluster spec and its links' figures cost the same at a million GPUs (the closed-form routes read them
    without a table; a simulation's routes come from the graph, tests/topology/test_routing.py)."""
    big = build_cluster(spec_of(1 << 20))
    assert not big.made  # no table or node list was built
    path, latency = ArithmeticRouter(big).route_and_latency(0, (1 << 20) - 1)
    assert len(path) == 8 and not big.latency and not big.made  # PXN, spine: routed without reading a figure
    expected = 0.0
    for link in path:  # (the route's latency: its links' figures added from the source)
        expected += big.latency[link]
    assert latency == expected and set(big.latency) == set(path) and not big.made  # figures of those links only
