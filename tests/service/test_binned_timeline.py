"""The binned timeline (service.plots.binned) and the fast rows of a Chrome trace (service.plots.rows): columns
covered as the closed form says, the bubble's share kept, the same rows as span by span, and a picture whose
size does not grow with the spans."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_plots import M8, M64, boxes

from api_schemas import SimulationRequest, load_request_file
from service import convert
from service.plots import render, rows_from_chrome_trace, rows_of, spans_from, spans_from_chrome_trace
from service.plots.binned import COLUMNS, LAYERS, _coverage, binned_runs
from service.plots.timeline import timeline_rows_figure
from simcore import simulate


def outcome_of(path: Path, **options: object):  # type: ignore[no-untyped-def]
    request = load_request_file(str(path))
    if options:
        document = request.model_dump(exclude_none=True, exclude_unset=True)
        document["options"] = {**document.get("options", {}), **options}
        request = SimulationRequest.model_validate(document)
    return simulate(replace(convert.replace_spans(convert.to_scenario(request)), extrapolate=False))


def test_columns_are_covered_as_the_closed_form_says() -> None:
    # [0.5, 2.25) covers half of column 0, all of 1 and a quarter of 2; [1, 1.5) half of column 1 again
    got = _coverage(np.array([0.5, 1.0]), np.array([2.25, 1.5]), 4)
    assert got == pytest.approx([0.5, 1.5, 0.25, 0.0])
    assert _coverage(np.array([]), np.array([]), 3) == pytest.approx([0.0, 0.0, 0.0])


def test_each_row_keeps_its_bubble_share_when_binned() -> None:
    outcome = outcome_of(M8)
    rows = rows_of(spans_from(outcome.spans))
    end = outcome.metrics.iteration_time_s
    runs = binned_runs(rows, [(0.0, end)], [0.0], end)
    column = end / COLUMNS
    for i, row in enumerate(rows):
        idle = sum(r.x1 - r.x0 for r in runs if r.row == i and r.layer == "compute" and r.kind == "idle")
        # a column goes to the kind covering most of it: the share is right to a column at each idle stretch's ends
        stretches = sum(1 for b in row.blocks if b.kind == "idle")
        assert idle == pytest.approx(outcome.metrics.stages[row.stage].bubble_s, abs=2 * stretches * column)
        passes = sum(r.x1 - r.x0 for r in runs if r.row == i and r.kind in ("forward", "backward", "recompute"))
        busy = sum(b.duration_s for b in row.blocks if b.kind in ("forward", "backward") and not b.inner)
        assert passes == pytest.approx(busy, abs=2 * row.passes * column)
    assert {r.layer for r in runs} <= LAYERS.keys() and all(r.x0 < r.x1 for r in runs)
    assert all(kind in LAYERS[layer] for layer, kind in {(r.layer, r.kind) for r in runs})


def test_rows_of_a_full_fidelity_trace_straight_from_it_equal_rows_of_its_spans() -> None:
    document = yaml.safe_load(M8.read_text(encoding="utf-8"))
    document["cluster"]["num_nodes"], document["layout"]["dp"] = 16, 2  # two replicas, each its own tracks
    document["layout"]["global_batch_size"] = 16
    document["options"] = {"fidelity": "full"}
    request = SimulationRequest.model_validate(document)
    outcome = simulate(convert.replace_spans(convert.to_scenario(request)))
    trace = convert.chrome_trace(outcome.spans)
    tracks = {s.track for s in outcome.spans}
    assert any(t.endswith("dp1") for t in tracks)  # replica 1 was recorded, and is not drawn
    rows = rows_from_chrome_trace(trace)
    assert rows == rows_of(spans_from_chrome_trace(trace))
    assert [r.stage for r in rows] == list(range(8)) and all(r.passes == 16 for r in rows)


def test_a_malformed_event_is_refused_where_it_is_read() -> None:
    def trace(track: str) -> dict[str, object]:
        return {"traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": track}},
            {"ph": "X", "name": "fwd mb0", "cat": "compute", "pid": 0, "tid": 0, "ts": 0, "dur": 1},
            {"ph": "X", "name": "fwd mb0", "cat": "compute", "pid": 0, "tid": 1, "ts": "soon", "dur": 1}]}

    with pytest.raises(ValueError, match=r"traceEvents\[2\]"):
        rows_from_chrome_trace(trace("stage 0"))  # a drawn track
    with pytest.raises(ValueError, match=r"traceEvents\[2\]"):
        spans_from_chrome_trace(trace("stage 0 dp1"))  # every span is read
    # the rows pass over another replica's events unread: the picture never draws them
    with pytest.raises(ValueError, match="no span belongs to a pipeline stage"):
        rows_from_chrome_trace(trace("stage 0 dp1"))


@pytest.mark.slow
def test_a_picture_of_more_boxes_than_the_limit_is_binned_and_its_paths_are_bounded() -> None:
    outcome = outcome_of(M64)
    rows = rows_of(spans_from(outcome.spans))
    end = outcome.metrics.iteration_time_s
    exact = render(timeline_rows_figure(rows, iteration_time_s=end), "svg").decode()
    binned = render(timeline_rows_figure(rows, iteration_time_s=end, max_boxes=100), "svg").decode()
    assert "stage0-forward-mb5-w0" in boxes(exact) and "binned-compute-idle" not in exact
    found = boxes(binned)
    assert {"binned-compute-forward", "binned-compute-backward", "binned-compute-idle"} <= found.keys()
    assert not any(re.fullmatch(r"stage\d+-(forward|backward)-mb\d+.*", k) for k in found)
    assert {f"stage{s}-row" for s in range(8)} <= found.keys()
    assert "drawn binned" in binned
    # one path per kind, however many passes: the exact picture draws one (or more) per box
    assert binned.count("<path") < 200 < exact.count("<path")
    few = rows_of(spans_from(outcome_of(M8).spans))
    fewer = render(timeline_rows_figure(few, iteration_time_s=end, max_boxes=0), "svg").decode()
    assert abs(fewer.count("<path") - binned.count("<path")) < 20


def test_a_binned_png_is_the_same_bytes_each_time() -> None:
    outcome = outcome_of(M64)
    rows = rows_of(spans_from(outcome.spans))
    pictures = {render(timeline_rows_figure(rows, iteration_time_s=outcome.metrics.iteration_time_s, max_boxes=0),
                       "png") for _ in range(2)}
    assert len(pictures) == 1
