"""Batch sweeps: the grid, the JSON Lines and CSV files, invalid points, bad sweep files, and resuming (a sweep
stopped halfway, or killed with SIGKILL, then started again writes the same final files as one that never
stopped)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from api_schemas import RequestError
from api_schemas.search import SweepRequest, parse_sweep_request
from service.cli.main import main
from service.sweep import RESULTS_CSV, RESULTS_JSONL, read_rows, run_sweep

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]

# 2 models x 2 ZeRO stages x 3 microbatch sizes; gpt3-760m has 16 heads, so TP 8 works for both models.
SWEEP: dict[str, Any] = {
    "base": {"model": {"preset": "gpt3-350m"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
             "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16, "recompute": "selective"}},
    "grid": {"model.preset": ["gpt3-350m", "gpt3-760m"], "layout.zero_stage": [0, 1],
             "layout.microbatch_size": [1, 2, 4]},
}


def files(out: Path) -> tuple[bytes, bytes]:
    return (out / RESULTS_JSONL).read_bytes(), (out / RESULTS_CSV).read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    out = tmp_path_factory.mktemp("uninterrupted")
    summary = run_sweep(SweepRequest.model_validate(SWEEP), out, workers=1)
    assert summary == {"points": 12, "skipped": 0, "simulated": 12, "invalid": 0,
                       "jsonl": str(out / RESULTS_JSONL), "csv": str(out / RESULTS_CSV)}
    return files(out)


def test_rows_follow_the_grid_order(reference: tuple[bytes, bytes]) -> None:
    rows = [json.loads(line) for line in reference[0].decode().splitlines()]
    assert [r["index"] for r in rows] == list(range(12))
    assert rows[0]["point"] == {"model.preset": "gpt3-350m", "layout.zero_stage": 0, "layout.microbatch_size": 1}
    assert rows[1]["point"]["layout.microbatch_size"] == 2  # the last path varies fastest
    assert rows[-1]["point"] == {"model.preset": "gpt3-760m", "layout.zero_stage": 1, "layout.microbatch_size": 4}
    assert all(r["status"] == "ok" and "wall_time_s" not in r["result"]["simulator"] for r in rows)
    assert len({r["key"] for r in rows}) == 12
    table = list(csv.DictReader(reference[1].decode().splitlines()))
    assert len(table) == 12
    assert table[3]["model.preset"] == "gpt3-350m" and table[3]["layout.zero_stage"] == "1"
    assert float(table[3]["tokens_per_s"]) == rows[3]["result"]["tokens_per_s"]
    assert table[0]["fits"] == "true"


def test_pool_and_inline_write_the_same_files(reference: tuple[bytes, bytes], tmp_path: Path) -> None:
    run_sweep(SweepRequest.model_validate(SWEEP), tmp_path, workers=2)
    assert files(tmp_path) == reference


def test_stopped_sweep_resumes_to_the_same_files(reference: tuple[bytes, bytes], tmp_path: Path) -> None:
    class Stop(Exception):
        pass

    def stop_after_five(done: int, total: int) -> None:
        if done >= 5:
            raise Stop

    request = SweepRequest.model_validate(SWEEP)
    with pytest.raises(Stop):
        run_sweep(request, tmp_path, workers=1, progress=stop_after_five)
    assert len(read_rows(tmp_path / RESULTS_JSONL)) == 5
    # a last line cut off mid-write is dropped on restart
    with open(tmp_path / RESULTS_JSONL, "a", encoding="utf-8") as f:
        f.write('{"index":5,"key":"abc","poi')
    summary = run_sweep(request, tmp_path, workers=2)
    assert summary["skipped"] == 5 and summary["simulated"] == 7
    assert files(tmp_path) == reference
    # started once more, it has nothing left to do
    assert run_sweep(request, tmp_path, workers=1)["skipped"] == 12
    assert files(tmp_path) == reference


def test_killed_sweep_resumes_to_the_same_files(tmp_path: Path) -> None:
    """A real kill (SIGKILL) of `clustersim sweep` halfway, then the same command again."""
    sweep = {"base": {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                      "layout": {"dp": 2, "tp": 4, "pp": 2, "global_batch_size": 64}},
             "grid": {"layout.zero_stage": [0, 1, 2, 3], "layout.microbatch_size": [1, 2, 4, 8],
                      "layout.schedule": ["gpipe", "1f1b"]}}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    command = [sys.executable, "-m", "service.cli.main", "sweep", str(path), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*command, "--out", str(killed)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jsonl = killed / RESULTS_JSONL
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and jsonl.read_bytes().count(b"\n") >= 4:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL, "the sweep ended before it could be killed"
    written = jsonl.read_bytes().count(b"\n")
    assert 4 <= written < 32
    assert not (killed / RESULTS_CSV).exists()
    assert subprocess.run([*command, "--out", str(killed)], cwd=ROOT, env=env, capture_output=True).returncode == 0
    assert subprocess.run([*command, "--out", str(whole)], cwd=ROOT, env=env, capture_output=True).returncode == 0
    assert files(killed) == files(whole)
    assert len(read_rows(whole / RESULTS_JSONL)) == 32


def test_invalid_points_are_rows_with_the_rule(tmp_path: Path) -> None:
    sweep = {**SWEEP, "grid": {"layout.tp": [2, 3]}}  # tp 3 breaks dp*tp*pp = 8
    summary = run_sweep(SweepRequest.model_validate(sweep), tmp_path, workers=1)
    assert summary["simulated"] == 1 and summary["invalid"] == 1
    rows = read_rows(tmp_path / RESULTS_JSONL)
    assert rows[1]["status"] == "invalid" and rows[1]["error"].startswith("layout.dp: dp*tp*pp")
    assert "result" not in rows[1]
    table = list(csv.DictReader((tmp_path / RESULTS_CSV).read_text().splitlines()))
    assert table[1]["status"] == "invalid" and table[1]["tokens_per_s"] == ""


def test_a_grid_path_may_replace_a_whole_section(tmp_path: Path) -> None:
    layouts = [{"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16},
               {"dp": 1, "tp": 8, "pp": 1, "global_batch_size": 16}]
    sweep = {"base": {k: v for k, v in SWEEP["base"].items() if k != "layout"}, "grid": {"layout": layouts}}
    run_sweep(SweepRequest.model_validate(sweep), tmp_path, workers=1)
    rows = read_rows(tmp_path / RESULTS_JSONL)
    assert [r["point"]["layout"]["tp"] for r in rows] == [1, 8]
    table = list(csv.DictReader((tmp_path / RESULTS_CSV).read_text().splitlines()))
    assert json.loads(table[1]["layout"])["tp"] == 8


@pytest.mark.parametrize("doc, field", [
    ({**SWEEP, "grid": {"layout.tpp": [1]}}, "grid"),
    ({**SWEEP, "grid": {"topology.x": [1]}}, "grid"),
    ({**SWEEP, "grid": {"layout.tp": []}}, "grid.layout.tp"),
    ({**SWEEP, "extra": 1}, "extra"),
    ({"grid": SWEEP["grid"]}, "base"),
])
def test_bad_sweep_files_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_sweep_request(json.dumps(doc))
    assert err.value.details[0].field == field


def test_bad_values_name_the_grid_path_or_base_field() -> None:
    with pytest.raises(RequestError) as err:
        SweepRequest.model_validate({**SWEEP, "grid": {"layout.tp": [2, 0]}}).requests()
    assert err.value.details[0].field == "grid.layout.tp" and "grid point 1" in err.value.details[0].rule
    base = {**SWEEP["base"], "layout": {**SWEEP["base"]["layout"], "zero": 1}}
    with pytest.raises(RequestError) as err:
        SweepRequest.model_validate({"base": base, "grid": {"layout.tp": [2]}}).requests()
    assert err.value.details[0].field == "base.layout.zero"


def test_out_dir_of_another_sweep_is_refused(tmp_path: Path) -> None:
    run_sweep(SweepRequest.model_validate({**SWEEP, "grid": {"layout.zero_stage": [0]}}), tmp_path, workers=1)
    with pytest.raises(RequestError) as err:
        run_sweep(SweepRequest.model_validate({**SWEEP, "grid": {"layout.zero_stage": [1]}}), tmp_path, workers=1)
    assert err.value.details[0].field == "out"


def test_cli_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({**SWEEP, "grid": {"layout.zero_stage": [0, 1]}}), encoding="utf-8")
    assert main(["sweep", str(path), "--workers", "1"]) == 0
    assert "2 points: 0 already written, 2 simulated, 0 invalid" in capsys.readouterr().out
    assert (tmp_path / "sweep-sweep" / RESULTS_CSV).exists()  # default --out: beside the file
    path.write_text(json.dumps({**SWEEP, "grid": {"layout.zero_stage": [5]}}), encoding="utf-8")
    assert main(["sweep", str(path), "--out", str(tmp_path / "x")]) == 2
    assert "grid.layout.zero_stage" in capsys.readouterr().err
