"""The web page in a real headless browser: Debian's Chromium driven by Playwright's Python API, against
`clustersim serve` on 127.0.0.1. The page loads, a preset runs inline with figures equal to the API's JSON and
the timeline drawn, a job runs with its live status to `succeeded`, a comparison of two requests shows both, a
search shows its ranking, the page works with the API token set, and /docs renders with every request kept on
this machine. Screenshots are saved (CLUSTERSIM_TEST_ARTIFACTS, else a temporary folder).

Skipped, saying why, only when no Chromium can be found (`.ci/run` installs Debian's `chromium`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from conftest import LARGE, SMALL, Server

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((path for path in map(shutil.which, BROWSERS) if path), None)
if BROWSER is None:
    pytest.skip("no Chromium browser found on PATH (chromium, chromium-browser, google-chrome): install Debian's "
                "package with `apt-get install -y chromium`, as .ci/run does", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the test extras: pip install -e "
                               "'.[test]'")

# As the machine's own browser needs on a closed network: no background connections, no sandbox as root.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
TIMEOUT_MS = 180_000  # a loaded 2-core machine draws a timeline in seconds, not milliseconds
TOKEN = "page-token"


def request_text(**layout: Any) -> str:
    doc = yaml.safe_load(SMALL.read_text(encoding="utf-8"))  # GPT-3 13B, 64 A100, PP 8, m = 8
    doc["layout"].update(layout)
    return json.dumps(doc, indent=2)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("CLUSTERSIM_TEST_ARTIFACTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=BROWSER, headless=True, args=ARGS)
        yield launched
        launched.close()


def start(tmp: Path, **env: str) -> Server:
    return Server(tmp / "web.db", tmp / "server.log", ready_timeout_s=120.0, CLUSTERSIM_WORKERS="2", **env)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(tmp_path_factory.mktemp("web"))
    yield running
    running.stop()


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda err: errors.append(str(err)))
    opened.goto(server.url + "/")
    opened.wait_for_selector("body[data-ready=true]")
    yield opened
    context.close()
    assert not errors, errors  # no script error on the page


def card(page: Any, field: str) -> float:
    return float(page.get_attribute(f"#sim-result .card[data-field={field}]", "data-value"))


def picture_svg(page: Any, selector: str) -> str:
    """The SVG text behind a drawn <img> (a blob: URL the page made from the API's answer)."""
    page.wait_for_selector(f"{selector}[data-loaded=true]")
    assert page.evaluate(f"document.querySelector('{selector} img').naturalWidth") > 300
    return str(page.evaluate(f"fetch(document.querySelector('{selector} img').src).then((r) => r.text())"))


def test_a_preset_runs_inline_and_its_figures_are_the_apis(page: Any, server: Server, artifacts: Path) -> None:
    assert page.title() == "clustersim"
    page.select_option("#example", "0")
    page.click("#run-inline")
    page.wait_for_selector("#sim-status[data-state=succeeded]")
    svg = picture_svg(page, "#sim-result .picture-timeline")
    assert all(f'id="stage{s}-row"' in svg for s in range(8)) and 'id="stage8-row"' not in svg
    for kind in ("breakdown", "memory"):
        assert "<svg" in picture_svg(page, f"#sim-result .picture-{kind}")
    api = httpx.post(server.url + "/v1/simulations", content=request_text(), timeout=120,
                     headers={"content-type": "application/json"}).json()
    for field in ("iteration_time_s", "tokens_per_s", "mfu", "hfu", "bubble_fraction"):
        assert card(page, field) == api[field], field
    assert card(page, "peak_gib_per_gpu") == api["memory"]["peak_gib_per_gpu"]
    assert page.locator("#sim-result table[data-table=stages] tbody tr").count() == len(api["stages"]) == 8
    page.screenshot(path=str(artifacts / "simulate.png"), full_page=True)


def test_a_job_runs_with_live_status_to_succeeded(page: Any, artifacts: Path) -> None:
    page.fill("#request", request_text(global_batch_size=1024))  # 1024 microbatches: a job of a few seconds
    page.click("#run-job")
    page.wait_for_selector("#sim-status[data-state=succeeded]")
    seen = json.loads(page.get_attribute("#sim-progress", "data-seen") or "[]")
    statuses = json.loads(page.get_attribute("#sim-progress", "data-statuses") or "[]")
    assert statuses[0] in ("queued", "running") and statuses[-1] == "succeeded", statuses
    assert seen == sorted(seen) and seen[-1] == 1.0 and all(0.0 <= p <= 1.0 for p in seen), seen
    assert page.get_attribute("#sim-progress", "data-value") == "1"
    svg = picture_svg(page, "#sim-result .picture-timeline")
    assert 'id="stage7-row"' in svg
    assert "job" in page.inner_text("#sim-result .result-head")
    page.screenshot(path=str(artifacts / "job.png"), full_page=True)
    page.click("button[data-tab=jobs]")
    page.wait_for_selector("#jobs-table tbody tr .badge.succeeded")


def test_a_comparison_is_headed_by_its_layouts(page: Any, artifacts: Path) -> None:
    page.click("button[data-tab=compare]")
    editors = page.locator(".compare-editor")
    assert editors.count() == 2
    assert editors.nth(0).locator(".compare-label").input_value() == ""  # no "A" and "B": a label is optional
    editors.nth(0).locator(".compare-label").fill("m8")
    for i, microbatches in enumerate((8, 32)):
        editors.nth(i).locator("textarea").fill(request_text(global_batch_size=microbatches))
    page.click("#compare-run")
    page.wait_for_selector("#compare-status[data-state=succeeded]")
    head = "#compare-result table[data-table=comparison] thead th"
    assert page.locator(head).first.inner_text() == "figure"
    columns = page.locator(f"{head}[data-shape]")
    assert columns.count() == 2
    for i in range(2):  # both DP 1 x TP 8 x PP 8: what sets them apart is said under it
        assert columns.nth(i).locator(".col-shape").inner_text() == "DP 1 x TP 8 x PP 8"
        detail = columns.nth(i).locator(".col-detail").inner_text()
        assert detail == "mb 1, 1f1b, ZeRO 0, recompute full, no grad overlap"
    assert columns.nth(0).locator(".col-differs").inner_text() == "global_batch_size 8"
    assert columns.nth(1).locator(".col-differs").inner_text() == "global_batch_size 32"
    assert columns.nth(0).locator(".col-label").inner_text() == "m8"
    assert columns.nth(1).locator(".col-label").count() == 0
    page.wait_for_function("document.querySelectorAll('#compare-result figure[data-loaded=true]').length === 4")
    captions = page.locator("#compare-result .picture-timeline figcaption span").all_inner_texts()
    assert captions == ["m8: pipeline timeline", "DP 1 x TP 8 x PP 8 (global_batch_size 32): pipeline timeline"]
    bubbles = page.locator("#compare-result tbody tr:has-text('bubble fraction') td.num").all_inner_texts()
    assert len(bubbles) == 2 and float(bubbles[0].rstrip("%")) > float(bubbles[1].rstrip("%"))  # m = 32 fills
    page.screenshot(path=str(artifacts / "compare.png"), full_page=True)


SEARCH = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
          "global_batch_size": 32, "space": {"tp": [1, 2, 16], "pp": [1, 2], "recompute": ["selective"],
                                             "zero_stage": [0, 1]},
          "training": {"tokens_per_parameter": 20, "gpu_hour_usd": 2.0},
          "bounds": {"top_k": 2, "max_candidates": 3}}


