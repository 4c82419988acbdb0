"""GET /v1/jobs/{id}/request: the request a job runs, whatever became of the job (the web page opens a job into
its editor with it). A simulation job's request is the one its result echoes and runs again to the same result; a
job that timed out still answers its own; a search job answers its search request, bounds as capped; 404 for no
such job, 401 without the token."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import LARGE, request_doc
from test_api import assert_error, client_for, wait_for

SEARCH = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
          "global_batch_size": 32, "space": {"tp": [1, 2], "pp": [1], "recompute": ["selective"], "zero_stage": [0]},
          "bounds": {"top_k": 1, "max_candidates": 2}}


def test_a_jobs_request_is_what_it_ran_and_runs_again(tmp_path: Path) -> None:
    with client_for(tmp_path / "request.db") as c:
        job = c.post("/v1/jobs", json=request_doc(seed=5)).json()
        assert job["links"]["request"] == f"/v1/jobs/{job['id']}/request"
        wait_for(c, job["id"], {"succeeded"})
        answer = c.get(job["links"]["request"])
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        request = answer.json()
        assert request == c.get(f"/v1/jobs/{job['id']}/result").json()["request"]
        assert request["model"] == {"preset": "gpt3-13b"} and request["options"]["seed"] == 5
        assert "null" not in answer.text  # the defaults written out, no empty field
        again = c.post("/v1/simulations", content=json.dumps(request), headers={"content-type": "application/json"})
        assert again.headers["x-clustersim-cache"] == "hit"  # the same request: its result from the cache

        search = c.post("/v1/searches", json=SEARCH).json()
        asked = c.get(f"/v1/jobs/{search['id']}/request").json()
        assert asked["space"]["tp"] == [1, 2] and asked["global_batch_size"] == 32
        assert asked["bounds"]["max_candidates"] == search["bounds"]["max_candidates"] == 2
        assert_error(c.get("/v1/jobs/nope/request"), 404, "not_found")


def test_a_job_that_did_not_succeed_answers_its_request(tmp_path: Path) -> None:
    with client_for(tmp_path / "timeout.db", job_timeout_s=0.3) as c:
        job = c.post("/v1/jobs", json=request_doc(LARGE)).json()
        assert wait_for(c, job["id"], {"timed_out", "succeeded", "failed"})["status"] == "timed_out"
        request = c.get(f"/v1/jobs/{job['id']}/request").json()
        assert request["model"]["preset"] == "gpt-1t" and request["layout"]["pp"] == 64


def test_a_jobs_request_needs_the_token(tmp_path: Path) -> None:
    with client_for(tmp_path / "auth.db", api_token="s3cret") as c:
        assert_error(c.get("/v1/jobs/x/request"), 401, "unauthorized")
        assert_error(c.get("/v1/jobs/x/request", headers={"Authorization": "Bearer s3cret"}), 404, "not_found")
