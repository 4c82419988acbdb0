"""How good the search's screen is on the issue's own case, Llama-3-70B on 256 H100s (global batch 1024,
seq 8192, default space): the layouts that pass the rules and memory, the closed-form estimate's error against
the engine per family (CP, EP, interleaved, ZeRO-3, plain) on a sample of each (the layout the estimate ranks
first in the family, then layouts spread over the family by simcore.run_cost.estimate_cost's seconds), and,
with --search, the search itself under a time limit (median of --repeat runs).

The error is estimated / simulated tokens/s: above 1 the estimate is optimistic (it ranks the layout too high).
A bound per family that covers the sample is printed. The search learns such bounds itself as it goes and prunes
by them (simcore.planning.frontier); bench/search_proof.py times that and checks its bounds.

Run:  python bench/search_quality.py [--sample N] [--search] [--time-limit S] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from api_schemas.search import search_request_from
from service import convert as adapters
from service.search import prepare, run_search
from simcore import simulate
from simcore.domain.layout import Layout
from simcore.planning.estimate import Estimator
from simcore.planning.prune import plan_search
from simcore.run_cost import estimate_cost
from topology.hardware import GPUS

REQUEST: dict[str, Any] = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
                           "global_batch_size": 1024}


def family_kind(layout: Layout) -> str:
    """The estimate's families whose error is measured apart."""
    if layout.cp > 1:
        return "CP"
    if getattr(layout, "ep", 1) > 1:
        return "EP"
    if layout.virtual_stages > 1:
        return "interleaved"
    if layout.zero_stage == 3:
        return "ZeRO-3"
    return "plain"


def screen_error(sample: int) -> dict[str, list[float]]:
    req = search_request_from(dict(REQUEST))
    base, _, _ = prepare(req)
    cluster = base.cluster
    plan = plan_search(base.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu],
                       req.global_batch_size, adapters.to_space(req.space), base.cost_parameters)
    estimator = Estimator(base.model, cluster, base.cost_parameters)
    by_kind: dict[str, list[tuple[float, Layout]]] = defaultdict(list)
    for layout in plan.candidates:
        scenario = replace(base, layout=layout)
        by_kind[family_kind(layout)].append((estimate_cost(scenario).seconds, layout))
    # The layout each family's estimate ranks first is sampled too: an optimistic error there is what misleads.
    best = {kind: max(entries, key=lambda entry: estimator.tokens_per_s(entry[1])) for kind, entries in by_kind.items()}
    print(f"{len(plan.candidates):,} layouts pass the rules and memory "
          f"({plan.generated:,} generated): " + ", ".join(f"{k} {len(v):,}" for k, v in sorted(by_kind.items())))
    ratios: dict[str, list[float]] = {}
    for kind, entries in sorted(by_kind.items()):
        entries.sort(key=lambda entry: entry[0])
        step = max(len(entries) // sample, 1)
        picked = [best[kind]] + [e for e in entries[::step][:sample] if e is not best[kind]]  # spread, cheapest first
        ratios[kind] = []
        for est_s, layout in picked:
            started = time.perf_counter()
            simulated = simulate(replace(base, layout=layout)).metrics.tokens_per_s
            wall = time.perf_counter() - started
            estimated = estimator.tokens_per_s(layout)
            ratios[kind].append(estimated / simulated)
            print(f"  {kind:12s} {layout.dp}x{layout.tp}x{layout.pp} cp {layout.cp} v {layout.virtual_stages} "
                  f"ZeRO {layout.zero_stage} mb {layout.microbatch_size}: estimate {estimated:,.0f}, simulated "
                  f"{simulated:,.0f} tokens/s, ratio {estimated / simulated:.3f} ({wall:.1f} s, est {est_s:.1f} s)",
                  flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample", type=int, default=3, help="layouts simulated per family")
    parser.add_argument("--search", action="store_true", help="run the search too")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ratios = screen_error(args.sample)
    print("screen error per family (estimated / simulated tokens/s): min, max; a bound that covers the sample")
    for kind, values in ratios.items():
        print(f"  {kind:12s} n {len(values)}: {min(values):.3f} .. {max(values):.3f}, optimistic by at most "
              f"{max(max(values) - 1, 0) * 100:.1f}%, pessimistic by at most {max(1 - min(values), 0) * 100:.1f}%")
    if args.search:
        walls, answers = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = run_search(REQUEST, time_limit_s=args.time_limit, workers=2)
            walls.append(time.perf_counter() - started)
            best = result["best"]
            answers.append(f"{best['summary']} {best['tokens_per_s']:,.0f} tokens/s" if best else "none")
            print(f"  search: {walls[-1]:.1f} s, {result['search']['simulated']} simulated, stopped by "
                  f"{result['search']['stopped_by']}: {answers[-1]}", flush=True)
        print(f"search wall median {statistics.median(walls):.1f} s; answers {sorted(set(answers))}")


if __name__ == "__main__":
    main()
