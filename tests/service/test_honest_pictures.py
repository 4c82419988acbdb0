"""Pictures and tables say what ran: a timeline of an extrapolated run draws the extrapolated time as a labelled
break, not as work; titles name every parallel dimension, the GPU and the precision; the compare and search
tables carry CP, EP, the GPU and the precision; tick labels do not overlap."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_compare import table_row
from test_plots import SVG, boxes, width

from api_schemas import SimulationRequest
from service.cli.main import main
from service.cli.search import render_search
from service.naming import gpu_label, gpu_name, layout_line, parallel_dimensions, precision_name
from service.plots import render, search_figure
from service.plots.pictures import describe
from service.plots.rows import Block, Row
from service.plots.timeline import spaced, timeline_rows_figure
from service.search import run_search

ROOT = Path(__file__).resolve().parents[2]
ONE_T = ROOT / "examples" / "gpt-1t-3072-a100.yaml"
M64 = ROOT / "examples" / "bubble-vs-microbatches" / "m64.yaml"

# A small mixture of experts on one DGX H100 (tests/service/test_moe_requests.py's), and a dense model like it
MOE: dict[str, Any] = {
    "model": {"architecture": "decoder_only", "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
              "ffn_hidden_size": 4096, "vocab_size": 32000, "seq_length": 1024, "attention": "flash",
              "num_experts": 8, "moe_top_k": 2, "moe_ffn_hidden_size": 1024},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "ep": 8, "microbatch_size": 2, "global_batch_size": 32},
}
CP4: dict[str, Any] = {"model": {k: v for k, v in MOE["model"].items() if not k.startswith(("num_experts", "moe_"))},
                       "cluster": MOE["cluster"],
                       "layout": {"dp": 2, "tp": 1, "pp": 1, "cp": 4, "microbatch_size": 2, "global_batch_size": 32}}


def texts(svg: str) -> list[str]:
    """Every line of text the picture shows (matplotlib writes one <text> per line)."""
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_names_of_the_layout_the_gpu_and_the_precision() -> None:
    assert parallel_dimensions(2, 4, 1, 4, 8) == "DP 2 x TP 4 x PP 1 x CP 4 (x EP 8)"
    assert parallel_dimensions(6, 8, 64) == "DP 6 x TP 8 x PP 64"
    assert parallel_dimensions(2, 1, 1, ep=8) == "DP 2 x TP 1 x PP 1 (x EP 8)"
    assert gpu_label("h100-80gb") == "H100 80GB" and gpu_label("gb300") == "GB300"
    assert precision_name() == "bf16" and precision_name("fp8") == "fp8 (tensorwise)"
    assert precision_name("fp8", "rowwise") == "fp8 (rowwise)"
    cluster = SimulationRequest.model_validate(MOE).cluster
    assert gpu_name(cluster) == "H100 80GB"
    groups = SimulationRequest.model_validate({**MOE, "cluster": {"preset": "dgx-a100", "node_groups": [
        {"num_nodes": 1}, {"num_nodes": 1, "gpu": "h100-80gb"}]}}).cluster
    assert gpu_name(groups) == "A100 80GB + H100 80GB"
    custom = SimulationRequest.model_validate({**MOE, "cluster": {"num_nodes": 1, "gpus_per_node": 8, "gpu_spec": {
        "name": "my-gpu", "peak_tflops_bf16": 500.0, "memory_gib": 96.0}}}).cluster
    assert gpu_name(custom) == "my-gpu"
    assert layout_line({"dp": 2, "tp": 4, "pp": 1, "cp": 4, "ep": 8, "precision": "fp8"}, "H100 80GB") == \
        "DP 2 x TP 4 x PP 1 x CP 4 (x EP 8), H100 80GB, fp8 (tensorwise)"


def test_a_cp_run_s_title_names_cp_the_gpu_and_the_precision(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cp.svg"
    assert main(["simulate", write(tmp_path, "cp.json", CP4), "--plot", str(out)]) == 0
    capsys.readouterr()
    title = texts(out.read_text(encoding="utf-8"))
    assert any("DP 2 x TP 1 x PP 1 x CP 4, H100 80GB, bf16, m = 8" in line for line in title), title
    moe = describe(SimulationRequest.model_validate({**MOE, "layout": {**MOE["layout"], "dp": 4, "cp": 2}}))
    assert "DP 4 x TP 1 x PP 1 x CP 2 (x EP 8), H100 80GB, bf16" in moe


def test_the_1t_timeline_draws_the_extrapolated_periods_as_a_labelled_break(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "1t.svg"
    assert main(["simulate", str(ONE_T), "--plot", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    periods = result["simulator"]["extrapolated_periods"]
    assert periods > 100  # the default run extrapolates most of the steady state
    svg = out.read_text(encoding="utf-8")
    lines = texts(svg)
    # the break's label: the periods, and the time they stand for (one stage's extrapolated span)
    assert f"{periods} periods" in lines and "extrapolated" in lines
    seconds = next(line for line in lines if re.fullmatch(r"\([\d.]+ s\)", line))
    # the legend names it, and the title says how many periods were not simulated
    assert "extrapolated, not simulated" in lines
    assert any(line.startswith(f"{periods} steady-state periods extrapolated ({seconds[1:-1]} a stage)")
               for line in lines)
    assert any("DP 6 x TP 8 x PP 64, A100 80GB, bf16, m = 512" in line for line in lines)
    found = boxes(svg)
    assert "extrapolated-1" in found and "extrapolated-2" not in found and "elided-1" not in found
    assert width(found["extrapolated-1"]) > 0
    # drawn binned (too many passes): the stages' staggered ends of their extrapolated spans are drawn as such,
    # and nothing is drawn as unnamed other work
    assert "binned-compute-extrapolated" in found and "binned-compute-other" not in found
    # the x ticks do not overlap: each label's box (digits 0.64 em of 9 pt) clears the next one
    ticks = sorted(_tick_labels(svg))
    for (x0, a), (x1, b) in zip(ticks, ticks[1:]):
        assert x1 - x0 >= 0.64 * 9 * (len(a) + len(b)) / 2, (a, b)


def _tick_labels(svg: str) -> list[tuple[float, str]]:
    """(x, text) of the x axis' tick labels: the texts centred on one baseline under the axes."""
    found = []
    for t in ET.fromstring(svg).iter(f"{SVG}text"):
        if "text-anchor: middle" in (t.get("style") or "") and t.get("y") and re.fullmatch(r"[\d.]+", t.text or ""):
            found.append((float(t.get("x", "0")), float(t.get("y", "0")), t.text or ""))
    baseline = max(y for _, y, _ in found)
    return [(x, text) for x, y, text in found if y == baseline]