def test_a_search_shows_its_ranking_days_cost_and_discarded_families(page: Any, server: Server,
                                                                       artifacts: Path) -> None:
    page.click("button[data-tab=search]")
    page.fill("#search-request", json.dumps(SEARCH))
    page.click("#search-run")
    page.wait_for_selector("#search-status[data-state=succeeded]")
    page.wait_for_selector("#search-result figure[data-loaded=true]")
    jobs = httpx.get(server.url + "/v1/jobs", params={"limit": 20}, timeout=60).json()["jobs"]
    job = next(j for j in jobs if j["kind"] == "search")  # the newest search: this one
    result = httpx.get(server.url + f"/v1/jobs/{job['id']}/result", timeout=60).json()
    table = "#search-result table[data-table=search]"
    heads = page.locator(f"{table} thead th").all_inner_texts()
    assert heads[heads.index("headroom") + 1:] == ["days", "GPU-hours", "cost USD", "goodput", "why"]
    rows = page.locator(f"{table} tbody tr")
    assert rows.count() == len(result["top"]) == 2
    for i, entry in enumerate(result["top"]):  # as `clustersim search` prints them (service/cli/search.py)
        run, goodput = entry["training"]["with_failures"], entry["training"]["goodput"]
        cells = rows.nth(i).locator("td[data-column]").all_inner_texts()
        assert cells == [f"{run['days']:.2f}", f"{run['gpu_hours']:,.0f}", f"{run['cost_usd']:,.0f}", f"{goodput:.3f}"]
    families = page.locator("#search-result table[data-table=families] tbody tr")
    assert families.count() == min(12, len(result["discarded_families"])) > 0
    reasons = [families.nth(i).locator("td.why").inner_text() for i in range(families.count())]
    assert reasons == [f["reason"] for f in result["discarded_families"][:12]] and all(reasons)
    assert "[object Object]" not in page.inner_text("#search-result")  # families and reasons are written as text
    page.screenshot(path=str(artifacts / "search.png"), full_page=True)
    # opened from the jobs list, the search's own request comes back into the editor
    page.fill("#search-request", "{}")
    page.click("button[data-tab=jobs]")
    page.click(f"#jobs-table tr[data-job='{job['id']}'] button.open")
    page.wait_for_selector("#search-status[data-state=succeeded]")
    page.wait_for_selector("#search-result table[data-table=search]")
    asked = httpx.get(server.url + f"/v1/jobs/{job['id']}/request", timeout=60).json()
    assert json.loads(page.input_value("#search-request")) == asked and asked["space"]["tp"] == [1, 2, 16]


