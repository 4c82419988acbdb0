"""A measured sendrecv or alltoall table (cluster.measured) scales the bandwidth of the transfers the model prices
by their link loads: point-to-point sends (pipeline stages, context-parallel ring steps) and MoE's all-to-all.
A table at half the model's bandwidth of its own configuration doubles those transfers' time at large sizes, in
its scope only (within a node, or across nodes)."""

from __future__ import annotations

from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore import build_network, simulate
from simcore.cost.moe import all_to_all_time

PP2 = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
       "layout": {"dp": 8, "tp": 1, "pp": 2, "microbatch_size": 4, "global_batch_size": 64}}
SIZES = [2**20 * 4**i for i in range(8)]  # 1 MiB to 16 GiB


def _table(collective: str, ranks: int, nodes: int, seconds: Any) -> dict[str, Any]:
    return {"collective": collective, "ranks": ranks, "nodes": nodes,
            "points": [{"size_bytes": s, "time_us": seconds(s) * 1e6} for s in SIZES]}


def _with(doc: dict[str, Any], *tables: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "cluster": {**doc["cluster"], "measured": {"collectives": list(tables)}}}


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def _model() -> Any:
    scenario = convert.to_scenario(SimulationRequest.model_validate(PP2))
    return build_network(scenario.cluster, scenario.algorithm).collectives


def _send_spans_s(doc: dict[str, Any]) -> list[float]:
    """The durations of the run's pipeline sends (its trace's pp spans)."""
    outcome = simulate(convert.replace_spans(convert.to_scenario(SimulationRequest.model_validate(doc))))
    return [s.end_s - s.start_s for s in outcome.spans
            if s.track.endswith(" pp") and s.name.split()[0] in ("act", "grad")]


def test_a_sendrecv_table_across_nodes_at_half_bandwidth_doubles_the_pipeline_sends() -> None:
    model = _model()
    ring = tuple(range(16))  # nccl-tests' 16 ranks over 2 nodes, each sending to the next
    half = _table("sendrecv", 16, 2, lambda s: 2 * model._ring_of_sends_s("sendrecv", ring, s))
    doc = {**PP2, "layout": {"dp": 1, "tp": 8, "pp": 2, "microbatch_size": 8, "global_batch_size": 16}}
    plain, slow = _send_spans_s(doc), _send_spans_s(_with(doc, half))
    assert len(plain) == len(slow) == 4  # two activations, two gradients, each across the nodes
    for a, b in zip(plain, slow):
        assert 1.9 <= b / a <= 2.0, (a, b)  # the bandwidth term doubles; the latency stays the model's
    compute = _run(doc)["time_breakdown_s"]["compute"]
    assert _run(_with(doc, half))["time_breakdown_s"]["compute"] == pytest.approx(compute)
    # a table of the other scope (within one node) leaves these sends, which cross nodes, as they were
    inside = _table("sendrecv", 8, 1, lambda s: 2 * model._ring_of_sends_s("sendrecv", tuple(range(8)), s))
    assert _send_spans_s(_with(doc, inside)) == pytest.approx(plain)


def test_an_alltoall_table_at_half_bandwidth_doubles_a_large_all_to_all() -> None:
    model = _model()
    group = [tuple(range(8))]
    plain = [all_to_all_time(model, group, s) for s in SIZES]
    half = _table("alltoall", 8, 1, lambda s: 2 * plain[SIZES.index(s)])
    scenario = convert.to_scenario(SimulationRequest.model_validate(_with(PP2, half)))
    measured = build_network(scenario.cluster, scenario.algorithm).collectives
    big = SIZES[-1]
    assert all_to_all_time(measured, group, big) == pytest.approx(2 * plain[-1], rel=1e-3)  # latency: the model's
    # the bandwidth term doubles at every size; the latency stays the model's
    small = SIZES[0]
    assert plain[0] < all_to_all_time(measured, group, small) < 2 * plain[0]
    # across nodes (no table of that scope): the model's
    across = [tuple(range(0, 16, 2))]
    assert all_to_all_time(measured, across, big) == pytest.approx(all_to_all_time(model, across, big))
