"""Speed benchmark: wall time, CPU time and event count of the 1T GPT on 3072 A100s
(examples/gpt-1t-3072-a100.yaml).

Prints the medians of N simulations (default 5) in one process; the first builds the cluster's graph, routes and
collective patterns, which later simulations of the same cluster reuse. The goal is at most 5 s per simulation.
CPU time (time.process_time) is the steadier figure on a machine shared with other work. With --full every
data-parallel replica is simulated (fidelity "full").
Run:  python bench/speed_1t.py [N] [--full]
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore import Fidelity
from simcore.simulate import simulate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gpt-1t-3072-a100.yaml"


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--full"]
    runs = int(args[0]) if args else 5
    scenario = to_scenario(load_request_file(str(EXAMPLE)))
    if "--full" in sys.argv:
        scenario = replace(scenario, fidelity=Fidelity.FULL)
    walls, cpus, events = [], [], 0
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), time.process_time()
        outcome = simulate(scenario)
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu_started)
        events = outcome.events
    wall = statistics.median(walls)
    print(f"1T GPT, 3072 A100s, DP 6 x TP 8 x PP 64, 512 microbatches: {events} events, "
          f"{outcome.simulated_ranks} simulated ranks")
    print(f"wall time over {runs} runs: median {wall:.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s "
          f"({events / wall:,.0f} events/s); CPU time: median {statistics.median(cpus):.2f} s, "
          f"first run {cpus[0]:.2f} s")


if __name__ == "__main__":
    main()
