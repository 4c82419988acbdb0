"""Placement twins: on a flat cluster, layouts whose placements differ by a permutation of whole servers give the
engine's figures exactly, so the search simulates one and knows the other; anywhere else none is claimed."""

from __future__ import annotations

from dataclasses import replace

from simcore import MODEL_PRESETS, NODE_PRESETS, Layout, Scenario, model_from_fields, simulate, sized
from simcore.planning.frontier import Frontier
from simcore.planning.twins import flat, servers_permuted, twins
from topology.cluster_spec import Fabric
from topology.health import ClusterHealth, DegradedLink

GPT_1_3B = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
H100 = NODE_PRESETS["dgx-h100"]
FOUR_NODES = sized(H100, 32)
# TP 8 fills a server: DP and PP over whole servers, in either order.
FILLED = Layout(dp=2, tp=8, pp=2, microbatch_size=1, global_batch_size=16, placement="tp,dp,pp")


def test_one_leaf_per_rail_is_flat_and_several_leaves_a_degraded_link_or_a_user_graph_are_not() -> None:
    assert flat(FOUR_NODES)
    assert flat(sized(H100, 8 * 32))  # one rail-optimized scalable unit
    assert not flat(sized(H100, 8 * 64))  # two units: routes between them are chosen by a hash of the ports
    assert flat(replace(FOUR_NODES, fabric=Fabric.FAT_TREE))  # a fat tree's leaf takes 32 NICs: 4 servers...
    assert not flat(replace(sized(H100, 64), fabric=Fabric.FAT_TREE))  # ...and 8 servers hang under two
    degraded = replace(FOUR_NODES, health=ClusterHealth(degraded_links=(DegradedLink(bandwidth_factor=0.5, gpu=3),)))
    assert not flat(degraded)


def test_a_permutation_of_whole_servers_is_found_and_a_move_inside_a_server_is_not() -> None:
    assert servers_permuted(FILLED, replace(FILLED, placement="tp,pp,dp"), 32, 8)
    half = Layout(dp=4, tp=4, pp=2, microbatch_size=1, global_batch_size=16, placement="tp,dp,pp")
    # TP 4 x DP 4 over 16 GPUs: PP moves to the other server's half (dp,pp order) -- not whole servers
    assert not servers_permuted(half, replace(half, placement="tp,pp,dp"), 32, 8)


def test_twins_simulate_to_the_same_figures() -> None:
    a, b = FILLED, replace(FILLED, placement="tp,pp,dp")
    assert twins([a, b], [0, 0], [FOUR_NODES]) == {1: 0}
    figures = [simulate(Scenario(GPT_1_3B, FOUR_NODES, lay)).metrics for lay in (a, b)]
    assert figures[0].tokens_per_s == figures[1].tokens_per_s
    assert figures[0].time_breakdown_s == figures[1].time_breakdown_s


def test_no_twin_is_claimed_on_a_cluster_that_is_not_flat_or_for_another_layout() -> None:
    a, b = FILLED, replace(FILLED, placement="tp,pp,dp")
    wide = replace(sized(H100, 64), fabric=Fabric.FAT_TREE)
    assert twins([replace(a, dp=4), replace(b, dp=4)], [0, 0], [wide]) == {}
    assert twins([a, replace(b, microbatch_size=2)], [0, 0], [FOUR_NODES]) == {}
    assert twins([a, b], [0, 1], [FOUR_NODES, FOUR_NODES]) == {}  # another cluster size's candidate


def test_a_twin_is_never_chosen_and_learns_its_ratio_when_its_twin_returns() -> None:
    f = Frontier([100.0, 99.0, 50.0], ["a", "b", "a"], [0, 0, 0], lambda i, s: -s, lambda i: 1.0,
                 lambda i: None, {1: 0})
    assert f.choose(4) == [0, 2]
    f.learn(0, 100.0, -100.0)
    assert f.errors["b"].ratios == [0.99]  # the twin's own estimate over the simulated figure
    assert f.could_win() == 0
