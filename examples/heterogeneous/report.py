"""A heterogeneous cluster: GPT-3 13B on 8 DGX A100 nodes and 8 DGX H100 nodes (mixed.yaml), against the same
16 nodes all A100 and all H100.

Cases: the mixed cluster with the even split (10 layers a stage) and with the balanced split (stage layers by the
time of the GPUs that run them), and with placement tp,pp,dp, which puts data-parallel replicas 0-1 on the A100s
and 2-3 on the H100s (every stage then has both: the slower replicas hold the others at the gradient reduction).
For the two splits, each stage's GPU, layers, per-microbatch time, busy fraction and bubble. Writes README.md.

Usage, from the repository root:  python examples/heterogeneous/report.py          (writes README.md)
                                  python examples/heterogeneous/report.py --check  (exit 1 if it is stale)
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import write_or_check
from service.convert import to_scenario
from simcore import NODE_PRESETS, Outcome, Partition, Scenario, simulate, sized

HERE = Path(__file__).resolve().parent
REQUEST = HERE / "mixed.yaml"


def cases() -> dict[str, Outcome]:
    """Each case's outcome, by name."""
    mixed = to_scenario(load_request_file(str(REQUEST)))
    gpus = mixed.cluster.num_gpus

    even = replace(mixed.layout, pipeline_partition=Partition.EVEN)

    def on(cluster: str) -> Scenario:  # the same nodes, all of one kind, the even split
        return replace(mixed, cluster=sized(NODE_PRESETS[cluster], gpus), layout=even)

    return {
        "all A100 (16 DGX A100)": simulate(on("dgx-a100")),
        "all H100 (16 DGX H100)": simulate(on("dgx-h100")),
        "mixed, even split": simulate(replace(mixed, layout=even)),
        "mixed, balanced split": simulate(mixed),
        "mixed, replicas across kinds (tp,pp,dp)": simulate(
            replace(mixed, layout=replace(mixed.layout, placement="tp,pp,dp"))),
    }


def _span(values: list[float], scale: float = 100.0, digits: int = 0) -> str:
    """'lo-hi' of the values (scaled), or one value when they round alike."""
    lo, hi = f"{scale * min(values):.{digits}f}", f"{scale * max(values):.{digits}f}"
    return lo if lo == hi else f"{lo}-{hi}"


def _stages(outcome: Outcome) -> list[str]:
    rows = ["| stage | GPU | layers | forward + backward per microbatch (ms) | busy fraction | bubble (s) |",
            "|---|---|---|---|---|---|"]
    m = outcome.metrics
    for s in m.stages:
        held = ", ".join(f"{n} {kind}" if kind == "transformer" else kind for kind, n in s.layers.items())
        rows.append(f"| {s.index} | {m.stage_gpus[s.index]} | {held} | {1e3 * (s.forward_s + s.backward_s):.1f} | "
                    f"{s.busy_fraction:.3f} | {s.bubble_s:.3f} |")
    return rows


def render() -> str:
    results = cases()
    even, balanced = results["mixed, even split"], results["mixed, balanced split"]
    across = results["mixed, replicas across kinds (tp,pp,dp)"]
    a100 = results["all A100 (16 DGX A100)"]
    e, b = even.metrics, balanced.metrics
    busy_e = [s.busy_fraction for s in e.stages]
    busy_b = [s.busy_fraction for s in b.stages]
    layers_b = [s.layers.get("transformer", 0) for s in b.stages]
    per_layer = {s.index: (s.forward_s + s.backward_s) / s.layers["transformer"] for s in e.stages}
    lines = [
        "# A heterogeneous cluster: GPT-3 13B on 8 DGX A100 and 8 DGX H100 nodes",
        "",
        "Written by `python examples/heterogeneous/report.py` from fresh simulations (`--check` tests that it is "
        "current). The request is `mixed.yaml`: `cluster.node_groups` lists 8 A100 nodes, then 8 H100 nodes "
        "(with 400 Gbit/s NICs) on one fabric; TP 8 inside a node, PP 4, DP 4, 32 microbatches a pipeline. "
        "With placement `tp,dp,pp` stages 0 and 1 run on the A100s and stages 2 and 3 on the H100s. Every "
        "stage's passes are costed on its own GPU, kernel by kernel (peak FLOP/s, HBM bandwidth, each "
        "generation's GEMM efficiency). MFU is over the cluster's mean peak.",
        "",
        "| case | iteration (s) | tokens/s | MFU | bubble fraction | ranks simulated |",
        "|---|---|---|---|---|---|",
    ]
    for name, outcome in results.items():
        m = outcome.metrics
        lines.append(f"| {name} | {m.iteration_time_s:.3f} | {m.tokens_per_s:,.0f} | {100 * m.mfu:.1f}% | "
                     f"{100 * m.bubble_fraction:.1f}% | {outcome.simulated_ranks} |")
    lines += [
        "",
        "## Even split: the A100 stages set the pace",
        "",
        *_stages(even),
        "",
        f"A layer costs {1e3 * per_layer[0]:.2f} ms per microbatch (forward and backward) on the A100 stage 0 and "
        f"{1e3 * per_layer[2]:.2f} ms on the H100 stage 2 ({per_layer[0] / per_layer[2]:.2f}x). With 10 layers "
        f"everywhere the A100 stages are busy {_span(busy_e[:2])}% of the "
        f"iteration; the H100 stages finish their layers early and wait for them: busy "
        f"{_span(busy_e[2:])}%, their bubble {_span([s.bubble_s for s in e.stages[2:]], 1.0, 3)} s.",
        "",
        "## Balanced split: layers by the speed of the GPUs",
        "",
        *_stages(balanced),
        "",
        f"The balanced split gives the A100 stages {layers_b[0]} and {layers_b[1]} layers and the H100 stages "
        f"{layers_b[2]} and {layers_b[3]}: every stage is busy {_span(busy_b)}% "
        f"of the iteration, and the iteration takes {b.iteration_time_s:.3f} s instead of {e.iteration_time_s:.3f} "
        f"s ({e.iteration_time_s / b.iteration_time_s:.2f}x the throughput of the even split; "
        f"{a100.metrics.iteration_time_s / b.iteration_time_s:.2f}x the all-A100 cluster's).",
        "",
        "## Replicas across GPU kinds",
        "",
        f"With placement `tp,pp,dp` data-parallel replicas 0 and 1 run on the A100s and 2 and 3 on the H100s: "
        f"every stage has both, so every replica is simulated ({across.simulated_ranks} ranks) and the H100 "
        f"replicas wait for the A100 ones at every gradient reduction. The iteration takes "
        f"{across.metrics.iteration_time_s:.3f} s, "
        f"{'slower' if across.metrics.iteration_time_s > a100.metrics.iteration_time_s else 'no faster'} than the "
        f"all-A100 cluster's {a100.metrics.iteration_time_s:.3f} s: the H100s' speed is lost. Keep each "
        "pipeline stage on one GPU kind and let the split balance them.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return write_or_check(HERE / "README.md", render(), argv, "python examples/heterogeneous/report.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
