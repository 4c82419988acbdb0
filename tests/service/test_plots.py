"""Pictures: the pipeline timeline read back from its SVG, the charts' bars against the figures they draw, PNG
output, determinism, and the CLI's --plot and plot commands."""

from __future__ import annotations

import json
import re
import struct
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from api_schemas import load_request_file
from service import convert
from service.cli.main import main
from service.plots import (
    breakdown_figure,
    comparison_figure,
    memory_figure,
    render,
    rows_of,
    spans_from,
    spans_from_chrome_trace,
    sweep_figure,
    timeline_figure,
)
from simcore import simulate

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
M8 = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"
M64 = ROOT / "examples" / "bubble-vs-microbatches" / "m64.yaml"
SVG = "{http://www.w3.org/2000/svg}"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """Every element with an id that draws one path: id -> (x0, y0, x1, y1) of its path's points."""
    out = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        gid = group.get("id", "")
        paths = group.findall(f"{SVG}path")
        if len(paths) != 1 or not paths[0].get("d"):
            continue
        values = [float(v) for v in _NUMBER.findall(paths[0].get("d", ""))]
        xs, ys = values[0::2], values[1::2]
        out[gid] = (min(xs), min(ys), max(xs), max(ys))
    return out


def width(box: tuple[float, float, float, float]) -> float:
    return box[2] - box[0]


def simulate_cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_plot_draws_the_timeline_of_every_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.svg"
    result = simulate_cli(capsys, str(M8), "--plot", str(out))
    m, p = 8, 8
    found = boxes(out.read_text(encoding="utf-8"))
    rows = sorted(int(k[len("stage"):-len("-row")]) for k in found if re.fullmatch(r"stage\d+-row", k))
    assert rows == list(range(p))
    iteration = result["iteration_time_s"]
    for stage in result["stages"]:
        s = stage["index"]
        row = found[f"stage{s}-row"]
        forward = {k for k in found if re.fullmatch(rf"stage{s}-forward-mb\d+", k)}
        backward = {k for k in found if re.fullmatch(rf"stage{s}-backward-mb\d+", k)}
        assert forward == {f"stage{s}-forward-mb{i}" for i in range(m)}
        assert backward == {f"stage{s}-backward-mb{i}" for i in range(m)}
        for i in range(m):  # full recompute: each backward's recomputation is drawn inside it
            inner, outer = found[f"stage{s}-recompute-mb{i}"], found[f"stage{s}-backward-mb{i}"]
            assert outer[0] - 1e-6 <= inner[0] < inner[2] <= outer[2] + 1e-6
            assert inner[1] >= outer[1] - 1e-6 and inner[3] <= outer[3] + 1e-6
        idle = sum(width(b) for k, b in found.items() if k.startswith(f"stage{s}-idle-"))
        assert stage["bubble_s"] > 0
        assert idle / width(row) == pytest.approx(stage["bubble_s"] / iteration, rel=0.01)
    # the stages' bubbles average to the headline figure
    mean = sum(s["bubble_s"] for s in result["stages"]) / p
    assert mean / iteration == pytest.approx(result["bubble_fraction"], rel=1e-12)


def test_png_is_a_picture_of_sensible_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.png"
    simulate_cli(capsys, str(M8), "--plot", str(out))
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width_px, height_px = struct.unpack(">II", data[16:24])
    assert 1000 <= width_px <= 3000 and 500 <= height_px <= 3000
    assert 20_000 < len(data) < 2_000_000


def test_the_same_request_gives_the_same_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a.svg", "b.svg", "a.png", "b.png"):
        simulate_cli(capsys, str(M8), "--plot", str(tmp_path / name))
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert b"<dc:date>" not in (tmp_path / "a.svg").read_bytes()


