"""Simulation cost against the data-parallel size: GPT-3 175B at TP 8 x PP 8 on DGX A100 nodes, 64 microbatches per
pipeline (global batch 64 x dp), with DP 1, 8, 64 and 256 (64 to 16,384 GPUs). Rounds interleave the sizes so that
they share the machine's load; each prints its medians of CPU time, its events and extrapolated periods, and the
ratio to DP 1 and to DP 8, for two cases:
- first: the first simulation on the cluster in the process (its graph already built: topology/cluster_graph.py
  keeps it per cluster spec; bench/graph_cost.py times building it): it routes its pairs and counts its
  collective patterns (simcore/network.py's network, built here);
- later: a later simulation on that cluster, whose network (routes, patterns, pass orders) the process kept: what
  every simulation of a search, a sweep or a Python session after the first pays.
The goal: setup flat in DP, DP 256 at most 1.5x DP 1. DP 1 has no data-parallel traffic at all (no gradient
collective to route, build or run: half the events of DP 8), so the ratio to DP 8, the smallest size with
data-parallel traffic, says whether the first simulation's setup grows with the data-parallel size.
Run:  python bench/dp_scaling_speed.py [N]      (N rounds, default 5)
"""

from __future__ import annotations

import statistics
import sys
import time

from simcore import NODE_PRESETS, Layout, Recompute, Scenario, model_from_fields, simulate, sized
from simcore.domain.presets import MODEL_PRESETS
from simcore.network import forget_networks

SIZES = (1, 8, 64, 256)


def scenario(dp: int) -> Scenario:
    layout = Layout(dp=dp, tp=8, pp=8, microbatch_size=1, global_batch_size=64 * dp, recompute=Recompute.SELECTIVE,
                    sequence_parallel=True, zero_stage=1, overlap_grad_reduce=True)
    return Scenario(model_from_fields(MODEL_PRESETS["gpt3-175b"]), sized(NODE_PRESETS["dgx-a100"], 64 * dp), layout)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    first: dict[int, list[float]] = {dp: [] for dp in SIZES}
    later: dict[int, list[float]] = {dp: [] for dp in SIZES}
    info: dict[int, tuple[int, int]] = {}
    scenarios = {dp: scenario(dp) for dp in SIZES}
    for dp in SIZES:
        simulate(scenarios[dp])  # its graph built once (and the code's first-call costs paid)
    for _ in range(rounds):
        for dp in SIZES:
            forget_networks()
            cpu = time.process_time()
            outcome = simulate(scenarios[dp])
            first[dp].append(time.process_time() - cpu)
            info[dp] = (outcome.events, outcome.extrapolated_periods)
            cpu = time.process_time()
            simulate(scenarios[dp])
            later[dp].append(time.process_time() - cpu)
    for name, times in (("first", first), ("later", later)):
        base, dp8 = statistics.median(times[1]), statistics.median(times[8])
        for dp in SIZES:
            cpu = statistics.median(times[dp])
            events, periods = info[dp]
            print(f"{name}: DP {dp:3d} ({64 * dp:5d} GPUs): CPU {cpu:.3f} s ({cpu / base:.2f}x DP 1; "
                  f"{cpu / dp8:.2f}x DP 8), {events} events, {periods} periods extrapolated")


if __name__ == "__main__":
    main()
