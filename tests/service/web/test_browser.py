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
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from conftest import SMALL, Server

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


def test_a_comparison_of_two_requests_shows_both(page: Any, artifacts: Path) -> None:
    page.click("button[data-tab=compare]")
    editors = page.locator(".compare-editor")
    assert editors.count() == 2
    for i, (label, microbatches) in enumerate((("m8", 8), ("m32", 32))):
        editors.nth(i).locator(".compare-label").fill(label)
        editors.nth(i).locator("textarea").fill(request_text(global_batch_size=microbatches))
    page.click("#compare-run")
    page.wait_for_selector("#compare-status[data-state=succeeded]")
    headers = page.locator("#compare-result table[data-table=comparison] thead th").all_inner_texts()
    assert headers == ["figure", "m8", "m32"]
    page.wait_for_function("document.querySelectorAll('#compare-result figure[data-loaded=true]').length === 4")
    bubbles = page.locator("#compare-result tbody tr:has-text('bubble fraction') td.num").all_inner_texts()
    assert len(bubbles) == 2 and float(bubbles[0].rstrip("%")) > float(bubbles[1].rstrip("%"))  # m = 32 fills
    page.screenshot(path=str(artifacts / "compare.png"), full_page=True)


def test_a_search_shows_its_ranking(page: Any) -> None:
    page.click("button[data-tab=search]")
    page.fill("#search-request", json.dumps({
        "model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
        "global_batch_size": 32, "space": {"tp": [1, 2], "pp": [1, 2], "recompute": ["selective"],
                                           "zero_stage": [0, 1]},
        "bounds": {"top_k": 2, "max_candidates": 3}}))
    page.click("#search-run")
    page.wait_for_selector("#search-status[data-state=succeeded]")
    page.wait_for_selector("#search-result figure[data-loaded=true]")
    assert page.locator("#search-result table[data-table=search] tbody tr").count() == 2
    assert "[object Object]" not in page.inner_text("#search-result")  # families are written as text


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
