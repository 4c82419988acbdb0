"""Routes found on the cluster's networkx graph (topology/routing.py) equal the built-in fabrics' closed forms
(tests/topology/arithmetic_router.py): every pair of a 2-node and of a 16-node cluster, both fabrics, PXN and
oversubscription, a partial node, a multi-node NVLink domain, and 10,000 random pairs of a 16,384-GPU cluster (2,000
on its fat tree); the
switch paths are every shortest path; the graph is built once per spec."""

from __future__ import annotations

import random
from dataclasses import replace

import networkx as nx
import pytest

from tests.topology.arithmetic_router import ArithmeticRouter
from topology import NODE_PRESETS, Fabric, Router, build_cluster, sized
from topology.cluster_graph import cluster_graph
from topology.cluster_spec import ClusterSpec

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

SMALL = {
    "dgx-a100 2 nodes rail": sized(NODE_PRESETS["dgx-a100"], 16),
    "dgx-a100 16 nodes rail": sized(NODE_PRESETS["dgx-a100"], 128),
    "dgx-2-v100 2 nodes (16 GPUs, 8 NICs)": sized(NODE_PRESETS["dgx-2-v100"], 32),
    "gb200-nvl72 2 racks": sized(NODE_PRESETS["gb200-nvl72"], 144),
}


def _with(spec: ClusterSpec, **fields: object) -> ClusterSpec:
    return replace(spec, **fields)  # type: ignore[arg-type]


SMALL["dgx-h100 16 nodes fat tree"] = _with(sized(NODE_PRESETS["dgx-h100"], 128), fabric=Fabric.FAT_TREE)
SMALL["dgx-a100 16 nodes fat tree 2:1"] = _with(SMALL["dgx-a100 16 nodes rail"], fabric=Fabric.FAT_TREE,
                                                oversubscription=2.0)
SMALL["dgx-a100 partial last node"] = sized(NODE_PRESETS["dgx-a100"], 13)
SMALL["dgx-h100 4-node NVLink domains"] = _with(sized(NODE_PRESETS["dgx-h100"], 128), nvlink_domain_gpus=32)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_graph_routes_equal_the_closed_forms_on_every_pair(name: str) -> None:
    cluster = build_cluster(SMALL[name])
    graph, oracle = Router(cluster), ArithmeticRouter(cluster)
    n = cluster.spec.num_gpus
    for src in range(n):
        for dst in range(n):
            assert graph.route_and_latency(src, dst) == oracle.route_and_latency(src, dst), (src, dst)
            assert graph.nodes(src, dst) == oracle.nodes(src, dst), (src, dst)


@pytest.mark.parametrize("fabric", list(Fabric))
def test_graph_routes_equal_the_closed_forms_on_random_pairs_of_16384_gpus(fabric: Fabric) -> None:
    spec = _with(sized(NODE_PRESETS["dgx-h100"], 16384), fabric=fabric)
    cluster = build_cluster(spec)
    graph, oracle = Router(cluster), ArithmeticRouter(cluster)
    rng = random.Random(7)
    spined, pairs = 0, 10_000 if fabric is Fabric.RAIL_OPTIMIZED else 2_000
    for _ in range(pairs):
        src, dst = rng.randrange(16384), rng.randrange(16384)
        assert graph.route_and_latency(src, dst) == oracle.route_and_latency(src, dst), (src, dst)
        spined += any(node[0] == "spine" for node in graph.nodes(src, dst))
    assert spined > pairs // 2  # most random pairs cross the spines: the ECMP choice is exercised


def test_switch_paths_are_every_shortest_path_in_sorted_order() -> None:
    cluster = build_cluster(sized(NODE_PRESETS["dgx-a100"], 64 * 8))  # 64 nodes: 2 units, 16 leaves
    router = Router(cluster)
    g = cluster.graph
    switches = g.subgraph(n for n, a in g.nodes(data=True) if a["kind"] in ("leaf", "spine"))
    for a, b in [(("leaf", 0), ("leaf", 9)), (("leaf", 3), ("leaf", 4)), (("leaf", 15), ("leaf", 0))]:
        expected = sorted(tuple(p) for p in nx.all_shortest_paths(switches, a, b))
        assert router.switch_paths(a, b) == expected
        assert len(expected) == cluster.num_spines


def test_the_graph_is_built_once_per_spec_and_carries_the_link_ids() -> None:
    spec = sized(NODE_PRESETS["dgx-a100"], 32)
    assert build_cluster(spec).graph is build_cluster(sized(NODE_PRESETS["dgx-a100"], 32)).graph
    assert cluster_graph(spec) is build_cluster(spec).graph
    cluster = build_cluster(spec)
    ids = sorted(d["link_id"] for _u, _v, d in cluster.graph.edges(data=True))
    assert ids == list(range(cluster.num_links))
    assert cluster.graph.graph["pxn"] is True
    assert build_cluster(_with(spec, fabric=Fabric.FAT_TREE)).graph.graph["pxn"] is False