@pytest.mark.parametrize("target", ["missing-folder/t.svg", "t.pdf", "."])
def test_an_unwritable_plot_is_invalid_input_before_simulating(
        target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = target if target == "." else str(tmp_path / target)
    assert main(["simulate", str(M8), "--plot", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was simulated
    assert captured.err.startswith("clustersim: invalid input: --plot: ")
    assert len(captured.err.strip().splitlines()) == 1


def test_breakdown_and_memory_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = simulate_cli(capsys, str(M8), "--plot", str(tmp_path / "b.svg"), "--plot-kind", "breakdown")
    found = boxes((tmp_path / "b.svg").read_text(encoding="utf-8"))
    split = {k: v for k, v in result["time_breakdown_s"].items() if v > 0}
    drawn = {k[len("breakdown-"):]: width(b) for k, b in found.items() if k.startswith("breakdown-")}
    assert drawn.keys() == split.keys()
    unit = drawn["compute"] / split["compute"]
    for kind, seconds in split.items():
        assert drawn[kind] == pytest.approx(seconds * unit, rel=1e-3, abs=0.02)

    result = simulate_cli(capsys, str(M8), "--plot", str(tmp_path / "m.svg"), "--plot-kind", "memory")
    found = boxes((tmp_path / "m.svg").read_text(encoding="utf-8"))
    height = {k: b[3] - b[1] for k, b in found.items() if k.startswith("memory-stage")}
    unit = height["memory-stage0-weights"] / result["stages"][0]["memory"]["breakdown_gib"]["weights"]
    for stage in result["stages"]:
        for kind, gib in stage["memory"]["breakdown_gib"].items():
            assert height[f"memory-stage{stage['index']}-{kind}"] == pytest.approx(gib * unit, rel=1e-3, abs=0.02)
    capacity, axis_bottom = found["capacity"][1], found["memory-stage0-weights"][3]
    assert (axis_bottom - capacity) / unit == pytest.approx(result["memory"]["capacity_gib"], rel=1e-3)


def test_plot_draws_a_saved_chrome_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    result = simulate_cli(capsys, str(M8), "--trace", str(trace))
    assert main(["plot", str(trace), "--out", str(tmp_path / "t.svg")]) == 0
    found = boxes((tmp_path / "t.svg").read_text(encoding="utf-8"))
    for stage in result["stages"]:
        s = stage["index"]
        assert sum(1 for k in found if re.fullmatch(rf"stage{s}-(forward|backward)-mb\d+", k)) == 16
        idle = sum(width(b) for k, b in found.items() if k.startswith(f"stage{s}-idle-"))
        # the trace has no iteration time: rows end with the last span, the optimizer of the critical rank
        assert idle / width(found[f"stage{s}-row"]) == pytest.approx(
            stage["bubble_s"] / result["iteration_time_s"], rel=0.01)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is not JSON"), ('{"traceEvents": []}', "no complete"), ('{"x": 1}', "traceEvents"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1}]}', "pipeline stage")])
def test_plot_rejects_what_is_not_a_trace(content: str, message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text(content, encoding="utf-8")
    assert main(["plot", str(tmp_path / "bad.json"), "--out", str(tmp_path / "t.svg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clustersim: invalid input: trace: ") and message in err
    assert not (tmp_path / "t.svg").exists()


def test_a_long_run_is_drawn_as_start_steady_state_and_end() -> None:
    # every period simulated (extrapolation would leave the steady state's periods out of the trace)
    scenario = replace(convert.replace_spans(convert.to_scenario(load_request_file(str(M64)))), extrapolate=False)
    outcome = simulate(scenario)
    spans = spans_from(outcome.spans)
    assert max(row.passes for row in rows_of(spans)) == 128
    svg = render(timeline_figure(spans, iteration_time_s=outcome.metrics.iteration_time_s), "svg").decode()
    found = boxes(svg)
    assert {"elided-1", "elided-2"} <= found.keys() and "elided-3" not in found
    assert svg.count("not drawn</text>") == 2
    windows = {int(k.rsplit("-w", 1)[1]) for k in found if re.fullmatch(r"stage\d+-forward-mb\d+-w\d", k)}
    assert windows == {0, 1, 2}
    drawn = {k.rsplit("-w", 1)[0] for k in found if re.fullmatch(r"stage0-(forward|backward)-mb\d+-w\d", k)}
    assert 10 <= len(drawn) < 64  # some of the 128 passes, not all
    # the windows are in time order and do not overlap
    edges = [found[f"elided-{k}"] for k in (1, 2)]
    assert edges[0][2] < edges[1][0]


def test_rows_from_a_trace_equal_rows_from_the_spans(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = simulate(convert.replace_spans(convert.to_scenario(load_request_file(str(M8)))))
    direct = rows_of(spans_from(outcome.spans))
    traced = rows_of(spans_from_chrome_trace(convert.chrome_trace(outcome.spans)))
    assert [r.stage for r in direct] == [r.stage for r in traced]
    for a, b in zip(direct, traced):
        assert [(x.kind, x.microbatch) for x in a.blocks] == [(x.kind, x.microbatch) for x in b.blocks]
        assert a.idle_s == pytest.approx(b.idle_s, abs=1e-8)  # the trace keeps nanoseconds
        assert a.idle_s == pytest.approx(outcome.metrics.stages[a.stage].bubble_s, rel=1e-12)


def test_comparison_and_sweep_charts() -> None:
    a = {"iteration_time_s": 2.0, "mfu": 0.5, "time_breakdown_s": {"compute": 1.5, "bubble": 0.5}}
    b = {"iteration_time_s": 1.0, "mfu": 0.6, "time_breakdown_s": {"compute": 0.8, "dp_comm": 0.2}}
    found = boxes(render(comparison_figure(["A", "B"], [a, b]), "svg").decode())
    assert width(found["compare-0-compute"]) == pytest.approx(3 * width(found["compare-0-bubble"]), rel=1e-4)
    assert width(found["compare-0-compute"]) == pytest.approx(1.875 * width(found["compare-1-compute"]), rel=1e-4)
    assert "compare-1-bubble" not in found
    with pytest.raises(ValueError, match="one label"):
        comparison_figure(["A"], [a, b])
    svg = render(sweep_figure([8, 16, 32, 64], [0.5, 0.3, None, 0.1], x_label="m", y_label="bubble"), "svg").decode()
    assert 'id="sweep-line"' in svg and svg.count("<text") >= 3
    assert render(breakdown_figure(a), "png")[:4] == b"\x89PNG"
    with pytest.raises(TypeError):
        memory_figure(42)


def test_compare_plot_draws_the_candidates_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.svg"
    assert main(["compare", str(M8), str(M64), "--json", "--plot", str(out)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    found = boxes(out.read_text(encoding="utf-8"))
    drawn = [sum(width(b) for k, b in found.items() if k.startswith(f"compare-{i}-")) for i in range(2)]
    # each bar is its iteration time on one axis
    assert drawn[0] / drawn[1] == pytest.approx(rows[0]["iteration_time_s"] / rows[1]["iteration_time_s"], rel=1e-3)
    assert "compare-0-bubble" in found and ">m8<" in out.read_text(encoding="utf-8")
    assert main(["compare", str(M8), "--plot", str(tmp_path / "no" / "c.svg")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--plot: cannot write" in captured.err


def test_sweep_writes_a_chart_of_mfu_against_the_first_field(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
            "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16}}
    request = tmp_path / "s.json"
    request.write_text(json.dumps({"base": base, "grid": {"layout.global_batch_size": [16, 32, 64],
                                                          "layout.zero_stage": [0, 1]}}), encoding="utf-8")
    assert main(["sweep", str(request), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    assert str(tmp_path / "out" / "mfu.svg") in capsys.readouterr().out
    svg = (tmp_path / "out" / "mfu.svg").read_text(encoding="utf-8")
    found = boxes(svg)
    assert {"sweep-line-0", "sweep-line-1"} <= found.keys() and "sweep-line-2" not in found
    assert "zero_stage = 0</text>" in svg and "zero_stage = 1</text>" in svg
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    mfu = {(r["point"]["layout.global_batch_size"], r["point"]["layout.zero_stage"]): r["result"]["mfu"] for r in rows}
    # the line's points: three, left to right, heights in the order of the MFUs (the y axis points down in SVG)
    d = svg[svg.index('id="sweep-line-0"'):].split('<path d="', 1)[1].split('"', 1)[0]
    values = [float(v) for v in _NUMBER.findall(d)]
    xs, ys = values[0::2], values[1::2]
    assert len(xs) == 3 and xs == sorted(xs)
    expected = [mfu[(m, 0)] for m in (16, 32, 64)]
    assert sorted(range(3), key=lambda i: -ys[i]) == sorted(range(3), key=lambda i: expected[i])
    assert (ys[0] - ys[1]) / (ys[0] - ys[2]) == pytest.approx(
        (expected[0] - expected[1]) / (expected[0] - expected[2]), rel=1e-3)


def test_search_plot_draws_the_top_layouts_and_the_discarded_families(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = tmp_path / "search.json"
    request.write_text(json.dumps({"model": {"preset": "gpt3-13b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                                   "global_batch_size": 64, "bounds": {"max_candidates": 4, "top_k": 3}}))
    out = tmp_path / "s.svg"
    assert main(["search", str(request), "--json", "--plot", str(out), "--workers", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    svg = out.read_text(encoding="utf-8")
    found = boxes(svg)
    drawn = [sum(width(b) for k, b in found.items() if k.startswith(f"top-{i}-")) for i in range(3)]
    times = [e["iteration_time_s"] for e in result["top"]]
    assert len(times) == 3 and "top-3-compute" not in found
    assert drawn[0] / drawn[2] == pytest.approx(times[0] / times[2], rel=1e-3)
    families = sorted(result["discarded_families"], key=lambda f: -f["layouts"])[:12]
    assert families, "this search discards some families"
    bars = [width(found[f"discarded-{i}"]) for i in range(len(families))]
    assert bars[0] / bars[-1] == pytest.approx(families[0]["layouts"] / families[-1]["layouts"], rel=1e-3)
    assert f"#1 {result['top'][0]['summary']}, bf16</text>" in svg
    assert "Layout search: gpt3-13b on 16 A100 80GB GPUs" in svg
    assert main(["search", str(request), "--plot", str(tmp_path / "s.pdf")]) == 2
    assert "--plot: a picture is written as .svg or .png" in capsys.readouterr().err


def test_plot_draws_a_result_document_that_carries_its_trace(tmp_path: Path) -> None:
    outcome = simulate(convert.replace_spans(convert.to_scenario(load_request_file(str(M8)))))
    body = convert.to_response(outcome, include_trace=True)
    (tmp_path / "result.json").write_text(json.dumps(body), encoding="utf-8")
    assert main(["plot", str(tmp_path / "result.json"), "--out", str(tmp_path / "t.svg")]) == 0
    found = boxes((tmp_path / "t.svg").read_text(encoding="utf-8"))
    for stage in body["stages"]:
        s = stage["index"]
        idle = sum(width(b) for k, b in found.items() if k.startswith(f"stage{s}-idle-"))
        assert idle / width(found[f"stage{s}-row"]) == pytest.approx(stage["bubble_s"] / body["iteration_time_s"],
                                                                      rel=0.01)


def test_rows_from_hand_made_spans_group_passes_and_keep_replica_zero() -> None:
    from service.plots import TimelineSpan as S

    spans = [
        # full fidelity: replica 0's compute stream and gradient stream share the track name 'stage 0 dp0'
        S("stage 0 dp0", "fwd mb0 chunk1", "compute", 0.0, 1.0),
        S("stage 0 dp0", "tp fwd mb0 chunk1", "tp_comm", 1.0, 1.2),
        S("stage 0 dp0", "idle: wait B0", "bubble", 1.2, 2.0), S("stage 0 dp0", "recv B0", "pp_comm", 2.0, 2.1),
        S("stage 0 dp0", "recompute bwd mb0 chunk1", "recompute", 2.1, 2.5),
        S("stage 0 dp0", "bwd mb0 chunk1", "compute", 2.5, 3.5), S("stage 0 dp0", "wait dp", "dp_comm", 3.5, 3.7),
        S("stage 0 dp0", "all-reduce grads", "dp_comm", 2.6, 3.6), S("stage 0 dp0", "optimizer", "optimizer", 3.7, 3.8),
        S("stage 0 pp", "act mb0", "pp_comm", 1.2, 1.3),
        S("stage 0 dp1", "fwd mb0 chunk1", "compute", 0.0, 1.0),  # replica 1: not drawn
        S("stage 0 gather1", "all-gather params", "dp_comm", 0.0, 0.5),
        S("clustersim", "something else", "other", 0.0, 9.0),  # not a stage's track
    ]
    (row,) = rows_of(spans)
    got = [(b.lane, b.kind, b.start_s, b.end_s, b.microbatch, b.chunk, b.inner) for b in row.blocks]
    assert got == [
        ("compute", "forward", 0.0, 1.2, 0, 1, False),
        ("compute", "tp_comm", 1.0, 1.2, 0, 1, True),
        ("pp", "pp_comm", 1.2, 1.3, None, 0, False),
        ("compute", "idle", 1.2, 2.0, None, 0, False),
        ("compute", "pp_comm", 2.0, 2.1, None, 0, False),
        ("compute", "backward", 2.1, 3.5, 0, 1, False),
        ("compute", "recompute", 2.1, 2.5, 0, 1, True),
        ("dp", "dp_comm", 2.6, 3.6, None, 0, False),
        ("compute", "dp_comm", 3.5, 3.7, None, 0, False),
        ("compute", "optimizer", 3.7, 3.8, None, 0, False),
    ]
    assert row.passes == 2 and row.idle_s == pytest.approx(0.8)
    svg = render(timeline_figure(spans, iteration_time_s=4.0), "svg").decode()
    found = boxes(svg)
    assert {"stage0-forward-mb0-c1", "stage0-backward-mb0-c1", "stage0-recompute-mb0-c1"} <= found.keys()
    assert width(found["stage0-idle-0"]) / width(found["stage0-row"]) == pytest.approx(0.8 / 4.0, rel=1e-4)
