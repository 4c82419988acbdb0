"""Stragglers and variability as events (topology/health.py, simcore/simulate.py's straggler_factors): a slow
GPU's compute takes longer and every rank that depends on it waits, through the same events as any other wait."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

from api_schemas import RequestError, parse_request
from service.convert import to_response, to_scenario
from simcore import Fidelity, SpecError, simulate

SMALL = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
         "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 64, "overlap_grad_reduce": False}}


def _with(doc: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {**doc, "cluster": {**doc["cluster"], **cluster}}


def _parse(doc: dict[str, Any]) -> Any:
    return parse_request(json.dumps(doc))


def _run(doc: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    return to_response(simulate(to_scenario(_parse(doc | {"options": {"seed": seed}}))))


def test_one_slow_rank_adds_exactly_its_extra_compute_to_pure_data_parallelism() -> None:
    healthy = _run(SMALL)
    slow = _run(_with(SMALL, slow_gpus=[{"gpu": 3, "compute_time_factor": 1.5}]))
    b = healthy["time_breakdown_s"]
    # Without overlap the all-reduce starts when the slowest rank arrives and takes as long; the slow rank then
    # also steps its optimizer 1.5x as long: the iteration grows by half its compute and optimizer time.
    extra = 0.5 * (b["compute"] + b["recompute"] + b["optimizer"])
    assert slow["iteration_time_s"] - healthy["iteration_time_s"] == pytest.approx(extra, rel=1e-9)
    assert slow["simulator"]["fidelity"] == "full" and slow["simulator"]["simulated_ranks"] == 8
    assert any(w.startswith("stragglers: 1 of 8 ranks") for w in slow["warnings"])


def test_a_slow_gpu_in_a_middle_stage_raises_the_other_stages_bubble() -> None:
    doc = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
           "layout": {"dp": 1, "tp": 2, "pp": 4, "global_batch_size": 16, "placement": "tp,dp,pp"}}
    healthy = _run(doc)
    slow = _run(_with(doc, slow_gpus=[{"gpu": 4, "compute_time_factor": 1.3}]))  # tp rank 0 of stage 2
    assert slow["iteration_time_s"] > healthy["iteration_time_s"]
    for before, after in zip(healthy["stages"], slow["stages"]):
        if before["index"] == 2:
            assert after["busy_fraction"] > before["busy_fraction"]  # the stage became the slowest
        else:
            assert after["bubble_s"] > before["bubble_s"]  # the others wait for it


def test_no_variability_is_identical_to_none_and_a_seed_gives_the_same_cluster() -> None:
    def strip(result: dict[str, Any]) -> dict[str, Any]:
        return {**result, "simulator": {**result["simulator"], "wall_time_s": 0}}

    assert strip(_run(_with(SMALL, compute_variability=0.0))) == strip(_run(SMALL))
    varied = _with(SMALL, compute_variability=0.05)
    first, again, other = _run(varied, seed=7), _run(varied, seed=7), _run(varied, seed=8)
    assert strip(first) == strip(again)
    assert first["iteration_time_s"] > _run(SMALL)["iteration_time_s"]
    assert other["iteration_time_s"] != first["iteration_time_s"]


def test_the_mean_over_seeds_grows_with_the_data_parallel_size() -> None:
    def mean(dp: int) -> float:
        doc = _with({**SMALL, "layout": {**SMALL["layout"], "dp": dp, "global_batch_size": 8 * dp}},
                    num_nodes=None, num_gpus=dp, compute_variability=0.05)
        return statistics.mean(_run(doc, seed)["iteration_time_s"] for seed in range(20))

    two, eight = mean(2), mean(8)
    assert eight > two  # the iteration waits for the slowest of more draws


def test_a_degraded_nic_slows_the_gradient_reduction_across_nodes() -> None:
    doc = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
           "layout": {"dp": 2, "tp": 8, "pp": 1, "global_batch_size": 16, "overlap_grad_reduce": False}}
    healthy = _run(doc)
    degraded = _run(_with(doc, degraded_links=[{"node": 1, "nic": 0, "bandwidth_factor": 0.25}]))
    assert degraded["communication_s"]["dp"] > healthy["communication_s"]["dp"]
    assert degraded["iteration_time_s"] > healthy["iteration_time_s"]
    port = _run(_with(doc, degraded_links=[{"gpu": 9, "bandwidth_factor": 0.25}]))  # a TP group's NVLink port
    assert port["time_breakdown_s"]["tp_comm"] > healthy["time_breakdown_s"]["tp_comm"]
    assert degraded["simulator"]["fidelity"] == "representative"  # links are on the shared graph: no rerun


@pytest.mark.parametrize(("cluster", "field"), [
    ({"slow_gpus": [{"gpu": 8, "compute_time_factor": 1.2}]}, "cluster.slow_gpus[0].gpu"),
    ({"degraded_links": [{"node": 1, "nic": 0, "bandwidth_factor": 0.5}]}, "cluster.degraded_links[0].node"),
    ({"degraded_links": [{"node": 0, "nic": 8, "bandwidth_factor": 0.5}]}, "cluster.degraded_links[0].nic"),
    ({"degraded_links": [{"gpu": 1, "node": 0, "bandwidth_factor": 0.5}]}, "cluster.degraded_links[0]"),
])
def test_a_straggler_outside_the_cluster_is_refused_naming_it(cluster: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        to_scenario(_parse(_with(SMALL, **cluster)))
    assert err.value.field == field


@pytest.mark.parametrize(("cluster", "field"), [
    ({"slow_gpus": [{"gpu": 1, "compute_time_factor": 0}]}, "cluster.slow_gpus.0.compute_time_factor"),
    ({"slow_gpus": [{"gpu": -1, "compute_time_factor": 1.2}]}, "cluster.slow_gpus.0.gpu"),
    ({"compute_variability": -0.1}, "cluster.compute_variability"),
    ({"degraded_links": [{"gpu": 1, "bandwidth_factor": 0}]}, "cluster.degraded_links.0.bandwidth_factor"),
])
def test_rates_out_of_range_are_refused_naming_the_field(cluster: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as err:
        _parse(_with(SMALL, **cluster))
    assert err.value.details[0].field == field


def test_stragglers_with_full_fidelity_asked_give_the_same_result_without_the_warning() -> None:
    slow = _with(SMALL, slow_gpus=[{"gpu": 3, "compute_time_factor": 1.5}])
    asked = to_scenario(_parse(slow | {"options": {"fidelity": "full"}}))
    assert asked.fidelity is Fidelity.FULL
    full = to_response(simulate(asked))
    assert full["iteration_time_s"] == _run(slow)["iteration_time_s"]
    assert not any(w.startswith("stragglers") for w in full["warnings"])
