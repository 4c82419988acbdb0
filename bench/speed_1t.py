"""Speed benchmark: wall time and event count of the 1T GPT on 3072 A100s (examples/gpt-1t-3072-a100.yaml).

Prints the median of N runs (default 5) on one core; the goal is at most 5 s per simulation.
Run:  python bench/speed_1t.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.simulate import simulate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gpt-1t-3072-a100.yaml"


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    scenario = to_scenario(load_request_file(str(EXAMPLE)))
    walls, events = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        outcome = simulate(scenario)
        walls.append(time.perf_counter() - started)
        events = outcome.events
    print(f"1T GPT, 3072 A100s, DP 6 x TP 8 x PP 64, 512 microbatches: {events} events, "
          f"{outcome.simulated_ranks} simulated ranks")
    print(f"wall time over {runs} runs: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s, "
          f"max {max(walls):.2f} s ({events / statistics.median(walls):,.0f} events/s)")


if __name__ == "__main__":
    main()
