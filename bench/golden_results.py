"""Golden results: simulate a fixed, varied set of requests and write their result JSON, to check that a speed-up
of the engine changes no figure.

The set: every example request under examples/ (YAML, GPT and T5), 30 layouts drawn deterministically from the
search space of examples/search/gpt3-175b-1024-a100.search.json (widened to every recomputation mode and both
overlap_grad_reduce settings, so that ZeRO 0-3, GPipe / 1F1B / interleaved, recomputation, sequence parallelism
and gradient overlap all appear) plus the 4 that search simulates first, and a few small cases: full fidelity
(ZeRO 1, 2, 3; a T5 pipeline with bucketed ZeRO 3 gathers), the tree and hierarchical algorithms, and a trace
(its spans compared too). `simulator.wall_time_s`, the one field that varies between identical runs, is dropped.

Run:  python bench/golden_results.py OUT.json      then compare:  python bench/golden_results.py --compare A B
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from api_schemas import SimulationRequest, load_request_file
from api_schemas.search import search_request_from
from service import convert as adapters
from service.search import to_space
from simcore import GPUS, Layout, Recompute, simulate
from simcore.planning.estimate import Estimator
from simcore.planning.prune import plan_search

ROOT = Path(__file__).resolve().parent.parent
SEARCH = ROOT / "examples" / "search" / "gpt3-175b-1024-a100.search.json"
CANDIDATES = 30

SMALL = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2}}
EXTRA: dict[str, dict[str, Any]] = {
    "small-full-fidelity-zero1-overlap": {
        **SMALL, "options": {"fidelity": "full"},
        "layout": {"dp": 2, "tp": 4, "pp": 2, "global_batch_size": 16, "zero_stage": 1,
                   "overlap_grad_reduce": True}},
    "small-full-fidelity-zero3-interleaved": {
        **SMALL, "options": {"fidelity": "full"},
        "layout": {"dp": 2, "tp": 2, "pp": 4, "virtual_stages": 2, "schedule": "interleaved_1f1b",
                   "global_batch_size": 16, "zero_stage": 3, "recompute": "selective"}},
    "small-full-fidelity-zero2-gpipe": {
        **SMALL, "options": {"fidelity": "full"},
        "layout": {"dp": 4, "tp": 2, "pp": 2, "schedule": "gpipe", "global_batch_size": 32, "zero_stage": 2,
                   "placement": "dp,tp,pp"}},
    "small-tree": {
        **SMALL, "options": {"collective_algorithm": "tree"},
        "layout": {"dp": 4, "tp": 2, "pp": 2, "global_batch_size": 32, "overlap_grad_reduce": True}},
    "small-hierarchical": {
        **SMALL, "options": {"collective_algorithm": "hierarchical"},
        "layout": {"dp": 4, "tp": 2, "pp": 2, "global_batch_size": 32, "zero_stage": 1}},
    "small-t5-full-fidelity-zero3-buckets": {
        "model": {"preset": "t5-base", "seq_length": 512, "decoder_seq_length": 128},
        "cluster": {"preset": "dgx-a100", "num_nodes": 1}, "options": {"fidelity": "full"},
        "layout": {"dp": 2, "tp": 1, "pp": 4, "global_batch_size": 16, "zero_stage": 3,
                   "pipeline_partition": "balanced", "zero3_gather_bucket_elements": 1000000,
                   "overlap_grad_reduce": True}},
    "small-t5-zero2": {
        "model": {"preset": "t5-base", "seq_length": 512, "decoder_seq_length": 128},
        "cluster": {"preset": "dgx-a100", "num_nodes": 2},
        "layout": {"dp": 4, "tp": 2, "pp": 2, "global_batch_size": 32, "zero_stage": 2, "overlap_grad_reduce": True}},
    "small-trace": {
        **SMALL, "options": {"trace": True},
        "layout": {"dp": 2, "tp": 4, "pp": 2, "global_batch_size": 16, "zero_stage": 3, "sequence_parallel": True,
                   "recompute": "full", "overlap_grad_reduce": True}},
}


SCHEDULES = ("1f1b", "gpipe", "interleaved_1f1b")


def _key(layout: Layout) -> tuple[object, ...]:
    return (layout.zero_stage, str(layout.schedule), str(layout.recompute), layout.sequence_parallel,
            layout.overlap_grad_reduce)


def search_candidates() -> list[tuple[str, Any]]:
    """CANDIDATES layouts of the search's space, the i-th from the stratum (ZeRO stage, schedule, recomputation,
    sequence parallelism, gradient overlap) that i names (or the next stratum that exists), at a fixed stride in
    it; then the 4 layouts a search simulates first (its estimate's order, on the default space)."""
    req = search_request_from(json.loads(SEARCH.read_text()))
    space = replace(to_space(req.space), recompute=tuple(Recompute), overlap_grad_reduce=(True, False))
    base = adapters.to_scenario(SimulationRequest(model=req.model, cluster=req.cluster,
                                                  layout={"dp": 1, "tp": 1, "pp": 1,
                                                          "global_batch_size": req.global_batch_size}))
    gpu = GPUS[base.cluster.gpu]
    plan = plan_search(base.model, base.cluster.num_gpus, base.cluster.gpus_per_node, gpu, req.global_batch_size,
                       space)
    strata: dict[tuple[object, ...], list[Layout]] = {}
    for layout in plan.candidates:
        strata.setdefault(_key(layout), []).append(layout)
    keys = sorted(strata, key=str)
    chosen: list[Layout] = []
    for i in range(CANDIDATES):
        target = (i % 4, SCHEDULES[(i // 4) % 3], str(list(Recompute)[i % 3]), (i // 2) % 2 == 1, (i // 3) % 2 == 0)
        key = next((k for k in keys if str(k) >= str(target)), keys[0])
        members = strata[key]
        chosen.append(members[(7919 * (i + 1)) % len(members)])
    default = plan_search(base.model, base.cluster.num_gpus, base.cluster.gpus_per_node, gpu,
                          req.global_batch_size, to_space(search_request_from(
                              {k: v for k, v in json.loads(SEARCH.read_text()).items() if k != "space"}).space))
    estimator = Estimator(base.model, base.cluster, base.cost_parameters)
    estimates = [estimator.tokens_per_s(layout) for layout in default.candidates]
    order = sorted(range(len(default.candidates)), key=lambda i: (-estimates[i], i))
    chosen += [default.candidates[i] for i in order[:4]]
    return [(f"search-{i:02d} {_describe(layout)}", replace(base, layout=layout)) for i, layout in enumerate(chosen)]


def _describe(layout: Layout) -> str:
    return (f"dp{layout.dp} tp{layout.tp} pp{layout.pp} mb{layout.microbatch_size} {layout.schedule}"
            f"v{layout.virtual_stages} zero{layout.zero_stage} {layout.recompute} sp{int(layout.sequence_parallel)}"
            f" ovl{int(layout.overlap_grad_reduce)} {layout.placement}")


def scenarios() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        out.append((str(path.relative_to(ROOT)), adapters.to_scenario(load_request_file(str(path)))))
    for name, body in EXTRA.items():
        out.append((name, adapters.to_scenario(SimulationRequest.model_validate(body))))
    return out + search_candidates()


def run(out_path: str) -> None:
    results: dict[str, Any] = {}
    for name, scenario in scenarios():
        started = time.perf_counter()
        outcome = simulate(scenario)
        result = adapters.to_response(outcome, include_trace=scenario.keep_spans)
        result["simulator"].pop("wall_time_s", None)
        results[name] = result
        print(f"{time.perf_counter() - started:6.2f} s  {outcome.events:8d} events  {name}", flush=True)
    Path(out_path).write_text(json.dumps(results, indent=1, sort_keys=True))


def _diff(a: Any, b: Any, where: str, out: list[str], rel: float) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out, rel)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, rel)
    elif isinstance(a, float) and isinstance(b, float):
        if a != b and not math.isclose(a, b, rel_tol=rel, abs_tol=1e-300):
            out.append(f"{where}: {a!r} != {b!r}")
    elif a != b:
        out.append(f"{where}: {a!r} != {b!r}")


def compare(before: str, after: str, rel: float = 1e-9) -> int:
    a, b = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    problems: list[str] = []
    _diff(a, b, "", problems, rel)
    exact = a == b
    for line in problems[:50]:
        print(line)
    print(f"{len(a)} results; {'identical' if exact else 'equal within 1e-9' if not problems else 'DIFFERENT'}"
          f" ({len(problems)} differences beyond {rel:g} relative)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        raise SystemExit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    run(sys.argv[1])
