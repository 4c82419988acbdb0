"""Cluster graph, routing and placement: the graph is well-formed, every route is a real path, placement is
the order the user asked for."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.domain.placement import place
from topology import GPUS, NODE_PRESETS, Fabric, Router, SpecError, build_cluster, sized
from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec
from topology.graph import Cluster

DGX_A100 = NODE_PRESETS["dgx-a100"]


def spec_of(num_gpus: int, preset: str = "dgx-a100", **changes: object) -> ClusterSpec:
    return dataclasses.replace(sized(NODE_PRESETS[preset], num_gpus), **changes)  # type: ignore[arg-type]


@cache
def cluster_of(num_gpus: int, preset: str = "dgx-a100", fabric: Fabric = Fabric.RAIL_OPTIMIZED,
               oversubscription: float = 1.0, nics_per_node: int | None = None) -> Cluster:
    changes: dict[str, object] = {"fabric": fabric, "oversubscription": oversubscription}
    if nics_per_node is not None:
        changes["nics_per_node"] = nics_per_node
    return build_cluster(spec_of(num_gpus, preset, **changes))


def kinds_by_node(cluster: Cluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _node, kind in cluster.graph.nodes(data="kind"):
        counts[kind] = counts.get(kind, 0) + 1
    return counts


# -- edges and link tables ---------------------------------------------------------------------------------

EDGE_KINDS = {
    frozenset({"gpu", "nvswitch"}): "nvlink",
    frozenset({"gpu", "nic"}): "pcie",
    frozenset({"nic", "leaf"}): "ib",
    frozenset({"leaf", "spine"}): "ib",
}


@pytest.mark.parametrize(("num_gpus", "fabric", "oversubscription"), [
    (8, Fabric.RAIL_OPTIMIZED, 1.0),
    (16, Fabric.RAIL_OPTIMIZED, 1.0),
    (16, Fabric.FAT_TREE, 1.0),
    (300, Fabric.FAT_TREE, 2.0),
    (300, Fabric.RAIL_OPTIMIZED, 2.0),
])
def test_every_edge_carries_its_attributes_and_matches_the_link_tables(num_gpus: int, fabric: Fabric,
                                                                        oversubscription: float) -> None:
    cluster = cluster_of(num_gpus, fabric=fabric, oversubscription=oversubscription)
    spec, g = cluster.spec, cluster.graph
    expected_bw = {"nvlink": spec.nvlink_bandwidth_bytes_per_s, "pcie": GPUS[spec.gpu].pcie_bandwidth_bytes_per_s,
                   "ib": spec.nic_bandwidth_bytes_per_s}
    expected_lat = {"nvlink": spec.intra_node_latency_s, "pcie": spec.intra_node_latency_s,
                    "ib": spec.inter_node_latency_s}
    n_links = len(cluster.link_ends)
    assert g.number_of_edges() == n_links
    assert len(cluster.link_bandwidth_bytes_per_s) == len(cluster.link_latency_s) == len(cluster.link_kind) == n_links
    assert len(cluster.edge_link) == n_links
    seen: set[int] = set()
    for u, v, data in g.edges(data=True):
        assert set(data) >= {"bandwidth_bytes_per_s", "latency_s", "kind", "link_id"}
        link = data["link_id"]
        assert 0 <= link < n_links and link not in seen
        seen.add(link)
        assert cluster.link_ends[link] == (u, v)
        assert cluster.edge_link[(u, v)] == link == cluster.link(u, v)
        assert cluster.link_bandwidth_bytes_per_s[link] == data["bandwidth_bytes_per_s"]
        assert cluster.link_latency_s[link] == data["latency_s"]
        assert cluster.link_kind[link] == data["kind"]
        kind = EDGE_KINDS[frozenset({g.nodes[u]["kind"], g.nodes[v]["kind"]})]
        assert data["kind"] == kind
        assert data["bandwidth_bytes_per_s"] == expected_bw[kind] > 0
        assert data["latency_s"] == expected_lat[kind] >= 0
        # Links are full duplex: the reverse direction exists with the same figures.
        back = g.edges[v, u]
        assert (back["bandwidth_bytes_per_s"], back["latency_s"], back["kind"]) == (
            data["bandwidth_bytes_per_s"], data["latency_s"], data["kind"])
    assert seen == set(range(n_links))


# -- sizes -------------------------------------------------------------------------------------------------

def test_one_node_has_gpus_switch_and_nics_but_no_fabric() -> None:
    c = cluster_of(8)
    # 8 GPUs + 1 NVSwitch + 8 NICs; 8 NVLink and 8 PCIe links, both directions.
    assert c.graph.number_of_nodes() == 17
    assert c.graph.number_of_edges() == 32
    assert kinds_by_node(c) == {"gpu": 8, "nvswitch": 1, "nic": 8}
    assert c.num_spines == 0
    assert set(c.link_kind) == {"nvlink", "pcie"}


def test_two_nodes_rail_optimized() -> None:
    c = cluster_of(16)
    # One scalable unit: 8 rail leaves, each with one uplink to each of 32 spines.
    assert kinds_by_node(c) == {"gpu": 16, "nvswitch": 2, "nic": 16, "leaf": 8, "spine": LEAF_DOWN_PORTS}
    assert c.num_spines == LEAF_DOWN_PORTS
    assert c.graph.number_of_nodes() == 2 * 17 + 8 + 32
    assert c.graph.number_of_edges() == 2 * 32 + 2 * 16 + 2 * 8 * 32  # 608


def test_two_nodes_fat_tree_share_one_leaf() -> None:
    c = cluster_of(16, fabric=Fabric.FAT_TREE)
    # 16 NICs fit one 32-port leaf: no spine is needed.
    assert kinds_by_node(c) == {"gpu": 16, "nvswitch": 2, "nic": 16, "leaf": 1}
    assert c.num_spines == 0
    assert c.graph.number_of_edges() == 2 * 32 + 2 * 16


@pytest.mark.parametrize("fabric", [Fabric.RAIL_OPTIMIZED, Fabric.FAT_TREE])
def test_384_nodes(fabric: Fabric) -> None:
    c = cluster_of(384 * 8, fabric=fabric)
    # 3072 NICs on 32-port leaves: 96 leaves either way (rail: 12 units x 8 rails); 32 spines.
    assert kinds_by_node(c) == {"gpu": 3072, "nvswitch": 384, "nic": 3072, "leaf": 96, "spine": 32}
    assert c.graph.number_of_nodes() == 384 * 17 + 96 + 32  # 6656
    assert c.graph.number_of_edges() == 384 * 32 + 2 * 3072 + 2 * 96 * 32  # 24576


def test_384_nodes_oversubscribed_have_half_the_spines() -> None:
    c = cluster_of(384 * 8, oversubscription=2.0)
    assert c.num_spines == 16
    assert kinds_by_node(c)["spine"] == 16
    assert c.graph.number_of_edges() == 384 * 32 + 2 * 3072 + 2 * 96 * 16


def test_partial_node_builds() -> None:
    c = cluster_of(3)
    assert c.num_gpus == 3 and c.spec.num_nodes == 1
    assert kinds_by_node(c)["gpu"] == 3
    assert c.graph.number_of_edges() == 2 * 3 + 2 * 3  # NVLink and PCIe of the three GPUs
    router = Router(c)
    assert len(router.route(0, 2)) == 2


def test_partial_last_node_builds_and_routes() -> None:
    c = cluster_of(11)
    assert c.spec.num_nodes == 2
    assert sorted(n[1] for n in c.graph if n[0] == "gpu") == list(range(11))
    assert {c.node_of(g) for g in range(8, 11)} == {1}
    router = Router(c)
    for src in range(11):
        for dst in range(11):
            assert_real_path(c, router, src, dst)


def test_invalid_spec_is_rejected_with_its_field() -> None:
    with pytest.raises(SpecError) as info:
        build_cluster(spec_of(16, oversubscription=0.5))
    assert info.value.field == "cluster.oversubscription"


# -- routing -----------------------------------------------------------------------------------------------

def assert_real_path(cluster: Cluster, router: Router, src: int, dst: int) -> None:
    nodes = router.nodes(src, dst)
    links = router.route(src, dst)
    assert nodes[0] == ("gpu", src) and nodes[-1] == ("gpu", dst)
    assert len(set(nodes)) == len(nodes), f"route {src}->{dst} revisits a node: {nodes}"
    assert len(links) == len(nodes) - 1
    for (u, v), link in zip(zip(nodes, nodes[1:]), links):
        assert cluster.graph.has_edge(u, v), f"route {src}->{dst} uses a missing edge {u}->{v}"
        assert cluster.graph.edges[u, v]["link_id"] == link
        assert cluster.link_ends[link] == (u, v)
    if src == dst:
        assert links == ()
    elif cluster.node_of(src) == cluster.node_of(dst):
        assert [cluster.link_kind[link] for link in links] == ["nvlink", "nvlink"]
    else:
        kinds = [cluster.link_kind[link] for link in links]
        assert kinds[-1] == "pcie" and "ib" in kinds


# A cluster big enough for three rail units and many fat-tree leaves, with a partial last node.
ROUTED = [
    dict(num_gpus=70 * 8 - 3, fabric=Fabric.RAIL_OPTIMIZED, oversubscription=1.0),
    dict(num_gpus=70 * 8 - 3, fabric=Fabric.FAT_TREE, oversubscription=1.0),
    dict(num_gpus=70 * 8 - 3, fabric=Fabric.RAIL_OPTIMIZED, oversubscription=2.0),
    dict(num_gpus=70 * 8 - 3, fabric=Fabric.FAT_TREE, oversubscription=2.0),
    dict(num_gpus=40 * 16, preset="dgx-2-v100", fabric=Fabric.RAIL_OPTIMIZED, oversubscription=1.0),
    dict(num_gpus=40 * 8, fabric=Fabric.RAIL_OPTIMIZED, oversubscription=2.0, nics_per_node=1),
]


@pytest.mark.parametrize("config", ROUTED, ids=lambda c: "-".join(str(v) for v in c.values()))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_route_is_a_real_path(config: dict[str, object], data: st.DataObject) -> None:
    cluster = cluster_of(**config)
    router = Router(cluster)
    n = cluster.num_gpus
    src = data.draw(st.integers(0, n - 1), label="src")
    dst = data.draw(st.integers(0, n - 1), label="dst")
    assert_real_path(cluster, router, src, dst)


@pytest.mark.slow
@pytest.mark.parametrize("fabric", [Fabric.RAIL_OPTIMIZED, Fabric.FAT_TREE])
def test_routing_is_deterministic(fabric: Fabric) -> None:
    spec = spec_of(70 * 8, fabric=fabric, oversubscription=2.0)
    a, b = Router(build_cluster(spec)), Router(build_cluster(spec))
    pairs = [(s, (s * 37 + 11) % 560) for s in range(0, 560, 7)]
    first = [a.route(s, d) for s, d in pairs]
    assert first == [b.route(s, d) for s, d in pairs]
    assert first == [a.route(s, d) for s, d in pairs]  # and from the cache
    assert [a.nodes(s, d) for s, d in pairs] == [b.nodes(s, d) for s, d in pairs]


def test_rail_optimized_stays_off_the_spines_inside_a_unit() -> None:
    cluster = cluster_of(LEAF_DOWN_PORTS * 8)  # exactly one scalable unit: 32 nodes
    router = Router(cluster)
    for src_node, dst_node in [(0, 1), (0, 31), (5, 17), (31, 2)]:
        for i in range(8):
            for j in range(8):
                src, dst = src_node * 8 + i, dst_node * 8 + j
                nodes = router.nodes(src, dst)
                assert not any(n[0] == "spine" for n in nodes), (src, dst, nodes)
                if i != j:
                    # PXN: first NVLink to the source node's GPU on the destination's rail.
                    assert nodes[1:3] == [("nvswitch", src_node), ("gpu", src_node * 8 + j)]


def test_rail_optimized_crosses_a_spine_between_units() -> None:
    cluster = cluster_of(2 * LEAF_DOWN_PORTS * 8)
    router = Router(cluster)
    nodes = router.nodes(0, LEAF_DOWN_PORTS * 8 + 3)
    assert sum(n[0] == "spine" for n in nodes) == 1


def test_fat_tree_crosses_a_spine_between_leaves() -> None:
    cluster = cluster_of(8 * 8, fabric=Fabric.FAT_TREE)  # 64 NICs: leaves 0 and 1
    router = Router(cluster)
    assert not any(n[0] == "spine" for n in router.nodes(0, 3 * 8))  # nodes 0 and 3 share leaf 0
    assert sum(n[0] == "spine" for n in router.nodes(0, 4 * 8)) == 1  # node 4 is on leaf 1


# -- placement ---------------------------------------------------------------------------------------------

def test_tp_innermost_puts_a_tensor_group_in_one_node() -> None:
    placement = place(2, 8, 2, "tp,dp,pp", 32)
    for d in range(2):
        for p in range(2):
            group = placement.tp_group(d, p)
            assert len(set(group)) == 8
            assert len({g // 8 for g in group}) == 1, group
    assert placement.tp_group(0, 0) == tuple(range(8))
    assert placement.dp_group(0, 0) == (0, 8)


def test_dp_innermost_spreads_a_tensor_group_over_nodes() -> None:
    placement = place(2, 8, 2, "dp,tp,pp", 32)
    group = placement.tp_group(0, 0)
    assert group == tuple(range(0, 16, 2))
    assert len({g // 8 for g in group}) == 2
    assert placement.dp_group(0, 0) == (0, 1)


@pytest.mark.parametrize("order", ["tp,dp,pp", "dp,tp,pp", "pp,tp,dp", "tp,pp,dp", "dp,pp,tp", "pp,dp,tp"])
def test_placement_is_a_bijection(order: str) -> None:
    dp, tp, pp = 3, 4, 2
    placement = place(dp, tp, pp, order, dp * tp * pp)
    gpus = [placement.gpu(d, t, p) for d in range(dp) for t in range(tp) for p in range(pp)]
    assert sorted(gpus) == list(range(dp * tp * pp))
    innermost = order.split(",")[0]
    assert dict(zip(("dp", "tp", "pp"), placement.strides))[innermost] == 1


def test_layout_size_mismatch_names_layout_dp() -> None:
    with pytest.raises(SpecError) as info:
        place(2, 8, 2, "tp,dp,pp", 16)
    assert info.value.field == "layout.dp"


def test_bad_order_names_layout_placement() -> None:
    with pytest.raises(SpecError) as info:
        place(2, 4, 2, "tp,dp,dp", 16)
    assert info.value.field == "layout.placement"


@pytest.mark.parametrize("order", ["tp,cp,dp,pp", "tp,dp,pp", "dp,tp,pp", "pp,dp,cp,tp", "cp,pp,tp,dp"])
def test_groups_are_the_gpus_of_their_ranks(order: str) -> None:
    dp, tp, pp, cp = 3, 4, 2, 2
    placement = place(dp, tp, pp, order, dp * tp * pp * cp, cp)
    for p in range(pp):
        for t in range(tp):
            assert placement.dp_group(t, p) == tuple(placement.gpu(d, t, p, c) for c in range(cp) for d in range(dp))
        for d in range(dp):
            for c in range(cp):
                assert placement.tp_group(d, p, c) == tuple(placement.gpu(d, t, p, c) for t in range(tp))
