"""Traces are stored gzip-compressed and streamed: sent as stored (Content-Encoding: gzip) to a client that
accepts gzip, inflated a chunk at a time for one that does not, and inside a result when options.trace asks;
a trace over CLUSTERSIM_MAX_TRACE_BYTES is refused up front by its estimate."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from conftest import request_doc, with_field
from fastapi.testclient import TestClient

from service.http.app import create_app
from service.settings import Settings


def _succeeded(c: TestClient, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while c.get(f"/v1/jobs/{job_id}").json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_trace_is_streamed_as_stored_gzip_or_inflated(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "t.db"), workers=1)),
                    base_url="http://localhost") as c:
        job_id = c.post("/v1/jobs", json=request_doc(seed=3)).json()["id"]
        _succeeded(c, job_id)
        with c.stream("GET", f"/v1/jobs/{job_id}/trace", headers={"Accept-Encoding": "gzip"}) as response:
            assert response.status_code == 200
            assert response.headers["content-encoding"] == "gzip"
            raw = b"".join(response.iter_raw())
        events = json.loads(gzip.decompress(raw))["traceEvents"]
        assert events
        plain = c.get(f"/v1/jobs/{job_id}/trace", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        assert plain.json()["traceEvents"] == events
        refused = c.get(f"/v1/jobs/{job_id}/trace", headers={"Accept-Encoding": "gzip;q=0"})
        assert "content-encoding" not in refused.headers
        traced = c.post("/v1/jobs", json=request_doc(seed=3, trace=True)).json()  # the same run: cached
        _succeeded(c, traced["id"])
        result = c.get(f"/v1/jobs/{traced['id']}/result").json()
        assert result["trace"]["traceEvents"] == events and result["iteration_time_s"] > 0
        inline = c.post("/v1/simulations", json=request_doc(seed=4, trace=True)).json()
        assert inline["trace"]["traceEvents"]


def test_a_trace_over_the_limit_is_refused_by_its_estimate(tmp_path: Path) -> None:
    settings = Settings(database=str(tmp_path / "cap.db"), workers=1, max_trace_bytes=20_000)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        big = with_field(request_doc(), "layout.global_batch_size", 2048)
        for route in ("/v1/jobs", "/v1/simulations"):
            doc = with_field(big, "options.trace", True)
            response = c.post(route, json=doc)
            assert response.status_code == 413, response.text
            error = response.json()["error"]
            assert error["details"][0]["field"] == "options.trace"
            assert error["estimated_trace_bytes"] > error["limit_bytes"] == 20_000
        assert c.post("/v1/simulations", json=big).status_code == 200  # no trace asked: inline is fine


