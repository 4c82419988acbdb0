"""Bring your own fabric: the same jobs on fat trees of 16 DGX H100 servers at full bisection, 2:1 and 4:1
oversubscription, and 4:1 with a failed spine switch, each a graph file that `clustersim topology` writes and a
request's `cluster.topology` names.

Writes the graph files (graphs/, with the `clustersim topology` command lines of GRAPHS) and README.md from the
simulation of this folder's request files (the path of `clustersim simulate`): iteration time, tokens per second
and the exposed communication of the kind each job waits on.

Usage, from the repository root:  python examples/fabrics/report.py          (writes graphs/ and README.md)
                                  python examples/fabrics/report.py --check  (exit 1 if either is stale)
"""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

from api_schemas import load_request_file
from service.cli.main import main as clustersim
from service.python_api import simulate

HERE = Path(__file__).resolve().parent
GRAPHS = {  # graph file: the arguments of `clustersim topology` that write it
    "fat-tree-1to1.json": ["fat-tree", "--nodes", "16", "--preset", "dgx-h100"],
    "fat-tree-2to1.json": ["fat-tree", "--nodes", "16", "--preset", "dgx-h100", "--oversubscription", "2"],
    "fat-tree-4to1.json": ["fat-tree", "--nodes", "16", "--preset", "dgx-h100", "--oversubscription", "4"],
    "fat-tree-4to1-spine0-failed.json": ["fat-tree", "--nodes", "16", "--preset", "dgx-h100",
                                         "--oversubscription", "4", "--remove-switch", "spine0"],
}
JOBS = (  # (request file stem, job, the time_breakdown_s entry it waits on)
    ("moe-ep64-1to1", "Qwen3-30B-A3B, EP 64 across two leaves", "ep_comm"),
    ("moe-ep64-2to1", "Qwen3-30B-A3B, EP 64 across two leaves", "ep_comm"),
    ("moe-ep64-4to1", "Qwen3-30B-A3B, EP 64 across two leaves", "ep_comm"),
    ("moe-ep64-4to1-spine0-failed", "Qwen3-30B-A3B, EP 64 across two leaves", "ep_comm"),
    ("dp128-tree-1to1", "GPT-3 1.3B, DP 128, tree all-reduce", "dp_comm"),
    ("dp128-tree-2to1", "GPT-3 1.3B, DP 128, tree all-reduce", "dp_comm"),
    ("dp128-ring-1to1", "GPT-3 1.3B, DP 128, ring all-reduce", "dp_comm"),
    ("dp128-ring-2to1", "GPT-3 1.3B, DP 128, ring all-reduce", "dp_comm"),
    ("tp8-pp16-1to1", "GPT-3 13B, TP 8 in a server, PP 16", "pp_comm"),
    ("tp8-pp16-4to1", "GPT-3 13B, TP 8 in a server, PP 16", "pp_comm"),
)


def graph_text(args: list[str]) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        code = clustersim(["topology", *args])
    assert code == 0, args
    return out.getvalue()


def render() -> str:
    rows = []
    for stem, job, wait in JOBS:
        path = HERE / f"{stem}.yaml"
        document = load_request_file(str(path))
        result = simulate(document)
        graph = path.read_text(encoding="utf-8").split("topology: graphs/")[1].split()[0].rstrip("}, ")
        rows.append(f"| `{stem}.yaml` | {job} | `{graph}` | {result.iteration_time_s:.3f} | "
                    f"{result.tokens_per_s:,.0f} | {wait} {getattr(result.time_breakdown_s, wait):.3f} |")
    commands = "\n".join(f"clustersim topology {' '.join(args)} -o examples/fabrics/graphs/{name}"
                         for name, args in GRAPHS.items())
    return f"""# Bring your own fabric

A request's `cluster.topology` is the cluster as a graph (networkx node-link JSON or GraphML): GPUs, NVSwitches,
NICs and switches, each link with its bandwidth and latency. Routes are found on it, so what a fabric's shape
does to a job comes out of the simulation: here 16 DGX H100 servers (128 GPUs, 8 NICs each) under a two-tier fat
tree whose leaves take 32 NICs (4 servers) each, at full bisection (32 spines), 2:1 (16 spines), 4:1 (8 spines),
and 4:1 with one spine switch failed. The graphs were written by `clustersim topology`:

```
{commands}
```

and each request names its graph by a path relative to the request file (`cluster: {{preset: dgx-h100, topology:
graphs/fat-tree-2to1.json}}`; the preset gives the GPU, the graph gives everything else).

| request | job | graph | iteration (s) | tokens/s | exposed communication (s) |
|---|---|---|---|---|---|
{chr(10).join(rows)}

What it shows:
- **The expert all-to-all crosses the spines.** Each EP group of 64 GPUs spans 8 servers on two leaves, so half
  of every GPU's dispatch leaves its leaf: with fewer uplinks it waits longer, and a failed spine takes an
  eighth of the 4:1 fabric's uplinks away.
- **A tree all-reduce crosses the spines, a ring hardly does.** NCCL's ring over 16 servers goes from server to
  server in order, so only the hops between leaves use an uplink, and no more than one ring channel's flow
  shares one; the tree's reductions between leaves load the uplinks and slow down when there are fewer of them.
- **A layout that keeps its traffic local does not notice.** TP 8 stays inside each server on NVLink, and the
  pipeline's sends go from one server to the next; oversubscription leaves it as it was.

Regenerate the graphs and this file: `python examples/fabrics/report.py` (`--check` says whether they are current;
a test runs it).
"""


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = False
    for name, args in GRAPHS.items():
        path, text = HERE / "graphs" / name, graph_text(args)
        if check:
            stale |= not path.exists() or path.read_text(encoding="utf-8") != text
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    text = render()
    readme = HERE / "README.md"
    if check:
        return 1 if stale or not readme.exists() or readme.read_text(encoding="utf-8") != text else 0
    readme.write_text(text, encoding="utf-8")
    print(f"wrote {readme} and {len(GRAPHS)} graphs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
