"""How good is the estimate a search is admitted by (service/search_limits.py)? For a few searches: the
planning's time against the bound it is charged (PLANNING_FIXED_S + PLANNING_S_PER_LAYOUT per layout of the
space's bound), and for the first candidates in the estimate's order the CPU time of simulating each against its
estimate (simcore.run_cost.estimate_cost), the ratio ESTIMATE_SHORTFALL must cover.

    python bench/search_admission.py [--candidates N] [--only NAME]

Each candidate is simulated in this process, as a search job's one worker does (its network built once per
cluster), so the ratios include nothing but the simulation. Slow: the GPT-1T full-fidelity candidates take about
a minute each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from api_schemas.search import search_request_from
from service import convert as adapters
from service.search import prepare, space_size_bound
from service.search_limits import ESTIMATE_SHORTFALL, candidate_cost, planning_bound_s
from simcore.planning.estimate import Estimator
from simcore.planning.prune import plan_search
from simcore.planning.worker import evaluate_candidate
from topology.hardware import GPUS

ROOT = Path(__file__).resolve().parent.parent
CASES: dict[str, dict[str, Any]] = {
    "gpt3-2.7b-16": {"model": {"preset": "gpt3-2.7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                     "global_batch_size": 256},
    "gpt3-175b-1024": json.loads((ROOT / "examples" / "search" / "gpt3-175b-1024-a100.search.json").read_text()),
    "llama3-70b-256": {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
                       "global_batch_size": 512},
    # The narrowed space of bench/orphan_workers.py: its first candidates run context parallelism over 16 GPUs.
    "llama3-70b-256-cp16": {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
                            "global_batch_size": 512,
                            "space": {"tp": [8], "pp": [2, 4, 8], "zero_stage": [1], "recompute": ["selective"],
                                      "sequence_parallel": [True]}},
    "gpt-1t-3072-full": {"model": {"preset": "gpt-1t"}, "cluster": {"preset": "dgx-a100", "num_nodes": 384},
                         "global_batch_size": 3072, "options": {"fidelity": "full"}},
}


def measure(doc: dict[str, Any], candidates: int) -> tuple[float, float, list[tuple[float, float]]]:
    """(planning seconds, its charged bound, [(estimated s, CPU s) per candidate]) for one search request."""
    request = search_request_from(doc)
    started = time.process_time()
    base, sizes, _ = prepare(request)
    cluster = base.cluster
    plan = plan_search(base.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu],
                       request.global_batch_size, adapters.to_space(request.space), base.cost_parameters)
    estimator = Estimator(base.model, cluster, base.cost_parameters)
    estimates = [estimator.tokens_per_s(layout) for layout in plan.candidates]
    order = sorted(range(len(estimates)), key=lambda i: (-estimates[i], i))
    planning_s = time.process_time() - started
    bound_s = planning_bound_s(space_size_bound(request, base, sizes))
    runs = []
    for i in order[:candidates]:
        scenario = replace(base, layout=plan.candidates[i])
        before = time.process_time()
        evaluate_candidate((i, scenario))
        runs.append((candidate_cost(scenario).seconds, time.process_time() - before))
    return planning_s, bound_s, runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--only", choices=sorted(CASES))
    args = parser.parse_args()
    ratios = []
    for name, doc in CASES.items():
        if args.only is not None and name != args.only:
            continue
        planning_s, bound_s, runs = measure(doc, args.candidates)
        case = [actual / estimated for estimated, actual in runs]
        ratios += case
        print(f"{name:17s} planning {planning_s:6.1f} s (bound {bound_s:6.1f} s); candidates CPU / estimate: "
              + ", ".join(f"{actual:.2f}/{estimated:.2f} s = {actual / estimated:.2f}" for estimated, actual in runs))
    if ratios:
        print(f"{len(ratios)} candidates: ratio min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f} (ESTIMATE_SHORTFALL {ESTIMATE_SHORTFALL:g})")
    return 0 if not ratios or max(ratios) <= ESTIMATE_SHORTFALL else 1


if __name__ == "__main__":
    raise SystemExit(main())
