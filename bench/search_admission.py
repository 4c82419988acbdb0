"""How good is the estimate a search is admitted by (service/search_limits.py)? For a few searches: the
planning's time against the bound it is charged (PLANNING_FIXED_S + PLANNING_S_PER_LAYOUT per layout of the
space's bound), and for the first candidates in the estimate's order the CPU time of simulating each against its
estimate (simcore.run_cost.estimate_cost), the ratio ESTIMATE_SHORTFALL must cover.

    python bench/search_admission.py [--candidates N] [--only NAME]
    python bench/search_admission.py --events N [--seed S] [--max-estimated-s S] [--only NAME]

With --events: N candidates of each kind of layout (simcore.planning.frontier.error_kind: context-parallel, with
ZeRO 3 or not, expert-parallel, ZeRO-3, interleaved, 1F1B, ...) drawn at random (seeded) from each search's
feasible layouts, those estimated at most --max-estimated-s; per kind, the engine events each simulation reported
over its estimated events (what admission limits: above 1 the estimate was short), and its CPU time over its
estimated seconds.

Each candidate is simulated in this process, as a search job's one worker does (its network built once per
cluster), so the ratios include nothing but the simulation. Slow: the GPT-1T full-fidelity candidates take about
a minute each.
"""

from __future__ import annotations

import argparse
import json
import random
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
from simcore.planning.frontier import error_kind
from simcore.planning.prune import plan_search
from simcore.planning.rank import Evaluation
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
    # MoE: experts not split by tensor parallelism (expert_tp 1), expert parallelism, and their ZeRO 2 buckets.
    "mixtral-8x7b-64": {"model": {"preset": "mixtral-8x7b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
                        "global_batch_size": 512},
    "qwen3-30b-64": {"model": {"preset": "qwen3-30b-a3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 8},
                     "global_batch_size": 512, "space": {"expert_tp": [1, 2]}},
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


def sample_events(doc: dict[str, Any], per_kind: int, seed: int,
                  max_estimated_s: float) -> dict[str, list[tuple[float, float]]]:
    """{kind: [(engine events / estimated events, CPU s / estimated s)]} of `per_kind` random feasible layouts of
    each kind of one search request, each estimated at most `max_estimated_s`."""
    request = search_request_from(doc)
    base, _, _ = prepare(request)
    cluster = base.cluster
    plan = plan_search(base.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu],
                       request.global_batch_size, adapters.to_space(request.space), base.cost_parameters)
    kinds: dict[str, list[int]] = {}
    for i, layout in enumerate(plan.candidates):
        kinds.setdefault(error_kind(layout)[0], []).append(i)
    draw = random.Random(seed)
    out: dict[str, list[tuple[float, float]]] = {}
    for kind, indices in sorted(kinds.items()):
        draw.shuffle(indices)
        for i in indices:
            if len(out.get(kind, ())) >= per_kind:
                break
            scenario = replace(base, layout=plan.candidates[i])
            cost = candidate_cost(scenario)
            if cost.seconds > max_estimated_s:
                continue
            before = time.process_time()
            result = evaluate_candidate((i, scenario))
            assert isinstance(result, Evaluation)  # no deadline: never Overdue
            out.setdefault(kind, []).append((result.events / cost.events,
                                             (time.process_time() - before) / cost.seconds))
    return out


def main_events(names: list[str], per_kind: int, seed: int, max_estimated_s: float) -> int:
    """Print the events and CPU ratios per kind and search, then over all; exit 1 if a candidate took more than
    1.5x its estimated events."""
    every: dict[str, list[tuple[float, float]]] = {}
    for name in names:
        for kind, ratios in sample_events(CASES[name], per_kind, seed, max_estimated_s).items():
            every.setdefault(kind, []).extend(ratios)
            events = [e for e, _ in ratios]
            print(f"{name:19s} {kind:24s} {len(ratios):2d} events/estimate {min(events):.2f}-{max(events):.2f}, "
                  f"CPU/estimate {max(c for _, c in ratios):.2f} at most")
    print("over all searches:")
    for kind, ratios in sorted(every.items()):
        events = [e for e, _ in ratios]
        print(f"  {kind:24s} {len(ratios):3d} events/estimate {min(events):.2f}-{max(events):.2f} (median "
              f"{statistics.median(events):.2f}), CPU/estimate {max(c for _, c in ratios):.2f} at most")
    worst = max(e for ratios in every.values() for e, _ in ratios)
    print(f"most events over the estimate: {worst:.2f} (goal: at most 1.5)")
    return 0 if worst <= 1.5 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--events", type=int, metavar="N", help="N random candidates of each kind per search")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-estimated-s", type=float, default=5.0)
    args = parser.parse_args()
    if args.events is not None:
        names = [args.only] if args.only else [n for n in CASES if n != "gpt-1t-3072-full"]  # a minute a candidate
        return main_events(names, args.events, args.seed, args.max_estimated_s)
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
