"""Simulation cost against the data-parallel size: GPT-3 175B at TP 8 x PP 8 on DGX A100 nodes, 64 microbatches per
pipeline (global batch 64 x dp), with DP 1, 8, 64 and 256 (64 to 16,384 GPUs). Each simulation is timed whole in
one process (building the cluster's graph and routes, the workload, the engine run), rounds interleaved so that
the sizes share the machine's load; prints each size's median wall and CPU time, its events and extrapolated
periods, and the ratio to DP 1 and to DP 8. The goal: DP 256 at most 1.5x DP 1. DP 1 has no data-parallel
traffic at all (no gradient collective to route, build or run: half the events of DP 8), so the ratio to DP 8, the
smallest size with data-parallel traffic, is what says whether setup grows with the data-parallel size. Each
round also simulates every size again on a network built before (its routes and collective patterns already
made): the CPU time left is the workload, pass lists and engine run, so the difference to the first time is what
building the network and the patterns costs.
Run:  python bench/dp_scaling_speed.py [N]      (N rounds, default 5)
"""

from __future__ import annotations

import statistics
import sys
import time

from simcore import NODE_PRESETS, Layout, Recompute, Scenario, model_from_fields, simulate, sized
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import build_network

SIZES = (1, 8, 64, 256)


def scenario(dp: int) -> Scenario:
    layout = Layout(dp=dp, tp=8, pp=8, microbatch_size=1, global_batch_size=64 * dp, recompute=Recompute.SELECTIVE,
                    sequence_parallel=True, zero_stage=1, overlap_grad_reduce=True)
    return Scenario(model_from_fields(MODEL_PRESETS["gpt3-175b"]), sized(NODE_PRESETS["dgx-a100"], 64 * dp), layout)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    walls: dict[int, list[float]] = {dp: [] for dp in SIZES}
    cpus: dict[int, list[float]] = {dp: [] for dp in SIZES}
    warm: dict[int, list[float]] = {dp: [] for dp in SIZES}
    info: dict[int, tuple[int, int]] = {}
    scenarios = {dp: scenario(dp) for dp in SIZES}
    networks = {dp: build_network(s.cluster, s.algorithm) for dp, s in scenarios.items()}
    for dp in SIZES:
        simulate(scenarios[dp], networks[dp])  # its routes and patterns made once
    for _ in range(rounds):
        for dp in SIZES:
            started, cpu = time.perf_counter(), time.process_time()
            outcome = simulate(scenarios[dp])
            walls[dp].append(time.perf_counter() - started)
            cpus[dp].append(time.process_time() - cpu)
            info[dp] = (outcome.events, outcome.extrapolated_periods)
            cpu = time.process_time()
            simulate(scenarios[dp], networks[dp])
            warm[dp].append(time.process_time() - cpu)
    base_wall, base_cpu = statistics.median(walls[1]), statistics.median(cpus[1])
    dp8_cpu = statistics.median(cpus[8])
    for dp in SIZES:
        wall, cpu = statistics.median(walls[dp]), statistics.median(cpus[dp])
        events, periods = info[dp]
        again = statistics.median(warm[dp])
        print(f"DP {dp:3d} ({64 * dp:5d} GPUs): wall {wall:.3f} s ({wall / base_wall:.2f}x DP 1), CPU {cpu:.3f} s "
              f"({cpu / base_cpu:.2f}x; {cpu / dp8_cpu:.2f}x DP 8), {events} events, {periods} periods extrapolated; "
              "on a built network "
              f"CPU {again:.3f} s ({again / statistics.median(warm[1]):.2f}x)")


if __name__ == "__main__":
    main()
