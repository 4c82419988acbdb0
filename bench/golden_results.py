"""Golden results: simulate a fixed, varied set of requests and write their result JSON, to check that a change
of the engine or a move of code changes no figure.

The set: every example request under examples/ (YAML, GPT and T5), 30 layouts drawn deterministically from the
search space of examples/search/gpt3-175b-1024-a100.search.json (widened to every recomputation mode and both
overlap_grad_reduce settings, so that ZeRO 0-3, GPipe / 1F1B / interleaved, recomputation, sequence parallelism
and gradient overlap all appear) plus the 4 that search simulates first, and a few small cases: full fidelity
(ZeRO 1, 2, 3; a T5 pipeline with bucketed ZeRO 3 gathers), the tree and hierarchical algorithms, and a trace
(its spans compared too). `simulator.wall_time_s`, the one field that varies between identical runs, is dropped.

TEST_SET, a subset that runs in a few seconds, is a CI test: tests/golden/golden.json holds each of its request
documents with its expected result, and tests/golden/test_golden.py simulates them again and compares (1e-9
relative). Regenerate that file (`--write-tests`) only when a change of figures is intended, and say which
figures changed and why in the commit.

Run:  python bench/golden_results.py OUT.json      then compare:  python bench/golden_results.py --compare A B
      python bench/golden_results.py --write-tests   (rewrites tests/golden/golden.json)
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from api_schemas import SimulationRequest, load_request_file
from api_schemas.topology_file import with_topology_file
from service import convert as adapters
from simcore import Layout, Recompute, simulate

ROOT = Path(__file__).resolve().parent.parent
SEARCH = ROOT / "examples" / "search" / "gpt3-175b-1024-a100.search.json"
CANDIDATES = 30
TEST_FILE = ROOT / "tests" / "golden" / "golden.json"
# Figures closer than this (s, or their unit) are equal: a residue such as time_breakdown_s.other, the iteration
# less its exclusive parts, is 0.0 or 4e-14 s as the rounding of the parts falls.
ROUNDING_S = 1e-12
EXTRAPOLATION_REL = 1e-12  # extrapolated results against full simulation
# The CI subset (names, or a search candidate's "search-NN" prefix): GPT and T5 (even and balanced stages, a
# 100B T5 without a pipeline); 1F1B, GPipe and interleaved 1F1B; ZeRO 0-3 with and without gradient overlap,
# bucketed ZeRO 3 gathers; recomputation none / selective / full, sequence parallelism; representative and full
# fidelity; ring, tree and hierarchical collectives; TP across nodes with one NIC; DP over 1024 GPUs; a trace.
TEST_SET = (
    "examples/bubble-vs-microbatches/m8.yaml",
    "examples/decoder-vs-encoder-decoder/best/short-t5-balanced.yaml",
    "examples/decoder-vs-encoder-decoder/best/long-pp-gpt.yaml",
    "examples/dp-scaling/8b-1024gpu.yaml",
    "examples/no-pipeline-limits/gpt3-175b-zero1.yaml",
    "examples/no-pipeline-limits/gpt3-175b-zero3.yaml",
    "examples/no-pipeline-limits/t5-100b-zero1.yaml",
    "examples/no-pipeline-limits/t5-100b-zero3.yaml",
    "examples/tp-across-nodes/tp8-pp2-1nic.yaml",
    "examples/zero-scaling/zero3-50m-gathers-384.yaml",
    "examples/zero-scaling/tp8-pp8-384.yaml",
    *(f"small-{name}" for name in ("full-fidelity-zero1-overlap", "full-fidelity-zero3-interleaved",
                                   "full-fidelity-zero2-gpipe", "tree", "hierarchical",
                                   "t5-full-fidelity-zero3-buckets", "t5-zero2", "trace")),
    "search-02", "search-03", "search-04", "search-06", "search-07", "search-12", "search-13", "search-17",
    "search-19", "search-20", "search-23", "search-26", "search-29", "search-33",
    *(f"periodic-{name}" for name in ("1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "zb-v", "dualpipe",
                                      "post-validation", "cp", "moe", "stragglers", "full-fidelity-zero3", "trace")),
)

SMALL = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2}}
PERIODIC = {"dp": 2, "tp": 2, "pp": 4, "global_batch_size": 96}  # 48 microbatches on 4 stages
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
    # Steady states long enough to extrapolate (simcore/engine/steady_state/periodic.py), each schedule and feature; the
    # stored results are simulated period by period (extrapolate: false), the test compares the extrapolated ones.
    "periodic-1f1b": {**SMALL, "layout": {**PERIODIC, "zero_stage": 1, "overlap_grad_reduce": True}},
    "periodic-interleaved": {**SMALL, "layout": {**PERIODIC, "tp": 4, "pp": 2, "global_batch_size": 128,
                                                 "schedule": "interleaved_1f1b", "virtual_stages": 2}},
    "periodic-gpipe": {**SMALL, "layout": {**PERIODIC, "schedule": "gpipe"}},
    "periodic-zb-h1": {**SMALL, "layout": {**PERIODIC, "schedule": "zb_h1"}},
    "periodic-zb-h2": {**SMALL, "layout": {**PERIODIC, "schedule": "zb_h2", "global_batch_size": 384}},
    "periodic-zb-v": {**SMALL, "layout": {**PERIODIC, "schedule": "zb_v", "global_batch_size": 384}},
    "periodic-dualpipe": {**SMALL, "layout": {**PERIODIC, "schedule": "dualpipe", "global_batch_size": 192}},
    "periodic-post-validation": {**SMALL, "layout": {**PERIODIC, "schedule": "zb_h1",
                                                     "optimizer_post_validation": True}},
    "periodic-cp": {**SMALL, "model": {"preset": "gpt3-1.3b", "seq_length": 8192, "attention": "flash"},
                    "layout": {**PERIODIC, "dp": 1, "cp": 2, "global_batch_size": 48}},
    "periodic-moe": {"model": {"preset": "qwen3-30b-a3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
                     "layout": {**PERIODIC, "dp": 4, "tp": 1, "ep": 4, "global_batch_size": 192, "zero_stage": 1}},
    "periodic-stragglers": {  # replicas at different periods: not periodic, simulated in full
        "model": {"preset": "gpt3-1.3b"},
        "cluster": {"preset": "dgx-a100", "num_nodes": 2, "slow_gpus": [{"gpu": 5, "compute_time_factor": 1.3}]},
        "layout": {**PERIODIC, "zero_stage": 1, "overlap_grad_reduce": True}},
    "periodic-full-fidelity-zero3": {**SMALL, "options": {"fidelity": "full"}, "layout": {**PERIODIC, "zero_stage": 3}},
    "periodic-trace": {**SMALL, "options": {"trace": True}, "layout": PERIODIC},
}


SCHEDULES = ("1f1b", "gpipe", "interleaved_1f1b")


def _key(layout: Layout) -> tuple[object, ...]:
    return (layout.zero_stage, str(layout.schedule), str(layout.recompute), layout.sequence_parallel,
            layout.overlap_grad_reduce)


def _search_document() -> dict[str, Any]:
    return dict(json.loads(SEARCH.read_text()))


def search_candidates() -> list[tuple[str, Layout]]:
    """CANDIDATES layouts of the search's space, the i-th from the stratum (ZeRO stage, schedule, recomputation,
    sequence parallelism, gradient overlap) that i names (or the next stratum that exists), at a fixed stride in
    it; then the 4 layouts a search simulates first (its estimate's order, on the default space)."""
    # Imported here: only writing the set needs the search, not comparing results with it.
    from api_schemas.search import search_request_from
    from service.convert import to_space
    from simcore import GPUS
    from simcore.planning.estimate import Estimator
    from simcore.planning.prune import plan_search

    document = _search_document()
    req = search_request_from(document)
    space = replace(to_space(req.space), recompute=tuple(Recompute), overlap_grad_reduce=(True, False))
    base = adapters.to_scenario(SimulationRequest.model_validate(
        {"model": document["model"], "cluster": document["cluster"],
         "layout": {"dp": 1, "tp": 1, "pp": 1, "global_batch_size": req.global_batch_size}}))
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
                              {k: v for k, v in document.items() if k != "space"}).space))
    estimator = Estimator(base.model, base.cluster, base.cost_parameters)
    estimates = [estimator.tokens_per_s(layout) for layout in default.candidates]
    order = sorted(range(len(default.candidates)), key=lambda i: (-estimates[i], i))
    chosen += [default.candidates[i] for i in order[:4]]
    return [(f"search-{i:02d} {_describe(layout)}", layout) for i, layout in enumerate(chosen)]


