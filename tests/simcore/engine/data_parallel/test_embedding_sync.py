"""Tied embeddings under pipelining: the stages holding a copy of the word embedding all-reduce its gradient after
the data-parallel reduction (Megatron-Core's finalize_model_grads), as a collective on the network."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from api_schemas import parse_request
from service.convert import replace_spans, to_scenario
from simcore import Fidelity, build_network, simulate
from simcore.cost.comm.collectives import Collective
from simcore.cost.workload import build_workload
from simcore.domain.placement import place

GPT = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 4},
       "layout": {"dp": 1, "tp": 8, "pp": 4, "global_batch_size": 16, "placement": "tp,dp,pp"}}


def _scenario(doc: dict[str, Any]) -> Any:
    return replace_spans(to_scenario(parse_request(json.dumps(doc))))


def _model(doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**doc, "model": {**doc["model"], **fields}}


def _layout(doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**doc, "layout": {**doc["layout"], **fields}}


def _waits(doc: dict[str, Any]) -> dict[str, float]:
    outcome = simulate(_scenario(doc))
    return {s.track: s.end_s - s.start_s for s in outcome.spans if s.name == "wait embedding all-reduce"}


def test_the_last_stage_to_arrive_waits_exactly_the_all_reduce_of_its_copy() -> None:
    scenario = _scenario(GPT)
    network = build_network(scenario.cluster, scenario.algorithm)
    placement = place(1, 8, 4, "tp,dp,pp", 32)
    workload = build_workload(scenario.model, scenario.layout, scenario.cluster.hardware, placement,
                              network.collectives, False, scenario.cost_parameters)
    assert workload.embedding_sync_ranks == (0, 3)
    vocab = scenario.model.vocab_size * scenario.model.hidden_size // 8
    assert workload.embedding_sync_bytes == vocab * scenario.layout.grad_reduce_bytes
    groups = tuple((placement.gpu(0, t, 0), placement.gpu(0, t, 3)) for t in range(8))
    alone = network.collectives.isolated_time(Collective.ALL_REDUCE, groups, workload.embedding_sync_bytes)
    waits = _waits(GPT)
    assert set(waits) == {"stage 0", "stage 3"}
    # In 1F1B the first stage finishes its backward passes last: the all-reduce starts when it arrives, and
    # what the last stage waited before it is the pipeline's drain (bubble), not communication.
    assert waits["stage 0"] == pytest.approx(alone, rel=1e-9)
    assert waits["stage 3"] == pytest.approx(alone, rel=1e-9)


def test_untied_or_unpipelined_models_have_nothing_to_synchronise() -> None:
    assert _waits(_model(GPT, tied_embeddings=False)) == {}
    assert _waits(_layout(GPT, dp=4, pp=1)) == {}
    tied = simulate(_scenario(GPT)).metrics.iteration_time_s
    untied = simulate(_scenario(_model(GPT, tied_embeddings=False))).metrics.iteration_time_s
    assert tied > untied


def test_interleaved_chunks_keep_the_copies_on_the_first_and_last_ranks() -> None:
    doc = _layout(GPT, schedule="interleaved_1f1b", virtual_stages=2)
    assert set(_waits(doc)) == {"stage 0", "stage 3"}


def test_an_encoder_decoder_shares_the_embedding_with_the_decoder_s_first_stage() -> None:
    doc = {"model": {"preset": "t5-3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
           "layout": {"dp": 1, "tp": 4, "pp": 4, "global_batch_size": 16, "encoder_pipeline_stages": 2}}
    assert set(_waits(doc)) == {"stage 0", "stage 2", "stage 3"}


def test_full_fidelity_agrees_with_the_representative_replica() -> None:
    doc = _layout(GPT, dp=2, global_batch_size=32)
    doc = {**doc, "cluster": {**doc["cluster"], "num_nodes": 8}}
    scenario = _scenario(doc)
    representative = simulate(scenario).metrics.iteration_time_s
    full = simulate(replace(scenario, fidelity=Fidelity.FULL)).metrics.iteration_time_s
    assert full == pytest.approx(representative, rel=1e-9)
