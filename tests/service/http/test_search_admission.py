"""A search is admitted by an estimate of its cost, like a simulation (service.search_limits): POST /v1/searches
caps its bounds (each candidate's estimated events and memory, the estimated seconds of all its simulations) and
says so in the 202; a search whose planning alone could not fit in the job time limit, or whose baseline a job
could not simulate, is 413 naming the field and the rule; a capped search ends within its time limit, and the
candidates over a limit are screened (listed with their estimate), not simulated."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from api_schemas.search import search_request_from
from service.http.app import create_app
from service.search import prepare, space_size_bound
from service.search_limits import ESTIMATE_SHORTFALL, planning_bound_s
from service.settings import Settings
from simcore.run_cost import SECONDS_PER_EVENT

# The search: GPT-1T on 384 DGX A100 nodes (3072 GPUs), every replica simulated. Uncapped, its 200
# candidates were estimated at 1,933 s of simulation and ran for about 80 minutes.
GPT_1T_FULL: dict[str, Any] = {"model": {"preset": "gpt-1t"}, "cluster": {"preset": "dgx-a100", "num_nodes": 384},
                               "global_batch_size": 3072, "options": {"fidelity": "full"}}
# GPT-3 2.7B on 2 nodes: 104 feasible candidates of about 0.13 s of estimate each (most of it the fixed start of
# a simulation process), 10 ms of simulation.
SMALL: dict[str, Any] = {"model": {"preset": "gpt3-2.7b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                         "global_batch_size": 256,
                         "space": {"tp": [2, 4], "recompute": ["selective"], "zero_stage": [1],
                                   "sequence_parallel": [True], "schedule": ["1f1b"]}}


@contextmanager
def service(tmp_path: Path, **settings: Any) -> Iterator[TestClient]:
    config = Settings(database=str(tmp_path / "api.db"), workers=1, worker_memory_mb=4096, **settings)
    with TestClient(create_app(config), base_url="http://localhost") as client:
        yield client


def layouts_bound(doc: dict[str, Any]) -> int:
    request = search_request_from(doc)
    base, sizes, _ = prepare(request)
    return space_size_bound(request, base, sizes)


def wait_done(client: TestClient, job_id: str, timeout_s: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_the_1t_full_fidelity_search_is_capped_to_end_within_the_job_time_limit(tmp_path: Path) -> None:
    with service(tmp_path) as client:
        response = client.post("/v1/searches", json=GPT_1T_FULL)
        assert response.status_code == 202, response.text
        job = response.json()
        assert client.delete(f"/v1/jobs/{job['id']}").status_code == 200  # not run here: it takes many minutes
    budget = round((3600 - planning_bound_s(layouts_bound(GPT_1T_FULL))) / ESTIMATE_SHORTFALL, 1)
    assert 800 < budget < 900  # the job time limit less about 93 s of planning's bound, over ESTIMATE_SHORTFALL 4
    bounds, capped = job["bounds"], {c["field"]: c["rule"] for c in job["capped"]}
    assert bounds["max_estimated_s"] == budget and bounds["max_candidates"] == 200
    assert capped["bounds.max_estimated_s"].startswith(f"at most {budget:g} s of estimated simulation: the job time "
                                                       "limit (3600 s) less the planning's bound")
    assert bounds["max_candidate_events"] == 20_000_000 and "screened" in capped["bounds.max_candidate_events"]
    assert bounds["max_candidate_memory_mb"] == 2048 and "bounds.max_candidate_memory_mb" in capped
    # The estimate of its events is what those bounds allow, no longer 0.
    assert job["estimated_events"] == min(int(budget / SECONDS_PER_EVENT), 200 * 20_000_000)


def test_a_search_whose_planning_cannot_fit_its_job_is_refused(tmp_path: Path) -> None:
    with service(tmp_path, job_timeout_s=60) as client:
        response = client.post("/v1/searches", json=GPT_1T_FULL)
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["code"] == "too_large"
        assert error["details"] == [{"field": "space", "rule": "estimated planning time must be <= 30 s (half the job "
                                                              "time limit)"}]
        assert error["estimated_planning_s"] > 30 and error["limit_s"] == 30
        # A time limit bounds the planning too (enumeration stops at it): then it is admitted.
        timed = {**GPT_1T_FULL, "bounds": {"time_limit_s": 20}}
        accepted = client.post("/v1/searches", json=timed)
        assert accepted.status_code == 202, accepted.text
        client.delete(f"/v1/jobs/{accepted.json()['id']}")


def test_a_baseline_a_job_could_not_simulate_is_refused(tmp_path: Path) -> None:
    with_baseline = {**SMALL, "baseline": {"dp": 4, "tp": 4, "pp": 1, "global_batch_size": 256}}
    with service(tmp_path, max_job_events=100) as client:
        response = client.post("/v1/searches", json=with_baseline)
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["details"][0]["field"] == "baseline"
        assert error["details"][0]["rule"] == "estimated engine events must be <= 100"
        assert error["message"].startswith("baseline: this simulation needs about")


def test_a_capped_search_ends_within_its_time_limit(tmp_path: Path) -> None:
    timeout_s = 12.0
    budget = round((timeout_s - planning_bound_s(layouts_bound(SMALL))) / ESTIMATE_SHORTFALL, 1)
    with service(tmp_path, job_timeout_s=timeout_s) as client:
        # every candidate in the estimate's order: the budget, not the proof, is what ends it
        exhaustive = {**SMALL, "bounds": {**SMALL.get("bounds", {}), "exhaustive": True}}
        response = client.post("/v1/searches", json=exhaustive)
        assert response.status_code == 202, response.text
        assert response.json()["bounds"]["max_estimated_s"] == budget
        done = wait_done(client, response.json()["id"])
        assert done["status"] == "succeeded", done
        result = client.get(f"/v1/jobs/{done['id']}/result").json()
    search = result["search"]
    # The budget, not the job's timeout, ended it: fewer candidates than feasible, within the estimate.
    assert search["stopped_by"] == "estimated_time"
    assert 1 <= search["simulated"] < search["feasible"] == 104
    assert search["estimated_s"] <= budget and search["screened"] == 0 and result["screened"] == []
    assert result["run"]["wall_time_s"] < timeout_s


def test_candidates_over_the_event_limit_are_screened_not_simulated(tmp_path: Path) -> None:
    with service(tmp_path, max_job_events=600) as client:
        response = client.post("/v1/searches", json={**SMALL, "bounds": {"max_candidates": 10, "top_k": 10,
                                                                           "exhaustive": True}})
        assert response.status_code == 202, response.text
        done = wait_done(client, response.json()["id"])
        assert done["status"] == "succeeded", done
        result = client.get(f"/v1/jobs/{done['id']}/result").json()
    search, screened = result["search"], result["screened"]
    assert search["simulated"] == 10 and search["stopped_by"] == "max_candidates"  # screened ones do not count
    assert search["screened"] >= len(screened) > 0
    for entry in screened:
        assert entry["estimated_events"] > 600
        assert entry["reason"] == f"estimated {entry['estimated_events']:,} engine events, over the limit of 600"
        assert entry["estimated_tokens_per_s"] > 0 and entry["summary"]
    simulated = set()
    for entry in result["top"]:  # each row, and the placements folded into it (equal figures)
        simulated.add(json.dumps(entry["layout"], sort_keys=True))
        for line in entry["why"]:
            if line.endswith("(folded into this row)"):
                for placement in line.removeprefix("the same figures with placement ").split(" (")[0].split(", "):
                    simulated.add(json.dumps({**entry["layout"], "placement": placement}, sort_keys=True))
    assert len(simulated) == 10 and not simulated & {json.dumps(e["layout"], sort_keys=True) for e in screened}
