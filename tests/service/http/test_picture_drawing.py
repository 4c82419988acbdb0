"""Pictures drawn once, in the background, by the service's drawing process (service.http.pictures), through a
real app: a picture not drawn yet is 202 with Retry-After and then the picture, drawn once in both formats and
kept across restarts; a large job's timeline is drawn when it succeeds, unasked; a drawing never holds an inline
simulation's slot; a drawing that fails is not drawn again; the drawing process goes when the service dies, and
a drawing under way ends at once when the service stops."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import alive, descendants, request_doc, with_field
from fastapi.testclient import TestClient
from test_api import assert_error, client_for, wait_for
from test_api_plots import get_picture
from test_api_search import SEARCH
from test_metrics import scrape, value
from test_plots import boxes

from api_schemas import SimulationRequest
from service import convert
from service.http import pictures
from service.http.picture_process import DrawOutcome, PictureProcess
from service.http.routes import plots
from simcore import simulate

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

PNG = b"\x89PNG\r\n\x1a\n"


def drawings(client: TestClient, outcome: str = "ok") -> float:
    """How many drawings this app's drawing process has ended with `outcome`."""
    return value(scrape(client), "clustersim_runs_total", kind="picture", outcome=outcome)


def succeeded_job(client: TestClient, doc: dict[str, Any]) -> str:
    job = client.post("/v1/jobs", json=doc).json()
    wait_for(client, job["id"], {"succeeded"}, timeout_s=120)
    return str(job["id"])


def test_a_picture_not_drawn_yet_is_202_then_drawn_once_in_both_formats_and_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "FIRST_WAIT_S", 0.0)  # answer 202 at once, however fast the drawing is
    database = tmp_path / "pictures.db"
    with client_for(database) as client:
        job_id = succeeded_job(client, with_field(request_doc(), "layout.global_batch_size", 24))
        url = f"/v1/jobs/{job_id}/plot?kind=timeline&format=png"
        first = client.get(url)
        assert first.status_code == 202, first.text
        assert first.json() == {"status": "drawing", "kind": "timeline", "format": "png",
                                "retry_after_s": int(first.headers["retry-after"])}
        assert first.headers["location"] == url and int(first.headers["retry-after"]) >= 1
        png = get_picture(client, url)
        assert png.status_code == 200 and png.headers["content-type"] == "image/png" and png.content[:8] == PNG
        assert client.get(url).content == png.content
        svg = get_picture(client, url.replace("png", "svg"))  # saved by the same drawing, from the same figure
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
        assert drawings(client) == 1
    with client_for(database) as client:  # a new service on the same database: nothing drawn again
        again = client.get(url)
        assert again.status_code == 200 and again.content == png.content
        assert client.get(url.replace("png", "svg")).content == svg.content
        assert drawings(client) == 0


def test_a_search_jobs_picture_is_its_ranking(tmp_path: Path) -> None:
    with client_for(tmp_path / "search.db") as client:
        job = client.post("/v1/searches", json=SEARCH).json()
        wait_for(client, job["id"], {"succeeded"}, timeout_s=120)
        response = get_picture(client, f"/v1/jobs/{job['id']}/plot")  # kind=search, its default
        assert response.status_code == 200 and response.headers["content-type"] == "image/svg+xml"
        assert "top-0-compute" in boxes(response.text)
        assert_error(client.get(f"/v1/jobs/{job['id']}/plot?kind=timeline"), 409, "no_plot")


def test_a_large_jobs_timeline_is_drawn_when_it_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pictures, "DRAW_WHEN_DONE_EVENTS", 0)  # every job counts as large
    monkeypatch.setattr(pictures, "WATCH_S", 0.05)
    monkeypatch.setattr(plots, "FIRST_WAIT_S", 0.0)
    with client_for(tmp_path / "unasked.db") as client:
        job_id = succeeded_job(client, with_field(request_doc(), "layout.global_batch_size", 1024))  # seconds
        deadline = time.monotonic() + 120
        while drawings(client) < 1:  # nobody has asked for it
            assert time.monotonic() < deadline, "the timeline of the job was not drawn"
            time.sleep(0.1)
        for fmt, media in (("png", "image/png"), ("svg", "image/svg+xml")):
            response = client.get(f"/v1/jobs/{job_id}/plot?format={fmt}")
            assert response.status_code == 200 and response.headers["content-type"] == media
        assert drawings(client) == 1