def test_the_extrapolated_break_is_where_every_stage_is_extrapolated() -> None:
    # two stages, their extrapolated spans staggered: the break is the time both are in theirs
    rows = [Row(0, (Block("compute", "forward", 0.0, 1.0, 0), Block("compute", "extrapolated", 1.0, 9.0, periods=8),
                    Block("compute", "backward", 9.0, 10.0, 0))),
            Row(1, (Block("compute", "forward", 0.5, 1.5, 0), Block("compute", "extrapolated", 1.5, 9.5, periods=8),
                    Block("compute", "backward", 9.5, 10.0, 0)))]
    svg = render(timeline_rows_figure(rows, iteration_time_s=10.0), "svg").decode()
    found = boxes(svg)
    lines = texts(svg)
    assert "8 periods" in lines and "(8 s)" in lines
    # the windows drawn are [0, 1.5) and [9, 10): the staggered ends of each stage's span stay in its row
    assert "stage1-extrapolated-0-w0" not in found and "stage0-extrapolated-0-w1" not in found
    assert width(found["stage0-extrapolated-0-w0"]) / width(found["stage0-forward-mb0-w0"]) == pytest.approx(0.5)
    assert width(found["stage1-extrapolated-0-w1"]) / width(found["stage1-backward-mb0-w1"]) == pytest.approx(1.0)


