"""Placement twins: candidates that differ only in placement and that the engine is sure to give the same
figures, so that a search simulates one of them and knows the other's result (no I/O).

Two placements of the same degrees map rank (d, t, p, c) to GPUs g_a and g_b. When g_b = pi(g_a) for a
permutation pi that moves whole servers and keeps every GPU's place inside its server (GPU k of server n to GPU k
of server s(n)), every group of the second layout (tensor, context, data, pipeline and expert parallel: all are
sets of rank coordinates) is the image under pi of the first's, and so is every flow. If pi is also an
automorphism of the cluster (links of the same figures onto links of the same figures, routes onto routes), the
two simulations are the same events on relabelled GPUs: equal figures.

That holds, and is checked here, on a *flat* cluster: one GPU kind, healthy (no slow GPU, degraded link or compute
variability, whose draws and factors are per GPU), the built-in fabric (no user graph), NVLink domains of one
server, and every server's NIC k under one leaf: a single fat-tree leaf, or one rail-optimized scalable unit
(LEAF_DOWN_PORTS servers; with PXN a message between servers stays on its rail's leaf, topology/routing.py).
Every route between servers is then NIC -> leaf -> NIC and any permutation of servers is an automorphism. On
anything else (several leaves, where routes between them are chosen by a hash of the ports) no twin is claimed and
every candidate is simulated. tests/simcore/planning/test_twins.py simulates twins and holds their figures equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simcore.domain.layout import Layout
from simcore.domain.placement import place
from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec, Fabric
from topology.health import ClusterHealth
from topology.links import fabric_size


def flat(spec: ClusterSpec) -> bool:
    """Whether every permutation of the cluster's servers is an automorphism of it (module docstring)."""
    if spec.topology is not None or spec.node_groups or spec.health != ClusterHealth() or spec.measured is not None:
        return False
    if spec.domain_gpus != spec.gpus_per_node or spec.num_gpus % spec.gpus_per_node:
        return False
    if spec.fabric is Fabric.RAIL_OPTIMIZED:
        return spec.num_nodes <= LEAF_DOWN_PORTS
    return fabric_size(spec)[0] <= 1


def _gpus(layout: Layout, num_gpus: int) -> list[int]:
    """The GPU of every rank (d, t, p, c), in one fixed order of the ranks."""
    p = place(layout.dp, layout.tp, layout.pp, layout.placement, num_gpus, layout.cp)
    return [p.gpu(d, t, s, c) for d in range(layout.dp) for t in range(layout.tp) for s in range(layout.pp)
            for c in range(layout.cp)]


def servers_permuted(a: Layout, b: Layout, num_gpus: int, gpus_per_node: int) -> bool:
    """Whether b's GPUs are a's with whole servers permuted, each GPU keeping its place in its server."""
    image: dict[int, int] = {}
    for ga, gb in zip(_gpus(a, num_gpus), _gpus(b, num_gpus)):
        if ga % gpus_per_node != gb % gpus_per_node or image.setdefault(ga // gpus_per_node,
                                                                         gb // gpus_per_node) != gb // gpus_per_node:
            return False
    return True


def twins(candidates: Sequence[Layout], owners: Sequence[int], clusters: Sequence[ClusterSpec]) -> dict[int, int]:
    """{twin: the candidate it is a twin of} over `candidates` (candidate i on clusters[owners[i]]): each
    candidate a placement twin of an earlier one (on a flat cluster: same cluster size, same layout but for the
    placement, servers permuted) maps to the first such one, which maps to nothing."""
    flats = [flat(c) for c in clusters]
    first: dict[tuple[int, Layout], list[int]] = {}
    known: dict[tuple[int, int, int, int, int, str, str], bool] = {}
    out: dict[int, int] = {}
    for i, layout in enumerate(candidates):
        c = owners[i]
        if not flats[c]:
            continue
        reps = first.setdefault((c, replace(layout, placement="")), [])
        spec = clusters[c]
        for r in reps:
            other = candidates[r]
            key = (c, layout.dp, layout.tp, layout.pp, layout.cp, other.placement, layout.placement)
            same = known.get(key)
            if same is None:
                same = known[key] = servers_permuted(other, layout, spec.num_gpus, spec.gpus_per_node)
            if same:
                out[i] = r
                break
        else:
            reps.append(i)
    return out
