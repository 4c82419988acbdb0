"""Groups given as copies of one group (simcore/cost/comm/groups.py) list the placement's groups exactly, and the
collective model builds from them the phases, choices and times it builds group by group from the same groups
listed one by one (the path it took before: tuple-of-tuples keys, ring hops group by group, copies found by
comparing every group), on alike and unlike clusters (fat-tree and rail fabrics, degraded links, a partial last
node, mixed GPUs) with every algorithm."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import pytest

import simcore.cost.comm.collectives as collectives_module
from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.groups import (
    GroupCopies,
    as_groups,
    copies,
    data_parallel_groups,
    stage_groups,
    tensor_parallel_groups,
)
from simcore.cost.comm.link_loads import LinkLoads, ring_copies, ring_loads
from simcore.cost.comm.symmetry import domain_copies
from simcore.domain.layout import CollectiveAlgorithm
from simcore.domain.placement import Placement, place
from topology import NODE_PRESETS, Fabric, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec
from topology.hardware import GPUS, GpuKind
from topology.health import ClusterHealth, DegradedLink
from topology.node_groups import NodeGroup

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

GB = 10**9


def spec_of(num_gpus: int, preset: str = "dgx-a100", **changes: object) -> ClusterSpec:
    return dataclasses.replace(sized(NODE_PRESETS[preset], num_gpus), **changes)  # type: ignore[arg-type]


def mixed() -> ClusterSpec:
    a100, h100 = GPUS[GpuKind.A100_80GB], GPUS[GpuKind.H100_80GB]
    return spec_of(40, node_groups=(NodeGroup(3, GpuKind.A100_80GB, 8, a100.nvlink_bandwidth_bytes_per_s, 8, 25 * GB),
                                    NodeGroup(2, GpuKind.H100_80GB, 8, h100.nvlink_bandwidth_bytes_per_s, 8, 50 * GB)))


# name -> (spec, (dp, tp, pp))
CLUSTERS = {
    "rail-64-nodes": (spec_of(64 * 8), (16, 8, 4)),
    "fat-tree-64-nodes": (spec_of(64 * 8, fabric=Fabric.FAT_TREE), (16, 8, 4)),
    "tp4-rail": (spec_of(64 * 8), (32, 4, 4)),
    "degraded-nic": (spec_of(64 * 8, health=ClusterHealth(degraded_links=(DegradedLink(0.5, node=3, nic=2),))),
                     (16, 8, 4)),
    "degraded-nvlink": (spec_of(64 * 8, health=ClusterHealth(degraded_links=(DegradedLink(0.25, gpu=9),))), (16, 8, 4)),
    "partial-last-node": (spec_of(100), (5, 4, 5)),
    "mixed-gpus": (mixed(), (5, 4, 2)),
}
ORDERS = ["tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "tp,cp,dp,pp"]


def grid_offsets(grid: Sequence[range]) -> list[int]:
    return [sum(parts) for parts in itertools.product(*grid)]


@pytest.mark.parametrize("grid", [(range(0, 40, 8),), (range(0, 40, 8), range(3)), (range(0, 24, 8), range(8)),
                                  (range(5, 6), range(0, 3, 2)), (range(2, 12, 5), range(1, 2)),
                                  (range(2), range(3)), (range(0), range(3)), (range(0, -12, -4),)])
def test_copies_read_as_the_groups_they_stand_for(grid: tuple[range, ...]) -> None:
    base = (0, 100, 7)
    expected = tuple(tuple(g + offset for g in base) for offset in grid_offsets(grid))
    groups = copies(base, grid)
    assert tuple(groups) == expected and len(groups) == len(expected)
    assert [groups[i] for i in range(len(expected))] == list(expected)
    if isinstance(groups, GroupCopies):
        for a, b, step in itertools.product(range(len(expected) + 1), range(len(expected) + 1), (1, 2)):
            assert tuple(groups[a:b:step]) == expected[a:b:step]
        assert groups == copies(base, grid) and hash(groups) == hash(copies(base, grid))
        if len(expected) > 1:  # listed one by one, they are recognised as the same copies
            assert as_groups(expected) == groups
    else:
        offsets = grid_offsets(grid)  # (0 1 2 8 9 10 ..., or 0 1 2 1 2 3: not one range)
        assert len({b - a for a, b in zip(offsets, offsets[1:])}) > 1
        assert as_groups(expected) == expected


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("sizes", [(4, 2, 3, 1), (4, 2, 3, 2), (2, 4, 2, 1), (3, 2, 2, 2), (1, 8, 2, 1)])
def test_the_helpers_list_the_placements_groups(order: str, sizes: tuple[int, int, int, int]) -> None:
    dp, tp, pp, cp = sizes
    placement = place(dp, tp, pp, order, dp * tp * pp * cp, cp)
    for rank in range(pp):
        assert tuple(data_parallel_groups(placement, rank)) == tuple(placement.dp_group(t, rank) for t in range(tp))
        for replicas in (range(dp), range(dp - 1, dp), range(0, dp, 2)):
            assert tuple(tensor_parallel_groups(placement, rank, replicas)) == tuple(
                placement.tp_group(d, rank, c) for c in range(cp) for d in replicas)
            ranks = (0, pp - 1)
            assert tuple(stage_groups(placement, ranks, replicas)) == tuple(
                tuple(placement.gpu(d, t, r, c) for r in ranks)
                for d in replicas for c in range(cp) for t in range(tp))


def groups_of(placement: Placement) -> list[GroupCopies | tuple[tuple[int, ...], ...]]:
    found: list[GroupCopies | tuple[tuple[int, ...], ...]] = []
    for rank in range(placement.pp):
        found += [data_parallel_groups(placement, rank), tensor_parallel_groups(placement, rank, range(placement.dp))]
    found.append(stage_groups(placement, (0, placement.pp - 1), range(placement.dp)))
    return [groups for groups in found if len(groups[0]) > 1]


def figures(model: CollectiveModel, groups: Sequence[tuple[int, ...]]) -> list[object]:
    out: list[object] = []
    for kind in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
        for size in (2.0**16, 2.0**28):
            out += [model.phases(kind, groups, size), model.choice(kind, groups, size),
                    model.isolated_time(kind, groups, size)]
    return out


def plain_rings(acc: LinkLoads, groups: Sequence[Sequence[int]], coef: float) -> None:
    for group in groups:
        ring_loads(acc, group, coef)


@pytest.mark.parametrize("algorithm", list(CollectiveAlgorithm))
@pytest.mark.parametrize("name", CLUSTERS)
def test_the_model_builds_from_copies_what_it_builds_group_by_group(name: str, algorithm: CollectiveAlgorithm,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec, (dp, tp, pp) = CLUSTERS[name]
    cluster = build_cluster(spec)
    for order in ("tp,dp,pp", "dp,tp,pp"):
        placement = place(dp, tp, pp, order, spec.num_gpus)
        every = groups_of(placement)
        assert any(isinstance(groups, GroupCopies) for groups in every)
        with monkeypatch.context() as patch:  # the path before copies: every group listed and built one by one
            patch.setattr(collectives_module, "as_groups", lambda groups: tuple(tuple(g) for g in groups))
            patch.setattr(collectives_module, "ring_copies", plain_rings)
            slow = CollectiveModel(cluster, Router(cluster), algorithm)
            expected = [figures(slow, tuple(groups)) for groups in every]
        fast = CollectiveModel(cluster, Router(cluster), algorithm)
        assert [figures(fast, groups) for groups in every] == expected, (name, order)


@pytest.mark.parametrize("name", CLUSTERS)
def test_rings_and_copies_from_copies_are_those_group_by_group(name: str) -> None:
    """Below the kept links: the same hops (runs) and loads on every link, the same copies found."""
    spec, (dp, tp, pp) = CLUSTERS[name]
    cluster = build_cluster(spec)
    router = Router(cluster)
    for order in ORDERS[:3]:
        placement = place(dp, tp, pp, order, spec.num_gpus)
        for groups in groups_of(placement):
            fast, slow = LinkLoads(router), LinkLoads(router)
            ring_copies(fast, groups, 0.75)
            plain_rings(slow, tuple(groups), 0.75)
            assert fast.runs == slow.runs and fast.loads == slow.loads
            found, expected = domain_copies(cluster, groups), domain_copies(cluster, tuple(groups))
            assert (found and (found[0], tuple(found[1]))) == expected
