"""Search speed: simulated candidates per minute for GPT-3 175B on 1024 A100s (128 DGX A100 nodes), global batch
1536, with the default executor (a local process pool, one worker per CPU).

The whole space is generated and pruned (what is pruned is counted, never simulated); the candidates are then
simulated for real in the estimate's order (bounds.exhaustive: not only those that can still win, so that the
rate is measured over the time) until the time limit (default 60 s, from the start of the search,
planning included). Candidates per minute = simulated candidates / the search's wall time x 60.
Run:  python bench/search_speed.py [SECONDS] [WORKERS]
"""

from __future__ import annotations

import os
import sys
import time

from service.search import run_search

REQUEST = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"preset": "dgx-a100", "num_nodes": 128},
    "global_batch_size": 1536,
    "bounds": {"exhaustive": True},  # every candidate in the estimate's order: a rate, not a proof
}


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else (os.cpu_count() or 1)
    started = time.perf_counter()
    result = run_search(REQUEST, max_candidates=10**9, time_limit_s=seconds, workers=workers, top_k=3)
    wall = time.perf_counter() - started
    s = result["search"]
    print(f"GPT-3 175B, 1024 A100s, global batch 1536: {s['generated']} layouts generated, {s['pruned']} pruned "
          f"({s['discarded']['invalid']} break a layout rule, {s['discarded']['memory']} do not fit), "
          f"{s['feasible']} feasible")
    print(f"simulated {s['simulated']} candidates in {wall:.1f} s with {result['run']['workers']} workers "
          f"({os.cpu_count()} CPUs): {s['simulated'] / wall * 60:.0f} simulated candidates per minute "
          f"(pruned ones not counted; enumerating and pruning took {result['run']['planning_s']:.1f} s of it)")
    for entry in result["top"]:
        print(f"  #{entry['rank']} {entry['summary']}: {entry['tokens_per_s']:,.0f} tokens/s, "
              f"MFU {100 * entry['mfu']:.1f}%")


if __name__ == "__main__":
    main()
