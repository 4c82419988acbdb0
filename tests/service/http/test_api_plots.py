"""Pictures over HTTP (GET /v1/jobs/{id}/plot, POST /v1/plots) through a real app: the CLI's pictures, drawn in
the service's drawing process, under the inline limits and the token; errors in the contract's format."""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import SMALL, request_doc, with_field
from fastapi.testclient import TestClient
from test_api import assert_error, client_for, wait_for
from test_plots import boxes, width

from service.plots import describe

BODY = SMALL.read_bytes()  # GPT-3 13B, 8 stages, 8 microbatches
YAML = {"content-type": "application/yaml"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with client_for(tmp_path_factory.mktemp("plots") / "plots.db") as c:
        yield c


def get_picture(client: TestClient, url: str, timeout_s: float = 60.0) -> Any:
    """GET a job's picture, asking again after each 202 (its Retry-After, at most a quarter second here) until
    it is drawn."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get(url)
        if response.status_code != 202:
            return response
        body = response.json()
        assert body["status"] == "drawing" and int(response.headers["retry-after"]) == body["retry_after_s"] >= 1
        assert response.headers["location"].startswith(url.split("?")[0])
        assert time.monotonic() < deadline, f"{url} was still being drawn after {timeout_s} s"
        time.sleep(0.25)


def stage_rows(svg: str) -> list[int]:
    return sorted(int(k[len("stage"):-len("-row")]) for k in boxes(svg) if re.fullmatch(r"stage\d+-row", k))


@pytest.mark.slow
def test_post_plots_draws_the_timeline_of_every_stage(client: TestClient) -> None:
    response = client.post("/v1/plots", content=BODY, headers=YAML)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    svg = response.text
    assert stage_rows(svg) == list(range(8))
    result = client.post("/v1/simulations", content=BODY, headers=YAML).json()
    found = boxes(svg)
    for stage in result["stages"]:  # the bubble is the idle: each row's idle share is the stage's bubble share
        s = stage["index"]
        idle = sum(width(b) for k, b in found.items() if k.startswith(f"stage{s}-idle-"))
        assert idle / width(found[f"stage{s}-row"]) == pytest.approx(stage["bubble_s"] / result["iteration_time_s"],
                                                                     rel=0.01)
        assert {k for k in found if re.fullmatch(rf"stage{s}-forward-mb\d+", k)} == {
            f"stage{s}-forward-mb{i}" for i in range(8)}
    assert describe_title(svg)
    again = client.post("/v1/plots", content=BODY, headers=YAML)
    assert again.content == response.content and again.headers["x-clustersim-cache"] == "hit"


def describe_title(svg: str) -> bool:
    from api_schemas import parse_request

    return describe(parse_request(BODY.decode())).split(":")[0] in svg


@pytest.mark.parametrize("kind", ["timeline", "breakdown", "memory"])
def test_every_kind_as_png(client: TestClient, kind: str) -> None:
    response = client.post(f"/v1/plots?kind={kind}&format=png", content=BODY, headers=YAML)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    data = response.content
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    png_width, png_height = struct.unpack(">II", data[16:24])
    assert 600 < png_width < 3000 and 300 < png_height < 3000


@pytest.mark.slow
def test_a_jobs_pictures(client: TestClient) -> None:
    doc = with_field(request_doc(), "layout.global_batch_size", 16)  # not cached by the other tests
    job = client.post("/v1/jobs", json=doc).json()
    wait_for(client, job["id"], {"succeeded"})
    timeline = get_picture(client, f"/v1/jobs/{job['id']}/plot")
    assert timeline.status_code == 200 and timeline.headers["content-type"] == "image/svg+xml"
    assert stage_rows(timeline.text) == list(range(8))
    ids = boxes(timeline.text)
    assert {k for k in ids if re.fullmatch(r"stage0-backward-mb\d+", k)} == {f"stage0-backward-mb{i}"
                                                                             for i in range(16)}
    memory = get_picture(client, f"/v1/jobs/{job['id']}/plot?kind=memory&format=svg")
    assert memory.status_code == 200 and "Memory per GPU" in memory.text
    # the same request inline: the same picture, from the same code
    inline = client.post("/v1/plots?kind=memory", json=doc)
    assert inline.content == memory.content


def test_plot_errors(client: TestClient) -> None:
    assert_error(client.get("/v1/jobs/nope/plot"), 404, "not_found", "job_id")
    job = client.post("/v1/jobs", content=BODY, headers=YAML).json()
    assert_error(client.get(f"/v1/jobs/{job['id']}/plot?kind=bar"), 422, "invalid_request", "query.kind")
    assert_error(client.get(f"/v1/jobs/{job['id']}/plot?format=pdf"), 422, "invalid_request", "query.format")
    wait_for(client, job["id"], {"succeeded"})
    error = assert_error(client.get(f"/v1/jobs/{job['id']}/plot?kind=search"), 409, "no_plot")
    assert "kind=timeline" in error["message"]
    assert_error(client.post("/v1/plots", json=with_field(request_doc(), "layout.tp", 0)), 422, "invalid_request",
                 "layout.tp")
    assert_error(client.post("/v1/plots?kind=search", content=BODY, headers=YAML), 422, "invalid_request",
                 "query.kind")


def test_a_queued_jobs_plot_is_409_not_finished(tmp_path: Any) -> None:
    with client_for(tmp_path / "busy.db", workers=1) as client:
        big = with_field(request_doc(), "layout.global_batch_size", 2048)  # 2048 microbatches: seconds
        first = client.post("/v1/jobs", json=big).json()
        second = client.post("/v1/jobs", json=with_field(big, "layout.global_batch_size", 1024)).json()
        error = assert_error(client.get(f"/v1/jobs/{second['id']}/plot"), 409, "not_finished")
        assert error["job_status"] == "queued"
        client.delete(f"/v1/jobs/{first['id']}")
        client.delete(f"/v1/jobs/{second['id']}")


def test_post_plots_keeps_the_inline_limits_and_the_token(tmp_path: Any) -> None:
    with client_for(tmp_path / "limits.db", max_inline_events=1000, api_token="s3cret") as client:
        assert_error(client.post("/v1/plots", content=BODY, headers=YAML), 401, "unauthorized")
        auth = {**YAML, "Authorization": "Bearer s3cret"}
        error = assert_error(client.post("/v1/plots", content=BODY, headers=auth), 413, "too_large_for_inline")
        assert error["jobs"] == "/v1/jobs"
        small = yaml.safe_load(BODY)
        small["layout"]["pp"], small["layout"]["dp"] = 1, 8  # one stage, 8 microbatches: few events
        ok = client.post("/v1/plots?kind=breakdown", json=small, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.headers["content-type"] == "image/svg+xml"
