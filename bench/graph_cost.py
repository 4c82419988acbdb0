"""What the cluster's networkx graph costs a simulation: for the 1T example's cluster (384 DGX A100 nodes, 3,072
GPUs) and the largest the service admits (2,048 DGX H100 nodes, 16,384 GPUs), the graph's size, the median time to
build it (topology/cluster_graph.py; a process builds it once per cluster), and the routes the 1T simulation
finds on it (how many pairs, the time per route); plus the time to import networkx and simpy in a fresh
interpreter. Medians of N rounds (default 5), each in a fresh interpreter so that no cache is warm.
Run:  python bench/graph_cost.py [N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ROUND = """
import json, time
t = time.perf_counter(); import networkx, simpy; imports = time.perf_counter() - t
from topology import NODE_PRESETS, sized
from topology.cluster_graph import cluster_graph
out = {"imports_s": imports}
for name, preset, gpus in (("1t", "dgx-a100", 3072), ("16k", "dgx-h100", 16384)):
    spec = sized(NODE_PRESETS[preset], gpus)
    t = time.perf_counter(); g = cluster_graph(spec); out[name] = [time.perf_counter() - t, len(g), g.size()]
from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.simulate import simulate
from simcore.network import build_network
scenario = to_scenario(load_request_file("examples/gpt-1t-3072-a100.yaml"))
network = build_network(scenario.cluster, scenario.algorithm)
router = network.collectives.router
t = time.perf_counter(); simulate(scenario, network); out["sim_s"] = time.perf_counter() - t
out["routed"] = router.routed
t = time.perf_counter()
for key in list(router._cache):  # the same pairs again, uncached, timed alone
    router._cache.pop(key)
    router.route_and_latency(*divmod(key, scenario.cluster.num_gpus))
out["route_s"] = (time.perf_counter() - t) / max(router.routed, 1)
print(json.dumps(out))
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    runs = [json.loads(subprocess.run([sys.executable, "-c", _ROUND], cwd=ROOT, check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1]) for _ in range(rounds)]

    def med(f):  # type: ignore[no-untyped-def]
        return statistics.median(f(r) for r in runs)

    print(f"import networkx + simpy: {med(lambda r: r['imports_s']):.3f} s (medians of {rounds} fresh interpreters)")
    for name, what in (("1t", "384 DGX A100 nodes (3,072 GPUs)"), ("16k", "2,048 DGX H100 nodes (16,384 GPUs)")):
        nodes, edges = runs[0][name][1], runs[0][name][2]
        built = statistics.median(r[name][0] for r in runs)
        print(f"graph of {what}: {nodes:,} nodes, {edges:,} directed edges, built in {built:.3f} s")
    print(f"1T simulation (graph built): {med(lambda r: r['sim_s']):.3f} s; {runs[0]['routed']:,} pairs routed on the "
          f"graph, {med(lambda r: r['route_s']) * 1e6:.0f} us a route")


if __name__ == "__main__":
    main()
