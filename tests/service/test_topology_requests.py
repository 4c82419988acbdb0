"""Requests on a user's own cluster graph (`cluster.topology`): the graph of a built-in fabric gives the built-in
request's result exactly; an oversubscribed fat tree slows what crosses its spines (a tree all-reduce over many
nodes, an expert all-to-all across leaves) and leaves a layout whose traffic stays under one leaf as it was; the
`topology` command writes graphs a request file names by a relative path (JSON or GraphML); bad graphs and fields
the graph gives are refused over the CLI (exit 2) and HTTP (422) naming the node, edge or field."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from service.python_api import simulate
from tests.service.conftest import assert_cli_refuses, assert_http_refuses, run_cli
from topology import NODE_PRESETS
from topology import builders as b


def request(cluster: dict[str, Any], layout: dict[str, Any], model: str = "gpt3-1.3b") -> dict[str, Any]:
    return {"model": {"preset": model}, "cluster": cluster, "layout": layout}


def graph(g: Any) -> dict[str, Any]:
    return json.loads(json.dumps(b.node_link(g)))


DP_TREE = {"dp": 64, "tp": 1, "pp": 1, "microbatch_size": 4, "global_batch_size": 256}
EP_ACROSS = {"dp": 128, "tp": 1, "pp": 1, "ep": 64, "microbatch_size": 2, "global_batch_size": 1024,
             "zero_stage": 1, "overlap_grad_reduce": True}


def test_the_graph_of_a_built_in_fabric_gives_the_built_in_result() -> None:
    for fabric, ratio in (("fat_tree", 2.0), ("rail_optimized", 1.0)):
        built_in = {"preset": "dgx-a100", "num_nodes": 8, "fabric": fabric, "oversubscription": ratio}
        spec = replace(NODE_PRESETS["dgx-a100"], num_gpus=64, fabric=fabric, oversubscription=ratio)
        mine = {"preset": "dgx-a100", "topology": graph(b.built_in(spec))}
        for layout in (DP_TREE, {"dp": 2, "tp": 8, "pp": 4, "microbatch_size": 1, "global_batch_size": 64}):
            a = simulate(request(built_in, layout)).model_dump(mode="json")
            u = simulate(request(mine, layout)).model_dump(mode="json")
            for doc in (a, u):  # the echoed request names the cluster as it was given: a preset or a graph
                doc.pop("simulator", None)
                doc.pop("request", None)
            assert a == u, (fabric, layout)


def test_oversubscription_slows_what_crosses_the_spines_and_nothing_else() -> None:
    def seconds(ratio: float, layout: dict[str, Any], model: str, **options: Any) -> float:
        g = graph(b.fat_tree(16, oversubscription=ratio))  # DGX H100 servers: 4 leaves of 4 servers
        doc = request({"preset": "dgx-h100", "topology": g}, layout, model)
        if options:
            doc["options"] = options
        return simulate(doc).iteration_time_s

    # MoE: each EP group spans 8 servers on two leaves; its all-to-all crosses the spines
    full, half, quarter = (seconds(r, EP_ACROSS, "qwen3-30b-a3b") for r in (1.0, 2.0, 4.0))
    assert full < half < quarter and quarter > 1.5 * full
    # a tree all-reduce over 16 servers crosses the spines; a ring stays on each leaf's neighbours
    tree = {"collective_algorithm": "tree"}
    assert seconds(2.0, {**DP_TREE, "dp": 128, "global_batch_size": 512}, "gpt3-1.3b", **tree) > \
        1.02 * seconds(1.0, {**DP_TREE, "dp": 128, "global_batch_size": 512}, "gpt3-1.3b", **tree)
    # TP 8 inside a server, PP 16 between servers in order: the stage hops cross a spine only between leaves
    local = {"dp": 1, "tp": 8, "pp": 16, "microbatch_size": 1, "global_batch_size": 64}
    assert seconds(4.0, local, "gpt3-13b") == seconds(1.0, local, "gpt3-13b")


def test_a_failed_spine_on_an_oversubscribed_fabric_slows_the_all_to_all() -> None:
    base = b.fat_tree(16, oversubscription=4.0)  # 8 spines
    failed = b.remove_switch(copy.deepcopy(base), "spine0")
    t = [simulate(request({"preset": "dgx-h100", "topology": graph(g)}, EP_ACROSS, "qwen3-30b-a3b")).iteration_time_s
         for g in (base, failed)]
    assert t[1] > t[0]


def test_the_topology_command_writes_graphs_a_request_file_names(capsys: Any, tmp_path: Path) -> None:
    times = {}
    (tmp_path / "graphs").mkdir()
    for name, extra in (("ft.json", []), ("ft.graphml", ["--graphml"])):
        code, _, err = run_cli(capsys, "topology", "fat-tree", "--nodes", "8", "--preset", "dgx-a100",
                               "--oversubscription", "2", "-o", str(tmp_path / "graphs" / name), *extra)
        assert code == 0, err
        doc = request({"preset": "dgx-a100", "topology": f"graphs/{name}"}, DP_TREE)
        doc["options"] = {"collective_algorithm": "tree"}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        code, out, err = run_cli(capsys, "simulate", str(path))
        assert code == 0, err
        times[name] = json.loads(out)["iteration_time_s"]
    built_in = request({"preset": "dgx-a100", "num_nodes": 8, "fabric": "fat_tree", "oversubscription": 2}, DP_TREE)
    built_in["options"] = {"collective_algorithm": "tree"}
    assert times["ft.json"] == times["ft.graphml"] == simulate(built_in).iteration_time_s
    code, _, err = run_cli(capsys, "topology", "fat-tree", "--nodes", "8", "--remove-switch", "spine99")
    assert code == 2 and "spine99" in err
    code, _, err = run_cli(capsys, "topology", "fat-tree", "--nodes", "8", "--preset", "dgx-z9")
    assert code == 2 and "--preset" in err and "dgx-z9" in err, err
    code, _, err = run_cli(capsys, "topology", "fat-tree", "--nodes", "8", "--degrade-link", "leaf0", "spine0", "x")
    assert code == 2 and "--degrade-link" in err and "SHARE" in err, err


def test_bad_graphs_and_fields_the_graph_gives_are_refused(capsys: Any, tmp_path: Path) -> None:
    g = graph(b.fat_tree(8))
    del g["links"][3]["bandwidth_gb_per_s"]
    bad = request({"preset": "dgx-h100", "topology": g}, DP_TREE)
    assert_cli_refuses(capsys, tmp_path, bad, "cluster.topology", "bandwidth_gb_per_s")
    assert_http_refuses(tmp_path, bad, "cluster.topology", "bandwidth_gb_per_s")
    both = request({"preset": "dgx-h100", "topology": graph(b.fat_tree(8)), "gpus_per_node": 8}, DP_TREE)
    assert_cli_refuses(capsys, tmp_path, both, "cluster.gpus_per_node", "the graph gives it")
    assert_http_refuses(tmp_path, both, "cluster.gpus_per_node", "the graph gives it")
    wrong = request({"preset": "dgx-h100", "topology": graph(b.fat_tree(8)), "num_nodes": 4}, DP_TREE)
    assert_cli_refuses(capsys, tmp_path, wrong, "cluster.num_nodes", "8")
    path_over_http = request({"preset": "dgx-h100", "topology": "graph.json"}, DP_TREE)
    assert_http_refuses(tmp_path, path_over_http, "cluster.topology", "must be the graph itself")
