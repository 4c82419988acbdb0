"""app.js's pure helpers run under Node (no browser needed): the discarded-families table writes each family as
a line of text, never `[object Object]`. Skipped, saying why, when no `node` is on PATH."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[3] / "service" / "web" / "app.js"
NODE = shutil.which("node") or shutil.which("nodejs")
if NODE is None:
    pytest.skip("no node on PATH: app.js's helpers are tested under Node", allow_module_level=True)


def function_source(name: str) -> str:
    """One top-level function of app.js, from `function name(` to its closing brace at column 0."""
    text = APP.read_text(encoding="utf-8")
    match = re.search(rf"^function {name}\(.*?^}}$", text, flags=re.S | re.M)
    assert match is not None, f"app.js has no top-level function {name}"
    return match.group(0)


def call(name: str, *args: object) -> str:
    script = f"{function_source(name)}\nprocess.stdout.write(String({name}(...{json.dumps(list(args))})));"
    return subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout


def test_a_family_is_written_as_its_layout_not_object_object() -> None:
    family = {"dp": 8, "tp": 4, "pp": 2, "zero_stage": 1, "recompute": "full", "sequence_parallel": True}
    assert call("familyLabel", family) == "DP 8 x TP 4 x PP 2, ZeRO 1, recompute full, SP"


def test_a_context_parallel_family_names_cp() -> None:
    family = {"dp": 2, "tp": 1, "pp": 4, "zero_stage": 0, "recompute": "selective", "sequence_parallel": False,
              "cp": 32}
    assert call("familyLabel", family) == "DP 2 x TP 1 x PP 4 x CP 32, ZeRO 0, recompute selective"


def test_the_search_table_uses_the_label() -> None:
    text = APP.read_text(encoding="utf-8")
    assert "familyLabel(f.family)" in text and "text: f.family}" not in text


def test_an_import_body_carries_the_model_for_deepspeed_only() -> None:
    script = (f"{function_source('importBody')}\nprocess.stdout.write(JSON.stringify([importBody('deepspeed', 'x', "
              "'dgx-a100', '2', 'gpt3-1.3b'), importBody('megatron', 'y', 'dgx-h100', '', 'gpt3-1.3b')]));")
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == [{"text": "x", "cluster": "dgx-a100", "nodes": 2, "model": "gpt3-1.3b"},
                               {"text": "y", "cluster": "dgx-h100"}]


def test_an_export_is_saved_under_the_frameworks_file_name() -> None:
    text = APP.read_text(encoding="utf-8")
    table = re.search(r"^const EXPORT_FILES = .*?;$", text, flags=re.M)
    assert table is not None
    script = f"{table.group(0)}\n{function_source('exportFileName')}\nprocess.stdout.write(JSON.stringify(" \
             "['megatron', 'torchtitan', 'deepspeed', 'other'].map(exportFileName)));"
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == ["pretrain_gpt.sh", "train.toml", "launch_deepspeed.sh", "other.txt"]


def test_ignored_and_assumed_keys_are_written_with_their_values() -> None:
    assert call("noteLines", {"lr": "0.00015", "seq_length": 131072}) == "lr: \"0.00015\",seq_length: 131072"


def test_an_error_is_shown_as_the_fields_it_names() -> None:
    err = {"status": 422, "message": "422 invalid_request: ...", "body": {"error": {"code": "invalid_request",
           "message": "layout.tp: ...", "details": [{"field": "layout.precision", "rule": "Megatron-LM can"}]}}}
    assert call("errorText", err) == "layout.precision: Megatron-LM can"
    assert call("errorText", {"message": "503 busy"}) == "503 busy"
