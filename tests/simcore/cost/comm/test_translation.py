"""Patterns counted per translation class (simcore/cost/comm/translation.py) are the patterns added up hop by hop and
trimmed by keep_links, exactly (the same links, loads and latency): data-parallel rings and mirrored pipeline
sends on rail-optimized and fat-tree fabrics, oversubscribed, with one NIC per node or one per GPU pair, NVL72
racks and two-node NVLink domains, in several placements; and the clusters where the model adds up every hop
(degraded links, mixed GPUs, a partial last node) give the same too."""

from __future__ import annotations

import dataclasses

import pytest

import simcore.cost.comm.translation as translation
from simcore.cost.comm.collectives import Collective, CollectiveModel, effective_capacity, ring_factor
from simcore.cost.comm.link_loads import LinkLoads, ring_loads, step_latency, worst_hop
from simcore.cost.comm.patterns import keep_links
from simcore.cost.comm.translation import Counted, block_of
from simcore.domain.layout import CollectiveAlgorithm
from simcore.domain.placement import place
from topology import NODE_PRESETS, Fabric, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec
from topology.health import ClusterHealth, DegradedLink

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")


def spec_of(num_gpus: int, preset: str = "dgx-a100", **changes: object) -> ClusterSpec:
    return dataclasses.replace(sized(NODE_PRESETS[preset], num_gpus), **changes)  # type: ignore[arg-type]


SPECS = {
    "rail-128-nodes": spec_of(128 * 8),
    "fat-tree-128-nodes": spec_of(128 * 8, fabric=Fabric.FAT_TREE),
    "rail-oversubscribed-3": spec_of(96 * 8, oversubscription=3.0),
    "fat-tree-oversubscribed-2": spec_of(96 * 8, fabric=Fabric.FAT_TREE, oversubscription=2.0),
    "one-nic-per-node": spec_of(128 * 8, nics_per_node=1),
    "dgx2-16-gpus-8-nics": spec_of(64 * 16, "dgx-2-v100"),
    "nvlink-domains-of-two-nodes": spec_of(128 * 8, nvlink_domain_gpus=16),
    "nvl72-racks": spec_of(64 * 72, "gb200-nvl72"),
}
PLACEMENTS = ["tp,dp,pp", "tp,pp,dp", "dp,tp,pp"]


def layout_for(spec: ClusterSpec) -> tuple[int, int, int]:
    gpn = spec.gpus_per_node
    tp = min(gpn, 8)
    pp = 4
    return spec.num_gpus // (tp * pp), tp, pp


