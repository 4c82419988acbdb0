"""Stragglers: GPT-3 175B on 1,024 A100s (healthy.yaml), with one GPU 20% slow, with 1% per-GPU compute
variability, and with both; every replica simulated (the engine does so whenever compute is uneven).

For each case: the iteration time and its growth, where the critical rank's time goes, the mean pipeline bubble,
and from the trace's spans how long the slow GPU's replica and the healthy replicas wait for the gradient
reduction (the data-parallel peers waiting for the straggler). Writes README.md.

Usage, from the repository root:  python examples/stragglers/report.py          (writes README.md)
                                  python examples/stragglers/report.py --check  (exit 1 if it is stale)
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import write_or_check
from service.convert import to_scenario
from simcore import ClusterHealth, Fidelity, Outcome, Scenario, SlowGpu, simulate

HERE = Path(__file__).resolve().parent
REQUEST = HERE / "healthy.yaml"
# GPU 347: node 43, local GPU 3. With placement tp,dp,pp it is tensor rank 3 of replica 11 in pipeline stage 2.
SLOW = SlowGpu(gpu=347, compute_time_factor=1.2)
CV = 0.01
SEEDS = range(5)


def _dp_wait_by_replica(outcome: Outcome, pp: int) -> dict[int, float]:
    """Each replica's mean over its stages of the time its compute stream waited for data-parallel work (its
    'wait ...' spans; under full fidelity a replica's compute stream and gradient stream share the track name
    `stage S dpR`, and the stream's own spans are its collectives)."""
    waits: dict[int, float] = {}
    for span in outcome.spans:
        if span.category == "dp_comm" and span.name.startswith("wait") and " dp" in span.track:
            replica = int(span.track.rsplit(" dp", 1)[1].split()[0])
            waits[replica] = waits.get(replica, 0.0) + (span.end_s - span.start_s) / pp
    return waits


def _work(outcome: Outcome) -> float:
    b = outcome.metrics.time_breakdown_s
    return b["compute"] + b["recompute"]


def _case(base: Scenario, health: ClusterHealth, seed: int = 0) -> Outcome:
    scenario = replace(base, cluster=replace(base.cluster, health=health), seed=seed, keep_spans=True,
                       fidelity=Fidelity.FULL)
    return simulate(scenario)


def render() -> str:
    base = to_scenario(load_request_file(str(REQUEST)))
    layout = base.layout
    healthy = _case(base, ClusterHealth())
    slow = _case(base, ClusterHealth(slow_gpus=(SLOW,)))
    varied = [_case(base, ClusterHealth(compute_variability=CV), seed) for seed in SEEDS]
    both = _case(base, ClusterHealth(slow_gpus=(SLOW,), compute_variability=CV))
    T0 = healthy.metrics.iteration_time_s

    def row(name: str, outcome: Outcome) -> str:
        m = outcome.metrics
        b = m.time_breakdown_s
        return (f"| {name} | {m.iteration_time_s:.3f} | {100 * (m.iteration_time_s / T0 - 1):+.2f}% | "
                f"{_work(outcome):.3f} | {b['bubble']:.3f} | {b['pp_comm']:.3f} | {b['dp_comm']:.3f} | "
                f"{100 * m.bubble_fraction:.2f}% | {m.critical_gpu} |")

    waits = _dp_wait_by_replica(slow, layout.pp)
    slow_replica = 11
    others = [w for r, w in waits.items() if r != slow_replica]
    healthy_waits = _dp_wait_by_replica(healthy, layout.pp)
    stage_bubbles = [(s0.index, s0.bubble_s, s1.bubble_s) for s0, s1 in zip(healthy.metrics.stages,
                                                                              slow.metrics.stages)]
    varied_T = [o.metrics.iteration_time_s for o in varied]
    lines = [
        "# Stragglers: one slow GPU and per-GPU variability on 1,024 A100s",
        "",
        "Written by `python examples/stragglers/report.py` from simulations of [healthy.yaml](healthy.yaml)",
        "(GPT-3 175B, DP 16 x TP 8 x PP 8, 32 microbatches per pipeline, 1F1B, gradient reduction overlapped with",
        "backward); a test checks that it is current. Every replica is simulated in every case.",
        "",
        f"- **one slow GPU**: GPU {SLOW.gpu} (node 43, tensor rank 3 of replica {slow_replica} in pipeline stage 2)",
        f"  computes {SLOW.compute_time_factor}x as long;",
        f"- **variability**: every GPU's compute time factor drawn log-normal, mean 1, CV {CV} (seed 0 in the table;",
        f"  seeds {SEEDS.start}-{SEEDS.stop - 1} below);",
        "- **both**.",
        "",
        "Times of the critical rank (the one that finishes last), seconds per iteration:",
        "",
        "| case | iteration s | vs healthy | compute + recompute s | bubble s | pp wait s | dp wait s | mean bubble "
        "| critical GPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        row("healthy", healthy),
        row("one GPU 1.2x", slow),
        row(f"variability CV {CV}", varied[0]),
        row("both", both),
        "",
        "## Where the slow GPU's delay goes",
        "",
        "- **Its tensor-parallel group**: the seven other GPUs of its group wait for it at every layer's",
        f"  collective, so the whole rank (replica {slow_replica}, stage 2, led by GPU {slow.metrics.critical_gpu}) "
        "computes 1.2x as long and",
        "  finishes last: the critical rank's compute and recomputation grow from "
        f"{_work(healthy):.3f} s to {_work(slow):.3f} s.",
        "- **The pipeline**: stage 2 of replica 11 becomes the slowest stage of its pipeline; the stages before and",
        "  after it wait for its activations and gradients. Mean bubble per stage, over the 16 replicas (s):",
        "",
        "| stage | healthy | one GPU 1.2x |",
        "|---:|---:|---:|",
    ]
    lines += [f"| {i} | {a:.4f} | {b:.4f} |" for i, a, b in stage_bubbles]
    lines += [
        "",
        "- **Every data-parallel peer**: the gradient reduction cannot finish before the slow replica's last",
        "  backward pass, so the other fifteen replicas wait. Mean time a replica's compute stream waited for",
        "  data-parallel work, per stage:",
        f"  - healthy: {statistics.mean(healthy_waits.values()):.3f} s;",
        f"  - with the slow GPU: replica {slow_replica} (the straggler's) {waits[slow_replica]:.3f} s, the other "
        f"replicas {statistics.mean(others):.3f} s on average.",
        "",
        f"The iteration grows by {100 * (slow.metrics.iteration_time_s / T0 - 1):.1f}% although one GPU in 1,024 "
        f"is slow: one GPU sets the pace of {layout.tp * layout.pp * layout.dp} GPUs.",
        "",
        "## Variability",
        "",
        f"With CV {CV} every GPU is a little slow or fast; each iteration waits for the slowest draws of each",
        "tensor-parallel group, pipeline and the data-parallel group: over seeds "
        f"{SEEDS.start}-{SEEDS.stop - 1} the iteration takes {statistics.mean(varied_T):.3f} s on average "
        f"({100 * (statistics.mean(varied_T) / T0 - 1):+.2f}%), from {min(varied_T):.3f} to {max(varied_T):.3f} s.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return write_or_check(HERE / "README.md", render(), argv, "python examples/stragglers/report.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
