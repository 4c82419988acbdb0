"""A user's own cluster graph (topology/user_topology.py) and the builders of topology/builders.py: what a graph
must hold (errors naming the node or edge and the rule), the simulator's numbering of it, and the routes found on
it (a removed spine link moves traffic to the others; a multi-plane fabric keeps each message in one plane; a
three-tier fat tree crosses the core between pods)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import networkx as nx
import pytest

from topology import NODE_PRESETS, Router, SpecError, build_cluster
from topology import builders as b
from topology.user_topology import UserTopology, parse_topology


def spec_of(t: UserTopology) -> Any:
    """A cluster spec on topology `t` (as service/convert_cluster.py makes it)."""
    return replace(NODE_PRESETS["dgx-h100"], topology=t, num_gpus=t.gpus, gpus_per_node=t.gpus_per_node,
                   nics_per_node=t.nics_per_node,
                   nvlink_domain_gpus=t.domain_gpus if t.domain_gpus != t.gpus_per_node else None)


def refused(doc: Any, *words: str) -> str:
    with pytest.raises(SpecError) as err:
        parse_topology(doc)
    assert err.value.field.startswith("cluster.topology")
    for word in words:
        assert word in err.value.rule, err.value.rule
    return err.value.rule


def without(doc: dict[str, Any], keep: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["links"] = [link for link in doc["links"] if keep(link)]
    return doc


FAT8 = b.node_link(b.fat_tree(8))  # 64 GPUs, two leaves, 32 spines


def test_bad_graphs_name_the_node_or_edge_and_the_rule() -> None:
    no_bw = copy.deepcopy(FAT8)
    del no_bw["links"][0]["bandwidth_gb_per_s"]
    refused(no_bw, "edge 'n0.nvswitch' - 'n0.gpu0'", "bandwidth_gb_per_s")
    bad_kind = copy.deepcopy(FAT8)
    bad_kind["nodes"][1]["kind"] = "cpu"
    refused(bad_kind, "node 'n0.gpu0'", "kind must be one of")
    refused(without(FAT8, lambda e: not (e["source"] == "n0.gpu3" and e["target"].startswith("n0.nic"))),
            "node 'n0.gpu3'", "exactly one edge to a nic")
    refused(without(FAT8, lambda e: not e["target"].startswith("spine")), "node 'n4.gpu0'", "no path to gpu",
            "disconnected", "'leaf1' to 'leaf0'")
    refused({**FAT8, "directed": True}, "has no reverse edge")
    gpu_gpu = copy.deepcopy(FAT8)
    gpu_gpu["links"].append({"source": "n0.gpu0", "target": "n1.gpu0", "bandwidth_gb_per_s": 1, "latency_us": 1})
    refused(gpu_gpu, "edge 'n0.gpu0' - 'n1.gpu0'", "a gpu cannot link to a gpu")
    negative = copy.deepcopy(FAT8)
    negative["links"][5]["latency_us"] = -1
    refused(negative, "latency_us >= 0")
    lonely = copy.deepcopy(FAT8)
    lonely["nodes"].append({"id": "x", "kind": "gpu"})
    refused(lonely, "node 'x'", "exactly one edge to an nvswitch")
    uneven = without(FAT8, lambda e: "n7.gpu7" not in (e["source"], e["target"]))
    uneven["nodes"] = [n for n in uneven["nodes"] if n["id"] != "n7.gpu7"]
    refused(uneven, "every server must hold as many GPUs as the first")
    refused({"nodes": "x", "links": []}, "must be a list")
    refused("a/path.json", "file path is read only from a request file")
    refused("<graphml", "not readable GraphML")


def test_numbering_follows_domains_servers_and_places() -> None:
    t = parse_topology(FAT8)
    assert (t.gpus, t.gpus_per_node, t.nics_per_node, t.domain_gpus, t.pxn) == (64, 8, 8, 8, False)
    names = {key: t.name(key) for key, _attrs in t.nodes}
    assert names[("gpu", 13)] == "n1.gpu5" and names[("nic", 10)] == "n1.nic2"
    assert names[("nvswitch", 7)] == "n7.nvswitch"
    # the two directions of each link are adjacent ids
    for i in range(0, len(t.links), 2):
        u, v, *_ = t.links[i]
        assert t.links[i + 1][:2] == (v, u)
    # the same graph read twice, or as GraphML, is the same topology (its hash is its content's)
    graphml = "\n".join(nx.generate_graphml(b.fat_tree(8)))
    assert parse_topology(graphml) == t and hash(parse_topology(copy.deepcopy(FAT8))) == hash(t)


def test_nvl_racks_share_one_domain_per_rack_and_split_trays() -> None:
    t = parse_topology(b.node_link(b.nvl_racks(2)))
    assert (t.gpus, t.gpus_per_node, t.domain_gpus, t.nics_per_node) == (144, 4, 72, 4)
    router = Router(build_cluster(spec_of(t)))
    assert len(router.route(0, 71)) == 2  # one NVLink domain: GPU -> NVSwitch -> GPU
    assert len(router.route(0, 72)) > 2  # the other rack: over the NICs


def spines_used(cluster: Any) -> dict[str, int]:
    """Messages from every GPU under leaf 0 to every GPU under leaf 1, per spine they cross."""
    router, used = Router(cluster), {}
    for src in range(32):
        for dst in range(32, 64):
            for node in router.nodes(src, dst):
                name = cluster.spec.topology.name(node)
                if name.startswith("spine"):
                    used[name] = used.get(name, 0) + 1
    return used


def test_a_removed_spine_link_moves_traffic_to_the_other_spines() -> None:
    full = build_cluster(spec_of(parse_topology(FAT8)))
    before = spines_used(full)
    busiest = max(before, key=before.__getitem__)
    cut = build_cluster(spec_of(parse_topology(without(FAT8, lambda e: {e["source"], e["target"]} !=
                                                                        {"leaf0", busiest}))))
    leaf0, leaf1 = ("switch", 0), ("switch", 1)
    assert len(Router(full).switch_paths(leaf0, leaf1)) == 32
    paths = Router(cut).switch_paths(leaf0, leaf1)
    assert len(paths) == 31 and busiest not in {cut.spec.topology.name(p[1]) for p in paths}
    after = spines_used(cut)
    assert busiest not in after
    assert sum(before.values()) == sum(after.values())  # the same messages, spread over the other spines
    assert max(after.values()) >= max(before.values())


def test_multi_plane_keeps_each_message_in_one_plane() -> None:
    t = parse_topology(b.node_link(b.multi_plane(8, planes=2)))
    assert t.pxn  # the planes are joined by nothing but NVLink
    cluster = build_cluster(spec_of(t))
    router = Router(cluster)
    for src, dst in ((0, 8), (1, 8), (3, 60), (0, 63)):
        planes = {cluster.spec.topology.name(n).split(".")[0] for n in router.nodes(src, dst) if n[0] == "switch"}
        assert len(planes) == 1, planes


def test_three_tier_fat_tree_crosses_the_core_between_pods() -> None:
    t = parse_topology(b.node_link(b.fat_tree(64, tiers=3)))  # 512 NICs, 16 leaves, pods of 32 leaves: one pod
    router = Router(build_cluster(spec_of(t)))
    kinds = [router.graph.nodes[n]["kind"] for n in router.nodes(0, 511)]
    assert kinds.count("switch") == 1 and "spine" not in kinds  # one pod: leaf, aggregation, leaf
    t = parse_topology(b.node_link(b.fat_tree(40, tiers=3, down=8)))  # 320 NICs, 40 leaves, 5 pods of 8
    router = Router(build_cluster(spec_of(t)))
    names = [t.name(n) for n in router.nodes(0, 319)]
    assert sum(name.startswith("core") for name in names) == 1
    assert sum(".agg" in name for name in names) == 2


def test_the_graph_of_a_built_in_fabric_routes_as_the_built_in() -> None:
    """The node-link export of the built-in graph, read back as a user graph: every route the same."""
    for fabric, oversubscription in (("fat_tree", 1.0), ("fat_tree", 2.0), ("rail_optimized", 1.0)):
        spec = replace(NODE_PRESETS["dgx-a100"], num_gpus=256, fabric=fabric, oversubscription=oversubscription)
        doc = b.node_link(b.built_in(spec))
        built, user = build_cluster(spec), build_cluster(spec_of(parse_topology(doc)))
        a, u = Router(built), Router(user)
        for src in range(0, 256, 7):
            for dst in range(0, 256, 5):
                mine = [f"{n[0]}{n[1]}" for n in a.nodes(src, dst)]
                theirs = [user.spec.topology.name(n) for n in u.nodes(src, dst)]
                assert mine == theirs, (fabric, src, dst)
                assert a.latency(src, dst) == pytest.approx(u.latency(src, dst), rel=1e-12)