def test_a_drawing_never_holds_an_inline_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "FIRST_WAIT_S", 0.0)
    with client_for(tmp_path / "slots.db", workers=1, max_queued_jobs=1) as client:  # one inline slot
        job_id = succeeded_job(client, with_field(request_doc(), "layout.global_batch_size", 32))
        process = client.app.state.service.pictures._process  # type: ignore[attr-defined]
        release, started = threading.Event(), threading.Event()
        draw = process.draw

        def held(*args: Any, **kwargs: Any) -> Any:  # the drawing takes as long as the test says
            started.set()
            release.wait(60)
            return draw(*args, **kwargs)

        monkeypatch.setattr(process, "draw", held)
        try:
            for kind in ("timeline", "memory", "breakdown"):
                assert client.get(f"/v1/jobs/{job_id}/plot?kind={kind}").status_code == 202
            assert started.wait(30)
            for seed in (1, 2, 3):  # uncached: each a simulation in the one inline slot
                response = client.post("/v1/simulations", json=request_doc(seed=seed))
                assert response.status_code == 200, response.text
            assert client.get(f"/v1/jobs/{job_id}/plot").status_code == 202  # still being drawn
        finally:
            release.set()
        assert get_picture(client, f"/v1/jobs/{job_id}/plot?kind=memory").status_code == 200


def test_a_drawing_that_fails_is_not_drawn_again(tmp_path: Path) -> None:
    with client_for(tmp_path / "failed.db") as client:
        job_id = succeeded_job(client, with_field(request_doc(), "layout.global_batch_size", 40))
        client.app.state.service.pictures._timeout_s = 0.001  # type: ignore[attr-defined]  # no drawing fits
        url = f"/v1/jobs/{job_id}/plot?kind=memory"
        error = assert_error(get_picture(client, url), 413, "too_large")
        assert "ran past the limit" in error["message"] and error["limit"] == pictures.DRAW_TIMEOUT_S
        assert_error(client.get(url), 413, "too_large")
        assert drawings(client, "timeout") == 1


def test_the_drawing_process_ends_when_the_service_is_killed(start_server: Any) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        job = client.post("/v1/jobs", json=with_field(request_doc(), "layout.global_batch_size", 48)).json()
        deadline = time.monotonic() + 120
        while client.get(f"/v1/jobs/{job['id']}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        while (response := client.get(f"/v1/jobs/{job['id']}/plot")).status_code == 202:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert response.status_code == 200
    below = descendants(server.process.pid)
    assert len(below) >= 2  # the forkserver and the drawing process, idle now
    server.kill()
    deadline = time.monotonic() + 10
    while alive(below):
        assert time.monotonic() < deadline, f"still running 10 s after the service was killed: {alive(below)}"
        time.sleep(0.1)


def test_an_interrupted_drawing_ends_its_process_at_once() -> None:
    request = SimulationRequest.model_validate(request_doc())
    result = json.dumps(convert.to_response(simulate(convert.to_scenario(request))))
    process = PictureProcess(memory_mb=None)
    outcomes: list[DrawOutcome] = []
    drawing = threading.Thread(target=lambda: outcomes.append(process.draw(
        "memory", ("svg", "png"), request.model_dump_json(), result, None, 60.0, lambda fmt, picture: None)))
    drawing.start()
    time.sleep(0.3)  # the process is starting, importing matplotlib: a second or more
    interrupted = time.monotonic()
    process.interrupt()
    drawing.join(10)
    assert outcomes and outcomes[0].status == "error" and outcomes[0].error_type == "Interrupted"
    assert time.monotonic() - interrupted < 2
    assert process.draw("memory", ("svg",), "{}", "{}", None, 60.0, lambda fmt, picture: None).error_type == \
        "Interrupted"  # and every later drawing
    process.close()