def _describe(layout: Layout) -> str:
    return (f"dp{layout.dp} tp{layout.tp} pp{layout.pp} mb{layout.microbatch_size} {layout.schedule}"
            f"v{layout.virtual_stages} zero{layout.zero_stage} {layout.recompute} sp{int(layout.sequence_parallel)}"
            f" ovl{int(layout.overlap_grad_reduce)} {layout.placement}")


def documents() -> list[tuple[str, dict[str, Any]]]:
    """Every request of the set as (name, request document). Each document is checked to give the same
    scenario as the file or layout it stands for."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        body = with_topology_file(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))  # the graph a path names
        _check(body, adapters.to_scenario(load_request_file(str(path))))
        out.append((str(path.relative_to(ROOT)), body))
    out += list(EXTRA.items())
    search = _search_document()
    for name, layout in search_candidates():
        body = {"model": search["model"], "cluster": search["cluster"], "layout": adapters.layout_json(layout)}
        if adapters.to_scenario(SimulationRequest.model_validate(body)).layout != layout:
            raise AssertionError(f"the document {body} does not give the layout it stands for: {layout}")
        out.append((name, body))
    return out


def _check(body: dict[str, Any], scenario: Any) -> None:
    if adapters.to_scenario(SimulationRequest.model_validate(body)) != scenario:
        raise AssertionError(f"the document {body} does not give the scenario it stands for")


def result_of(body: dict[str, Any], extrapolate: bool | None = None) -> tuple[dict[str, Any], int]:
    """A request document's result JSON (without `simulator.wall_time_s`, the one field that varies between
    identical runs) and its event count; `extrapolate` overrides the document's `options.extrapolate`."""
    scenario = adapters.to_scenario(SimulationRequest.model_validate(body))
    if extrapolate is not None:
        scenario = replace(scenario, extrapolate=extrapolate)
    outcome = simulate(scenario)
    result = adapters.to_response(outcome, include_trace=scenario.keep_spans)
    result["simulator"].pop("wall_time_s", None)
    return result, outcome.events