def test_the_page_works_with_the_token(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    guarded = start(tmp_path, CLUSTERSIM_API_TOKEN=TOKEN)
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(guarded.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.click("#run-inline")
        page.wait_for_selector("#sim-status[data-state=failed]")
        assert "401" in page.inner_text("#sim-result .error-box")
        page.fill("#token", TOKEN)
        page.dispatch_event("#token", "change")
        page.click("#run-inline")
        page.wait_for_selector("#sim-status[data-state=succeeded]")
        assert 'id="stage0-row"' in picture_svg(page, "#sim-result .picture-timeline")
        page.reload()  # kept for the browser session
        page.wait_for_selector("body[data-ready=true]")
        assert page.input_value("#token") == TOKEN
        page.screenshot(path=str(artifacts / "token.png"), full_page=True)
    finally:
        context.close()
        guarded.stop()


def test_docs_render_with_no_request_leaving_the_machine(browser: Any, server: Server) -> None:
    context = browser.new_context()
    hosts: list[str] = []

    def only_here(route: Any) -> None:
        host = urlsplit(route.request.url).hostname or ""
        hosts.append(host)
        if host == "127.0.0.1":
            route.continue_()
        else:
            route.abort()

    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.route("**/*", only_here)
        page.goto(server.url + "/docs")
        page.wait_for_selector(".opblock-summary-path[data-path='/v1/simulations']")
        assert page.locator(".opblock").count() >= 10
        assert set(hosts) == {"127.0.0.1"}, hosts
    finally:
        context.close()


INTEROP = Path(__file__).resolve().parents[2] / "interop" / "data"


def test_a_launch_config_is_imported_into_the_form_and_exported(page: Any, server: Server, artifacts: Path) -> None:
    page.click("#import-panel summary")
    assert page.is_hidden("#imp-model-label")  # a model preset only for a ds_config.json
    page.select_option("#imp-kind", "megatron")
    page.select_option("#imp-cluster", "dgx-h100")
    page.fill("#imp-text", (INTEROP / "train_llama3_8b_h100_fp8.args").read_text())
    page.click("#imp-run")
    page.wait_for_selector("#imp-status[data-state=succeeded]")
    loaded = json.loads(page.input_value("#request"))
    api = httpx.post(server.url + "/v1/imports/megatron", timeout=120,
                     json={"text": (INTEROP / "train_llama3_8b_h100_fp8.args").read_text()}).json()
    assert loaded == api["request"] and loaded["model"]["num_layers"] == 32
    ignored = page.locator("#imp-notes ul[data-notes=ignored] li").all_inner_texts()
    assert len(ignored) == len(api["ignored"]) and 'lr: "0.00015"' in ignored
    # fp8 is Megatron-LM's: the DeepSpeed export refuses it, naming the field and who can
    page.select_option("#exp-kind", "deepspeed")
    page.click("#exp-download")
    page.wait_for_selector("#exp-status[data-state=failed]")
    assert "layout.precision" in page.inner_text("#exp-error") and "Megatron-LM can" in page.inner_text("#exp-error")
    page.screenshot(path=str(artifacts / "export-refused.png"), full_page=True)
    page.select_option("#exp-kind", "megatron")
    with page.expect_download() as download:
        page.click("#exp-download")
    saved = download.value
    assert saved.suggested_filename == "pretrain_gpt.sh"
    text = Path(saved.path()).read_text()
    assert text == httpx.post(server.url + "/v1/exports/megatron", json=loaded, timeout=120).json()["text"]
    assert page.is_hidden("#exp-error")
    # a ds_config.json names no model: the page asks for one
    page.select_option("#imp-kind", "deepspeed")
    assert page.is_visible("#imp-model-label")
    page.select_option("#imp-model", "gpt3-350m")
    page.select_option("#imp-cluster", "dgx-a100")
    page.fill("#imp-text", (INTEROP / "deepspeed" / "ds_config_func_bs8_zero2.json").read_text())
    page.click("#imp-run")
    page.wait_for_selector("#imp-status[data-state=succeeded]")
    assert json.loads(page.input_value("#request"))["layout"]["zero_stage"] == 2
    assert "zero_optimization.reduce_bucket_size" in page.inner_text("#imp-notes")
    page.screenshot(path=str(artifacts / "import.png"), full_page=True)
    page.fill("#imp-text", '{"train_batch_size": 8, "zero_optimisation": {"stage": 1}}')
    page.click("#imp-run")
    page.wait_for_selector("#imp-status[data-state=failed]")
    assert "input.zero_optimisation.stage" in page.inner_text("#imp-notes .error-box")


def submitted(server: Server, text: str) -> str:
    """A simulation job submitted through the API and run to success; its id."""
    job = httpx.post(server.url + "/v1/jobs", content=text, headers={"content-type": "application/json"},
                     timeout=60).json()
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while httpx.get(f"{server.url}/v1/jobs/{job['id']}", timeout=60).json()["status"] != "succeeded":
        assert time.monotonic() < deadline, "the job did not succeed in time"
        time.sleep(0.2)
    return str(job["id"])


def test_opening_a_job_loads_its_own_request(page: Any, server: Server, artifacts: Path) -> None:
    job = submitted(server, request_text(global_batch_size=16))
    page.select_option("#example", "3")  # an unrelated request in the editor: GPT-100B on 1024 GPUs
    page.click("button[data-tab=jobs]")
    page.click(f"#jobs-table tr[data-job='{job}'] button.open")
    page.wait_for_selector("#sim-status[data-state=succeeded]")
    asked = httpx.get(f"{server.url}/v1/jobs/{job}/request", timeout=60).json()
    loaded = json.loads(page.input_value("#request"))
    assert loaded == asked and loaded["model"] == {"preset": "gpt3-13b"} and loaded["layout"]["global_batch_size"] == 16
    assert page.input_value("#example") == ""  # no example is named for it: the job is
    assert page.locator("#example option[value='']").text_content() == f"the request of job {job[:8]}"
    assert f"job {job}" in page.inner_text("#sim-result .result-head")
    assert 'id="stage7-row"' in picture_svg(page, "#sim-result .picture-timeline")
    page.screenshot(path=str(artifacts / "job-opened.png"), full_page=True)


def test_a_failed_job_shows_its_reason_and_opens_with_its_request(browser: Any, tmp_path: Path,
                                                                   artifacts: Path) -> None:
    short = start(tmp_path, CLUSTERSIM_JOB_TIMEOUT_S="0.5")  # the 1T GPT, every period simulated, takes seconds
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(short.url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#request", LARGE.read_text(encoding="utf-8"))  # YAML, as the editor takes it
        page.click("#run-job")
        page.wait_for_selector("#sim-status[data-state=timed_out]")
        job = httpx.get(short.url + "/v1/jobs", timeout=60).json()["jobs"][0]
        assert job["status"] == "timed_out" and job["error"]["code"] == "timeout"
        box = page.locator("#sim-result .error-box")
        assert box.get_attribute("data-status") == "timed_out"
        assert box.locator(".job-reason").inner_text() == job["error"]["message"]
        assert "wall-time limit of 0.5 s" in job["error"]["message"]
        page.screenshot(path=str(artifacts / "job-failed.png"), full_page=True)
        page.select_option("#example", "1")  # the editor moves on to another request
        page.click("button[data-tab=jobs]")
        row = page.locator(f"#jobs-table tr[data-job='{job['id']}']")
        row.locator(".badge.timed_out").wait_for()
        assert row.locator("td.reason").inner_text() == f"timeout {job['error']['message']}"
        page.screenshot(path=str(artifacts / "jobs-failed.png"), full_page=True)
        row.locator("button.open").click()
        page.wait_for_selector("#sim-status[data-state=timed_out]")
        page.wait_for_selector("#sim-result .error-box[data-status=timed_out]")
        loaded = json.loads(page.input_value("#request"))
        assert loaded == httpx.get(f"{short.url}/v1/jobs/{job['id']}/request", timeout=60).json()
        assert loaded["model"] == {"preset": "gpt-1t"} and loaded["layout"]["pp"] == 64
        assert page.inner_text("#sim-result .job-reason") == job["error"]["message"]
        page.screenshot(path=str(artifacts / "job-failed-opened.png"), full_page=True)
    finally:
        context.close()
        short.stop()


PLOT = re.compile(r"/v1/jobs/[0-9a-f]+/plot\?kind=(timeline|breakdown|memory)")


def test_a_picture_says_drawing_until_it_is_shown_and_why_when_it_is_not(page: Any, server: Server,
                                                                         artifacts: Path) -> None:
    job = submitted(server, request_text(global_batch_size=24))
    asked: list[float] = []
    drawing = {"held": True}

    def plot(route: Any) -> None:
        kind = PLOT.search(route.request.url).group(1)  # type: ignore[union-attr]
        if kind == "timeline" and drawing["held"]:  # as the service answers while the picture is being drawn
            asked.append(time.monotonic())
            route.fulfill(status=202, headers={"Retry-After": "1", "Location": route.request.url},
                          content_type="application/json",
                          body=json.dumps({"status": "drawing", "kind": kind, "format": "svg", "retry_after_s": 1}))
        elif kind == "timeline":
            asked.append(time.monotonic())
            route.continue_()
        elif kind == "breakdown":  # as the service answers a drawing past its limit
            route.fulfill(status=413, content_type="application/json", body=json.dumps({"error": {
                "code": "too_large", "message": "drawing the breakdown ran past the limit of 300 s", "details": []}}))
        else:  # a picture the browser cannot read: never a broken image
            route.fulfill(status=200, content_type="image/png", body=b"not a picture")

    page.route(PLOT, plot)
    page.click("button[data-tab=jobs]")
    page.click(f"#jobs-table tr[data-job='{job}'] button.open")
    timeline = page.locator("#sim-result .picture-timeline")
    page.wait_for_selector("#sim-result .picture-timeline[data-retries='2']")
    assert timeline.get_attribute("data-state") == "drawing"
    assert timeline.locator(".picture-state .spinner").is_visible()
    assert timeline.locator(".picture-note").inner_text() == "drawing… the service expects it in about 1 s"
    assert timeline.locator("img").is_hidden()
    page.screenshot(path=str(artifacts / "picture-drawing.png"), full_page=True)
    drawing["held"] = False
    svg = picture_svg(page, "#sim-result .picture-timeline")
    assert 'id="stage7-row"' in svg and timeline.locator(".picture-state").count() == 0
    assert len(asked) >= 3 and all(b - a >= 0.9 for a, b in zip(asked, asked[1:])), asked  # after Retry-After
    for kind, why in (("breakdown", "Not drawn: 413 too_large: drawing the breakdown ran past the limit of 300 s"),
                      ("memory", "Not shown: the service sent a picture the browser cannot read")):
        figure = page.locator(f"#sim-result .picture-{kind}")
        page.wait_for_selector(f"#sim-result .picture-{kind}[data-loaded=error]")
        assert figure.locator(".picture-error").inner_text() == why
        assert figure.locator("img").is_hidden() and figure.locator(".spinner").count() == 0
    page.screenshot(path=str(artifacts / "picture-states.png"), full_page=True)