def test_context_and_expert_parallel_spans_are_drawn_as_theirs() -> None:
    from service.plots import TimelineSpan as S
    from service.plots import rows_of

    spans = [S("stage 0", "fwd mb0", "compute", 0.0, 1.0),
             S("stage 0", "ep dispatch+combine fwd mb0", "ep_comm", 1.0, 1.2),
             S("stage 0", "wait kv fwd mb1", "cp_comm", 1.2, 1.5),
             S("stage 0", "fwd mb1", "compute", 1.5, 2.5),
             S("stage 0", "ep dispatch+combine recompute bwd mb0", "ep_comm", 2.5, 2.6),
             S("stage 0", "bwd mb0", "compute", 2.6, 3.0)]
    (row,) = rows_of(spans)
    got = [(b.kind, b.start_s, b.end_s, b.microbatch, b.inner) for b in row.blocks]
    # the all-to-alls are part of their passes (drawn along the pass's bottom), the CP wait a wait of its own
    assert got == [("forward", 0.0, 1.2, 0, False), ("ep_comm", 1.0, 1.2, 0, True), ("cp_comm", 1.2, 1.5, None, False),
                   ("forward", 1.5, 2.5, 1, False), ("backward", 2.5, 3.0, 0, False),
                   ("ep_comm", 2.5, 2.6, 0, True)]
    svg = render(timeline_rows_figure([row], iteration_time_s=3.0), "svg").decode()
    assert {"CP comm.", "EP comm."} <= set(texts(svg)) and "other" not in texts(svg)
    found = boxes(svg)
    assert width(found["stage0-cp_comm-0"]) / width(found["stage0-row"]) == pytest.approx(0.1, rel=1e-4)


def test_spaced_ticks_drop_a_label_that_would_touch_its_neighbour() -> None:
    # 100 points per unit: '50' at 100 pt and '50.8' at 110 pt would overlap; '52' at 300 pt does not
    assert spaced([(1.0, "50"), (1.1, "50.8"), (3.0, "52")], 100.0) == [(1.0, "50"), (3.0, "52")]


def test_compare_table_and_picture_carry_cp_ep_gpu_and_precision(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    files = [write(tmp_path, "cp4.json", CP4), write(tmp_path, "ep8.json", MOE)]
    picture = tmp_path / "c.svg"
    assert main(["compare", *files, "--plot", str(picture)]) == 0
    out = capsys.readouterr().out
    assert table_row(out, "DP x TP x PP") == ["2 x 1 x 1", "8 x 1 x 1"]
    assert table_row(out, "CP") == ["4", "1"] and table_row(out, "EP") == ["1", "8"]
    assert table_row(out, "GPU") == ["H100 80GB", "H100 80GB"] and table_row(out, "precision") == ["bf16", "bf16"]
    assert float(table_row(out, "exposed cp s")[0]) >= 0 and float(table_row(out, "exposed ep s")[1]) > 0
    lines = texts(picture.read_text(encoding="utf-8"))
    assert "DP 2 x TP 1 x PP 1 x CP 4, H100 80GB, bf16" in lines
    assert "DP 8 x TP 1 x PP 1 (x EP 8), H100 80GB, bf16" in lines
    assert main(["compare", *files, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["layout"]["cp"] == 4 and "ep" not in rows[0]["layout"]
    assert rows[1]["layout"]["ep"] == 8 and "cp" not in rows[1]["layout"]
    assert rows[1]["summary"].startswith("DP 8 x TP 1 x PP 1 (x EP 8)") and rows[1]["gpu"] == "H100 80GB"


def test_search_table_and_picture_carry_cp_ep_gpu_and_precision(capsys: pytest.CaptureFixture[str]) -> None:
    model = copy.deepcopy(MOE["model"])
    space = {"dp": [2], "tp": [1], "pp": [1], "cp": [4], "ep": [8], "microbatch_size": [2], "zero_stage": [0],
             "recompute": ["none"], "schedule": ["1f1b"], "sequence_parallel": [False]}
    result = run_search({"model": model, "cluster": MOE["cluster"], "global_batch_size": 32, "space": space,
                         "bounds": {"max_candidates": 2, "top_k": 1}}, workers=1)
    assert result["top"], result["discarded_families"]
    render_search(result)
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "layout" in line and "tokens/s" in line)
    assert [cell.strip() for cell in header.strip().strip("┃").split("┃")][:7] == \
        ["#", "layout", "CP", "EP", "GPUs", "GPU", "precision"]
    row = next(line for line in out.splitlines() if line.strip().startswith("│ 1 "))
    cells = [cell.strip() for cell in row.strip().strip("│").split("│")]
    assert cells[2:7] == ["4", "8", "8", "H100 80GB", "bf16"]
    lines = texts(render(search_figure(result), "svg").decode())
    assert any(line.startswith("#1 DP 2 x TP 1 x PP 1 x CP 4 (x EP 8), mb 2") and line.endswith(", bf16")
               for line in lines), lines
    assert any("on 8 H100 80GB GPUs" in line for line in lines)