def run(out_path: str) -> None:
    results: dict[str, Any] = {}
    for name, body in documents():
        started = time.perf_counter()
        results[name], events = result_of(body)
        print(f"{time.perf_counter() - started:6.2f} s  {events:8d} events  {name}", flush=True)
    Path(out_path).write_text(json.dumps(results, indent=1, sort_keys=True))


def write_tests() -> None:
    """Write TEST_FILE: the TEST_SET's request documents and their results, which tests/golden/ checks."""
    chosen = {name: body for name, body in documents() if name.split(" ")[0] in TEST_SET}
    missing = set(TEST_SET) - {name.split(" ")[0] for name in chosen}
    if missing:
        raise SystemExit(f"not in the set: {sorted(missing)}")
    cases = {}
    for name, body in chosen.items():
        # Stored: the figures simulated period by period, with the number of periods the default run (which
        # must agree with them) extrapolates.
        result, _events = result_of(body, extrapolate=False)
        default, _events = result_of(body)
        problems = extrapolation_differences(result, default)
        if problems:
            raise SystemExit(f"{name}: extrapolated result differs from full simulation: {problems[:5]}")
        result["simulator"]["extrapolated_periods"] = default["simulator"]["extrapolated_periods"]
        cases[name] = {"request": body, "result": result}
    TEST_FILE.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(cases)} cases to {TEST_FILE.relative_to(ROOT)}")


def _diff(a: Any, b: Any, where: str, out: list[str], rel: float, floor: float = ROUNDING_S) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out, rel, floor)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out, rel, floor)
    elif isinstance(a, float) and isinstance(b, float):
        if a != b and not math.isclose(a, b, rel_tol=rel, abs_tol=max(floor, 1e-300)):
            out.append(f"{where}: {a!r} != {b!r}")
    elif a != b:
        out.append(f"{where}: {a!r} != {b!r}")


def differences(before: Any, after: Any, rel: float = 1e-9, floor: float = ROUNDING_S) -> list[str]:
    """Where two results (or sets of results) differ beyond `rel` relative and `floor` absolute, one line each
    ("" for none)."""
    out: list[str] = []
    _diff(before, after, "", out, rel, floor)
    return out


def extrapolation_differences(full: dict[str, Any], extrapolated: dict[str, Any]) -> list[str]:
    """Where a result with extrapolated periods differs from the same request simulated period by period
    (`options.extrapolate: false`) beyond 1e-12 relative. Figures that add up per-event durations (busy and wait
    times, summed over a rank's events and over the stages) carry the full run's own rounding: each duration is a
    difference of two clock readings, exact only to the clock's last bit (1.4e-14 s at 100 s), so they are also
    equal within 1e-12 of the iteration time times the stages (simcore/engine/steady_state/periodic.py)."""
    full, extrapolated = dict(full), dict(extrapolated)
    full.pop("trace", None)  # the extrapolated trace leaves the periods out (compared in tests/simcore/engine)
    extrapolated.pop("trace", None)
    full["simulator"] = {k: v for k, v in full["simulator"].items() if k != "extrapolated_periods"}
    extrapolated["simulator"] = {k: v for k, v in extrapolated["simulator"].items() if k != "extrapolated_periods"}
    floor = EXTRAPOLATION_REL * full["iteration_time_s"] * len(full["stages"])
    return differences(full, extrapolated, EXTRAPOLATION_REL, floor)


def compare(before: str, after: str, rel: float = 1e-9) -> int:
    a, b = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    problems = differences(a, b, rel)
    exact = a == b
    for line in problems[:50]:
        print(line)
    print(f"{len(a)} results; {'identical' if exact else 'equal within 1e-9' if not problems else 'DIFFERENT'}"
          f" ({len(problems)} differences beyond {rel:g} relative)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        raise SystemExit(compare(sys.argv[2], sys.argv[3]))
    if sys.argv[1:] == ["--write-tests"]:
        write_tests()
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        run(sys.argv[1])
    else:
        raise SystemExit(__doc__)
