"""How fast the search proves its answer, and whether the answer is the exhaustive one: the issue's problems
searched with default bounds (only what can still win is simulated, simcore.planning.frontier), each --repeat
times (median wall), with the estimate's error per kind the search learned; and, with --exhaustive CASE, the
exhaustive best of a case's space (bench/search_exhaustive.py: every feasible layout either simulated or under
a ceiling no simulation of it can beat), its answer stored in bench/data/search_exhaustive.json with the code
version it was measured at, to compare the proven answers with.

Cases:
- llama70b: Llama-3-70B on 256 H100s (32 DGX H100), global batch 1024, seq 8192 (target: proven in 60 s).
- gpt3-175b: GPT-3 175B on 1024 A100s (128 DGX A100), global batch 1536 (target: proven in 60 s).
- gpt3-175b-example: the same on the space of examples/search/gpt3-175b-1024-a100.search.json (TP 4 or 8,
  selective or full recompute), small enough to simulate whole here.
- llama70b-narrow: the Llama-3-70B problem on a space of 992 layouts (cp 1, 2 or 4, ZeRO 1, no or selective
  recompute, two placements, microbatch 1 or 2), small enough to simulate whole here.
- gpt-1t: the 1T of examples/gpt-1t-3072-a100.yaml on 3072 A100s, its published layout as the baseline (target:
  within 120 s, at least as fast as DP 6 x TP 8 x PP 64).
- llama70b-cost: Llama-3-70B on 1024 H100s ranked by the cost of 15T tokens at 2.5 USD a GPU-hour, under a
  240 s time limit (target: an answer within it).

Each case prints the peak resident memory of the search's worker processes (the largest, as the kernel counts
it for the children of this process). With --http, each case runs instead as a search job of `clustersim serve`
(127.0.0.1, a free port, a fresh database), its time limit in the request's bounds; the peak is then the largest
resident memory of the server's processes, sampled every 0.2 s while the job runs.

With --check-bounds K, each case's search is checked against layouts it did not simulate: per error kind,
K of the kind's most promising layouts left unsimulated and K drawn at random from the rest are simulated, and
each ratio estimated / simulated is compared with the low end of the bound the search pruned with: a ratio
below it is a bound exceeded, and one whose layout beats the search's best would have changed the answer.

Run:  python bench/search_proof.py [CASE ...] [--repeat R] [--workers N] [--check-bounds K] [--http]
      python bench/search_proof.py --exhaustive gpt3-175b   (long: every layout over the best's speed simulated)
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api_schemas.search import search_request_from
from bench.search_exhaustive import exhaustive_best
from service import convert as adapters
from service.executors import make_executor
from service.search import prepare, run_search
from simcore import simulate
from simcore.planning.estimate import Estimator
from simcore.planning.frontier import PRIOR, error_kind
from simcore.planning.rank import describe
from simcore.planning.search import Bounds, search

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "bench" / "data" / "search_exhaustive.json"
LLAMA = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
         "global_batch_size": 1024}
GPT3 = {"model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 128},
        "global_batch_size": 1536}


def _example_1t() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "examples" / "gpt-1t-3072-a100.yaml").read_text())
    return {"model": loaded["model"], "cluster": loaded["cluster"],
            "global_batch_size": loaded["layout"]["global_batch_size"], "baseline": loaded["layout"]}


CASES: dict[str, tuple[dict[str, Any], float | None]] = {
    "llama70b": (LLAMA, None),
    "gpt3-175b": (GPT3, None),
    "gpt3-175b-example": ({**GPT3, "space": {"tp": [4, 8], "recompute": ["selective", "full"]}}, None),
    "llama70b-narrow": ({**LLAMA, "space": {"cp": [1, 2, 4], "zero_stage": [1], "recompute": ["none", "selective"],
                                            "placement": ["tp,dp,pp", "tp,pp,dp"], "max_microbatch_size": 2}}, None),
    "gpt-1t": (_example_1t(), None),
    "llama70b-cost": ({**LLAMA, "cluster": {"preset": "dgx-h100", "num_nodes": 128}, "objective": "cost",
                       "training": {"tokens": 15e12, "gpu_hour_usd": 2.5}}, 240.0),
}


def code_version() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def stored() -> dict[str, Any]:
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def run(case: str, workers: int | None) -> tuple[dict[str, Any], float]:
    request, limit = CASES[case]
    started = time.perf_counter()
    result = run_search(request, time_limit_s=limit, workers=workers)
    return result, time.perf_counter() - started


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_http(case: str) -> tuple[dict[str, Any], float, int]:
    """The case as a search job of a fresh `clustersim serve`: its result, wall seconds from the POST to the
    result, and the peak resident memory of any one server process meanwhile."""
    import httpx

    from bench.load_test import free_port, start_server
    from bench.orphan_workers import descendants

    request, limit = CASES[case]
    body = {**request, "bounds": {**request.get("bounds", {}), **({"time_limit_s": limit} if limit else {})}}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_server(port, 1, Path(tmp) / "jobs.db", Path(tmp) / "server.log")
        url = f"http://127.0.0.1:{port}"
        try:
            started = time.perf_counter()
            posted = httpx.post(f"{url}/v1/searches", json=body, timeout=60)
            posted.raise_for_status()
            job = posted.json()["id"]
            peak = 0
            while True:
                peak = max([peak, _rss_bytes(server.pid), *(_rss_bytes(p.pid) for p in descendants(server.pid))])
                status = httpx.get(f"{url}/v1/jobs/{job}", timeout=10).json()
                if status["status"] not in ("queued", "running"):
                    break
                time.sleep(0.2)
            wall = time.perf_counter() - started
            if status["status"] != "succeeded":
                raise RuntimeError(f"{case}: the search job ended {status['status']}: {status.get('error')}")
            result = httpx.get(f"{url}/v1/jobs/{job}/result", timeout=60).json()
            return result, wall, peak
        finally:
            server.terminate()
            server.wait(30)


def peak_worker_rss() -> int:
    """The largest peak resident memory of any child process so far (the local pool's workers), in bytes."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def answer(result: dict[str, Any]) -> str:
    best = result["best"]
    return f"{best['summary']} at {best['tokens_per_s']:,.0f} tokens/s" if best else "none"


def check_bounds(case: str, k: int) -> None:
    """Search again on domain objects (the same search), then simulate layouts it did not and compare their
    error with the bound it pruned with."""
    request, _ = CASES[case]
    req = search_request_from(dict(request))
    base, clusters, goal = prepare(req)
    if len(clusters) > 1:
        print("  (bounds are checked on searches of one cluster size)")
        return
    found = search(base, req.global_batch_size, adapters.to_space(req.space), Bounds(), goal=goal,
                   executor=make_executor())
    cluster = base.cluster
    plan, estimator = found.plan, Estimator(base.model, cluster, base.cost_parameters)
    simulated = set(found.simulated_layouts)
    low = {(e.kind, e.placement): e.low for e in found.errors}
    best = found.best.evaluation.tokens_per_s if found.best else 0.0
    by_kind: dict[tuple[str, str], list[Any]] = {}
    for layout in plan.candidates:
        if layout not in simulated:
            by_kind.setdefault(error_kind(layout), []).append(layout)
    draw = random.Random(0)
    exceeded = changed = checked = 0
    for kind, layouts in sorted(by_kind.items()):
        layouts.sort(key=lambda lay: -estimator.tokens_per_s(lay))
        picked = layouts[:k] + draw.sample(layouts[k:], min(k, len(layouts[k:])))
        bound = low.get(kind, PRIOR[0])
        worst, most = 10.0, 0.0
        for layout in picked:
            speed = simulate(replace(base, layout=layout)).metrics.tokens_per_s
            ratio = estimator.tokens_per_s(layout) / speed
            checked += 1
            worst, most = min(worst, ratio), max(most, ratio)
            if ratio < bound:
                exceeded += 1
                changed += speed > best
                print(f"      exceeded: {describe(layout)} (v {layout.virtual_stages}, m {layout.num_microbatches}): "
                      f"estimate {estimator.tokens_per_s(layout):,.0f}, simulated {speed:,.0f} tokens/s, ratio "
                      f"{ratio:.3f}", flush=True)
        print(f"    {kind[0]:24s} {kind[1]:10s} {len(picked)} checked: ratios {worst:.3f} .. {most:.3f}, bound "
              f"{bound:.3f}{'  EXCEEDED' if worst < bound else ''}", flush=True)
    print(f"  bounds checked on {checked} layouts the search did not simulate: {exceeded} below their kind's bound, "
          f"{changed} of them faster than the search's best")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="*", default=["llama70b", "gpt3-175b", "gpt-1t", "llama70b-cost"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--exhaustive", metavar="CASE", help="simulate every layout of CASE and store its answer")
    parser.add_argument("--http", action="store_true", help="run each case as a search job of `clustersim serve`")
    parser.add_argument("--check-bounds", type=int, default=0, metavar="K",
                        help="per error kind, simulate 2K layouts the search did not and check its bounds")
    args = parser.parse_args()
    if args.exhaustive:
        found = exhaustive_best(CASES[args.exhaustive][0], args.workers)
        entries = stored()
        entries[args.exhaustive] = {"code_version": code_version(), "method": "ceiling", "feasible": found.feasible,
                                    "simulated": found.simulated, "screened": found.screened,
                                    "tightest": round(found.tightest, 4), "wall_s": round(found.wall_s, 1),
                                    "best": found.best, "tokens_per_s": found.tokens_per_s}
        STORE.write_text(json.dumps(entries, indent=2) + "\n")
        print(f"{args.exhaustive}: exhaustive best of {found.feasible:,} feasible layouts, {found.simulated:,} "
              f"simulated (the rest under their ceiling; {found.screened} over the search's limits) in "
              f"{found.wall_s:.0f} s: "
              f"{found.best} at {found.tokens_per_s:,.0f} tokens/s; simulated / ceiling at most {found.tightest:.3f} "
              f"(stored in {STORE.relative_to(ROOT)})")
        return
    known = stored()
    for case in args.cases:
        walls, answers = [], []
        for _ in range(args.repeat):
            if args.http:
                result, wall, peak = run_http(case)
                where = "HTTP job, peak server process"
            else:
                result, wall = run(case, args.workers)
                peak, where = peak_worker_rss(), "peak worker process so far"
            walls.append(wall)
            s = result["search"]
            answers.append(answer(result))
            print(f"{case}: {wall:.1f} s (planning {result['run']['planning_s']:.1f} s), {s['feasible']:,} feasible, "
                  f"{s['simulated']} simulated, {s['screened']} screened, stopped by {s['stopped_by']}, could still "
                  f"win {s['could_win']}: {answers[-1]} ({where} {peak / 2**20:,.0f} MiB)", flush=True)
        print(f"{case}: median wall {statistics.median(walls):.1f} s of {args.repeat}; answers {sorted(set(answers))}")
        baseline = result.get("baseline")
        if baseline is not None:
            print(f"  baseline {baseline['summary']}: {baseline['tokens_per_s']:,.0f} tokens/s; best "
                  f"{baseline.get('best_speedup', 0):.2f}x")
        print("  estimate / simulated tokens/s per kind (placement): n, min .. max, the bound pruned with")
        for k in result["search"]["estimate_error"]:
            print(f"    {k['kind']:24s} {k['placement']:10s} n {k['simulated']:3d}: {k['ratio_min']:.3f} .. "
                  f"{k['ratio_max']:.3f}, bound {k['bound_low']:.3f}"
                  + (f" (exceeded {k['bound_exceeded']}x during the search)" if k['bound_exceeded'] else ""))
        if args.check_bounds:
            check_bounds(case, args.check_bounds)
        entry = known.get(case)
        if entry is None:
            print("  no exhaustive answer stored (python bench/search_proof.py --exhaustive " + case + ")")
        else:
            same = abs(entry["tokens_per_s"] - result["best"]["tokens_per_s"]) <= 1e-9 * entry["tokens_per_s"]
            print(f"  exhaustive ({entry['simulated']:,} simulated in {entry['wall_s']:.0f} s at "
                  f"{entry['code_version']}, code now {code_version()}): {entry['best']} at "
                  f"{entry['tokens_per_s']:,.0f} tokens/s: {'the same answer' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
