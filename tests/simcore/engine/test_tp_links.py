"""Tensor parallelism across nodes loads the links (simcore/engine/tp_links.py): alone it takes the time the
workload computed; beside data-parallel traffic on the same NICs both slow down; inside a node it stays folded."""

from __future__ import annotations

import pytest

from simcore.cost.workload import build_workload
from simcore.domain.layout import CollectiveAlgorithm, Layout
from simcore.domain.model import model_from_fields
from simcore.domain.placement import place
from simcore.engine.pipeline import Engine, EngineConfig, EngineResult
from simcore.network import build_network
from simcore.simulate import Scenario, simulate
from topology import GPUS, NODE_PRESETS, sized

MODEL = model_from_fields({"architecture": "decoder_only", "num_layers": 8, "hidden_size": 4096,
                           "num_attention_heads": 32, "vocab_size": 1024, "seq_length": 2048})
DGX_A100 = NODE_PRESETS["dgx-a100"]


def engine_run(layout: Layout, gpus: int, tp_on_links: bool) -> tuple[Engine, EngineResult]:
    spec = sized(DGX_A100, gpus)
    network = build_network(spec, CollectiveAlgorithm.AUTO)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, gpus)
    workload = build_workload(MODEL, layout, GPUS[spec.gpu], placement, network.collectives)
    engine = Engine(EngineConfig(layout, placement, workload, network.collectives, keep_spans=True,
                                 passes=network.passes(layout)))
    if not tp_on_links:  # the folded model: TP's time without its traffic on the links
        engine.tp_links = None
    return engine, engine.run()


def test_tp_across_nodes_slows_the_data_parallel_traffic_on_the_same_nics() -> None:
    # TP 16 over two DGX A100 nodes uses every NIC of both; the overlapped DP all-reduce between the two
    # replicas (GPU i and i + 16) leaves through the same NICs.
    layout = Layout(dp=2, tp=16, pp=1, microbatch_size=1, global_batch_size=8, overlap_grad_reduce=True)
    engine, shared = engine_run(layout, 32, tp_on_links=True)
    assert engine.tp_links is not None and engine.tp_links.crosses(0)
    _folded_engine, alone = engine_run(layout, 32, tp_on_links=False)
    dp_shared, dp_alone = shared.recorder.ranks[0].comm_busy_s["dp"], alone.recorder.ranks[0].comm_busy_s["dp"]
    assert dp_shared > dp_alone * 1.05
    assert shared.recorder.ranks[0].comm_busy_s["tp"] > alone.recorder.ranks[0].comm_busy_s["tp"]
    tp_spans = [s for s in shared.recorder.spans if s.category == "tp_comm"]
    assert tp_spans and all(s.name.startswith("tp ") for s in tp_spans)


def test_tp_alone_on_the_links_takes_the_workloads_time() -> None:
    layout = Layout(dp=1, tp=16, pp=1, microbatch_size=1, global_batch_size=4)
    _engine, on_links = engine_run(layout, 16, tp_on_links=True)
    _folded, folded = engine_run(layout, 16, tp_on_links=False)
    assert on_links.iteration_time_s == pytest.approx(folded.iteration_time_s, rel=1e-9)
    assert on_links.recorder.ranks[0].time_s["tp_comm"] == pytest.approx(
        folded.recorder.ranks[0].time_s["tp_comm"], rel=1e-9)


def test_tp_inside_a_node_stays_folded() -> None:
    layout = Layout(dp=2, tp=8, pp=1, microbatch_size=1, global_batch_size=8, overlap_grad_reduce=True)
    engine, _result = engine_run(layout, 16, tp_on_links=True)
    assert engine.tp_links is not None and not engine.tp_links.crosses(0)
    outcome = simulate(Scenario(MODEL, sized(DGX_A100, 16), layout, algorithm=CollectiveAlgorithm.AUTO))
    assert outcome.metrics.iteration_time_s == pytest.approx(_result.iteration_time_s, rel=1e-12)
