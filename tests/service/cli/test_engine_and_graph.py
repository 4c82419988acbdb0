"""What a `clustersim simulate` runs on, as the design says: a SimPy engine (one simpy.Environment, no event loop
of the engine's own) over the cluster's networkx graph, whose routes the simulation takes. Checked on the CLI's
path in a fresh interpreter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = """
import contextlib, io, json, sys
import simpy
import topology.routing as routing
from topology.cluster_graph import cluster_graph
from service.cli.main import main

made, routed = [], []
real_env, real_route = simpy.Environment.__init__, routing.Router.route_and_latency

def env_init(self, *args, **kwargs):
    made.append(self)
    real_env(self, *args, **kwargs)

def route(self, src, dst):
    routed.append((self.graph is cluster_graph(self.cluster.spec), len(self.graph)))
    return real_route(self, src, dst)

simpy.Environment.__init__ = env_init
routing.Router.route_and_latency = route
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["simulate", sys.argv[1]])
result = json.loads(out.getvalue())
print(json.dumps({"environments": len(made), "routed": len(routed), "on_the_graph": all(r[0] for r in routed),
                  "graph_nodes": max(r[1] for r in routed), "events": result["simulator"]["events"],
                  "modules": sorted(m for m in sys.modules if m in ("simpy", "networkx"))}))
"""


def test_the_cli_simulates_on_a_simpy_environment_and_routes_on_the_networkx_graph() -> None:
    request = ROOT / "examples" / "tp-across-nodes" / "tp8-pp2.yaml"  # 2 DGX A100 nodes: routes cross the fabric
    out = subprocess.run([sys.executable, "-c", _PROBE, str(request)], check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["modules"] == ["networkx", "simpy"]
    assert seen["environments"] >= 1 and seen["events"] > 0
    assert seen["routed"] > 0 and seen["on_the_graph"]
    assert seen["graph_nodes"] == 2 * (8 + 1 + 8) + 8 + 32  # per node GPUs, switch, NICs; 8 rail leaves, 32 spines


def test_the_engine_defines_no_event_loop_of_its_own() -> None:
    """No module of the engine keeps a queue of timed calls (a heap) or steps one: time is SimPy's."""
    for path in sorted((ROOT / "simcore" / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "heapq" for alias in node.names}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "heapq" not in imported and not {"heappush", "heappop"} & imported, path.name
    clock = (ROOT / "simcore" / "engine" / "clock.py").read_text()
    assert "import simpy" in clock and "self.env.run()" in clock
