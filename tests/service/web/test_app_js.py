"""The web page's pure helpers run under Node (no browser needed), imported from the page's own modules
(service/web/*.mjs): a discarded family is written as a line of text and its reason as text, never `[object
Object]`; a search's days and cost are written as the CLI's table writes them; a comparison's columns are headed by
their layouts; a job's reason is its error's message and fields; a picture being drawn says so. Skipped, saying
why, when no `node` is on PATH."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

WEB = Path(__file__).resolve().parents[3] / "service" / "web"
NODE = shutil.which("node") or shutil.which("nodejs")
if NODE is None:
    pytest.skip("no node on PATH: the page's helpers are tested under Node", allow_module_level=True)


def call(module: str, name: str, *args: object) -> Any:
    """`name(...args)` of the page's module `module` (e.g. "search.mjs"), its answer as JSON."""
    url = (WEB / module).as_uri()
    script = (f"import {{{name}}} from {json.dumps(url)};\n"
              f"process.stdout.write(JSON.stringify({name}(...{json.dumps(list(args))})));")
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_module_is_loaded_by_the_page_and_imports_under_node() -> None:
    modules = sorted(path.name for path in WEB.glob("*.mjs"))
    loaded, todo = set(), ["app.js"]
    while todo:  # app.js's imports, and theirs
        found = re.findall(r'^import .* from "\./([\w.]+)";$', (WEB / todo.pop()).read_text(encoding="utf-8"), re.M)
        todo += [name for name in found if name not in loaded]
        loaded |= set(found)
    assert loaded == set(modules), set(modules) ^ loaded
    for name in modules:  # none touches the page when imported
        done = subprocess.run([NODE, "--input-type=module", "-e", f"import {json.dumps((WEB / name).as_uri())};"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (name, done.stderr)


def test_a_family_is_written_as_its_layout_not_object_object() -> None:
    family = {"dp": 8, "tp": 4, "pp": 2, "zero_stage": 1, "recompute": "full", "sequence_parallel": True}
    assert call("search.mjs", "familyLabel", family) == "DP 8 x TP 4 x PP 2, ZeRO 1, recompute full, SP"


def test_a_context_parallel_family_names_cp() -> None:
    family = {"dp": 2, "tp": 1, "pp": 4, "zero_stage": 0, "recompute": "selective", "sequence_parallel": False,
              "cp": 32}
    assert call("search.mjs", "familyLabel", family) == "DP 2 x TP 1 x PP 4 x CP 32, ZeRO 0, recompute selective"


@pytest.mark.parametrize(("reason", "text"), [
    ("layout.dp: must equal the number of GPUs (16)", "layout.dp: must equal the number of GPUs (16)"),
    ({"field": "memory", "rule": "stage 0 needs 206.3 GiB per GPU"}, "memory: stage 0 needs 206.3 GiB per GPU"),
    ({"message": "over the limits"}, "over the limits"),
    (None, ""),
])
def test_a_familys_reason_is_text(reason: object, text: str) -> None:
    assert call("search.mjs", "reasonText", reason) == text


def test_a_runs_days_and_cost_are_written_as_the_cli_writes_them() -> None:
    training = {"with_failures": {"days": 90.72314979897193, "gpu_hours": 34837.68952280522,
                                  "cost_usd": 69675.37904561045},
                "without_failures": {"days": 1.0, "gpu_hours": 1.0, "cost_usd": 1.0}, "goodput": 0.98765}
    run = training["with_failures"]
    cli = [f"{run['days']:.2f}", f"{run['gpu_hours']:,.0f}", f"{run['cost_usd']:,.0f}", f"{training['goodput']:.3f}"]
    assert call("search.mjs", "trainingCells", training) == cli == ["90.72", "34,838", "69,675", "0.988"]
    del training["with_failures"]["cost_usd"]  # no GPU-hour price: no cost
    assert call("search.mjs", "trainingCells", training)[2] == "–"


def row(summary: str, **layout: object) -> dict[str, Any]:
    return {"label": "x", "summary": summary, "layout": layout}


def test_comparison_columns_are_headed_by_their_layouts() -> None:
    rows = [row("DP 8 x TP 4 x PP 2, mb 1, 1f1b, ZeRO 1, recompute full"),
            row("DP 4 x TP 4 x PP 4 x CP 2, mb 1, 1f1b v2, ZeRO 1, recompute full, SP")]
    requests = [{"model": {"preset": "gpt-100b"}, "layout": {"dp": 8, "pp": 2, "global_batch_size": 64}},
                {"model": {"preset": "gpt-100b"}, "layout": {"dp": 4, "pp": 4, "cp": 2, "global_batch_size": 64}}]
    headings = call("compare.mjs", "columnHeadings", rows, requests, ["", ""])
    assert headings == [
        {"shape": "DP 8 x TP 4 x PP 2", "detail": "mb 1, 1f1b, ZeRO 1, recompute full", "differs": "", "label": ""},
        {"shape": "DP 4 x TP 4 x PP 4 x CP 2", "detail": "mb 1, 1f1b v2, ZeRO 1, recompute full, SP", "differs": "",
         "label": ""}]
    assert call("compare.mjs", "columnName", headings[1]) == "DP 4 x TP 4 x PP 4 x CP 2"


def test_columns_of_one_layout_say_what_sets_them_apart() -> None:
    summary = "DP 1 x TP 8 x PP 8, mb 1, 1f1b, ZeRO 0, recompute full"
    requests = [{"model": {"preset": "gpt3-13b"}, "layout": {"dp": 1, "global_batch_size": 8}},
                {"model": {"preset": "t5-11b"}, "layout": {"dp": 1, "global_batch_size": 32}}]
    headings = call("compare.mjs", "columnHeadings", [row(summary), row(summary)], requests, ["m8", ""])
    assert [h["differs"] for h in headings] == ["model.preset gpt3-13b, global_batch_size 8",
                                                "model.preset t5-11b, global_batch_size 32"]
    assert [h["label"] for h in headings] == ["m8", ""]
    assert [call("compare.mjs", "columnName", h) for h in headings] == [
        "m8", "DP 1 x TP 8 x PP 8 (model.preset t5-11b, global_batch_size 32)"]


def test_a_jobs_reason_is_its_errors_message_and_fields() -> None:
    job = {"error": {"code": "invalid_request", "message": "the simulator rejected the request",
                     "details": [{"field": "layout.tp", "rule": "must divide 64"}]}}
    assert call("api.mjs", "jobReason", job) == "the simulator rejected the request\nlayout.tp: must divide 64"
    assert call("api.mjs", "jobReason", {"status": "succeeded", "error": None}) == ""


def test_a_picture_being_drawn_says_when_it_is_expected() -> None:
    assert call("pictures.mjs", "drawingText") == "drawing…"
    assert call("pictures.mjs", "drawingText", 7) == "drawing… the service expects it in about 7 s"
    assert [call("api.mjs", "retryAfterS", h) for h in ("7", "0", "", None, "soon", "3600")] == [7, 1, 1, 1, 1, 60]


def test_an_import_body_carries_the_model_for_deepspeed_only() -> None:
    assert call("interop.mjs", "importBody", "deepspeed", "x", "dgx-a100", "2", "gpt3-1.3b") == {
        "text": "x", "cluster": "dgx-a100", "nodes": 2, "model": "gpt3-1.3b"}
    assert call("interop.mjs", "importBody", "megatron", "y", "dgx-h100", "", "gpt3-1.3b") == {
        "text": "y", "cluster": "dgx-h100"}


def test_an_export_is_saved_under_the_frameworks_file_name() -> None:
    names = [call("interop.mjs", "exportFileName", kind) for kind in ("megatron", "torchtitan", "deepspeed", "other")]
    assert names == ["pretrain_gpt.sh", "train.toml", "launch_deepspeed.sh", "other.txt"]


def test_ignored_and_assumed_keys_are_written_with_their_values() -> None:
    assert call("interop.mjs", "noteLines", {"lr": "0.00015", "seq_length": 131072}) == [
        'lr: "0.00015"', "seq_length: 131072"]


def test_an_error_is_shown_as_the_fields_it_names() -> None:
    err = {"status": 422, "message": "422 invalid_request: ...", "body": {"error": {"code": "invalid_request",
           "message": "layout.tp: ...", "details": [{"field": "layout.precision", "rule": "Megatron-LM can"}]}}}
    assert call("api.mjs", "errorText", err) == "layout.precision: Megatron-LM can"
    assert call("api.mjs", "errorText", {"message": "503 busy"}) == "503 busy"
