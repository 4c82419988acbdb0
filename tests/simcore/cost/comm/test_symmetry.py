"""The collective patterns taken from the first NVLink domain's groups (simcore/cost/comm/symmetry.py) are the
patterns built group by group, and trimmed by keep_links, exactly: on clusters where the copies hold (one GPU
kind, no degraded link, groups inside domains) and on those where the model must build every group (mixed GPUs,
degraded links, groups across nodes, copies out of order, a partial last node)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel, effective_capacity, ring_factor
from simcore.cost.comm.link_loads import LinkLoads, Phase, nvls_loads, ring_loads, step_latency, tree_loads
from simcore.cost.comm.patterns import COLLECTIVE_KEPT_LINKS, keep_links
from simcore.cost.comm.symmetry import Groups, domain_copies, kept_phases
from simcore.domain.layout import CollectiveAlgorithm
from topology import NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec
from topology.graph import Cluster, Node
from topology.hardware import GB, GPUS, GpuKind
from topology.health import ClusterHealth, DegradedLink
from topology.node_groups import NodeGroup


def spec_of(num_gpus: int, preset: str = "dgx-a100", **changes: object) -> ClusterSpec:
    return dataclasses.replace(sized(NODE_PRESETS[preset], num_gpus), **changes)  # type: ignore[arg-type]


def domain_links(cluster: Cluster, gpu: int) -> set[int]:
    """Links with an end at a GPU, switch or NIC of `gpu`'s NVLink domain, from the link tables."""
    spec = cluster.spec
    domain = cluster.domain_of(gpu)

    def inside(end: Node) -> bool:
        kind, index = end[0], end[1]
        if kind == "gpu":
            return index // spec.domain_gpus == domain
        if kind == "nic":
            return index // spec.nics_per_node * spec.gpus_per_node // spec.domain_gpus == domain
        return kind == "nvswitch" and index == domain

    return {link for link, (u, v) in enumerate(cluster.link_ends) if inside(u) or inside(v)}


def builder(cluster: Cluster, algorithm: str, kind: Collective) -> Callable[[Groups], tuple[Phase, ...]]:
    router = Router(cluster)

    def build(groups: Groups) -> tuple[Phase, ...]:
        acc = LinkLoads(router)
        for group in groups:
            if algorithm == "ring":
                ring_loads(acc, group, ring_factor(kind, len(group)))
            elif algorithm == "tree":
                tree_loads(acc, group)
            else:
                nvls_loads(acc, group, kind)
        return ((acc, step_latency(3)),)

    return build


def tp_groups(num_gpus: int, tp: int, order: list[int] | None = None) -> Groups:
    groups = tuple(tuple(range(first, first + tp)) for first in range(0, num_gpus - tp + 1, tp))
    return groups if order is None else tuple(groups[i] for i in order)


def mixed() -> ClusterSpec:
    a100, h100 = GPUS[GpuKind.A100_80GB], GPUS[GpuKind.H100_80GB]
    return spec_of(40, node_groups=(NodeGroup(3, GpuKind.A100_80GB, 8, a100.nvlink_bandwidth_bytes_per_s, 8, 25 * GB),
                                    NodeGroup(2, GpuKind.H100_80GB, 8, h100.nvlink_bandwidth_bytes_per_s, 8, 50 * GB)))


CASES = {
    # (spec, groups, copies expected)
    "tp8-every-node": (spec_of(64 * 8), tp_groups(64 * 8, 8), True),
    "tp4-two-per-node": (spec_of(16 * 8), tp_groups(16 * 8, 4), True),
    "tp2-h100": (spec_of(8 * 8, "dgx-h100"), tp_groups(8 * 8, 2), True),
    "tp8-of-every-other-node": (spec_of(16 * 8), tp_groups(16 * 8, 8)[::2], True),
    "nvl72-tp8": (spec_of(4 * 72, "gb200-nvl72"), tp_groups(4 * 72, 8), True),
    "domain-of-two-nodes": (spec_of(8 * 8, nvlink_domain_gpus=16), tp_groups(8 * 8, 4), True),
    "partial-last-node": (spec_of(8 * 8 + 4), tp_groups(8 * 8 + 4, 4), False),  # 17 groups: no whole copy
    "partial-last-node-idle": (spec_of(8 * 8 + 4), tp_groups(8 * 8, 4), True),
    "rail-fabric-tp16-across-nodes": (spec_of(16 * 8), tp_groups(16 * 8, 16), False),
    "copies-out-of-order": (spec_of(16 * 8), tp_groups(16 * 8, 4, [0, 1, 3, 2] + list(range(4, 32))), False),
    "degraded-nvlink": (spec_of(16 * 8, health=ClusterHealth(degraded_links=(DegradedLink(0.5, gpu=13),))),
                        tp_groups(16 * 8, 8), False),
    "mixed-gpus": (mixed(), tp_groups(40, 8), False),
    "one-group": (spec_of(8), tp_groups(8, 8), False),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("algorithm", "kind"), [("ring", Collective.ALL_REDUCE), ("ring", Collective.ALL_GATHER),
                                                 ("tree", Collective.ALL_REDUCE),
                                                 ("nvls", Collective.REDUCE_SCATTER)])
@pytest.mark.parametrize("extra", [1, COLLECTIVE_KEPT_LINKS, 40])
def test_patterns_from_the_first_domain_are_the_patterns_of_every_group(name: str, algorithm: str,
                                                                        kind: Collective, extra: int) -> None:
    spec, groups, symmetric = CASES[name]
    cluster = build_cluster(spec)
    copies = domain_copies(cluster, groups)
    assert (copies is not None and len(copies[1]) > 1) is symmetric
    build = builder(cluster, algorithm, kind)
    capacity = effective_capacity(cluster)
    primary = domain_links(cluster, groups[0][0])
    expected = tuple(keep_links(acc.pattern(latency_of), primary, capacity, extra) for acc, latency_of in build(groups))
    assert kept_phases(cluster, groups, build, primary, capacity, extra) == expected


@pytest.mark.parametrize("algorithm", [CollectiveAlgorithm.AUTO, CollectiveAlgorithm.RING,
                                       CollectiveAlgorithm.TREE, CollectiveAlgorithm.HIERARCHICAL])
@pytest.mark.parametrize("preset", ["dgx-a100", "dgx-h100"])
def test_the_model_gives_the_same_phases_with_and_without_the_copies(algorithm: CollectiveAlgorithm,
                                                                     preset: str) -> None:
    symmetric = build_cluster(spec_of(32 * 8, preset))
    # the same cluster, its one degraded link a no-op (factor 1): the model builds every group there
    plain = build_cluster(spec_of(32 * 8, preset, health=ClusterHealth(degraded_links=(DegradedLink(1.0, gpu=255),))))
    assert domain_copies(symmetric, tp_groups(256, 8)) is not None and domain_copies(plain, tp_groups(256, 8)) is None
    fast = CollectiveModel(symmetric, Router(symmetric), algorithm)
    slow = CollectiveModel(plain, Router(plain), algorithm)
    for tp in (2, 4, 8):
        groups = tp_groups(256, tp)
        for kind in Collective:
            if kind not in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
                continue
            for size in (2**16, 2**24, 2**30):
                assert fast.phases(kind, groups, size) == slow.phases(kind, groups, size), (tp, kind, size)
                assert fast.isolated_time(kind, groups, size) == slow.isolated_time(kind, groups, size)