def kept_both_ways(spec: ClusterSpec, build: object, extra: int, primary_of: object) -> None:
    cluster = build_cluster(spec)
    router = Router(cluster)
    acc = LinkLoads(router)
    build(acc)  # type: ignore[operator]
    capacity = effective_capacity(cluster)
    primary = primary_of(cluster, router)  # type: ignore[operator]
    latency_of = step_latency(5)
    counted = acc.kept(primary, capacity, extra, latency_of)
    assert block_of(router, acc.runs) is not None  # the counted path ran
    expected = keep_links(acc.pattern(latency_of), primary, capacity, extra)
    assert counted == expected


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("order", ["tp,dp,pp", "tp,pp,dp"])  # (with dp innermost, a group shares its domains)
@pytest.mark.parametrize("extra", [1, 4, 8, 40])
def test_data_parallel_rings_counted_by_class_are_the_rings_hop_by_hop(name: str, order: str, extra: int) -> None:
    spec = SPECS[name]
    dp, tp, pp = layout_for(spec)
    placement = place(dp, tp, pp, order, spec.num_gpus)
    groups = [placement.dp_group(t, pp - 1) for t in range(tp)]

    def build(acc: LinkLoads) -> None:
        for group in groups:
            ring_loads(acc, group, ring_factor(Collective.ALL_REDUCE, len(group)))

    domain = spec.domain_gpus
    kept_both_ways(spec, build, extra, lambda cluster, router: {
        link for g in range(groups[0][0] // domain * domain, groups[0][0] // domain * domain + domain)
        for other in (g + domain, g - domain) if 0 <= other < spec.num_gpus
        for link in router.route(g, other) + router.route(other, g)})


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("order", PLACEMENTS)
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("extra", [1, 4, 8])
def test_pipeline_sends_counted_by_class_are_the_sends_hop_by_hop(name: str, order: str, backward: bool,
                                                                  extra: int) -> None:
    spec = SPECS[name]
    dp, tp, pp = layout_for(spec)
    placement = place(dp, tp, pp, order, spec.num_gpus)
    src, dst = (2, 1) if backward else (1, 2)
    first = (placement.gpu(0, 0, src), placement.gpu(0, 0, dst))

    def build(acc: LinkLoads) -> None:
        for t in range(tp):
            acc.run(placement.gpu(0, t, src), placement.gpu(0, t, dst), placement.strides[0], dp, 1.0)

    kept_both_ways(spec, build, extra, lambda cluster, router: set(router.route(*first)))


def test_runs_that_step_down_are_counted_too() -> None:
    spec = SPECS["fat-tree-128-nodes"]

    def build(acc: LinkLoads) -> None:
        acc.run(1000, 1013, -32, 30, 0.75)
        acc.run(3, 900, 8, 15, 0.75)
        acc.hop(5, 1017, 0.75)

    kept_both_ways(spec, build, 8, lambda cluster, router: set(router.route(1000, 1013)))


@pytest.mark.parametrize("name", ["rail-128-nodes", "fat-tree-oversubscribed-2"])
def test_pairs_far_apart_are_counted_too(name: str) -> None:
    # the tied embedding's synchronisation: a ring of two per position, first and last stage, blocks apart
    spec = SPECS[name]
    dp, tp, pp = layout_for(spec)
    placement = place(dp, tp, pp, "tp,dp,pp", spec.num_gpus)
    groups = [(placement.gpu(d, t, 0), placement.gpu(d, t, pp - 1)) for d in range(dp) for t in range(tp)]

    def build(acc: LinkLoads) -> None:
        for group in groups:
            ring_loads(acc, group, ring_factor(Collective.ALL_REDUCE, 2))

    kept_both_ways(spec, build, 8, lambda cluster, router: set(router.route(*groups[0])))


@pytest.mark.parametrize("name", ["rail-128-nodes", "fat-tree-128-nodes", "one-nic-per-node"])
@pytest.mark.parametrize("shift", [1, 3])
def test_pairs_far_apart_across_local_indices_are_counted_too(name: str, shift: int) -> None:
    # rings of two between GPUs of different local indices: the way back is not the way there turned round (PXN
    # takes the other node's proxy), so each way is routed
    spec = SPECS[name]
    far = spec.num_gpus // 2
    groups = [(g, g + far + shift) for g in range(0, far - shift)]

    def build(acc: LinkLoads) -> None:
        for group in groups:
            ring_loads(acc, group, ring_factor(Collective.ALL_REDUCE, 2))

    kept_both_ways(spec, build, 8, lambda cluster, router: set(router.route(*groups[0])) | set(router.route(
        groups[0][1], groups[0][0])))


def test_mixed_weights_and_small_clusters_are_added_hop_by_hop() -> None:
    router = Router(build_cluster(spec_of(128 * 8)))
    acc = LinkLoads(router)
    acc.run(0, 512, 8, 10, 1.0)
    acc.run(0, 520, 8, 10, 0.5)
    assert block_of(router, acc.runs) is None
    small = Router(build_cluster(spec_of(48 * 8)))  # under two blocks of 32 nodes
    assert block_of(small, [(0, 8, 8, 40, 1.0)]) is None


FALLBACKS = {
    "degraded-nic": ClusterHealth(degraded_links=(DegradedLink(0.5, node=3, nic=2),)),
    "degraded-nvlink": ClusterHealth(degraded_links=(DegradedLink(0.25, gpu=9),)),
}


@pytest.mark.parametrize("algorithm", [CollectiveAlgorithm.AUTO, CollectiveAlgorithm.RING])
@pytest.mark.parametrize("order", PLACEMENTS)
def test_the_model_counts_by_class_what_it_adds_up_hop_by_hop(algorithm: CollectiveAlgorithm, order: str) -> None:
    symmetric = build_cluster(spec_of(128 * 8))
    # the same cluster with a degraded link that changes nothing (factor 1): the model adds up every hop there
    plain = build_cluster(spec_of(128 * 8, health=ClusterHealth(degraded_links=(DegradedLink(1.0, gpu=7),))))
    assert block_of(Router(symmetric), [(0, 8, 8, 200, 1.0)]) is not None
    assert block_of(Router(plain), [(0, 8, 8, 200, 1.0)]) is None
    fast = CollectiveModel(symmetric, Router(symmetric), algorithm)
    slow = CollectiveModel(plain, Router(plain), algorithm)
    dp, tp, pp = 32, 8, 4
    placement = place(dp, tp, pp, order, 1024)
    for rank in range(pp):
        for kind in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
            for size in (2**20, 2**28):
                assert fast.data_parallel_phases(kind, placement, rank, size) == \
                    slow.data_parallel_phases(kind, placement, rank, size), (rank, kind, size)
        for other in (rank - 1, rank + 1):
            if 0 <= other < pp:
                for replicas in (range(dp), range(0, dp, 2), [0, 1, 5]):
                    assert fast.pipeline_send(placement, rank, other, list(replicas)) == \
                        slow.pipeline_send(placement, rank, other, list(replicas)), (rank, other, replicas)


@pytest.mark.parametrize("name", FALLBACKS)
def test_clusters_that_are_not_alike_everywhere_are_added_hop_by_hop(name: str) -> None:
    cluster = build_cluster(spec_of(128 * 8, health=FALLBACKS[name]))
    router = Router(cluster)
    acc = LinkLoads(router)
    acc.run(0, 8, 8, 127, 1.0)
    assert block_of(router, acc.runs) is None
    capacity = effective_capacity(cluster)
    assert acc.kept(set(), capacity, 8, worst_hop) == keep_links(acc.pattern(worst_hop), set(), capacity, 8)


@pytest.mark.parametrize("name", ["rail-128-nodes", "fat-tree-128-nodes", "nvlink-domains-of-two-nodes"])
def test_patterns_whole_blocks_apart_are_moved_from_the_first_counted(name: str) -> None:
    spec = SPECS[name]
    cluster = build_cluster(spec)
    router = Router(cluster)
    capacity = effective_capacity(cluster)
    dp, tp, pp = spec.num_gpus // (8 * 4), 8, 4  # "tp,dp,pp": the stages are whole blocks apart
    placement = place(dp, tp, pp, "tp,dp,pp", spec.num_gpus)
    memo: dict[tuple[object, ...], Counted] = {}
    for src, dst in [(0, 1), (1, 2), (2, 3), (3, 2), (2, 1), (1, 0)]:
        acc = LinkLoads(router)
        for t in range(tp):
            acc.run(placement.gpu(0, t, src), placement.gpu(0, t, dst), placement.strides[0], dp, 1.0)
        primary = set(router.route(placement.gpu(0, 0, src), placement.gpu(0, 0, dst)))
        expected = keep_links(acc.pattern(worst_hop), primary, capacity, 4)
        assert acc.kept(primary, capacity, 4, worst_hop, memo) == expected, (src, dst)
    assert len(memo) == 2  # one count forward, one backward (the forward one turned round)


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("order", PLACEMENTS)
def test_patterns_turned_round_are_the_first_counted_turned_round(name: str, order: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The backward sends from the forward ones' count (links turned round, id ^ 1) where the forward ones load
    one direction of each link, and counted afresh where they load both (a ring over nodes loads each NIC both
    ways): the same as hop by hop either way."""
    spec = SPECS[name]
    cluster = build_cluster(spec)
    router = Router(cluster)
    capacity = effective_capacity(cluster)
    dp, tp, pp = layout_for(spec)
    placement = place(dp, tp, pp, order, spec.num_gpus)
    counts: list[int] = []
    count = translation._count

    def counting(*args: object) -> Counted:
        counts.append(1)
        return count(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(translation, "_count", counting)
    memo: dict[tuple[object, ...], Counted] = {}
    step = placement.strides[0]
    sends = [[(placement.gpu(0, t, src), placement.gpu(0, t, dst)) for t in range(tp)] for src, dst in [(1, 2), (2, 1)]]
    ring = [(g, g + step) for g in range(0, tp * placement.strides[1], placement.strides[1])]
    rings = [ring, [(b, a) for a, b in ring]]
    turned = []
    for pattern in (*sends, *rings):
        counts.clear()
        acc = LinkLoads(router)
        for a, b in pattern:
            acc.run(a, b, step, dp - 1, 1.0)
        if block_of(router, acc.runs) is None:
            return  # (placements whose sends are not counted by class: test_pipeline_sends_... covers them)
        primary = set(router.route(*pattern[0]))
        expected = keep_links(acc.pattern(worst_hop), primary, capacity, 4)
        assert acc.kept(primary, capacity, 4, worst_hop, memo) == expected
        turned.append(not counts)
    if name == "rail-128-nodes" and order == "tp,dp,pp":
        assert turned == [False, True, False, False], turned  # the ring's links are loaded both ways: counted again


def hop_by_hop(router: Router, hops: list[tuple[int, int, float]]) -> dict[int, float]:
    loads: dict[int, float] = {}
    for src, dst, w in hops:
        for link in router.route(src, dst):
            loads[link] = loads.get(link, 0.0) + w
    return loads


def test_single_hops_join_runs_only_while_they_share_one_weight() -> None:
    router = Router(build_cluster(SPECS["rail-128-nodes"]))
    pairs = [(g, g + 768) for g in range(0, 200)]
    same = [(a, b, 0.3) for a, b in pairs] + [(b, a, 0.3) for a, b in pairs][::-1]
    interleaved = [hop for a, b in pairs for hop in ((a, b, 0.3), (b, a, 0.3))]
    for hops in (same, interleaved):
        acc = LinkLoads(router)
        for src, dst, w in hops:
            acc.hop(src, dst, w)
        assert len(acc.runs) == 2  # the forward and the backward hops, each one run
        assert dict(acc.loads) == hop_by_hop(router, hops)
    mixed = interleaved[:6] + [(5, 900, 0.7)] + interleaved[6:]
    acc = LinkLoads(router)
    for src, dst, w in mixed:
        acc.hop(src, dst, w)
    assert len(acc.runs) == 2 + 1 + len(interleaved) - 6  # joined until the second weight came
    assert dict(acc.loads) == hop_by_hop(router, mixed)
