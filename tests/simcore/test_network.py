"""The process's network cache (simcore/network.py): a simulation on the network an earlier one built (its routes,
counted patterns and pass orders) gives the same results to the bit as on a network of its own, whatever ran
before it; the cache keeps a few clusters, rebuilds a network grown past its bound, and gives a cluster with
measured collective tables a network per simulation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore import Layout, Recompute, Scenario, simulate, sized
from simcore import network as network_module
from simcore.domain.layout import CollectiveAlgorithm, Schedule
from simcore.network import build_network, forget_networks, shared_network

BASE = convert.to_scenario(SimulationRequest.model_validate({
    "model": {"preset": "gpt3-13b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 8},
    "layout": {"dp": 4, "tp": 4, "pp": 4, "microbatch_size": 1, "global_batch_size": 64}}))


def layouts() -> list[Layout]:
    plain = BASE.layout
    return [
        plain,
        replace(plain, dp=8, tp=8, pp=1, placement="dp,tp,pp", zero_stage=3),
        replace(plain, dp=2, tp=4, pp=8, schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=5,
                recompute=Recompute.FULL, sequence_parallel=True),
        replace(plain, dp=16, tp=2, pp=2, overlap_grad_reduce=True, zero_stage=1),
        replace(plain, schedule=Schedule.ZB_H1),
    ]


def figures(scenario: Scenario, network: object = None) -> tuple[object, ...]:
    outcome = simulate(scenario, network)  # type: ignore[arg-type]
    return outcome.metrics, outcome.events, outcome.warnings, outcome.extrapolated_periods, outcome.simulated_ranks


@pytest.mark.parametrize("algorithm", [CollectiveAlgorithm.AUTO, CollectiveAlgorithm.RING])
def test_a_shared_network_gives_what_a_network_of_its_own_gives(algorithm: CollectiveAlgorithm) -> None:
    scenarios = [replace(BASE, layout=layout, algorithm=algorithm) for layout in layouts()]
    alone = [figures(s, build_network(s.cluster, s.algorithm)) for s in scenarios]
    forget_networks()
    for order in (scenarios[::-1], scenarios):  # each after every other, both ways round
        assert [figures(s) for s in order] == (alone[::-1] if order[0] is scenarios[-1] else alone)
    assert shared_network(BASE.cluster, algorithm).cached_entries() > 0  # (the later runs found it built)


def test_the_cache_keeps_a_network_per_cluster_and_algorithm_and_the_last_few() -> None:
    forget_networks()
    first = shared_network(BASE.cluster, CollectiveAlgorithm.AUTO)
    assert shared_network(BASE.cluster, CollectiveAlgorithm.AUTO) is first
    assert shared_network(BASE.cluster, CollectiveAlgorithm.TREE) is not first
    others = [sized(BASE.cluster, 8 * n) for n in range(1, network_module.NETWORKS_KEPT + 1)]
    for spec in others:
        shared_network(spec, CollectiveAlgorithm.AUTO)
    assert shared_network(BASE.cluster, CollectiveAlgorithm.AUTO) is not first  # (the least recently used went)
    assert shared_network(others[-1], CollectiveAlgorithm.AUTO) is shared_network(others[-1],
                                                                                  CollectiveAlgorithm.AUTO)


def test_a_network_grown_past_its_bound_is_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    forget_networks()
    simulate(BASE)
    grown = shared_network(BASE.cluster, BASE.algorithm)
    assert grown.cached_entries() > 0
    monkeypatch.setattr(network_module, "NETWORK_ENTRIES_KEPT", grown.cached_entries() - 1)
    fresh = shared_network(BASE.cluster, BASE.algorithm)
    assert fresh is not grown and fresh.cached_entries() == 0


def test_a_cluster_with_measured_collectives_gets_a_network_per_simulation() -> None:
    table = {"collective": "all_reduce", "ranks": 8, "nodes": 1,
             "points": [{"size_bytes": 2**20 * 4**i, "time_us": 50.0 * 4**i} for i in range(6)]}
    doc = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1,
                                                        "measured": {"collectives": [table]}},
           "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 4, "global_batch_size": 64}}
    spec = convert.to_scenario(SimulationRequest.model_validate(doc)).cluster
    assert shared_network(spec, CollectiveAlgorithm.AUTO) is not shared_network(spec, CollectiveAlgorithm.AUTO)
